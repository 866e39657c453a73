"""Narrowing choice questions with many options: tournaments (`predict_tournament`).

One row cannot hold many options well: each option's tokens are squeezed to fit the head budget and
accuracy falls with the option count (spec §10.5). A tournament asks a choice question with more than
`group_size` options in rounds instead. Its options (caller order) are split into balanced groups of at
most `group_size`; every group is asked as a choice question of its own -- all groups of a state in ONE
predict call per round -- and the best of each group go on. As many go on per group as keep the next
field within `group_size` (at least one), so a 100-option question with groups of 16 takes one
elimination round (7 groups, the best 2 of each) and a final. The final call asks the finalists together
with the state's other questions, in the caller's order, with `min_confidence` applied there only.

The answer of a narrowed question is the final's, with `probabilities` over ALL its labels (eliminated =
0.0) and its `confidence`/`answer_confidence` as the final computed them over the finalists. The result
gains `tournament: {qid: {"finalists", "rounds", "options"[, "option_order_dropped"]}}` (empty when no
question needed narrowing) and `usage.input_tokens` counts every round. An `option_order` permutes all k
options, so it cannot apply to a group; it is dropped for narrowed questions and the block says so.
"""

from __future__ import annotations

from typing import Any

from .questions import check_questions

__all__ = ["predict_tournament", "predict_tournament_batch"]

DEFAULT_GROUP_SIZE = 16


def check_group_size(group_size: Any) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        raise ValueError(f"group_size must be an integer >= 2 (options asked together per row), got {group_size!r}")
    return group_size


def _choice_criteria(definition: dict) -> dict:
    """{label: description} of a validated choice definition (a list of labels has no descriptions)."""
    criteria = definition["criteria"]
    return dict(criteria) if isinstance(criteria, dict) else {label: None for label in criteria}


def _split(members: list[int], group_size: int) -> tuple[list[list[int]], int]:
    """Balanced groups of at most group_size, and how many of each go on."""
    n_groups = -(-len(members) // group_size)
    size, extra = divmod(len(members), n_groups)
    groups, start = [], 0
    for j in range(n_groups):
        end = start + size + (1 if j < extra else 0)
        groups.append(members[start:end])
        start = end
    return groups, max(1, group_size // n_groups)


def _sub_question(definition: dict, labels: list, members: list[int], criteria: dict) -> dict:
    sub = {k: v for k, v in definition.items() if k not in ("criteria", "option_order")}
    sub["criteria"] = {labels[i]: criteria[labels[i]] for i in members}
    return sub


class _Tournament:
    """The narrowed questions of one call: their labels, and each state's surviving option indices."""

    def __init__(self, questions: dict, group_size: int, n_states: int):
        qs = check_questions(questions)  # the library's own validation and error texts
        self.questions, self.group_size = questions, group_size
        self.big = [q.qid for q in qs if q.qtype == "choice" and q.k > group_size]
        self.criteria = {qid: _choice_criteria(questions[qid]) for qid in self.big}
        self.labels = {qid: list(self.criteria[qid]) for qid in self.big}
        self.alive = [{qid: list(range(len(self.labels[qid]))) for qid in self.big} for _ in range(n_states)]
        self.rounds = [{qid: 0 for qid in self.big} for _ in range(n_states)]
        self.tokens = [0] * n_states

    def key(self, i: int) -> tuple:
        return tuple(tuple(self.alive[i][qid]) for qid in self.big)

    def elimination(self, i: int) -> tuple[dict, list]:
        """This state's next round: {generated id: group question} and (id, qid, members, going on)."""
        asked, plan = {}, []
        for n, qid in enumerate(self.big):
            members = self.alive[i][qid]
            if len(members) <= self.group_size:
                continue
            groups, keep = _split(members, self.group_size)
            for j, group in enumerate(groups):
                if len(group) <= keep:  # nothing to eliminate here: the whole group goes on
                    plan.append((None, qid, group, keep))
                    continue
                gid = f"t{n}.{j}"
                asked[gid] = _sub_question(self.questions[qid], self.labels[qid], group, self.criteria[qid])
                plan.append((gid, qid, group, keep))
        return asked, plan

    def advance(self, i: int, plan: list, result: dict) -> None:
        survivors: dict[Any, list[int]] = {}
        for gid, qid, group, keep in plan:
            if gid is None:
                survivors.setdefault(qid, []).extend(group)
                continue
            probs = result["answers"][gid]["probabilities"]
            labels = self.labels[qid]
            best = sorted(group, key=lambda m: (-probs[labels[m]], m))[:keep]
            survivors.setdefault(qid, []).extend(best)
        for qid, members in survivors.items():
            self.alive[i][qid] = sorted(members)  # caller order again for the next round
            self.rounds[i][qid] += 1
        self.tokens[i] += int(result.get("usage", {}).get("input_tokens", 0))

    def final_questions(self, i: int) -> dict:
        out = {}
        for qid, definition in self.questions.items():
            if qid in self.alive[i]:
                out[qid] = _sub_question(definition, self.labels[qid], self.alive[i][qid], self.criteria[qid])
            else:
                out[qid] = definition
        return out

    def finish(self, i: int, result: dict) -> dict:
        answers = dict(result["answers"])
        block = {}
        for qid in self.big:
            labels, finalists = self.labels[qid], self.alive[i][qid]
            answer = dict(answers[qid])
            final = answer["probabilities"]
            answer["probabilities"] = {label: final.get(label, 0.0) for label in labels}
            answers[qid] = answer
            entry = {"finalists": [labels[m] for m in finalists], "rounds": self.rounds[i][qid] + 1,
                     "options": len(labels)}
            if self.questions[qid].get("option_order") is not None:
                entry["option_order_dropped"] = True
            block[qid] = entry
        usage = dict(result.get("usage", {}))
        usage["input_tokens"] = int(usage.get("input_tokens", 0)) + self.tokens[i]
        return {**result, "answers": answers, "usage": usage, "tournament": block}


def _by_key(indices: list[int], key: Any) -> dict[Any, list[int]]:
    groups: dict[Any, list[int]] = {}
    for i in indices:
        groups.setdefault(key(i), []).append(i)
    return groups


def predict_tournament_batch(agent: Any, states: list, questions: dict, group_size: int = DEFAULT_GROUP_SIZE,
                             min_confidence: Any = None, **predict_kwargs: Any) -> list[dict]:
    """`predict_tournament` for many states: each round asks the states whose surviving options are the
    same in one `agent.predict_batch` call (every state shares the first round)."""
    group_size = check_group_size(group_size)
    states = list(states)
    t = _Tournament(questions, group_size, len(states))
    if not t.big:
        results = agent.predict_batch(states, questions, min_confidence=min_confidence, **predict_kwargs)
        return [{**r, "tournament": {}} for r in results]
    pending = list(range(len(states)))
    while pending:
        rounds = {i: t.elimination(i) for i in pending}
        pending = [i for i in pending if rounds[i][0]]
        for members in _by_key(pending, t.key).values():
            asked = rounds[members[0]][0]
            results = agent.predict_batch([states[i] for i in members], asked, **predict_kwargs)
            for i, result in zip(members, results):
                t.advance(i, rounds[i][1], result)
    out: list[dict | None] = [None] * len(states)
    for members in _by_key(list(range(len(states))), t.key).values():
        results = agent.predict_batch([states[i] for i in members], t.final_questions(members[0]),
                                      min_confidence=min_confidence, **predict_kwargs)
        for i, result in zip(members, results):
            out[i] = t.finish(i, result)
    return out  # type: ignore[return-value]


def predict_tournament(agent: Any, state: Any, questions: dict, group_size: int = DEFAULT_GROUP_SIZE,
                       **predict_kwargs: Any) -> dict:
    """Answer `questions` about `state`, narrowing each choice question with more than `group_size` options
    in rounds of groups (one predict call per round). `predict_kwargs` go to every call (`lang`, `max_len`,
    `head_max_len`, ...), except `min_confidence`, which applies to the final answers."""
    if state is None:
        raise TypeError("state must be a str, dict or list, got None")
    return predict_tournament_batch(agent, [state], questions, group_size, **predict_kwargs)[0]

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
0.0) and its `confidence`/`answer_confidence` as the final computed them over the finalists. Its
abstention fields (§2.4) are those of its full option count: the bucket is read from
`len(probabilities)`, so a widened answer is gated again (tournament and shortlist alike) and agrees
with `laya.confidence.apply_confidence_gate` run on the returned result. The result
gains `tournament: {qid: {"finalists", "rounds", "options"[, "option_order_dropped"]}}` (empty when no
question needed narrowing) and `usage.input_tokens` counts every round. An `option_order` permutes all k
options, so it cannot apply to a group; it is dropped for narrowed questions and the block says so.

Shortlisting (`shortlist_choice`, `predict_shortlist`) narrows by embedding similarity instead, with no
extra model call: the state (prefixed by the question's instructions) and every option text ("label" or
"label: description", the text the model itself sees) are embedded by a caller-supplied `embed_fn(texts)
-> array [n, d]`, options are ranked by cosine similarity (clipped to [-1, 1]; a zero vector scores 0),
ties going to the earlier option, and the best k are kept in the caller's order. `predict_shortlist`
embeds every narrowed question's texts in ONE `embed_fn` call, then asks all questions in ONE
`agent.predict`; its result carries `probabilities` over ALL labels (dropped = 0.0, like the tournament)
and `shortlist: {qid: {"kept", "scores", "k", "options", "passthrough"[, "option_order_dropped"]}}` for
every choice question. A question with at most k options is passed through untouched (`passthrough`
true, `kept` = all labels, `scores` = {}: nothing is embedded for it).

`embed_fn_from_agent(agent)` makes an `embed_fn` from the agent's own encoder (mean-pooled last hidden
state over real tokens, L2-normalised); `cached_embed_fn(embed_fn)` adds an exact-string LRU cache so
option texts are embedded once per process.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple
from typing import Any, Callable

import numpy as np

from .confidence import check_min_confidence, gate_answer
from .numeric import nesting_guard, shown
from .questions import check_question, check_questions, render_state

__all__ = ["predict_tournament", "predict_tournament_batch", "shortlist_choice", "predict_shortlist",
           "predict_shortlist_batch", "embed_fn_from_agent", "cached_embed_fn", "CacheInfo"]

DEFAULT_GROUP_SIZE = 16


def check_group_size(group_size: Any) -> int:
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 2:
        with nesting_guard("group_size", "pass an integer >= 2"):  # (the repr of a deep value recurses)
            raise ValueError("group_size must be an integer >= 2 (options asked together per row), "
                             f"got {shown(group_size)}")
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


def _narrowed_questions(questions: dict, labels: dict, criteria: dict, members: dict) -> dict:
    """`questions` in the caller's order, each question in `members` ({qid: option indices}) asked on
    those options only, every other question as given."""
    return {qid: _sub_question(definition, labels[qid], members[qid], criteria[qid]) if qid in members
            else definition for qid, definition in questions.items()}


_GATE_FIELDS = ("abstention", "abstention_threshold", "low_confidence")


def _widened(answer: dict, labels: list, min_confidence: Any) -> dict:
    """A copy of a narrowed question's answer with `probabilities` over ALL `labels` (not asked = 0.0).

    With `min_confidence` set, the abstention fields are written again for the widened answer: spec §2.4
    takes the bucket from `len(probabilities)`, i.e. every option, not the k asked, so the gate the
    narrowed predict applied (bucket of k) is dropped and the full option count's one applied (the
    answer then re-gates to the same verdict with `apply_confidence_gate`)."""
    out = dict(answer)
    probs = out["probabilities"]
    out["probabilities"] = {label: probs.get(label, 0.0) for label in labels}
    if min_confidence is not None:
        for field in _GATE_FIELDS:
            out.pop(field, None)
        gate_answer(out, check_min_confidence(min_confidence))
    return out


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

    def in_caller_terms(self, error: ValueError, plan: list) -> ValueError:
        """A round's refusal naming the caller's question instead of the round's generated id."""
        text = str(error)
        for gid, qid, group, _ in plan:
            if gid is not None and f"question {gid!r}" in text:
                return ValueError(text.replace(f"question {gid!r}", f"question {qid!r} (a tournament round over "
                                                                     f"{len(group)} of its {len(self.labels[qid])} options)"))
        return error

    def final_questions(self, i: int) -> dict:
        return _narrowed_questions(self.questions, self.labels, self.criteria, self.alive[i])

    def finish(self, i: int, result: dict, min_confidence: Any = None) -> dict:
        answers = dict(result["answers"])
        block = {}
        for qid in self.big:
            labels, finalists = self.labels[qid], self.alive[i][qid]
            answers[qid] = _widened(answers[qid], labels, min_confidence)
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
            asked, plan = rounds[members[0]]
            try:
                results = agent.predict_batch([states[i] for i in members], asked, **predict_kwargs)
            except ValueError as e:
                raise t.in_caller_terms(e, plan) from None
            for i, result in zip(members, results):
                t.advance(i, rounds[i][1], result)
    out: list[dict | None] = [None] * len(states)
    for members in _by_key(list(range(len(states))), t.key).values():
        results = agent.predict_batch([states[i] for i in members], t.final_questions(members[0]),
                                      min_confidence=min_confidence, **predict_kwargs)
        for i, result in zip(members, results):
            out[i] = t.finish(i, result, min_confidence)
    return out  # type: ignore[return-value]


def predict_tournament(agent: Any, state: Any, questions: dict, group_size: int = DEFAULT_GROUP_SIZE,
                       **predict_kwargs: Any) -> dict:
    """Answer `questions` about `state`, narrowing each choice question with more than `group_size` options
    in rounds of groups (one predict call per round). `predict_kwargs` go to every call (`lang`, `max_len`,
    `head_max_len`, ...), except `min_confidence`, which applies to the final answers."""
    if state is None:
        raise TypeError("state must be a str, dict or list, got None")
    return predict_tournament_batch(agent, [state], questions, group_size, **predict_kwargs)[0]


# ---- shortlisting by embedding similarity ------------------------------------------------------------

DEFAULT_SHORTLIST_K = 20
DEFAULT_CACHE_SIZE = 4096
EmbedFn = Callable[[list], np.ndarray]
CacheInfo = namedtuple("CacheInfo", ["hits", "misses", "maxsize", "currsize"])


def _int_at_least(value: Any, minimum: int) -> bool:
    """An integer (numpy ones included, bools not) >= `minimum`."""
    return not isinstance(value, bool) and isinstance(value, (int, np.integer)) and value >= minimum


def _positive(value: Any, name: str, minimum: int = 1) -> int:
    """`value` as an int when `_int_at_least(value, minimum)`; else ValueError("<name> must be an integer >=
    <minimum>, got ...")."""
    if not _int_at_least(value, minimum):
        with nesting_guard(name, f"pass an integer >= {minimum}"):  # (the repr of a deep value recurses)
            raise ValueError(f"{name} must be an integer >= {minimum}, got {shown(value)}")
    return int(value)


def check_k(k: Any) -> int:
    if not _int_at_least(k, 1):
        with nesting_guard("k", "pass a positive integer"):  # (the repr of a deep value recurses)
            raise ValueError(f"k must be a positive integer (options kept per choice question), got {shown(k)}")
    return int(k)


def _check_texts(texts: Any, where: str) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"{where} takes a list of texts, not a single {type(texts).__name__}; wrap it: [text]")
    try:
        texts = list(texts)
    except TypeError:
        raise TypeError(f"{where} takes a list of texts, not {type(texts).__name__}") from None
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{where}: text {i} is {type(text).__name__}, not str")
    return texts


def _embeddings(embed_fn: Any, texts: list[str]) -> np.ndarray:
    """`embed_fn(texts)` as a checked float64 array [len(texts), d]."""
    if not callable(embed_fn):
        raise TypeError(f"embed_fn must be a callable texts -> array [n, d], got {type(embed_fn).__name__}")
    out = embed_fn(list(texts))
    try:
        arr = np.asarray(out, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError, OverflowError) as e:
        raise ValueError(f"embed_fn must return a numeric array [n, d] (numpy, or a CPU tensor); "
                         f"got {type(out).__name__}: {e}") from None
    if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] < 1:
        raise ValueError(f"embed_fn returned an array of shape {tuple(arr.shape)} for {len(texts)} texts; "
                         f"expected ({len(texts)}, d) with d >= 1")
    if not np.isfinite(arr).all():
        raise ValueError("embed_fn returned non-finite values (nan or inf); check the embedding model")
    return arr


def _cosines(query: np.ndarray, options: np.ndarray) -> np.ndarray:
    """Cosine of each option row with the query, clipped to [-1, 1]; a zero vector scores 0."""
    denom = np.linalg.norm(options, axis=1) * np.linalg.norm(query)
    safe = np.where(denom > 0, denom, 1.0)
    return np.clip(np.where(denom > 0, (options @ query) / safe, 0.0), -1.0, 1.0)


def _kept(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the k best options (ties: the earlier option), in the caller's order."""
    return sorted(sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:k])


def _query_text(state_text: str, instructions: str | None) -> str:
    return state_text if instructions is None else f"{instructions}\n\n{state_text}"


def _score_questions(embed_fn: Any, items: list[tuple[str, tuple[str, ...]]]) -> list[np.ndarray]:
    """Cosines for each (query, option texts) item, all texts embedded in one embed_fn call (deduplicated)."""
    unique = list(dict.fromkeys(t for query, options in items for t in (query, *options)))
    index = {t: i for i, t in enumerate(unique)}
    emb = _embeddings(embed_fn, unique)
    out = []
    for query, options in items:
        out.append(_cosines(emb[index[query]], emb[[index[t] for t in options]]))
    return out


def shortlist_choice(state: Any, criteria: Any, embed_fn: EmbedFn, k: int = DEFAULT_SHORTLIST_K, *,
                     instructions: Any = None, return_scores: bool = False) -> Any:
    """Keep the `k` options of a choice question's `criteria` most similar to `state`.

    `criteria` is a choice question's criteria (dict {label: description} or list of labels, validated as
    laya validates questions). The state text (prefixed by `instructions` when given) and each option text
    ("label" or "label: description") are embedded in one `embed_fn` call and ranked by cosine similarity.
    Returns the kept criteria in the caller's order and form (a dict for a dict, a list for a list or
    tuple); with `return_scores` a pair (kept, {label: cosine in [-1, 1]} over all options). With
    `k >= len(criteria)` everything is kept, and `embed_fn` is only called when scores are asked for.
    """
    k = check_k(k)
    state_text = render_state(state)
    definition = {"type": "choice", "instructions": "shortlist" if instructions is None else instructions,
                  "criteria": criteria}
    try:
        q = check_question("criteria", definition)
    except ValueError as e:
        message, prefix = str(e), "question 'criteria': "
        raise ValueError("shortlist_choice: " + (message[len(prefix):] if message.startswith(prefix) else message)
                         ) from None
    labels = list(q.labels)
    if q.k <= k and not return_scores:
        return _criteria_subset(criteria, labels, range(q.k))
    query = _query_text(state_text, None if instructions is None else q.instructions)
    (scores,) = _score_questions(embed_fn, [(query, q.option_texts)])
    keep = list(range(q.k)) if q.k <= k else _kept(scores, k)
    kept = _criteria_subset(criteria, labels, keep)
    if return_scores:
        return kept, {label: float(s) for label, s in zip(labels, scores)}
    return kept


def _criteria_subset(criteria: Any, labels: list, keep: Any) -> Any:
    if isinstance(criteria, dict):
        return {labels[i]: criteria[labels[i]] for i in keep}
    return [labels[i] for i in keep]


class _Shortlist:
    """The narrowed questions of one call: per state, the kept option indices of each big choice question."""

    def __init__(self, states: list, questions: dict, embed_fn: Any, k: int):
        qs = check_questions(questions)  # the library's own validation and error texts
        self.questions, self.k = questions, k
        self.choice = [q for q in qs if q.qtype == "choice"]
        self.big = [q for q in self.choice if q.k > k]
        self.labels = {q.qid: list(q.labels) for q in self.choice}
        self.criteria = {q.qid: _choice_criteria(questions[q.qid]) for q in self.big}
        texts = [render_state(s) for s in states]
        items = [(_query_text(text, q.instructions), q.option_texts) for text in texts for q in self.big]
        scores = iter(_score_questions(embed_fn, items) if items else [])
        self.scores = [{q.qid: next(scores) for q in self.big} for _ in texts]
        self.kept = [{qid: _kept(s, k) for qid, s in per_state.items()} for per_state in self.scores]

    def key(self, i: int) -> tuple:
        return tuple(tuple(self.kept[i][q.qid]) for q in self.big)

    def asked(self, i: int) -> dict:
        return _narrowed_questions(self.questions, self.labels, self.criteria, self.kept[i])

    def finish(self, i: int, result: dict, min_confidence: Any = None) -> dict:
        answers = dict(result["answers"])
        block = {}
        for q in self.choice:
            qid, labels = q.qid, self.labels[q.qid]
            if qid not in self.kept[i]:
                block[qid] = {"kept": labels, "scores": {}, "k": self.k, "options": q.k, "passthrough": True}
                continue
            answers[qid] = _widened(answers[qid], labels, min_confidence)
            entry = {"kept": [labels[m] for m in self.kept[i][qid]],
                     "scores": {label: round(float(s), 4) for label, s in zip(labels, self.scores[i][qid])},
                     "k": self.k, "options": q.k, "passthrough": False}
            if self.questions[qid].get("option_order") is not None:
                entry["option_order_dropped"] = True
            block[qid] = entry
        return {**result, "answers": answers, "shortlist": block}


def predict_shortlist(agent: Any, state: Any, questions: dict, embed_fn: EmbedFn, k: int = DEFAULT_SHORTLIST_K,
                      **predict_kwargs: Any) -> dict:
    """Answer `questions` about `state`, first narrowing each choice question with more than `k` options
    to its `k` options most similar to the state (see `shortlist_choice`; the question's instructions
    prefix the state text). One `embed_fn` call, then ONE `agent.predict(state, narrowed, **predict_kwargs)`
    (an Agent, ONNXAgent or Router). Narrowed answers get `probabilities` over all labels (dropped = 0.0);
    the result gains `shortlist: {qid: {"kept", "scores", "k", "options", "passthrough"}}` per choice
    question (`option_order` cannot apply to a subset: it is dropped and the entry says
    `"option_order_dropped": true`)."""
    k = check_k(k)
    if state is None:
        raise TypeError("state must be a str, dict or list, got None")
    plan = _Shortlist([state], questions, embed_fn, k)
    result = agent.predict(state, plan.asked(0), **predict_kwargs)
    return plan.finish(0, result, predict_kwargs.get("min_confidence"))


def predict_shortlist_batch(agent: Any, states: list, questions: dict, embed_fn: EmbedFn,
                            k: int = DEFAULT_SHORTLIST_K, **predict_kwargs: Any) -> list[dict]:
    """`predict_shortlist` for many states: one `embed_fn` call for all of them, and one
    `agent.predict_batch` call per distinct set of kept options (states that kept the same share it)."""
    k = check_k(k)
    if isinstance(states, (str, bytes, dict)):
        raise TypeError("states must be a list of states; for one state use predict_shortlist")
    states = list(states)
    if any(s is None for s in states):
        raise TypeError("state must be a str, dict or list, got None")
    plan = _Shortlist(states, questions, embed_fn, k)
    out: list[dict | None] = [None] * len(states)
    for members in _by_key(list(range(len(states))), plan.key).values():
        results = agent.predict_batch([states[i] for i in members], plan.asked(members[0]), **predict_kwargs)
        for i, result in zip(members, results):
            out[i] = plan.finish(i, result, predict_kwargs.get("min_confidence"))
    return out  # type: ignore[return-value]


# ---- embedding functions -------------------------------------------------------------------------------

def embed_fn_from_agent(agent: Any, max_length: int = 512, batch_size: int = 32) -> EmbedFn:
    """An `embed_fn(texts) -> np.ndarray [n, d]` (float32) from the agent's own encoder.

    Each text becomes [CLS] text [SEP] (at most `max_length` tokens, also capped by the encoder's
    position limit), and its embedding is the mean of the encoder's last hidden state over the real
    (non-padding) tokens, L2-normalised (a cosine is then a dot product; laya computes cosines anyway):
    `Agent.encode_texts`. The encoder is
    the checkpoint's trained decision encoder, not a sentence-embedding model: good enough to drop clearly
    unrelated options, but a dedicated embedding model ranks better. Needs a torch `Agent` (an
    ONNXAgent has no encoder to call).
    """
    max_length = _positive(max_length, "max_length", 2)
    batch_size = _positive(batch_size, "batch_size")
    if not callable(getattr(agent, "encode_texts", None)):
        raise TypeError(f"embed_fn_from_agent needs a torch laya Agent (it calls the encoder); got "
                        f"{type(agent).__name__}. Pass an embed_fn of your own (texts -> array [n, d]) instead")
    limit = agent.text_limit(max_length)

    def embed(texts: Any) -> np.ndarray:
        return agent.encode_texts(_check_texts(texts, "embed_fn"), max_length=max_length, batch_size=batch_size)

    embed.max_length, embed.batch_size = limit, batch_size  # type: ignore[attr-defined]
    return embed


def cached_embed_fn(embed_fn: EmbedFn, maxsize: int | None = DEFAULT_CACHE_SIZE) -> EmbedFn:
    """Wrap `embed_fn` with an LRU cache keyed by the exact text (`maxsize=None`: unbounded).

    A call looks every text up; the texts not cached (each distinct one once) go to `embed_fn` in ONE call,
    and the answer is stacked in input order. `cache_info()` -> CacheInfo(hits, misses, maxsize, currsize):
    `misses` counts texts sent to `embed_fn`, `hits` every other text asked for (a repeat inside one call
    included). `cache_clear()` empties the cache and its counters. Thread-safe; the lock is not held
    while `embed_fn` runs (two threads may then embed the same new text; the result is the same).
    """
    if not callable(embed_fn):
        raise TypeError(f"embed_fn must be a callable texts -> array [n, d], got {type(embed_fn).__name__}")
    if maxsize is not None:
        maxsize = _positive(maxsize, "maxsize")
    cache: OrderedDict[str, np.ndarray] = OrderedDict()
    lock = threading.Lock()
    counts = {"hits": 0, "misses": 0}

    def embed(texts: Any) -> np.ndarray:
        texts = _check_texts(texts, "cached embed_fn")
        found: dict[str, np.ndarray] = {}
        with lock:
            for text in texts:
                row = cache.get(text)
                if row is not None:
                    cache.move_to_end(text)
                    found[text] = row
        missing = list(dict.fromkeys(t for t in texts if t not in found))
        if missing:
            fresh = _embeddings(embed_fn, missing).astype(np.float32)
            fresh.setflags(write=False)
            dims = {row.shape[0] for row in found.values()}
            if dims and dims != {fresh.shape[1]}:
                raise ValueError(f"embed_fn returned vectors of size {fresh.shape[1]}, but cached ones have "
                                 f"size {dims.pop()}; call cache_clear() after changing the embedding model")
            for text, row in zip(missing, fresh):
                found[text] = row
        with lock:
            counts["misses"] += len(missing)
            counts["hits"] += len(texts) - len(missing)
            for text in missing:
                cache[text] = found[text]
                cache.move_to_end(text)
            while maxsize is not None and len(cache) > maxsize:
                cache.popitem(last=False)
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[t] for t in texts])

    def cache_info() -> CacheInfo:
        with lock:
            return CacheInfo(counts["hits"], counts["misses"], maxsize, len(cache))

    def cache_clear() -> None:
        with lock:
            cache.clear()
            counts["hits"] = counts["misses"] = 0

    embed.cache_info, embed.cache_clear = cache_info, cache_clear  # type: ignore[attr-defined]
    embed.__wrapped__ = embed_fn  # type: ignore[attr-defined]
    return embed

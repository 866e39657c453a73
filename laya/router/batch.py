"""Router.predict_batch: requests checked, routed, grouped by checkpoint; each group loads once, runs its
start hooks, answers each (questions, budgets, language) sub-group in one agent.predict_batch call, gates
and runs its end hooks in reverse start order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..hooks import aggregate_usage
from ..questions import located, render_state
from .calls import HookRun, answer_group

def check_requests(requests: Any) -> list[dict]:
    """The requests of route_batch / predict_batch, checked before anything is routed or loaded."""
    if isinstance(requests, (str, bytes, bytearray, dict)) or not isinstance(requests, Sequence):
        raise TypeError("requests must be a sequence of request dictionaries")
    for i, r in enumerate(requests):
        if not isinstance(r, dict):
            raise TypeError(f"request {i} must be a dict, got {type(r).__name__}")
        if "state" not in r:
            raise ValueError(f"request {i} is missing required key 'state'")
        if r["state"] is None:
            raise TypeError(f"request {i} 'state' must not be None; pass a string, dict, or list")
        if "questions" not in r:
            raise ValueError(f"request {i} is missing required key 'questions'")
        if not isinstance(r["questions"], dict):
            raise TypeError(f"request {i} 'questions' must be a dict, got {type(r['questions']).__name__}")
    return list(requests)


def state_error(states: list, indices: list) -> Exception | None:
    """The render error of the first bad state, naming its request index (`indices`); None when all render."""
    for i, state in zip(indices, states):
        try:
            render_state(state)
        except (TypeError, ValueError) as e:
            return located(e, f"request {i}")
    return None


def request_lang(request: dict, decision: dict) -> Any:
    """The language an agent is told: the request's `lang`, else the detected one."""
    if request.get("lang") is not None:
        return request["lang"]
    return (decision.get("detection") or {}).get("language")


class BatchRun:
    """One predict_batch call over checked requests and their decisions."""

    def __init__(self, router: Any, requests: list, decisions: list, run: HookRun, batch_size: Any,
                 sort_by_length: bool):
        self.router, self.requests, self.decisions, self.run = router, requests, decisions, run
        self.batch_size, self.sort_by_length = batch_size, bool(sort_by_length)
        self.results: list = [None] * len(requests)
        self.sizes: list[tuple[int, bool]] = []  # (states, reordered) per sub-group that reached an agent

    def answer(self) -> list[dict]:
        groups: dict[str, list[int]] = {}
        for i, decision in enumerate(self.decisions):
            groups.setdefault(self.router._decision_model(decision), []).append(i)
        for name, members in groups.items():
            self._group(name, members)
        return self.results

    def _group(self, name: str, members: list[int]) -> None:
        router, run = self.router, self.run
        contexts = [run.context(states=[self.requests[i]["state"]], questions=self.requests[i]["questions"],
                                model=name, router=router, decision=self.decisions[i],
                                max_len=self.requests[i].get("max_len"),
                                head_max_len=self.requests[i].get("head_max_len")) for i in members]
        try:
            agent = router._load_for_call(name)
        except Exception as e:
            for ctx in contexts:
                run.fail(ctx, e)
            raise
        for i, ctx in zip(members, contexts):
            ctx.agent = agent
            if not run.start(ctx) and (len(ctx.states) != 1 or ctx.states[0] is None):
                raise ValueError(f"request {i}: an on_predict_start hook must leave exactly one state, "
                                 f"got {len(ctx.states)}")
        try:
            self._sub_groups(agent, members, contexts)
        except Exception as e:
            for ctx in contexts:
                if ctx.results is None:
                    ctx.error = e
                    run.fire("on_error", ctx, False)
            for ctx in reversed(contexts):
                run.finish(ctx, failed=True)
            raise
        for i, ctx in zip(reversed(members), reversed(contexts)):
            run.finish(ctx)
            self.results[i] = run.with_routing(ctx, self.decisions[i])

    def _sub_groups(self, agent: Any, members: list[int], contexts: list) -> None:
        with_lang = bool(getattr(agent, "lang_temperatures", None))
        subs: dict[tuple, list] = {}
        for i, ctx in zip(members, contexts):
            if ctx.results is not None:  # answered by a start hook (ctx.skip)
                continue
            lang = (request_lang(self.requests[i], self.decisions[i]),) if with_lang else ()
            key = (json.dumps(ctx.questions, ensure_ascii=False, default=repr), ctx.max_len, ctx.head_max_len, lang)
            subs.setdefault(key, []).append((i, ctx))
        for (_, max_len, head_max_len, lang), pairs in subs.items():
            indices, group = [i for i, _ in pairs], [ctx for _, ctx in pairs]
            states = [ctx.states[0] for ctx in group]
            try:
                results = answer_group(agent, states, group[0].questions, self.batch_size, max_len, head_max_len,
                                       lang, self.sort_by_length)
            except (TypeError, ValueError):
                bad = state_error(states, indices)  # the agent numbers states within this sub-group only
                if bad is None:
                    raise
                raise bad from None
            size = self.batch_size
            self.sizes.append((len(states), self.sort_by_length and size is not None and 1 < size < len(states)))
            for ctx, result in zip(group, results):
                ctx.results = [result]
                ctx.usage = aggregate_usage([result])

    def sort_report(self) -> dict | None:
        """The diagnostics["sort_by_length"] entry, or None when nothing is to be written."""
        if not self.sort_by_length or not self.sizes:
            return None
        counts = [n for n, _ in self.sizes]
        return {"groups": len(self.sizes), "reordered": sum(r for _, r in self.sizes), "smallest": min(counts),
                "largest": max(counts)}

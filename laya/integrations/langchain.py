"""LangChain runnables around a laya Agent (spec §1.1 names them; the design below is this package's).

Every class is a `langchain_core.runnables.Runnable` wrapping anything with laya's
`predict(state, questions, **kwargs)`: an `Agent`, an `ONNXAgent` or a `laya.Router`. `invoke` goes
through `Runnable._call_with_config`, so callbacks and tracing see one chain run per call; `batch`,
`ainvoke`, `abatch` and `stream` are LangChain's defaults (threads over `invoke`: an Agent is thread-safe).
Keyword arguments given at construction that the classes do not take themselves (`lang`,
`min_confidence`, `max_len`, `head_max_len`, `hooks`, ...) go to every `predict`; keyword arguments of
`invoke` are added for that call.

Inputs (`state_from_input`): a str, a dict or a list is a laya state as is, except that a bare string is
wrapped as `{state_key: text}` when the questions read one state key (`state_key` defaults to the key a
preset names in backticks, e.g. `message` for triage, `prompt` for the guard; pass `state_key=None` to
keep strings bare). A LangChain message becomes its text; a list of messages or a `PromptValue` becomes
a conversation `[{"role": type, "content": text}, ...]` (a list state: truncation keeps the newest turns).

- `LayaDecision(agent, questions)`: `invoke(input)` -> the agent's result dict, unchanged.
- `LayaRouter(agent, routes, instructions=...)`: `routes` maps each route label to a runnable (or a plain
  callable, wrapped in `RunnableLambda`), a description string, or a `(description, runnable)` pair.
  One choice question (`question_id`, default "route") over the labels (descriptions included) picks
  the route; `invoke` passes the ORIGINAL input to the chosen runnable (with the run's child callbacks)
  and returns its output. A route without a runnable returns the decision instead:
  `{"route", "confidence", "probabilities", "fallback", "result"}` (`route(input)` always returns it).
  `fallback` + `min_confidence`: when the answer's `answer_confidence` is below `min_confidence`, the
  fallback route is taken (`"fallback": true`). `embed_fn` (+ `k`) shortlists many routes first
  (`laya.shortlist.predict_shortlist`).
- `LayaGuardrail(agent, questions=None, block_when=None)`: the guard preset by default. `invoke`
  returns the input unchanged when nothing blocks, else raises `LayaGuardrailError` (an `Exception`
  carrying `.result`, `.reasons`, `.input`). `block_when` is a callable `result -> bool | str | list of
  reasons` or a dict `{qid: rule}`: noul -> block when P(true) >= the number; score -> block when the
  expected level >= the number; choice -> block when the chosen label is the given label or one of a
  list/set of labels. Default with the guard preset: `{"jailbreak": 0.5, "prompt_injection": 0.5,
  "harm_severity": 2}` ("clearly harmful" or worse; `sensitive_data` and `topic` inform, never block);
  default with your own questions: every noul question at 0.5 (none -> `ValueError`: give block_when).
  `check(input)` returns `(blocked, reasons, result)` without raising.
- `LayaTriage(agent)`: the triage preset; `invoke` -> `{qid: value, ..., "result": result}` with
  value = chosen label (choice), expected level (score), P(true) (noul) (`summarise`).
- `LayaEvaluator(agent, criteria)`: scores an (input, output) pair, e.g. an LLM's answer. `criteria`
  is a description string or a dict `{name: description}`; each becomes a score question over `levels`
  (default four: does not meet .. fully meets) about the state `{input_key: ..., output_key: ...}`.
  Input: a dict with those keys (default "input"/"output"; other keys ignored) or an `(input, output)`
  pair. `invoke` -> `{"score": mean of scores, "scores": {name: expected level / (levels - 1), in
  [0, 1]}, "levels": {name: expected level}, "result": result}`.
"""

from __future__ import annotations

import copy
import math
from typing import Any, Callable

try:
    from langchain_core.messages import BaseMessage
    from langchain_core.prompt_values import PromptValue
    from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
except ImportError as e:  # optional dependency
    raise ImportError("laya.integrations needs LangChain's core package (langchain_core), which could not be "
                      f"imported ({e}); install it with: pip install langchain-core") from e

from ..answers import unit_interval
from ..presets import guard_questions, state_field, triage_questions
from ..questions import check_questions

__all__ = ["LayaDecision", "LayaEvaluator", "LayaGuardrail", "LayaGuardrailError", "LayaRouter", "LayaTriage",
           "state_from_input", "summarise"]

_AUTO = object()  # state_key default: the key the questions name in backticks
DEFAULT_GUARD_BLOCK = {"jailbreak": 0.5, "prompt_injection": 0.5, "harm_severity": 2}
DEFAULT_EVAL_LEVELS = ("does not meet the criterion", "partly meets the criterion", "mostly meets the criterion",
                       "fully meets the criterion")


def _message_text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):  # a property in langchain_core >= 1 (a callable str subclass)
        return str(text)
    if callable(text):  # a method before
        text = text()
        if isinstance(text, str):
            return text
    content = message.content
    return content if isinstance(content, str) else str(content)


def _conversation(messages: Any) -> list:
    return [{"role": m.type, "content": _message_text(m)} for m in messages]


def state_from_input(value: Any, state_key: str | None = None) -> Any:
    """A runnable's input as a laya state (see the module docstring)."""
    if value is None:
        raise TypeError("input is None; pass a string, a dict, a list, or LangChain message(s)")
    if isinstance(value, BaseMessage):
        value = _message_text(value)
    elif isinstance(value, PromptValue):
        return _conversation(value.to_messages())
    elif isinstance(value, (list, tuple)) and value and all(isinstance(m, BaseMessage) for m in value):
        return _conversation(value)
    if isinstance(value, str):
        return {state_key: value} if state_key else value
    if isinstance(value, (dict, list)):
        return value
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"input of type {type(value).__name__} is not a laya state; pass a string, a dict, a list, "
                    "or LangChain message(s)")


def summarise(result: dict) -> dict:
    """{qid: chosen label (choice) | expected level (score) | P(true) (noul)} of a laya result."""
    out = {}
    for qid, answer in result.get("answers", {}).items():
        out[qid] = answer.get(answer.get("type"))
    return out


def _check_agent(agent: Any) -> Any:
    if not callable(getattr(agent, "predict", None)):
        raise TypeError(f"agent must be a laya Agent, ONNXAgent or Router (something with .predict), got "
                        f"{type(agent).__name__}")
    return agent


class _LayaRunnable(Runnable):
    """Shared plumbing: the agent, the validated questions, input conversion, one predict per invoke."""

    def __init__(self, agent: Any, questions: dict, state_key: Any = _AUTO, **predict_kwargs: Any):
        self.agent = _check_agent(agent)
        check_questions(questions)  # laya's own validation and error texts, at construction
        self.questions = copy.deepcopy(questions)
        if state_key is _AUTO:
            state_key = state_field(self.questions)
        elif state_key is not None and (not isinstance(state_key, str) or not state_key):
            raise ValueError(f"state_key must be a non-empty string or None, got {state_key!r}")
        self.state_key = state_key
        self.predict_kwargs = predict_kwargs

    def _predict(self, value: Any, **kwargs: Any) -> dict:
        state = state_from_input(value, self.state_key)
        return self.agent.predict(state, self.questions, **{**self.predict_kwargs, **kwargs})

    def _run(self, value: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:  # noqa: A002
        return self._call_with_config(self._run, input, config, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(agent={self.agent!r}, questions={list(self.questions)!r})"


class LayaDecision(_LayaRunnable):
    """`invoke(input)` -> the agent's result dict for `questions`."""

    def __init__(self, agent: Any, questions: dict, *, state_key: Any = _AUTO, **predict_kwargs: Any):
        super().__init__(agent, questions, state_key, **predict_kwargs)

    def _run(self, value: Any, **kwargs: Any) -> dict:
        return self._predict(value, **kwargs)


class LayaRouter(_LayaRunnable):
    """Pick a route with one choice question and run it (see the module docstring)."""

    def __init__(self, agent: Any, routes: dict, instructions: Any = "Which route should handle this input?", *,
                 fallback: Any = None, min_confidence: float | None = None, question_id: str = "route",
                 embed_fn: Callable | None = None, k: int = 20, state_key: Any = _AUTO, **predict_kwargs: Any):
        if not isinstance(routes, dict) or not routes:
            raise ValueError("routes must be a non-empty dict {label: runnable | description | (description, "
                             f"runnable)}}, got {routes!r}")
        criteria, self.targets = {}, {}
        for label, spec in routes.items():
            description, target = self._route_spec(label, spec)
            criteria[label] = description
            if target is not None:
                self.targets[label] = target
        if fallback is not None and fallback not in criteria:
            raise ValueError(f"fallback {fallback!r} is not one of the routes {list(criteria)!r}")
        if min_confidence is not None:
            unit_interval(min_confidence, "min_confidence")
            if fallback is None:
                raise ValueError("min_confidence needs a fallback route to take when the decision is unsure")
        self.fallback, self.min_confidence, self.question_id = fallback, min_confidence, question_id
        self.embed_fn, self.k = embed_fn, k
        if embed_fn is not None:
            from ..shortlist import check_k

            check_k(k)
        questions = {question_id: {"type": "choice", "instructions": instructions, "criteria": criteria}}
        super().__init__(agent, questions, state_key, **predict_kwargs)

    @staticmethod
    def _route_spec(label: Any, spec: Any) -> tuple[Any, Runnable | None]:
        if isinstance(spec, tuple) and len(spec) == 2:
            description, target = spec
            if description is not None and not isinstance(description, str):
                raise ValueError(f"route {label!r}: the description in (description, runnable) must be a string")
            return description, LayaRouter._route_spec(label, target)[1]
        if spec is None or isinstance(spec, str):
            return spec, None
        if isinstance(spec, Runnable):
            return None, spec
        if callable(spec):
            return None, RunnableLambda(spec)
        raise ValueError(f"route {label!r}: give a runnable, a callable, a description string or a "
                         f"(description, runnable) pair, not {type(spec).__name__}")

    def _decide(self, value: Any, **kwargs: Any) -> dict:
        if self.embed_fn is None:
            result = self._predict(value, **kwargs)
        else:
            from ..shortlist import predict_shortlist

            state = state_from_input(value, self.state_key)
            result = predict_shortlist(self.agent, state, self.questions, self.embed_fn, self.k,
                                       **{**self.predict_kwargs, **kwargs})
        answer = result["answers"][self.question_id]
        confidence = answer.get("answer_confidence", answer.get("confidence"))
        route, fell_back = answer["choice"], False
        if self.min_confidence is not None and confidence is not None and confidence < self.min_confidence:
            route, fell_back = self.fallback, True
        return {"route": route, "confidence": confidence, "probabilities": answer["probabilities"],
                "fallback": fell_back, "result": result}

    def route(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> dict:  # noqa: A002
        """The routing decision only (nothing is run)."""
        return self._call_with_config(lambda value: self._decide(value, **kwargs), input, config)

    def _run(self, value: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        # `config` arrives with this run's child callbacks (Runnable._call_with_config patches it)
        decision = self._decide(value, **kwargs)
        target = self.targets.get(decision["route"])
        if target is None:
            return decision
        return target.invoke(value, config)


class LayaGuardrailError(Exception):
    """Raised by `LayaGuardrail` when an input is blocked: `.result` (the laya result), `.reasons`
    (one line per rule that fired), `.input` (what was blocked)."""

    def __init__(self, message: str, *, result: dict | None = None, reasons: list | None = None,
                 input: Any = None):  # noqa: A002
        super().__init__(message)
        self.result, self.reasons, self.input = result, list(reasons or []), input

    def __reduce__(self) -> tuple:  # keyword-only fields survive pickling (e.g. across processes)
        return (_rebuild_guardrail_error, (str(self), self.result, self.reasons, self.input))


def _rebuild_guardrail_error(message: str, result: Any, reasons: Any, value: Any) -> LayaGuardrailError:
    return LayaGuardrailError(message, result=result, reasons=reasons, input=value)


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


class LayaGuardrail(_LayaRunnable):
    """Pass the input through, or raise `LayaGuardrailError` (see the module docstring)."""

    def __init__(self, agent: Any, questions: dict | None = None, *, block_when: Any = None,
                 state_key: Any = _AUTO, **predict_kwargs: Any):
        preset = questions is None
        super().__init__(agent, guard_questions() if preset else questions, state_key, **predict_kwargs)
        qs = {q.qid: q for q in check_questions(self.questions)}
        if block_when is None:
            block_when = dict(DEFAULT_GUARD_BLOCK) if preset else {qid: 0.5 for qid, q in qs.items()
                                                                    if q.qtype == "noul"}
            if not block_when:
                raise ValueError("these questions have no noul (yes/no) question to block on; pass block_when="
                                 "{qid: threshold or label(s)} or a callable result -> bool")
        if callable(block_when):
            self.block_when: Any = block_when
            return
        if not isinstance(block_when, dict) or not block_when:
            raise ValueError(f"block_when must be a non-empty dict {{qid: rule}} or a callable, got {block_when!r}")
        rules = {}
        for qid, rule in block_when.items():
            q = qs.get(qid)
            if q is None:
                raise ValueError(f"block_when names question {qid!r}, which is not among {list(qs)!r}")
            if q.qtype == "noul":
                if not _is_number(rule) or not 0.0 <= rule <= 1.0:
                    raise ValueError(f"block_when[{qid!r}]: a noul rule is a P(true) threshold in [0, 1], "
                                     f"got {rule!r}")
            elif q.qtype == "score":
                if not _is_number(rule) or not 0.0 <= rule <= q.k - 1:
                    raise ValueError(f"block_when[{qid!r}]: a score rule is an expected-level threshold in "
                                     f"[0, {q.k - 1}], got {rule!r}")
            else:
                labels = list(rule) if isinstance(rule, (list, tuple, set, frozenset)) else [rule]
                unknown = [label for label in labels if label not in q.labels]
                if unknown or not labels:
                    raise ValueError(f"block_when[{qid!r}]: a choice rule is a label or labels among "
                                     f"{list(q.labels)!r}, got {rule!r}")
                rule = labels
            rules[qid] = (q.qtype, rule)
        self.block_when = rules

    def _reasons(self, result: dict) -> list[str]:
        if callable(self.block_when):
            verdict = self.block_when(result)
            if not verdict:
                return []
            if isinstance(verdict, str):
                return [verdict]
            if isinstance(verdict, (list, tuple)):
                return [str(v) for v in verdict] or ["blocked by block_when"]
            return ["blocked by block_when"]
        reasons = []
        answers = result["answers"]
        for qid, (qtype, rule) in self.block_when.items():
            answer = answers[qid]
            if qtype == "noul" and answer["noul"] >= rule:
                reasons.append(f"{qid}: P(true)={answer['noul']:.4f} >= {rule}")
            elif qtype == "score" and answer["score"] >= rule:
                reasons.append(f"{qid}: expected level {answer['score']:.4f} >= {rule}")
            elif qtype == "choice" and answer["choice"] in rule:
                reasons.append(f"{qid}: chose {answer['choice']!r}")
        return reasons

    def check(self, input: Any, **kwargs: Any) -> tuple[bool, list[str], dict]:  # noqa: A002
        """(blocked, reasons, result) for one input, without raising."""
        result = self._predict(input, **kwargs)
        reasons = self._reasons(result)
        return bool(reasons), reasons, result

    def _run(self, value: Any, **kwargs: Any) -> Any:
        blocked, reasons, result = self.check(value, **kwargs)
        if blocked:
            raise LayaGuardrailError("laya guardrail blocked the input: " + "; ".join(reasons), result=result,
                                     reasons=reasons, input=value)
        return value


class LayaTriage(_LayaRunnable):
    """The triage preset (or your questions): `invoke` -> `{qid: value, ..., "result": result}`."""

    def __init__(self, agent: Any, questions: dict | None = None, *, state_key: Any = _AUTO,
                 **predict_kwargs: Any):
        super().__init__(agent, triage_questions() if questions is None else questions, state_key,
                         **predict_kwargs)
        if "result" in self.questions:
            raise ValueError("a question id 'result' would collide with the full result's key; rename it")

    def _run(self, value: Any, **kwargs: Any) -> dict:
        result = self._predict(value, **kwargs)
        return {**summarise(result), "result": result}


class LayaEvaluator(_LayaRunnable):
    """Score an (input, output) pair against criteria with score questions (see the module docstring)."""

    def __init__(self, agent: Any, criteria: Any, *, levels: Any = None, input_key: str = "input",
                 output_key: str = "output", **predict_kwargs: Any):
        if isinstance(criteria, str):
            criteria = {"criterion": criteria}
        if not isinstance(criteria, dict) or not criteria:
            raise ValueError(f"criteria must be a description string or a non-empty dict {{name: description}}, "
                             f"got {criteria!r}")
        levels = list(DEFAULT_EVAL_LEVELS if levels is None else levels)
        if len(levels) < 2:
            raise ValueError(f"levels must list at least 2 score levels (worst first), got {levels!r}")
        for name in (input_key, output_key):
            if not isinstance(name, str) or not name or "`" in name:
                raise ValueError(f"input_key/output_key must be non-empty strings without backticks, got {name!r}")
        if input_key == output_key:
            raise ValueError(f"input_key and output_key must differ, both are {input_key!r}")
        questions = {}
        for name, description in criteria.items():
            if not isinstance(description, str) or not description.strip():
                raise ValueError(f"criterion {name!r}: the description must be a non-empty string")
            questions[name] = {"type": "score", "criteria": levels,
                               "instructions": f"How well does `{output_key}`, the response to `{input_key}`, "
                                               f"meet this criterion: {description}"}
        self.input_key, self.output_key = input_key, output_key
        super().__init__(agent, questions, None, **predict_kwargs)

    def _pair(self, value: Any) -> dict:
        if isinstance(value, dict):
            missing = [key for key in (self.input_key, self.output_key) if key not in value]
            if missing:
                raise ValueError(f"the evaluator's input dict needs the keys {self.input_key!r} and "
                                 f"{self.output_key!r}; missing {missing!r}")
            pair = (value[self.input_key], value[self.output_key])
        elif isinstance(value, (tuple, list)) and len(value) == 2:
            pair = tuple(value)
        else:
            raise TypeError(f"the evaluator takes a dict with {self.input_key!r} and {self.output_key!r} or an "
                            f"(input, output) pair, not {type(value).__name__}")
        texts = [_message_text(v) if isinstance(v, BaseMessage) else v for v in pair]
        return {self.input_key: texts[0], self.output_key: texts[1]}

    def _run(self, value: Any, **kwargs: Any) -> dict:
        result = self.agent.predict(self._pair(value), self.questions, **{**self.predict_kwargs, **kwargs})
        levels, scores = {}, {}
        for name, definition in self.questions.items():
            level = float(result["answers"][name]["score"])
            levels[name] = level
            scores[name] = round(min(1.0, max(0.0, level / (len(definition["criteria"]) - 1))), 4)
        return {"score": round(sum(scores.values()) / len(scores), 4), "scores": scores, "levels": levels,
                "result": result}

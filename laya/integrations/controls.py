"""What every integration class shares: the runner (an `agent=`, a process-wide `Router`, or a laya-serve
endpoint at `base_url`), the call controls, reading answers and confidences, and screening for violations.

No framework and no torch import here: the runner loads torch when it first answers.
"""

from __future__ import annotations

import inspect
import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from ..numeric import is_real

CONTROL_NAMES = ("agent", "base_url", "api_key", "model", "max_len", "head_max_len", "lang", "min_confidence",
                 "task", "lang_guess", "hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
HOOK_NAMES = ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
CALL_NAMES = ("model", "max_len", "head_max_len", "lang", "min_confidence", "task", "lang_guess", *HOOK_NAMES)
BODY_NAMES = ("model", "max_len", "head_max_len", "task", "lang", "lang_guess", "min_confidence")
ROUTING_HINTS = ("task", "lang_guess")
REQUEST_NAMES = ("model", "task", "lang", "lang_guess", "max_len", "head_max_len")  # per request in predict_batch
HTTP_TIMEOUT_S = 10.0
HOOKS_REMOTE = ("hooks run in the local runner and cannot be sent to a laya-serve endpoint; install them where "
                "serve runs, or drop them")

_ROUTER_LOCK = threading.Lock()
_ROUTER: list = []


def shared_router() -> Any:
    """One process-wide `Router()`, created on first use."""
    with _ROUTER_LOCK:
        if not _ROUTER:
            from ..router import Router

            _ROUTER.append(Router())
        return _ROUTER[0]


def endpoint(base_url: str) -> str:
    """`<base_url>/v1/systemone`, not appended twice."""
    url = base_url.rstrip("/")
    return url if url.endswith("/v1/systemone") else url + "/v1/systemone"


class _SameOrigin(urllib.request.HTTPRedirectHandler):
    """Follow a redirect only to the same scheme, host and port, re-sending the same request."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> Any:
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            raise urllib.error.HTTPError(newurl, code, f"redirect to another origin refused: {newurl}", headers, fp)
        return urllib.request.Request(newurl, data=req.data, headers=dict(req.header_items()),
                                      method=req.get_method())


def post_decision(url: str, body: dict, api_key: str | None = None) -> dict:
    """POST a System One body; the reply object, or RuntimeError naming what went wrong."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    opener = urllib.request.build_opener(_SameOrigin)
    try:
        with opener.open(request, timeout=HTTP_TIMEOUT_S) as response:
            payload = response.read()
    except urllib.error.HTTPError as e:
        try:
            text = e.read().decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - the status alone still says what happened
            text = str(e.reason)
        raise RuntimeError(f"Laya server error {e.code}: {text}") from None
    except (urllib.error.URLError, OSError) as e:
        raise RuntimeError(f"Failed to connect to Laya server at {url}: {getattr(e, 'reason', None) or e}") from None
    try:
        out = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        out = None
    if not isinstance(out, dict):
        raise RuntimeError(f"Malformed decision response from {url}: the reply is not a JSON object")
    if not isinstance(out.get("answers"), dict):
        raise RuntimeError(f"Malformed decision response from {url}: 'answers' is not an object")
    return out


class RemoteRunner:
    """`predict(state, questions, **controls)` over a laya-serve endpoint (what `laya.structured` calls)."""

    def __init__(self, base_url: str, api_key: str | None = None):
        self.url, self.api_key = endpoint(base_url), api_key

    def predict(self, state: Any, questions: dict, **controls: Any) -> dict:
        if any(controls.get(k) is not None for k in HOOK_NAMES):
            raise ValueError(HOOKS_REMOTE)
        if callable(controls.get("lang_guess")):
            raise ValueError("a callable lang_guess runs in the local runner and cannot be sent to a laya-serve "
                             "endpoint; pass a language code, or drop it")
        body = {"state": state, "questions": questions,
                **{k: controls[k] for k in BODY_NAMES if controls.get(k) is not None}}
        return post_decision(self.url, body, self.api_key)


def _takes(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is p.VAR_KEYWORD for p in params)


def routing_hint_error(name: str, runner: Any) -> ValueError:
    return ValueError(f"{name} is a routing hint, and {type(runner).__name__}.predict does not read it: this runner "
                      f"answers on the checkpoint it was built with. Pass a Router as `agent=`, or drop it.")


class Runner:
    """The runner and the set controls of one integration object."""

    def __init__(self, owner: Any):
        self.owner = owner

    def value(self, name: str) -> Any:
        return getattr(self.owner, name, None)

    @property
    def remote(self) -> bool:
        return bool(self.value("base_url"))

    def target(self) -> Any:
        if self.remote:
            return RemoteRunner(self.value("base_url"), self.value("api_key"))
        agent = self.value("agent")
        return agent if agent is not None else shared_router()

    @property
    def source(self) -> str:
        return endpoint(self.value("base_url")) if self.remote else type(self.target()).__name__

    def controls(self, runner: Any) -> dict:
        """The set call controls; a routing hint the runner cannot read is refused."""
        out = {k: self.value(k) for k in CALL_NAMES if self.value(k) is not None}
        if not isinstance(runner, RemoteRunner):
            for hint in ROUTING_HINTS:
                if hint in out and not _takes(runner.predict, hint):
                    raise routing_hint_error(hint, runner)
        return out

    def predict(self, state: Any, questions: dict) -> dict:
        runner = self.target()
        return runner.predict(state, questions, **self.controls(runner))

    def batchable(self, return_exceptions: bool) -> bool:
        if return_exceptions or self.remote:
            return False
        runner = self.target()
        if not callable(getattr(runner, "predict_batch", None)):
            return False
        routerish = callable(getattr(runner, "route_batch", None))
        return not (routerish and any(self.value(k) is not None for k in HOOK_NAMES))

    def predict_batch(self, states: list, questions: dict) -> list[dict]:
        """One predict_batch for all states (Router form with per-request keys, else (states, questions))."""
        runner = self.target()
        controls = self.controls(runner)
        if callable(getattr(runner, "route_batch", None)):
            per = {k: controls.pop(k) for k in REQUEST_NAMES if k in controls}
            requests = [{"state": s, "questions": questions, **per} for s in states]
            return list(runner.predict_batch(requests, **controls))
        for hint in ROUTING_HINTS + ("model",):
            controls.pop(hint, None)
        return list(runner.predict_batch(states, questions, **controls))


# ---- reading answers -----------------------------------------------------------------------------------

def is_number(value: Any) -> bool:
    """A finite plain int or float (numpy's float64 is one), not a bool."""
    return is_real(value, finite=True, types=(int, float))


def confidence_of(answer: dict) -> float:
    """`answer_confidence`, else `confidence`, else 1.0."""
    for key in ("answer_confidence", "confidence"):
        value = answer.get(key)
        if is_number(value):
            return float(value)
    return 1.0


def strict_answer(result: Any, qid: str, source: str, kind: str) -> dict:
    """The answer to `qid`, checked: an object whose `choice` is a string or whose `noul` is finite."""
    answers = result.get("answers") if isinstance(result, dict) else None
    answer = answers.get(qid) if isinstance(answers, dict) else None
    if not isinstance(answer, dict):
        raise RuntimeError(f"Malformed decision response from {source}: no answer object for {qid!r}")
    if kind == "choice" and not isinstance(answer.get("choice"), str):
        raise RuntimeError(f"Malformed decision response from {source}: {qid!r} has no string 'choice'")
    if kind == "noul" and not is_number(answer.get("noul")):
        raise RuntimeError(f"Malformed decision response from {source}: {qid!r} has no finite 'noul'")
    return answer


def check_answers(result: Any, source: str) -> dict:
    """Every answer an object; nouls finite and choices strings (Agno, CrewAI and LlamaIndex classes)."""
    answers = result.get("answers") if isinstance(result, dict) else None
    if not isinstance(answers, dict):
        raise RuntimeError(f"Malformed decision response from {source}: 'answers' is not an object")
    for qid, answer in answers.items():
        kind = answer.get("type") if isinstance(answer, dict) else None
        strict_answer(result, qid, source, kind if kind in ("choice", "noul") else "")
    return answers


def check_threshold(value: Any, name: str = "threshold") -> float:
    if not is_number(value) or not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1]; got {value!r}")
    return float(value)


def _upper_mass(answer: dict, levels: int | None) -> float | None:
    """P(level in the upper half: indices k//2 .. k-1), else score / (k - 1) without probabilities."""
    probs = answer.get("probabilities")
    values = list(probs.values()) if isinstance(probs, dict) else list(probs) if isinstance(probs, list) else []
    if values and all(is_number(v) for v in values):
        return float(sum(values[len(values) // 2:]))
    score, k = answer.get("score"), levels or len(values)
    if is_number(score) and k and k > 1:
        return float(score) / (k - 1)
    return None


def _levels(questions: dict | None, qid: str) -> int | None:
    criteria = ((questions or {}).get(qid) or {}).get("criteria")
    return len(criteria) if isinstance(criteria, (list, tuple)) else None


def violations(answers: dict, threshold: float, questions: dict | None = None) -> dict:
    """Noul answers with P(true) >= threshold and score answers whose upper-half mass is >= threshold."""
    out = {}
    for qid, answer in answers.items():
        if not isinstance(answer, dict):
            continue
        kind = answer.get("type") or ("noul" if "noul" in answer else "score" if "score" in answer else None)
        if kind == "noul" and is_number(answer.get("noul")) and answer["noul"] >= threshold:
            out[qid] = {"probability": answer["noul"], "confidence": confidence_of(answer)}
        elif kind == "score":
            mass = _upper_mass(answer, _levels(questions, qid))
            if mass is not None and mass >= threshold:
                out[qid] = {"score": answer.get("score"), "probability": round(mass, 4),
                            "confidence": confidence_of(answer)}
    return out


class PolicyViolation(ValueError):
    """An input that broke a guardrail policy: `.violations` {qid: details}, `.raw_decision` (the laya result)."""

    def __init__(self, message: str, violations: dict | None = None, raw_decision: Any = None):
        super().__init__(message)
        self.violations, self.raw_decision = dict(violations or {}), raw_decision

    def __reduce__(self) -> tuple:
        return (type(self), (str(self), self.violations, self.raw_decision))

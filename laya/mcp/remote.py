"""`RemoteRouter`: a `Router` that routes here and answers through a running `laya serve` (stdlib HTTP only).

Importing it needs neither torch nor FastAPI; the request body keys are the server's own (`laya.serve`).
"""

from __future__ import annotations

import json
import math
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
import warnings
from typing import Any

from ..router import Router
from ..serve import BODY_CONTROLS, BODY_REFUSALS
from .errors import RemoteError

__all__ = ["DEFAULT_TIMEOUT_S", "RemoteError", "RemoteRouter"]

DEFAULT_TIMEOUT_S = 300.0  # a remote server may load a checkpoint on the first request
STATUS_CODES = {401: "unauthorized", 400: "invalid_request", 413: "invalid_request", 422: "invalid_request",
                503: "busy"}
URL_ERROR = "base_url must be an HTTP(S) server URL without a query or fragment"


def _check_url(base_url: Any) -> str:
    if not isinstance(base_url, str):
        raise ValueError(URL_ERROR)
    parts = urllib.parse.urlsplit(base_url.strip())
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(URL_ERROR)
    return base_url.strip().rstrip("/")


def _positive_seconds(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _timeout(timeout: Any) -> float:
    if timeout is not None:
        if not _positive_seconds(timeout):
            raise ValueError("timeout must be a finite positive number")
        return float(timeout)
    raw = (os.environ.get("LAYA_REMOTE_TIMEOUT") or "").strip()
    if not raw:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not _positive_seconds(value):
        warnings.warn(f"laya: LAYA_REMOTE_TIMEOUT={raw!r} is not a finite positive number of seconds; using "
                      f"{DEFAULT_TIMEOUT_S:g}", RuntimeWarning, stacklevel=3)
        return DEFAULT_TIMEOUT_S
    return value


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        body = error.read().decode("utf-8", "replace")
    except Exception:  # noqa: BLE001 - the status alone still says what happened
        return f"HTTP {error.code}"
    try:
        detail = json.loads(body).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail) if detail else (body.strip()[:500] or f"HTTP {error.code}")


def _is_timeout(error: BaseException) -> bool:
    reason = getattr(error, "reason", error)
    return isinstance(reason, (TimeoutError, socket.timeout)) or "timed out" in str(reason)


class RemoteRouter(Router):
    """Routes locally (the inherited `route`) and posts every answer to `<base_url>/v1/systemone`."""

    is_remote = True

    def __init__(self, base_url: str, api_key: str | None = None, timeout: float | None = None,
                 **router_kwargs: Any):
        self.base_url = _check_url(base_url)
        self.api_key = api_key or None
        self.timeout = _timeout(timeout)
        for dropped in ("device", "preload"):  # nothing loads here
            router_kwargs.pop(dropped, None)
        super().__init__(**router_kwargs)

    # ---- HTTP ------------------------------------------------------------------------------------

    def _request(self, method: str, path: str, body: Any = None) -> dict:
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8")
        request = urllib.request.Request(self.base_url + path, data=data, method=method,
                                         headers={"Accept": "application/json"})
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.api_key:
            request.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                payload = response.read()
        except urllib.error.HTTPError as e:
            detail = _detail(e)
            code = STATUS_CODES.get(e.code, "upstream_error")
            message = detail if code == "invalid_request" else f"laya server at {self.base_url} answered " \
                                                               f"{e.code}: {detail}"
            raise RemoteError(code, message) from None
        except (urllib.error.URLError, TimeoutError, OSError) as e:
            if _is_timeout(e):
                raise RemoteError("timeout", f"the laya server at {self.base_url} did not answer within "
                                             f"{self.timeout:g} s (LAYA_REMOTE_TIMEOUT)") from None
            raise RemoteError("unreachable", f"cannot reach the laya server at {self.base_url} "
                                             f"({getattr(e, 'reason', None) or e}); check the URL and that "
                                             "`laya serve` is running") from None
        try:
            out = json.loads(payload.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            out = None
        if not isinstance(out, dict):
            raise RemoteError("upstream_error", f"the laya server at {self.base_url} did not answer with a JSON "
                                                "object")
        return out

    def health(self) -> dict:
        return self._request("GET", "/health")

    @property
    def loaded(self) -> list[str]:
        try:
            return list(self.health().get("loaded") or [])
        except RemoteError:
            return []

    @property
    def loaded_revisions(self) -> dict:
        try:
            return dict(self.health().get("revisions") or {})
        except RemoteError:
            return {}

    def agents(self) -> dict:
        return {}  # no checkpoint is resident in this process

    # ---- what a remote router cannot do -------------------------------------------------------------

    def load(self, name: str) -> Any:
        raise RemoteError("unsupported_remote", f"checkpoint {name!r} cannot be loaded here: this router answers "
                                                f"through {self.base_url}")

    def attach(self, name: str, agent: Any) -> None:
        raise RemoteError("unsupported_remote", f"an agent cannot be attached as {name!r}: this router answers "
                                                f"through {self.base_url}")

    def preload(self, names: list | None = None) -> "RemoteRouter":
        return self

    def unload(self, name: str | None = None) -> None:
        return None

    # ---- answering ---------------------------------------------------------------------------------

    def predict(self, state: Any, questions: dict, model: str | None = None, task: str | None = None,
                lang: str | None = None, lang_guess: Any = None, hooks: Any = None, on_predict_start: Any = None,
                on_predict_end: Any = None, hooks_raise: bool | None = None, hooks_timeout: float | None = None,
                max_len: int | None = None, head_max_len: int | None = None, min_confidence: Any = None) -> dict:
        given = {"hooks": hooks, "on_predict_start": on_predict_start, "on_predict_end": on_predict_end,
                 "hooks_raise": hooks_raise, "hooks_timeout": hooks_timeout}
        refused = sorted(k for k in BODY_REFUSALS if given.get(k) is not None)
        if refused:
            raise RemoteError("unsupported_remote", f"{', '.join(refused)} run in this process and cannot be sent "
                                                    f"to {self.base_url}; install them where laya serve runs")
        if callable(lang_guess):
            raise RemoteError("unsupported_remote", "a callable lang_guess cannot be sent to a remote laya serve; "
                                                    "pass a language code")
        values = {"model": model, "max_len": max_len, "head_max_len": head_max_len, "task": task, "lang": lang,
                  "lang_guess": lang_guess, "min_confidence": min_confidence}
        if isinstance(model, str) and model.strip().lower() in ("", "auto"):
            values["model"] = None
        body = {"state": state, "questions": questions,
                **{k: values[k] for k in BODY_CONTROLS if values.get(k) is not None}}
        return self._request("POST", "/v1/systemone", body)

    system_one = predict

    def predict_batch(self, requests: list, batch_size: int | None = None, hooks_timeout: float | None = None,
                      min_confidence: Any = None, sort_by_length: bool = False, *, hooks: Any = None,
                      on_predict_start: Any = None, on_predict_end: Any = None, hooks_raise: bool | None = None,
                      diagnostics: dict | None = None) -> list[dict]:
        """One `predict` per request (batch_size, sort_by_length and diagnostics do not apply here)."""
        from ..router.batch import check_requests

        checked = check_requests(requests)
        return [self.predict(r["state"], r["questions"], model=r.get("model"), task=r.get("task"),
                             lang=r.get("lang"), lang_guess=r.get("lang_guess"), hooks=hooks,
                             on_predict_start=on_predict_start, on_predict_end=on_predict_end,
                             hooks_raise=hooks_raise, hooks_timeout=hooks_timeout, max_len=r.get("max_len"),
                             head_max_len=r.get("head_max_len"), min_confidence=min_confidence)
                for r in checked]

    def __repr__(self) -> str:
        return f"RemoteRouter({self.base_url!r}, timeout={self.timeout:g})"

"""Server settings: defaults, then `LAYA_*` environment variables, then command-line flags."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any

from .limits import (DEFAULT_BODY_READ_TIMEOUT, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_HOST, DEFAULT_LOG_LEVEL,
                     DEFAULT_MAX_BATCH_TOKENS, DEFAULT_MAX_CONCURRENT, DEFAULT_MAX_TOKEN_BUDGET, DEFAULT_PORT,
                     DEFAULT_SHUTDOWN_TIMEOUT, MAX_BODY_BYTES, MAX_TOURNAMENT_GROUP)

log = logging.getLogger("laya.serve")
TRUE_WORDS = ("1", "true", "yes", "on")
ENGINE_MODES = ("auto", "on", "off")


GPU_BATCH_ROWS = 256  # rows per forward by default: a GPU pass of 256 rows takes milliseconds
CPU_BATCH_ROWS = 64  # on the CPU a 256-row pass of laya-mini took 3-5 s, and a small request waits for one pass


@dataclass(frozen=True)
class ServeConfig:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    device: str | None = None
    backend: str = "auto"
    batch_invariant: bool = False  # every row alone: an answer never depends on what it was batched with
    preload: bool = True
    models: tuple[str, ...] = ()  # names to serve and preload; empty = the extra_models names, or all registered
    extra_models: dict = field(default_factory=dict)  # {name: local dir or Hub id}
    default_model: str = "multilingual"
    max_loaded: int = 2
    auto_task: bool = False
    threads: int | None = None
    idle_unload_seconds: float = 0.0
    api_key: str | None = None
    root_path: str = ""
    log_level: str = DEFAULT_LOG_LEVEL
    access_log: bool = False  # uvicorn's per-request access log line (off unless asked: it costs every request)
    gc_freeze: bool = True  # after a checkpoint loads: collect once, then freeze what survives (no full-GC stalls)
    # admission and limits
    max_concurrent: int = DEFAULT_MAX_CONCURRENT  # requests admitted at once; raise it (--max-concurrent) so batches can fill
    max_queue_rows: int = 4096  # question rows waiting for the worker; beyond -> 503
    max_body_bytes: int = MAX_BODY_BYTES
    body_read_timeout: float = DEFAULT_BODY_READ_TIMEOUT
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT  # the drain deadline after SIGTERM
    header_read_timeout: float = DEFAULT_HEADER_READ_TIMEOUT  # a new connection's headers, or it is closed
    max_body_reads: int = 0  # > 0: bodies are read under this limit and only complete ones are admitted
    max_token_budget: int = DEFAULT_MAX_TOKEN_BUDGET
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS
    jev_strict: bool = False
    tournament_group: int = 0  # > 0: choice questions with more options are narrowed in rounds of this size
    # dynamic batching
    batching: bool = True
    batch_window_ms: float = 2.0
    max_batch_rows: int | None = None  # states x questions in one forward; None: GPU_BATCH_ROWS, CPU_BATCH_ROWS
    engine_process: str = "auto"  # forwards in a child process: on, off, auto (on for a CUDA device)
    # Ray Serve
    ray: bool = False
    replicas: int = 1
    max_replicas: int = 0  # > replicas turns on Ray autoscaling between the two

    def with_overrides(self, **changes: Any) -> "ServeConfig":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


class SettingError(ValueError):
    """A LAYA_* value that stops the server from starting (`laya.serve.main()` exits with its text)."""


LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")


# env name -> (field, parser); a parser takes (name, raw) with raw non-blank
def _bool(name: str, raw: str) -> bool:
    return raw.strip().lower() in TRUE_WORDS


def _int(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    return value


def _float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None


def _lenient_int(low: int, high: int | None, default: Any, warn: bool = False) -> Any:
    """An int in [low, high]; anything else is the default (the published rule for these variables)."""
    def parse(name: str, raw: str) -> Any:
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            if warn:
                log.warning("laya serve: %s=%r is not an integer >= %d; using %s", name, raw, low, default)
            return default
        return value
    return parse


def _lenient_seconds(default: float, warn_infinite: bool = False) -> Any:
    """A finite number of seconds > 0; anything else is the default."""
    def parse(name: str, raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            return default
        if not math.isfinite(value):
            if warn_infinite:
                log.warning("laya serve: %s=%r is not a finite number of seconds; it stays off", name, raw)
            return default
        return value if value > 0 else default
    return parse


def _port(name: str, raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= 65535:
        raise SettingError(f"invalid {name} '{raw}': must be an integer 1-65535")
    return value


def _log_level(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in LOG_LEVELS:
        raise SettingError(f"invalid {name} '{raw}': must be one of {', '.join(LOG_LEVELS)}")
    return value


def _engine_mode(name: str, raw: str) -> str:
    value = raw.strip().lower()
    if value not in ENGINE_MODES:
        raise ValueError(f"{name}={raw!r} must be one of {', '.join(ENGINE_MODES)}")
    return value


def _names(name: str, raw: str) -> tuple[str, ...]:
    return tuple(n.strip() for n in raw.split(",") if n.strip())


def parse_extra_models(name: str, raw: str) -> dict:
    """`{name: source}`; a source given as a JSON list is a (repo, subfolder) pair."""
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise SettingError(f"invalid {name}: not valid JSON ({e}); use {{\"name\": \"/path/or/org-repo\"}}") from None
    if not isinstance(value, dict):
        raise SettingError(f"invalid {name}: must be a JSON object {{name: source}}, got {type(value).__name__}")
    out = {}
    for key, source in value.items():
        if isinstance(source, list):
            if len(source) != 2 or not all(isinstance(part, str) or part is None for part in source):
                raise SettingError(f"invalid {name}: the source of {key!r} must be a string or a "
                                   f"[repo, subfolder] pair, got {source!r}")
            source = tuple(source)
        elif not isinstance(source, str):
            raise SettingError(f"invalid {name}: the source of {key!r} must be a string or a [repo, subfolder] "
                               f"pair, got {type(source).__name__}")
        out[key] = source
    return out


def _text(name: str, raw: str) -> str:
    return raw.strip()


ENV = {
    "LAYA_HOST": ("host", _text), "LAYA_PORT": ("port", _port), "LAYA_DEVICE": ("device", _text),
    "LAYA_BACKEND": ("backend", _text), "LAYA_BATCH_INVARIANT": ("batch_invariant", _bool),
    "LAYA_PRELOAD": ("preload", _bool), "LAYA_MODELS": ("models", _names),
    "LAYA_EXTRA_MODELS": ("extra_models", parse_extra_models), "LAYA_DEFAULT_MODEL": ("default_model", _text),
    "LAYA_MAX_LOADED": ("max_loaded", _lenient_int(1, None, 2)), "LAYA_AUTO_TASK": ("auto_task", _bool),
    "LAYA_THREADS": ("threads", _lenient_int(1, None, None)),
    "LAYA_IDLE_UNLOAD_SECONDS": ("idle_unload_seconds", _lenient_seconds(0.0, warn_infinite=True)),
    "LAYA_API_KEY": ("api_key", _text), "LAYA_ROOT_PATH": ("root_path", _text),
    "LAYA_LOG_LEVEL": ("log_level", _log_level), "LAYA_ACCESS_LOG": ("access_log", _bool),
    "LAYA_GC_FREEZE": ("gc_freeze", _bool),
    "LAYA_MAX_CONCURRENT": ("max_concurrent", _lenient_int(1, None, DEFAULT_MAX_CONCURRENT)),
    "LAYA_MAX_QUEUE_ROWS": ("max_queue_rows", _int), "LAYA_MAX_BODY_BYTES": ("max_body_bytes", _int),
    "LAYA_BODY_READ_TIMEOUT": ("body_read_timeout", _lenient_seconds(DEFAULT_BODY_READ_TIMEOUT)),
    "LAYA_SHUTDOWN_TIMEOUT": ("shutdown_timeout", _lenient_seconds(DEFAULT_SHUTDOWN_TIMEOUT)),
    "LAYA_HEADER_READ_TIMEOUT": ("header_read_timeout", _lenient_seconds(DEFAULT_HEADER_READ_TIMEOUT)),
    "LAYA_MAX_BODY_READS": ("max_body_reads", _lenient_int(0, None, 0)),
    "LAYA_MAX_TOKEN_BUDGET": ("max_token_budget", _lenient_int(1, None, DEFAULT_MAX_TOKEN_BUDGET, warn=True)),
    "LAYA_MAX_BATCH_TOKENS": ("max_batch_tokens", _lenient_int(1, None, DEFAULT_MAX_BATCH_TOKENS)),
    "LAYA_JEV_STRICT": ("jev_strict", _bool),
    "LAYA_TOURNAMENT_GROUP": ("tournament_group", _lenient_int(2, MAX_TOURNAMENT_GROUP, 0)),
    "LAYA_BATCHING": ("batching", _bool), "LAYA_BATCH_WINDOW_MS": ("batch_window_ms", _float),
    "LAYA_MAX_BATCH_ROWS": ("max_batch_rows", _int), "LAYA_ENGINE_PROCESS": ("engine_process", _engine_mode),
    "LAYA_REPLICAS": ("replicas", _int),
    "LAYA_MAX_REPLICAS": ("max_replicas", _int),
}
MAIN_ONLY = ("LAYA_HOST", "LAYA_PORT", "LAYA_LOG_LEVEL", "LAYA_SHUTDOWN_TIMEOUT",
             "LAYA_HEADER_READ_TIMEOUT")  # read by laya.serve.main(), not by create_app()
# read by build_router(), so create_app(router) with a router of its own leaves them alone
ROUTER_ONLY = ("LAYA_MODELS", "LAYA_EXTRA_MODELS", "LAYA_DEFAULT_MODEL", "LAYA_MAX_LOADED", "LAYA_AUTO_TASK",
               "LAYA_PRELOAD", "LAYA_THREADS")
REQUEST_ENV = ("LAYA_JEV_STRICT", "LAYA_MAX_TOKEN_BUDGET", "LAYA_MAX_BATCH_TOKENS")  # read on each request


def env_changes(environ: Any, names: Any = None) -> dict:
    """{field: value} for the set, non-blank variables among `names` (default: all of ENV)."""
    changes = {}
    for name in names or ENV:
        attr, parse = ENV[name]
        raw = environ.get(name)
        if raw is not None and raw.strip():
            changes[attr] = parse(name, raw)
    return changes


def from_env(environ: dict | None = None, base: ServeConfig | None = None) -> ServeConfig:
    """Settings from `LAYA_*` variables; unset or blank ones keep the default."""
    environ = os.environ if environ is None else environ
    return check(replace(base or ServeConfig(), **env_changes(environ)))


_request_cache: dict = {}  # raw values -> (changes, whether LAYA_MAX_TOKEN_BUDGET is malformed)
_strict_budget = _lenient_int(1, None, None)  # None for a value that is not an integer >= 1


def request_settings(cfg: ServeConfig, environ: Any = None) -> ServeConfig:
    """`cfg` with the per-request variables (LAYA_JEV_STRICT, LAYA_MAX_TOKEN_BUDGET, LAYA_MAX_BATCH_TOKENS)
    read again now; parsed once per distinct set of values."""
    environ = os.environ if environ is None else environ
    raw = tuple(environ.get(name) for name in REQUEST_ENV)
    cached = _request_cache.get(raw)
    if cached is None:
        defaults = {"jev_strict": False, "max_token_budget": DEFAULT_MAX_TOKEN_BUDGET,
                    "max_batch_tokens": DEFAULT_MAX_BATCH_TOKENS}
        changes = {**defaults, **env_changes(environ, REQUEST_ENV)}  # a malformed budget warns here
        budget = environ.get("LAYA_MAX_TOKEN_BUDGET")
        malformed = bool(budget and budget.strip()) and _strict_budget("LAYA_MAX_TOKEN_BUDGET", budget) is None
        if len(_request_cache) >= 64:
            _request_cache.clear()
        _request_cache[raw] = (changes, malformed)
    else:
        changes, malformed = cached
        if malformed:  # R-SRV-6: every request that reads a malformed budget logs the warning, not only the first
            env_changes(environ, ("LAYA_MAX_TOKEN_BUDGET",))
    if all(getattr(cfg, k) == v for k, v in changes.items()):
        return cfg
    return replace(cfg, **changes)


def check(cfg: ServeConfig) -> ServeConfig:
    """Refuse settings that cannot work, naming the value."""
    positive = ("port", "max_concurrent", "max_queue_rows", "max_body_bytes", "max_token_budget", "max_batch_tokens",
                "max_batch_rows", "max_loaded", "replicas")
    for name in positive:
        value = getattr(cfg, name)
        if value is None and name == "max_batch_rows":  # the device's default
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer")
    if cfg.port > 65535:
        raise ValueError(f"port={cfg.port!r} must be an integer 1-65535")
    for name in ("body_read_timeout", "shutdown_timeout", "header_read_timeout"):
        if not getattr(cfg, name) > 0:
            raise ValueError(f"{name}={getattr(cfg, name)!r} must be a positive number of seconds")
    if cfg.batch_window_ms < 0 or cfg.idle_unload_seconds < 0:
        raise ValueError("batch_window_ms and idle_unload_seconds must be >= 0")
    if isinstance(cfg.max_body_reads, bool) or not isinstance(cfg.max_body_reads, int) or cfg.max_body_reads < 0:
        raise ValueError(f"max_body_reads={cfg.max_body_reads!r} must be 0 (off) or a positive integer")
    if cfg.threads is not None and cfg.threads < 1:
        raise ValueError(f"threads={cfg.threads!r} must be a positive integer")
    if isinstance(cfg.tournament_group, bool) or not isinstance(cfg.tournament_group, int) \
            or cfg.tournament_group < 0 or cfg.tournament_group == 1 or cfg.tournament_group > MAX_TOURNAMENT_GROUP:
        raise ValueError(f"tournament_group={cfg.tournament_group!r} must be 0 (off) or an integer in 2..100 "
                         "(options asked together per row)")
    if cfg.engine_process not in ENGINE_MODES:
        raise ValueError(f"engine_process={cfg.engine_process!r} must be one of {', '.join(ENGINE_MODES)}")
    if cfg.max_replicas and cfg.max_replicas < cfg.replicas:
        raise ValueError(f"max_replicas={cfg.max_replicas} is below replicas={cfg.replicas}; raise it or use 0")
    return cfg


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya serve", description="Serve laya over HTTP (System One API, "
                                "Jev-compatible) with dynamic batching. Flags override LAYA_* variables.")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument("--model", action="append", metavar="NAME=SOURCE", dest="model_sources",
                   help="serve a local checkpoint dir or Hub id under NAME (repeatable)")
    p.add_argument("--models", help="comma list of names to serve and preload (default: the --model names "
                   "when any are given, else every registered one)")
    p.add_argument("--default-model", help="the checkpoint for states without language evidence (default "
                   "multilingual); on a server of custom checkpoints only, every request without 'model'")
    p.add_argument("--device", help="cpu, cuda, cuda:N, mps or auto")
    p.add_argument("--backend", help="eager, compile, tilelang or auto (default auto)")
    p.add_argument("--batch-invariant", dest="batch_invariant", action="store_true", default=None,
                   help="answer every row alone, so dynamic batching never changes an answer's bits (slower)")
    p.add_argument("--no-preload", dest="preload", action="store_false", default=None,
                   help="load checkpoints on first use instead of at start")
    p.add_argument("--max-loaded", type=int)
    p.add_argument("--auto-task", action="store_true", default=None, help="route workflow question sets to "
                   "typed-decisions")
    p.add_argument("--threads", type=int, help="torch intra-op threads")
    p.add_argument("--idle-unload-seconds", type=float)
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' (prefer LAYA_API_KEY: flags show in ps)")
    p.add_argument("--root-path")
    p.add_argument("--log-level")
    p.add_argument("--access-log", action="store_true", default=None, help="log one line per request (uvicorn)")
    p.add_argument("--no-gc-freeze", dest="gc_freeze", action="store_false", default=None,
                   help="leave Python's garbage collector as it is (default: freeze what a checkpoint load leaves "
                   "and collect the young generation less often)")
    p.add_argument("--max-concurrent", type=int, help="requests admitted at once (default 16; excess -> 503). "
                   "Batching fills a forward only from requests in flight: raise it for many clients")
    p.add_argument("--max-queue-rows", type=int)
    p.add_argument("--max-body-bytes", type=int)
    p.add_argument("--body-read-timeout", type=float)
    p.add_argument("--max-body-reads", type=int, metavar="N", help="read up to N bodies at once outside the "
                   "--max-concurrent slots, so slow uploads never hold a model slot (default 0: a body is read "
                   "inside its slot, as published)")
    p.add_argument("--header-read-timeout", type=float, metavar="SECONDS", help="close a new connection whose "
                   "request headers are not complete in this time (default 10)")
    p.add_argument("--shutdown-timeout", type=float, metavar="SECONDS", help="after SIGTERM, wait at most this "
                   "long for requests in flight, then close them (default 30)")
    p.add_argument("--max-token-budget", type=int)
    p.add_argument("--max-batch-tokens", type=int)
    p.add_argument("--jev-strict", action="store_true", default=None, help="answer in the exact Jev shape")
    p.add_argument("--tournament-group", type=int, metavar="G", help="narrow choice questions with more than G "
                   "options in rounds of G (0 = off); allows up to 255 options per choice")
    p.add_argument("--no-batching", dest="batching", action="store_false", default=None)
    p.add_argument("--batch-window-ms", type=float)
    p.add_argument("--max-batch-rows", type=int, help="states x questions in one forward (default 256 on a GPU, 64 on "
                   "the CPU, so a small request never waits long behind one pass of a large batch)")
    p.add_argument("--engine-process", choices=ENGINE_MODES, help="run the model's forwards in a child process, "
                   "so HTTP and JSON work never waits on the forward's host work (default auto: on for a CUDA "
                   "device)")
    p.add_argument("--ray", action="store_true", default=None, help="run as a Ray Serve deployment")
    p.add_argument("--replicas", type=int)
    p.add_argument("--max-replicas", type=int, help="with --ray: autoscale between --replicas and this")
    return p


def parse_model_sources(items: list[str] | None) -> dict:
    out = {}
    for item in items or []:
        name, sep, source = item.partition("=")
        if not sep or not name.strip() or not source.strip():
            raise ValueError(f"--model {item!r} must look like NAME=SOURCE, e.g. support=/models/support-v2")
        out[name.strip()] = source.strip()
    return out


def from_args(argv: list[str] | None = None, environ: dict | None = None) -> ServeConfig:
    args = build_parser().parse_args(argv)
    cfg = from_env(environ)
    extra = {**cfg.extra_models, **parse_model_sources(args.model_sources)}
    names = {f.name for f in fields(ServeConfig)}
    changes = {k: v for k, v in vars(args).items() if k in names and v is not None}
    if args.models is not None:
        changes["models"] = _names("--models", args.models)
    return check(replace(cfg, **changes, extra_models=extra))

"""The server's published limits, defaults and request-field groups (no FastAPI, no torch: `laya.mcp.remote` and
`import laya.serve` read them without the serve extra)."""

from __future__ import annotations

MAX_QUESTIONS = 64
MAX_STATE_CHARS = 50000
MAX_BATCH_STATES = 64
MAX_BODY_BYTES = 2 * 1024 * 1024
MAX_CHOICE_OPTIONS = 100
MAX_TOURNAMENT_CHOICE_OPTIONS = 255  # with tournament mode (LAYA_TOURNAMENT_GROUP in 2..100)
MAX_SCORE_LEVELS = 32
MAX_TOTAL_OPTIONS = 512
MAX_JSON_DEPTH = 256  # nesting the parser and every later re-serialisation handle far below Python's stack limit
MAX_TOURNAMENT_GROUP = 100

DEFAULT_BODY_READ_TIMEOUT = 10.0
DEFAULT_HEADER_READ_TIMEOUT = 10.0  # seconds a new connection has to send its request headers
DEFAULT_SHUTDOWN_TIMEOUT = 30.0  # seconds SIGTERM waits for in-flight requests before closing them
DEFAULT_MAX_BATCH_TOKENS = 131072
DEFAULT_MAX_CONCURRENT = 16
DEFAULT_PORT = 8000
DEFAULT_HOST = "0.0.0.0"
DEFAULT_LOG_LEVEL = "info"
DEFAULT_MAX_TOKEN_BUDGET = 8192

LIVENESS_ONLY = {"status": "ok"}

# `Router.predict` parameters beyond state/questions: the ones a body may set, and the ones it may not
BODY_CONTROLS = ("model", "max_len", "head_max_len", "task", "lang", "lang_guess", "min_confidence")
BODY_REFUSALS = ("hooks", "on_predict_start", "on_predict_end", "hooks_raise", "hooks_timeout")
# `Router.predict_batch`: call-level controls, per-request controls, and the in-place out-parameter
BATCH_BODY_CALL_CONTROLS = ("batch_size", "min_confidence", "sort_by_length")
BATCH_BODY_ITEM_CONTROLS = ("max_len", "head_max_len", "task", "lang", "lang_guess")
BATCH_BODY_OUT_PARAMETERS = ("diagnostics",)

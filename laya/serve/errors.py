"""Every error the HTTP routes answer with: one table of (status, message, headers) by name.

A route raises `fail(name, **fields)`; the message is the table's text with the fields filled in, so each
status and each published text lives here once. The body is Jev-shaped: `{"detail": message}`.
"""

from __future__ import annotations

from .limits import MAX_JSON_DEPTH

CLOSE = {"Connection": "close"}
RETRY = {"Retry-After": "1"}
BEARER = {"WWW-Authenticate": "Bearer"}
CLIENT_CLOSED = 499  # nginx's code for a client that went away: counted apart from server errors

ERRORS: dict[str, tuple[int, str, dict]] = {
    # 400: the body is not a request
    "invalid_json": (400, "request body must be valid JSON", {}),
    "too_deep": (400, f"request body nests JSON deeper than {MAX_JSON_DEPTH} levels (the server's nesting limit); "
                      "flatten the state or send it as text", {}),
    "huge_int": (400, "request body has an integer literal over {digits} digits (the server's limit); "
                      "send such a number as a string", {}),
    "bad_content_length": (400, "Content-Length {value!r} is not a number", CLOSE),
    "not_single": (400, "request body must be an object with a 'questions' field", {}),
    "not_batch": (400, "request body must be an object with 'states' and 'questions' fields", {}),
    "state_required": (400, "'state' is required", {}),
    "batch_state_required": (400, "'states[{index}]' is required", {}),
    "questions_not_object": (400, "'questions' must be an object", {}),
    "states_not_list": (400, "'states' must be a non-empty list", {}),
    "lone_surrogate": (400, "request body contains an unpaired surrogate escape; those cannot be encoded as UTF-8",
                       {}),
    "state_not_serializable": (400, "'state' must be JSON-serializable", {}),
    # 401, 408
    "unauthorized": (401, "invalid or missing bearer token", BEARER),
    "read_timeout": (408, "request body was not received in time", CLOSE),
    # 413: over a limit
    "body_too_large": (413, "request body too large", CLOSE),
    # 415: a body this server cannot read
    "unsupported_encoding": (415, "unsupported encoding: Content-Encoding {value!r}; send the body uncompressed "
                                  "(no Content-Encoding, or identity)", CLOSE),
    "too_many_questions": (413, "too many questions ({count} > {limit})", {}),
    "too_many_states": (413, "too many states in batch ({count} > {limit})", {}),
    "too_many_options": (413, "too many choice options for '{qid}' ({count} > {limit})", {}),
    "too_many_levels": (413, "too many score levels for '{qid}' ({count} > {limit})", {}),
    "too_many_total": (413, "too many answer options across questions ({count} > {limit})", {}),
    "state_too_large": (413, "state too large ({count} > {limit} chars)", {}),
    # 422: a value the server or the library refuses
    "refused_hooks": (422, "{names} run inside the server process and cannot be sent to this endpoint; install "
                           "them where laya-serve runs, or drop them", {}),
    "refused_diagnostics": (422, "diagnostics is filled in place for an in-process caller and cannot be returned "
                                 "over HTTP; read the per-group report from the CLI or a local Router", {}),
    "budget_not_int": (422, "{name} must be an integer", {}),
    "budget_not_positive": (422, "{name} must be a positive integer", {}),
    "budget_over_limit": (422, "{name} exceeds server limit ({value} > {limit})", {}),
    "lang_not_text": (422, '{name} must be a language code string such as "de", or null', {}),
    "task_not_text": (422, "task must be a string or null, got {kind} {value!r}", {}),
    "task_unknown": (422, "task {value!r} names no task or checkpoint this server knows ({unknown}); send one of "
                          "those names, or omit task to let the router choose", {}),
    "batch_size_not_int": (422, "batch_size must be an integer", {}),
    "batch_size_not_positive": (422, "batch_size must be a positive integer, got {value!r}", {}),
    "sort_not_bool": (422, "sort_by_length must be a boolean", {}),
    "model_not_text": (422, "model must be a string (a served checkpoint name or 'auto'), got {value!r}", {}),
    "model_unservable": (422, "{unknown}, or omit model to let the router choose", {}),
    "model_not_served": (422, "model {model!r} is not served here; this server answers with {served} (or send no "
                              "'model' to use {default!r})", {}),
    "null_score_level": (422, "score question '{qid}' has a null level at index {index}; give every level a "
                              "description", {}),
    "non_finite": (422, "question '{qid}': {what} holds a non-finite number (NaN or Infinity, or a literal past "
                        "1.8e308); the model would read it as text 'Infinity': send it as a string", {}),
    "non_finite_state": (422, "{where} holds a non-finite number at {path} (NaN or Infinity, or a literal past "
                              "1.8e308 such as 1e309); the model would read it as text 'Infinity': send a finite "
                              "number, or the value as a string", {}),
    "question_unknown_keys": (422, "question '{qid}': unknown key(s) {names} in its definition; a question takes "
                                   "{allowed} (a misspelt key would be ignored)", {}),
    "tournament_labels": (422, "question '{qid}': a choice is narrowed by elimination once a request has one over "
                               "100 options, and that needs every label to be a string", {}),
    "library": (422, "{detail}", {}),
    # 5xx
    "inference_failed": (500, "inference failed", {}),
    "busy": (503, "server busy, try again later", RETRY),
    "shutting_down": (503, "the server is shutting down and stopped this request at its drain deadline; send it "
                           "again (to another replica, or once the server is back)", RETRY),
}


class ApiError(Exception):
    """An HTTP error with a user-facing message (never internals)."""

    def __init__(self, status: int, detail: str, headers: dict | None = None):
        try:
            detail.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate quoted from the body: escaped, or the reply could not be sent
            detail = detail.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, dict(headers or {})


def fail(kind: str, /, **fields) -> ApiError:
    """The table's error `kind` with its message filled in (raise it)."""
    status, text, headers = ERRORS[kind]
    return ApiError(status, text.format(**fields) if fields else text, headers)


def library(error: BaseException) -> ApiError:
    """A library ValueError/TypeError passed through as 422 with its own text."""
    return fail("library", detail=str(error))

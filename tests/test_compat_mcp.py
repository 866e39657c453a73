"""Compat 0.4.15 §13 (MCP): laya.mcp.device, laya.mcp.remote, the module-level tools of laya.mcp.tools and the
server's wire shape, all without the `mcp` SDK (the server tests skip when it is absent)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from laya.mcp import device as mcp_device


# ---- R-MCP-2 laya.mcp.device ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, expected", [(None, None), ("", None), ("   ", None), (" CUDA:0 ", "cuda:0"),
                                           ("cpu", "cpu"), ("MPS", "mps")])
def test_env_device_trims_and_lowercases_the_type(monkeypatch, raw, expected):
    if raw is None:
        monkeypatch.delenv("LAYA_DEVICE", raising=False)
    else:
        monkeypatch.setenv("LAYA_DEVICE", raw)
    assert mcp_device.env_device() == expected


def test_env_device_refuses_what_torch_refuses(monkeypatch):
    monkeypatch.setenv("LAYA_DEVICE", "gpu")
    with pytest.raises(ValueError) as e:
        mcp_device.env_device()
    text = str(e.value)
    assert text.startswith("LAYA_DEVICE='gpu' is not a torch device: ")
    assert text.endswith(" -- use a device such as 'cpu', 'cuda', 'cuda:0' or 'mps'")


def test_env_device_refuses_what_torch_rewrites(monkeypatch):
    monkeypatch.setenv("LAYA_DEVICE", "cuda:258")
    with pytest.raises(ValueError) as e:
        mcp_device.env_device()
    assert str(e.value) == ("LAYA_DEVICE='cuda:258' is not the device torch asks for: torch reads it as 'cuda:2' "
                            "-- use a device such as 'cpu', 'cuda', 'cuda:0' or 'mps'")


def test_resolve_device_and_report(monkeypatch):
    import torch

    monkeypatch.delenv("LAYA_DEVICE", raising=False)
    assert mcp_device.resolve_device("weird:force") == "weird:force"
    expected = "cuda" if torch.cuda.is_available() else mcp_device.resolve_device()
    assert mcp_device.resolve_device() == expected
    monkeypatch.setenv("LAYA_DEVICE", "cpu")
    assert mcp_device.resolve_device() == "cpu"
    assert mcp_device.device_report() == {"device": "cpu", "torch_cuda": torch.cuda.is_available(),
                                          "torch_version": torch.__version__}


def test_agent_device_reads_the_type():
    import torch

    class A:
        device = torch.device("cuda", 1)

    class S:
        device = "mps"

    assert mcp_device.agent_device(A()) == "cuda"
    assert mcp_device.agent_device(S()) == "mps"
    assert mcp_device.agent_device(object()) is None


def test_router_agent_never_loads(agent):
    from laya.router import Router

    router = Router(models={"local": "/nowhere"}, default="local")
    assert mcp_device.router_agent(router, "local") is None
    assert mcp_device.router_agent(router, "english") is None
    router.attach("english", agent)
    router.attach("local", agent)
    assert router.loaded == ["english", "local"]
    assert mcp_device.router_agent(router, "en") is agent  # alias -> canonical built-in name
    assert mcp_device.router_agent(router, "LOCAL") is agent
    assert router.loaded == ["english", "local"]  # LRU untouched
    assert mcp_device.router_agent(router, "nope") is None


def test_mcp_modules_import_without_torch_or_sdk():
    code = ("import sys, laya.mcp, laya.mcp.device, laya.mcp.remote, laya.mcp.tools; "
            "print('torch' in sys.modules, 'mcp' in sys.modules, 'fastapi' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "False"]


def test_mcp_all_and_server_import_error_names_the_extra():
    import laya.mcp

    assert laya.mcp.__all__ == ["device", "remote", "server", "tools"]
    code = ("import sys; sys.modules['mcp'] = None\n"
            "try:\n    import laya.mcp.server\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("IMPORTERROR ") and "laya[mcp]" in out and "pip install" in out


# ---- R-MCP-3 laya.mcp.remote ----------------------------------------------------------------------------

import json  # noqa: E402
import threading  # noqa: E402
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer  # noqa: E402

from laya.mcp.remote import DEFAULT_TIMEOUT_S, RemoteError, RemoteRouter  # noqa: E402
from laya.mcp.tools import ToolError  # noqa: E402

STATE = {"message": "My card was charged twice for the same order, please refund me."}
QUESTIONS = {"intent": {"type": "choice", "instructions": "What does the customer want?",
                        "criteria": {"refund": "money back", "help": "technical help"}},
             "angry": {"type": "noul", "instructions": "Is the customer angry?"}}
ANSWER = {"answers": {"intent": {"type": "choice", "choice": "refund", "probabilities": {"refund": 0.9, "help": 0.1},
                                 "confidence": 0.9},
                      "angry": {"type": "noul", "noul": 0.2, "confidence": 0.8}},
          "routing": {"model": "english", "repo": "convaiinnovations/laya", "reason": "stub"}}


class Reply(BaseHTTPRequestHandler):
    """Answers with Reply.status / Reply.body (raw bytes or JSON); records every request."""

    status, body, calls = 200, ANSWER, []

    def log_message(self, *args):
        pass

    def _answer(self):
        data = Reply.body if isinstance(Reply.body, bytes) else json.dumps(Reply.body).encode()
        self.send_response(Reply.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        Reply.calls.append(("GET", self.path, self.headers.get("Authorization"), None))
        self._answer()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Reply.calls.append(("POST", self.path, self.headers.get("Authorization"), body))
        self._answer()


@pytest.fixture()
def reply():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Reply)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Reply.status, Reply.body, Reply.calls = 200, ANSWER, []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("url", ["ftp://host", "http://", "localhost:8000", "http://h/x?q=1", "http://h/#f", 3])
def test_remote_router_refuses_bad_urls(url):
    with pytest.raises(ValueError, match=r"^base_url must be an HTTP\(S\) server URL without a query or fragment$"):
        RemoteRouter(url)


def test_remote_router_timeout(monkeypatch):
    from laya.router import Router

    monkeypatch.delenv("LAYA_REMOTE_TIMEOUT", raising=False)
    assert DEFAULT_TIMEOUT_S == 300.0
    router = RemoteRouter("http://h:1/", device="cuda", preload=True)
    assert isinstance(router, Router) and router.timeout == 300.0 and router.base_url == "http://h:1"
    monkeypatch.setenv("LAYA_REMOTE_TIMEOUT", "12.5")
    assert RemoteRouter("https://h").timeout == 12.5
    assert RemoteRouter("https://h", timeout=3).timeout == 3.0
    for bad in (0, -1, float("inf"), float("nan"), True, "5"):
        with pytest.raises(ValueError, match="^timeout must be a finite positive number$"):
            RemoteRouter("https://h", timeout=bad)


def test_remote_router_has_nothing_to_load():
    router = RemoteRouter("http://127.0.0.1:9")
    for call in (lambda: router.load("english"), lambda: router.attach("english", object())):
        with pytest.raises(RemoteError) as e:
            call()
        assert isinstance(e.value, RuntimeError) and e.value.code == "unsupported_remote" and e.value.message
    assert router.preload() is router and router.unload() is None
    assert router.loaded == [] and router.loaded_revisions == {}  # unreachable


def test_remote_predict_posts_the_set_controls(reply):
    router = RemoteRouter(reply, api_key="k3y")
    out = router.predict(STATE, QUESTIONS, model="auto", lang="en", max_len=128, min_confidence=0.5)
    assert out == ANSWER
    method, path, auth, body = Reply.calls[-1]
    assert (method, path, auth) == ("POST", "/v1/systemone", "Bearer k3y")
    assert body == {"state": STATE, "questions": QUESTIONS, "max_len": 128, "lang": "en", "min_confidence": 0.5}
    router.predict(STATE, QUESTIONS, model="english", task=None, head_max_len=64, lang_guess="de")
    assert Reply.calls[-1][3] == {"state": STATE, "questions": QUESTIONS, "model": "english", "head_max_len": 64,
                                  "lang_guess": "de"}
    results = router.predict_batch([{"state": STATE, "questions": QUESTIONS}, {"state": STATE, "questions": QUESTIONS,
                                                                               "lang": "fr"}], batch_size=8)
    assert results == [ANSWER, ANSWER] and Reply.calls[-1][3]["lang"] == "fr" and len(Reply.calls) == 4
    Reply.body = {"status": "ok", "loaded": ["english"], "revisions": {"english": "abc"}}
    assert router.health()["status"] == "ok" and router.loaded == ["english"]
    assert router.loaded_revisions == {"english": "abc"}


@pytest.mark.parametrize("kwargs", [{"hooks": [object()]}, {"hooks_raise": False}, {"hooks_timeout": 2.0},
                                    {"on_predict_start": print}, {"lang_guess": lambda s: "en"}])
def test_remote_predict_refuses_in_process_controls(reply, kwargs):
    with pytest.raises(RemoteError) as e:
        RemoteRouter(reply).predict(STATE, QUESTIONS, **kwargs)
    assert e.value.code == "unsupported_remote" and Reply.calls == []


@pytest.mark.parametrize("status, body, code", [
    (401, {"detail": "missing or invalid API key"}, "unauthorized"),
    (400, {"detail": "request body must be valid JSON"}, "invalid_request"),
    (413, {"detail": "state too large (50001 > 50000 chars)"}, "invalid_request"),
    (422, {"detail": "question 'q': no 'instructions'"}, "invalid_request"),
    (503, {"detail": "server busy, try again later"}, "busy"),
    (500, {"detail": "inference failed"}, "upstream_error"),
    (200, b"not json", "upstream_error"),
    (200, [1, 2], "upstream_error"),
])
def test_remote_http_failures_map_to_codes(reply, status, body, code):
    Reply.status, Reply.body = status, body
    with pytest.raises(RemoteError) as e:
        RemoteRouter(reply).predict(STATE, QUESTIONS)
    assert e.value.code == code
    if code == "invalid_request":
        assert e.value.message == body["detail"]


def test_remote_unreachable_and_timeout(monkeypatch):
    import socket

    with pytest.raises(RemoteError) as e:
        RemoteRouter("http://127.0.0.1:9").predict(STATE, QUESTIONS)
    assert e.value.code == "unreachable"
    quiet = socket.socket()
    quiet.bind(("127.0.0.1", 0))
    quiet.listen(1)  # accepts, never answers
    try:
        with pytest.raises(RemoteError) as e:
            RemoteRouter(f"http://127.0.0.1:{quiet.getsockname()[1]}", timeout=0.3).predict(STATE, QUESTIONS)
        assert e.value.code == "timeout"
    finally:
        quiet.close()


# ---- R-MCP-4 module functions ---------------------------------------------------------------------------

from laya.mcp import tools as T  # noqa: E402


def test_tool_function_signatures():
    import inspect

    assert "model" not in inspect.signature(T.laya_preset).parameters
    route = inspect.signature(T.laya_route).parameters
    assert route["questions"].default is inspect.Parameter.empty
    assert [n for n, p in route.items() if p.kind is p.KEYWORD_ONLY] == ["model", "task", "lang", "lang_guess",
                                                                         "router"]
    assert inspect.signature(T.laya_predict).parameters["model"].default == "auto"
    batch = inspect.signature(T.laya_predict_batch).parameters
    assert list(batch)[:5] == ["requests", "batch_size", "hooks_timeout", "min_confidence", "sort_by_length"]
    assert inspect.signature(T.laya_tournament).parameters["group_size"].default == 16
    assert set(inspect.signature(T.laya_status).parameters) == {"router", "loaded", "preload"}
    assert T.PRESETS == {"guard": "guard_questions", "moderation": "moderation_questions",
                         "triage": "triage_questions", "model_router": "router_questions",
                         "email": "email_questions"}
    assert T.BATCH_ITEM_OVERRIDES == ("model", "task", "lang", "lang_guess", "max_len", "head_max_len")
    assert T.AUTO == "auto" and set(T.VALID_TYPES) == {"choice", "score", "noul"}
    assert "state" in T.batch_item_key_doc() and "model" not in T.batch_item_key_doc(omit=("model",))


def test_tool_error_payload():
    error = ToolError("invalid_state", "state must be an object")
    assert (error.code, error.message) == ("invalid_state", "state must be an object")
    assert error.payload() == {"error": "invalid_state", "message": "state must be an object"}


@pytest.mark.parametrize("fn, kwargs, code", [
    (T.validate_state, {"state": {}}, "invalid_state"),
    (T.validate_state, {"state": "text"}, "invalid_state"),
    (T.validate_questions, {"questions": {"q": {"type": "noul", "instructions": " "}}}, "invalid_questions"),
    (T.validate_questions, {"questions": {"q": {"type": {}, "instructions": "x"}}}, "invalid_questions"),
    (T.validate_questions, {"questions": {"q": {"type": "score", "instructions": "x", "criteria": ["a", None]}}},
     "invalid_questions"),
    (T.validate_questions, {"questions": {"q": {"type": "choice", "instructions": "x", "criteria": ["a"],
                                                "labels": {"false": "n", "true": "y"}}}}, "invalid_questions"),
    (T.validate_questions, {"questions": {"q": {"type": "choice", "instructions": "x", "criteria": ["a", "b"],
                                                "option_order": [0, 0]}}}, "invalid_questions"),
    (T.validate_preset, {"preset": "nope", "known": T.PRESETS}, "invalid_preset"),
    (T.validate_model, {"model": 3}, "invalid_model"),
    (T.validate_task, {"task": "typed-decisions", "model": "english"}, "invalid_task"),
    (T.validate_task, {"task": 3}, "invalid_task"),
    (T.validate_lang, {"lang": ["de"]}, "invalid_lang"),
    (T.validate_lang_guess, {"lang_guess": 1}, "invalid_lang_guess"),
    (T.validate_budget, {"value": 0, "name": "max_len"}, "invalid_max_len"),
    (T.validate_budget, {"value": True, "name": "head_max_len"}, "invalid_head_max_len"),
    (T.validate_budget, {"value": 2.0, "name": "max_len"}, "invalid_max_len"),
    (T.validate_min_confidence, {"value": 1.5}, "invalid_min_confidence"),
    (T.validate_batch_requests, {"requests": []}, "invalid_request"),
    (T.validate_batch_requests, {"requests": ["x"]}, "invalid_request"),
    (T.validate_batch_requests, {"requests": [{"state": STATE, "questions": QUESTIONS, "max_len": -1}]},
     "invalid_max_len"),
])
def test_validators_raise_their_codes(fn, kwargs, code):
    with pytest.raises(ToolError) as e:
        fn(**kwargs)
    assert e.value.code == code and e.value.message


def test_validators_pass_good_values():
    assert T.validate_model(None) == "auto" and T.validate_model(" AUTO ") == "auto"
    assert T.validate_model("EN") == "english"
    assert T.validate_preset(" Router ", T.PRESETS) == "model_router"
    assert T.validate_task("typed-decisions") == "typed-decisions" and T.validate_task(None, "english") is None
    assert T.validate_budget(None, "max_len") is None and T.validate_budget(64, "max_len") == 64
    assert T.validate_min_confidence({"default": 0.3}) == {"default": 0.3}
    items = T.validate_batch_requests([{"state": STATE, "questions": QUESTIONS, "model": "auto", "lang": "de"}])
    assert items[0]["model"] is None and items[0]["lang"] == "de"


def test_available_presets():
    presets = T.get_available_presets()
    assert list(presets) == list(T.PRESETS)
    assert presets["model_router"]["aliases"] == ["router"] and "aliases" not in presets["guard"]
    assert presets["triage"]["state_field"] == "message" and presets["triage"]["n_questions"] == 5
    assert presets["guard"]["questions"][0] == "jailbreak"


def test_predict_with_an_agent_only(agent):
    out = T.laya_predict(STATE, QUESTIONS, agent=agent, task="ignored", lang_guess="de")
    assert out["routing"] == {"model": None, "repo": None, "reason": "auto routing without router"}
    assert set(out) == {"answers", "routing", "latency_ms", "device"} and out["device"] == "cpu"
    out = T.laya_predict(STATE, QUESTIONS, "english", agent=agent)
    assert out["routing"] == {"model": "english", "repo": None, "reason": "explicit model"}


def test_predict_with_a_router(agent, tiny_checkpoint):
    from laya.router import Router

    router = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu")
    router.attach("tiny", agent)
    out = T.laya_predict(STATE, QUESTIONS, "tiny", router=router)
    assert out["routing"]["model"] == "tiny" and out["device"] == "cpu"
    status = T.laya_status(router=router, preload=False)
    assert status["loaded"] == ["tiny"] and status["checkpoint_devices"] == {"tiny": "cpu"}
    assert status["router_preload"] is False and status["router_ready"] is True
    assert {"device", "torch_cuda", "torch_version", "package_versions"} <= set(status)
    assert T.laya_route(STATE, QUESTIONS, model="tiny", router=router)["model"] == "tiny"
    long = {"message": "The parcel came back broken. " * 60}
    out = T.laya_predict_long(long, QUESTIONS, "tiny", window=48, stride=24, router=router)
    assert out["windows"] > 1 and set(out) == {"answers", "routing", "windows", "latency_ms", "device"}
    labels = [f"l{i}" for i in range(25)]
    pick = {"pick": {"type": "choice", "instructions": "Which?", "criteria": labels, "option_order": list(range(25))}}
    out = T.laya_shortlist(STATE, pick, "tiny", router=router, embed_fn=lambda texts: [[1.0, float(len(t))]
                                                                                       for t in texts])
    assert out["shortlist"]["pick"]["k"] == 20 and out["option_order_dropped"] is True
    out = T.laya_tournament(STATE, pick, "tiny", group_size=8, router=router)
    assert out["option_order_dropped"] is True and out["routing"]["model"] == "tiny"


@pytest.mark.parametrize("fn, kwargs, code", [
    (T.laya_shortlist, {"k": 0}, "invalid_k"), (T.laya_shortlist, {"k": True}, "invalid_k"),
    (T.laya_tournament, {"group_size": 1}, "invalid_group_size"),
    (T.laya_predict_long, {"window": 0}, "invalid_window"), (T.laya_predict_long, {"stride": 1.5}, "invalid_stride"),
])
def test_sizes_are_checked(agent, fn, kwargs, code):
    with pytest.raises(ToolError) as e:
        fn(STATE, QUESTIONS, agent=agent, **kwargs)
    assert e.value.code == code


def test_remote_router_refuses_local_only_tools(reply):
    router = RemoteRouter(reply)
    for fn in (T.laya_shortlist, T.laya_tournament):
        with pytest.raises(ToolError) as e:
            fn(STATE, QUESTIONS, router=router)
        assert e.value.code == "unsupported_remote"
    out = T.laya_predict(STATE, QUESTIONS, router=router)
    assert out["routing"] == ANSWER["routing"] and "device" not in out
    Reply.status, Reply.body = 401, {"detail": "missing API key"}
    with pytest.raises(ToolError) as e:
        T.laya_predict(STATE, QUESTIONS, router=router)
    assert e.value.code == "unauthorized"
    status = T.laya_status(router=router)
    assert status["mode"] == "remote" and status["server"] is None and status["server_error"].startswith("unauth")


def test_shared_router_construction_failure_is_retried(monkeypatch):
    from laya.mcp import runtime

    runtime.reset_shared_router()
    calls = []

    def failing(env=None):
        calls.append(1)
        raise OSError("hub down")

    monkeypatch.setattr(runtime, "build_router", failing)
    for _ in range(2):
        with pytest.raises(ToolError) as e:
            T.laya_predict(STATE, QUESTIONS)
        assert e.value.code == "internal_error"
        assert e.value.message == "router construction failed: OSError: hub down"
    assert len(calls) == 2
    monkeypatch.setattr(runtime, "build_router", lambda env=None: RemoteRouter("http://127.0.0.1:9"))
    assert runtime.shared_router() is runtime.shared_router()
    runtime.reset_shared_router()


def test_base_url_env_builds_a_remote_router(monkeypatch):
    from laya.mcp import runtime

    router = runtime.build_router({"LAYA_BASE_URL": "gpu-box:8000", "LAYA_API_KEY": "k"})
    assert isinstance(router, RemoteRouter) and router.base_url == "http://gpu-box:8000" and router.api_key == "k"


# ---- R-MCP-5 the server (needs the mcp SDK) -------------------------------------------------------------

def _server():
    pytest.importorskip("mcp")
    from laya.mcp import server

    return server


def test_server_wrappers_and_version():
    import asyncio

    server = _server()
    assert all(callable(getattr(server, f"{name}_tool")) for name in T.TOOL_NAMES)
    listed = asyncio.run(server.server.list_tools())
    assert [t.name for t in listed] == list(T.TOOL_NAMES)
    assert server.server_version() and server.server.name == "laya"
    route = next(t for t in listed if t.name == "laya_route")
    schema = getattr(route, "input_schema", None) or route.inputSchema
    assert schema["required"] == ["state", "questions"]


def test_server_failures_are_error_results(monkeypatch):
    import asyncio

    server = _server()
    result = asyncio.run(server.server.call_tool("laya_predict", {"state": "plain", "questions": QUESTIONS}))
    flag = getattr(result, "is_error", None)
    assert (flag if flag is not None else result.isError) is True
    text = result.content[0].text
    assert json.loads(text)["error"] == "invalid_state" and text.startswith('{\n  "error": ')

    def boom(**kwargs):
        raise KeyError("x")

    monkeypatch.setattr(server.tools, "laya_route", boom)
    result = server.laya_route_tool(STATE, QUESTIONS)
    assert json.loads(result.content[0].text) == {"error": "internal_error", "message": "KeyError: 'x'"}


def test_unknown_task_is_invalid_task():
    from laya.router import Router

    router = Router()
    for fn in (T.laya_route, T.laya_predict):
        with pytest.raises(ToolError) as e:
            fn(STATE, QUESTIONS, task="nope", router=router)
        assert e.value.code == "invalid_task" and "'nope'" in e.value.message
    with pytest.raises(ToolError) as e:
        T.laya_route_batch([{"state": STATE, "questions": QUESTIONS, "task": "nope"}], router=router)
    assert e.value.code == "invalid_task" and e.value.message.startswith("requests[0]: ")
    assert T.laya_route(STATE, QUESTIONS, task="typed_decisions", router=router)["model"] == "typed-decisions"


def test_router_from_the_environment(monkeypatch):
    from laya.mcp import runtime
    from laya.router import Router

    preloaded = []
    monkeypatch.setattr(Router, "preload", lambda self, names=None: preloaded.append(list(names)) or self)
    router = runtime.build_router({"LAYA_DEFAULT_MODEL": "english", "LAYA_AUTO_TASK": "1"})
    assert preloaded == [["english", "multilingual"]]  # LAYA_MODELS defaults to english,multilingual here
    assert router.default == "english" and router.auto_task_detection is True
    runtime.build_router({"LAYA_MODELS": "en", "LAYA_PRELOAD": "true"})
    assert preloaded[-1] == ["english"]
    runtime.build_router({"LAYA_PRELOAD": "0"})
    assert len(preloaded) == 2
    assert runtime.preload_wanted({}) is True and runtime.preload_wanted({"LAYA_PRELOAD": "off"}) is False


def test_bad_laya_device_fails_construction(monkeypatch):
    from laya.mcp import runtime

    runtime.reset_shared_router()
    monkeypatch.setenv("LAYA_DEVICE", "gpu")
    monkeypatch.setenv("LAYA_PRELOAD", "0")
    with pytest.raises(ToolError) as e:
        T.laya_predict(STATE, QUESTIONS)
    assert e.value.code == "internal_error"
    assert e.value.message.startswith("router construction failed: ValueError: LAYA_DEVICE='gpu' is not a torch device")
    runtime.reset_shared_router()

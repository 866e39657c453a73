"""`LayaTools` (the class form of laya.mcp.tools, compat 0.4.15 §19) on the tiny checkpoint, without the `mcp`
package; the remote path (LAYA_BASE_URL -> RemoteRouter) against a local HTTP stub."""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from laya.mcp.tools import TOOL_NAMES, LayaTools

STATE = {"message": "My card was charged twice for the same order, please refund me."}
QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "help": "technical help", "other": None}},
    "urgency": {"type": "score", "instructions": "How urgent is it?", "criteria": ["low", "medium", "high"]},
    "angry": {"type": "noul", "instructions": "Is the customer angry?"},
}


def call(tools: LayaTools, name: str, **kwargs) -> dict:
    raw = getattr(tools, name)(**kwargs)
    assert isinstance(raw, str)
    return json.loads(raw)


def error_code(out: dict) -> str:
    """The failure payload of compat 0.4.15 §20: {"error": "<code>", "message": ...}."""
    assert set(out) == {"error", "message"}, out
    assert isinstance(out["error"], str) and isinstance(out["message"], str)
    return out["error"]


@pytest.fixture(scope="module")
def tools(agent):
    return LayaTools(agent, env={})


# ---- local tools ----------------------------------------------------------------------------------------

def test_tool_names_match_the_spec():
    assert TOOL_NAMES == ("laya_status", "laya_route", "laya_route_batch", "laya_predict", "laya_predict_batch",
                          "laya_shortlist", "laya_tournament", "laya_preset", "laya_decide", "laya_predict_long")


def test_status_reports_the_served_agent(tools):
    out = call(tools, "laya_status")
    assert out["mode"] == "local" and out["router_ready"] is True
    assert "english" in out["loaded"] and set(out["checkpoint_devices"].values()) == {"cpu"}
    assert out["device"] == "cpu" and out["device_is_preference"] is False
    assert out["package_versions"]["laya"]


def test_status_does_not_call_a_factory():
    called = []
    tools = LayaTools(lambda: called.append(1), env={})
    out = call(tools, "laya_status")
    assert out["router_ready"] is False and out["loaded"] == [] and called == []


def test_route_loads_nothing(tools):
    out = call(tools, "laya_route", state=STATE, questions=QUESTIONS)
    assert set(out) == {"model", "repo", "reason"} and out["model"] in ("english", "multilingual")
    out = call(tools, "laya_route", state=STATE, questions=QUESTIONS, model="local")
    assert out["model"] == "local" and "explicit model" in out["reason"]


def test_predict_matches_the_agent(tools, agent):
    out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS)
    assert list(out["answers"]) == list(QUESTIONS)
    assert out["routing"]["model"] == "english"
    assert out["device"] == "cpu" and out["latency_ms"] >= 0
    direct = agent.predict(STATE, QUESTIONS, lang=(out["routing"].get("detection") or {}).get("language"))
    assert out["answers"] == json.loads(json.dumps(direct["answers"]))


def test_predict_min_confidence_and_budgets(tools):
    out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS, min_confidence=0.99, max_len=128,
               head_max_len=64)
    for answer in out["answers"].values():
        assert answer["abstention"] in ("passed", "abstained", "unevaluated")
        assert answer["abstention_threshold"] == 0.99
    out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS, min_confidence={"default": 0.2})
    assert all(a["abstention_threshold"] == 0.2 for a in out["answers"].values())


def test_predict_batch_in_input_order(tools):
    other = {"spam": {"type": "noul", "instructions": "Is it spam?"}}
    states = [STATE, {"message": "Hello, how do I reset my password?"}, {"message": "WIN A FREE PRIZE NOW"}]
    requests = [{"state": states[0], "questions": QUESTIONS}, {"state": states[1], "questions": QUESTIONS},
                {"state": states[2], "questions": other, "model": "local"}]
    out = call(tools, "laya_predict_batch", requests=requests)
    assert [list(r["answers"]) for r in out["requests"]] == [list(QUESTIONS), list(QUESTIONS), ["spam"]]
    assert all(r["device"] == "cpu" for r in out["requests"])
    assert sum(out["model_counts"].values()) == 3 and out["model_counts"]["local"] == 1
    assert out["total_latency_ms"] >= out["per_request_latency_ms"] >= 0
    for request, result in zip(requests, out["requests"]):
        single = call(tools, "laya_predict", **request)
        assert single["answers"] == result["answers"]
    sized = call(tools, "laya_predict_batch", requests=requests, batch_size=1, sort_by_length=True, hooks_timeout=5,
                 min_confidence=0.5)
    assert [r["answers"]["spam" if "spam" in r["answers"] else "angry"]["abstention_threshold"]
            for r in sized["requests"]] == [0.5, 0.5, 0.5]


def test_route_batch(tools):
    out = call(tools, "laya_route_batch", requests=[{"state": STATE, "questions": QUESTIONS},
                                                    {"state": STATE, "questions": QUESTIONS, "model": "local"}])
    assert [d["model"] for d in out["decisions"]][1] == "local"
    assert sum(out["model_counts"].values()) == 2


def test_shortlist_narrows_long_choices(tools):
    labels = [f"label_{i}" for i in range(30)]
    questions = {"pick": {"type": "choice", "instructions": "Which label fits?", "criteria": labels},
                 "angry": {"type": "noul", "instructions": "Is the customer angry?"}}
    out = call(tools, "laya_shortlist", state=STATE, questions=questions, k=5)
    block = out["shortlist"]["pick"]
    assert block["k"] == 5 and block["options"] == 30 and len(block["kept"]) == 5
    assert set(out["answers"]["pick"]["probabilities"]) == set(labels)
    assert out["device"] == "cpu"


def test_tournament_narrows_in_rounds(tools):
    labels = [f"option_{i}" for i in range(40)]
    questions = {"pick": {"type": "choice", "instructions": "Which option fits?", "criteria": labels}}
    out = call(tools, "laya_tournament", state=STATE, questions=questions, group_size=8)
    assert out["answers"]["pick"]["choice"] in labels
    assert "pick" in out["tournament"] and out["tournament"]["pick"]["rounds"]
    assert error_code(call(tools, "laya_tournament", state=STATE, questions=questions, group_size=1)) \
        == "invalid_group_size"


def test_presets(tools):
    out = call(tools, "laya_preset", preset="triage", state=STATE)
    assert list(out["answers"]) == ["intent", "is_urgent", "frustration", "refund_requested", "churn_risk"]
    assert out["preset"] == "triage"
    out = call(tools, "laya_preset", preset="Router", state={"text": "Plan a database migration"})
    assert out["preset"] == "model_router"
    assert error_code(call(tools, "laya_preset", preset="nope", state=STATE)) == "invalid_preset"
    assert error_code(call(tools, "laya_preset", preset="guard", state=STATE, model="english")) \
        == "invalid_request"  # laya_preset takes no model (compat 0.4.15 §20)


def test_decide_fills_a_schema(tools):
    schema = {"type": "object", "properties": {
        "intent": {"enum": ["refund", "help", "other"], "description": "What does the customer want?"},
        "angry": {"type": "boolean"},
        "urgency": {"type": "integer", "minimum": 1, "maximum": 3}}}
    out = call(tools, "laya_decide", state=STATE, schema=schema)
    assert set(out["values"]) == {"intent", "angry", "urgency"}
    assert out["values"]["intent"] in ("refund", "help", "other")
    assert isinstance(out["values"]["angry"], bool) and out["values"]["urgency"] in (1, 2, 3)
    assert set(out["probabilities"]["angry"]) == {"false", "true"}
    assert out["device"] == "cpu"
    out = call(tools, "laya_decide", state=STATE, schema=schema, min_confidence=1.0)
    assert all(v is None for v in out["values"].values())
    bad = call(tools, "laya_decide", state=STATE, schema={"type": "object", "properties": {"x": {"type": "string"}}})
    assert error_code(bad) == "invalid_schema" and "x" in bad["message"]
    assert error_code(call(tools, "laya_decide", state=STATE, schema=["x"])) == "invalid_schema"


def test_predict_long(tools):
    state = {"message": " ".join(["The order arrived broken and I want my money back."] * 80)}
    out = call(tools, "laya_predict_long", state=state, questions=QUESTIONS, window=64, stride=32)
    assert "error" not in out, out
    assert list(out["answers"]) == list(QUESTIONS)
    windows = out["windows"]
    assert windows > 1 and out["device"] == "cpu"
    for answer in out["answers"].values():
        block = answer["window"]
        assert block["count"] == windows and 0 <= block["index"] < windows
        assert 0 <= block["token_start"] < block["token_end"]


# ---- structured errors ----------------------------------------------------------------------------------

@pytest.mark.parametrize("state", ["plain text", ["turn"], None, 3, {}])
def test_non_dict_state(tools, state):
    out = call(tools, "laya_predict", state=state, questions=QUESTIONS)
    assert error_code(out) == "invalid_state"


def test_bad_questions(tools):
    bad = {"q": {"type": "bogus", "instructions": "?"}}
    out = call(tools, "laya_predict", state=STATE, questions=bad)
    assert error_code(out) == "invalid_questions" and out["message"].startswith("question 'q'")
    assert error_code(call(tools, "laya_predict", state=STATE, questions=["q"])) == "invalid_questions"
    assert error_code(call(tools, "laya_predict", state=STATE, questions={})) == "invalid_questions"
    many = {"q": {"type": "choice", "instructions": "?", "criteria": [str(i) for i in range(101)]}}
    out = call(tools, "laya_predict", state=STATE, questions=many)
    assert error_code(out) == "invalid_questions" and "101 > 100" in out["message"]
    out = call(tools, "laya_predict_batch", requests=[{"state": STATE, "questions": QUESTIONS},
                                                      {"state": STATE, "questions": bad}])
    assert error_code(out) == "invalid_questions" and out["message"].startswith("requests[1]")


def test_bad_controls(tools):
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, min_confidence=2)) \
        == "invalid_min_confidence"
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, max_len=-1)) \
        == "invalid_max_len"
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, head_max_len=True)) \
        == "invalid_head_max_len"
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, model="/some/path")) \
        == "invalid_model"
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, model=3)) == "invalid_model"
    assert error_code(call(tools, "laya_predict", state=STATE, questions=QUESTIONS, lang=3)) == "invalid_lang"
    assert error_code(call(tools, "laya_predict_batch", requests=[])) == "invalid_request"
    assert error_code(call(tools, "laya_predict_batch", requests=[{"state": STATE, "questions": QUESTIONS,
                                                                   "hooks": 1}])) == "invalid_request"
    assert error_code(call(tools, "laya_predict_batch", requests=[{"state": STATE, "questions": QUESTIONS}],
                           batch_size=-2)) == "invalid_batch_size"
    assert error_code(call(tools, "laya_predict_batch", requests=[{"state": STATE, "questions": QUESTIONS}],
                           hooks_timeout=-1)) == "invalid_hooks_timeout"
    assert error_code(call(tools, "laya_route_batch", requests=[{"state": "x", "questions": QUESTIONS}])) \
        == "invalid_state"
    assert error_code(json.loads(tools.call("laya_nope"))) == "unknown_tool"
    assert error_code(json.loads(tools.call("laya_predict", {"state": STATE}))) == "invalid_request"


class Exploding:
    """An agent whose inference fails unexpectedly."""

    device = "cpu"
    model_id_or_path = "exploding"

    def predict(self, *a, **k):
        raise RuntimeError("boom at /srv/weights")

    predict_batch = predict


def test_unexpected_failures_are_internal_errors(caplog):
    tools = LayaTools(Exploding(), env={})
    with caplog.at_level("ERROR", logger="laya.mcp"):
        out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS)
    assert error_code(out) == "internal_error" and out["message"] == "RuntimeError: boom at /srv/weights"
    assert "boom" in caplog.text


def test_models_not_ready():
    def factory():
        raise OSError("no network")

    out = call(LayaTools(factory, env={}), "laya_predict", state=STATE, questions=QUESTIONS)
    assert error_code(out) == "models_not_ready"
    env = {"LAYA_EXTRA_MODELS": json.dumps({"gone": "/nonexistent/laya-ckpt"}), "LAYA_DEVICE": "cpu",
           "LAYA_PRELOAD": "0"}
    out = call(LayaTools(env=env), "laya_predict", state=STATE, questions=QUESTIONS, model="gone")
    assert error_code(out) == "models_not_ready"
    out = call(LayaTools(env={**env, "LAYA_PRELOAD": "1"}), "laya_predict", state=STATE, questions=QUESTIONS)
    assert error_code(out) == "internal_error" and out["message"].startswith("router construction failed: ")


def test_env_built_router(tiny_checkpoint):
    tools = LayaTools(env={"LAYA_EXTRA_MODELS": json.dumps({"tiny": tiny_checkpoint}), "LAYA_DEVICE": "cpu",
                           "LAYA_DEFAULT_MODEL": "tiny"})
    out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS, model="tiny")
    assert out["routing"]["model"] == "tiny" and out["device"] == "cpu"
    status = call(tools, "laya_status")
    assert status["loaded"] == ["tiny"] and status["checkpoint_devices"] == {"tiny": "cpu"}


def test_bad_env_is_reported():
    out = call(LayaTools(env={"LAYA_EXTRA_MODELS": "{"}), "laya_predict", state=STATE, questions=QUESTIONS)
    assert error_code(out) == "internal_error" and "LAYA_EXTRA_MODELS" in out["message"]
    out = call(LayaTools(env={"LAYA_BASE_URL": "ftp://x"}), "laya_predict", state=STATE, questions=QUESTIONS)
    assert error_code(out) == "internal_error" and "base_url must be an HTTP(S) server URL" in out["message"]


# ---- remote (LAYA_BASE_URL) -----------------------------------------------------------------------------

def fake_result(state, questions, body):
    answers = {}
    for qid, q in questions.items():
        if q["type"] == "noul":
            answers[qid] = {"type": "noul", "noul": 0.25, "confidence": 0.75, "answer_confidence": 0.75}
        elif q["type"] == "choice":
            labels = list(q["criteria"])
            probs = {label: round(1.0 / len(labels), 4) for label in labels}
            probs[labels[0]] = round(1.0 - sum(list(probs.values())[1:]), 4)
            answers[qid] = {"type": "choice", "choice": labels[0], "probabilities": probs, "confidence": 0.1,
                            "answer_confidence": probs[labels[0]]}
        else:
            n = len(q["criteria"])
            answers[qid] = {"type": "score", "score": 1.0, "probabilities": {str(i): round(1 / n, 4) for i in range(n)},
                            "confidence": 0.1, "answer_confidence": round(1 / n, 4)}
    return {"model": "laya-rl-agent", "answers": answers, "usage": {"input_tokens": 10, "output_tokens": 0},
            "routing": {"model": body.get("model") or "english", "reason": "stub", "state": state}}


class Stub(BaseHTTPRequestHandler):
    calls: list = []

    def log_message(self, *args):
        pass

    def send(self, status, body, headers=None):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        Stub.calls.append(("GET", self.path, self.headers.get("Authorization"), None))
        if self.path == "/health":
            self.send(200, {"status": "ok", "loaded": ["english"], "device": "cuda", "device_is_preference": False,
                            "checkpoint_devices": {"english": "cuda"}})
        else:
            self.send(404, {"detail": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.calls.append(("POST", self.path, self.headers.get("Authorization"), body))
        questions = body.get("questions") or {}
        if any(q.get("type") == "bogus" for q in questions.values()):
            return self.send(422, {"detail": "question 'q': type must be choice, score or noul"})
        if self.path == "/v1/systemone":
            self.send(200, fake_result(body["state"], questions, body), {"X-Inference-Time-Ms": "1.50"})
        elif self.path == "/v1/systemone/batch":
            results = [fake_result(s, questions, body) for s in body["states"]]
            self.send(200, {"results": results, "total_usage": {"input_tokens": 10 * len(results),
                                                                "output_tokens": 0}})
        else:
            self.send(404, {"detail": "not found"})


@pytest.fixture()
def stub():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    Stub.calls = []
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def remote(url, **env):
    return LayaTools(env={"LAYA_BASE_URL": url + "/", "LAYA_API_KEY": "k3y", "LAYA_REMOTE_TIMEOUT": "5", **env})


def test_remote_status_and_predict(stub):
    tools = remote(stub)
    out = call(tools, "laya_status")
    assert out["mode"] == "remote" and out["server"]["status"] == "ok" and out["device"] == "cuda"
    assert out["base_url"] == stub and out["router_preload"] is False and out["router_ready"] is True
    assert out["loaded"] == ["english"]
    out = call(tools, "laya_predict", state=STATE, questions=QUESTIONS, model="english", lang="en", max_len=256,
               min_confidence=0.5)
    assert list(out["answers"]) == list(QUESTIONS) and out["routing"]["model"] == "english"
    method, path, auth, body = Stub.calls[-1]
    assert (method, path, auth) == ("POST", "/v1/systemone", "Bearer k3y")
    assert body == {"state": STATE, "questions": QUESTIONS, "model": "english", "max_len": 256, "lang": "en",
                    "min_confidence": 0.5}
    assert Stub.calls[0][:3] == ("GET", "/health", "Bearer k3y")


def test_remote_predict_batch_posts_one_request_each(stub):
    tools = remote(stub)
    other = {"spam": {"type": "noul", "instructions": "Is it spam?"}}
    requests = [{"state": {"message": "a"}, "questions": QUESTIONS}, {"state": {"message": "b"}, "questions": other},
                {"state": {"message": "c"}, "questions": QUESTIONS}]
    out = call(tools, "laya_predict_batch", requests=requests, batch_size=2)
    assert [r["routing"]["state"]["message"] for r in out["requests"]] == ["a", "b", "c"]
    assert [list(r["answers"]) for r in out["requests"]] == [list(QUESTIONS), ["spam"], list(QUESTIONS)]
    posts = [c for c in Stub.calls if c[0] == "POST"]
    assert len(posts) == 3 and all(c[1] == "/v1/systemone" and "batch_size" not in c[3] for c in posts)
    out = call(tools, "laya_predict_batch", requests=requests, hooks_timeout=3)
    assert error_code(out) == "unsupported_remote"


def test_remote_preset_decide_and_local_routing(stub):
    tools = remote(stub)
    out = call(tools, "laya_preset", preset="triage", state=STATE)
    assert out["answers"]["intent"]["choice"] == "refund"
    schema = {"type": "object", "properties": {"angry": {"type": "boolean"}, "tone": {"enum": ["calm", "rude"]}}}
    out = call(tools, "laya_decide", state=STATE, schema=schema)
    assert out["values"] == {"angry": False, "tone": "calm"}
    before = len(Stub.calls)
    out = call(tools, "laya_route", state=STATE, questions=QUESTIONS)  # routes here: nothing is sent
    assert out["model"] in ("english", "multilingual") and len(Stub.calls) == before


def test_remote_errors(stub):
    tools = remote(stub)
    labels = {"pick": {"type": "choice", "instructions": "?", "criteria": [f"o{i}" for i in range(20)]}}
    for name, kwargs in (("laya_shortlist", {"state": STATE, "questions": QUESTIONS}),
                         ("laya_tournament", {"state": STATE, "questions": labels}),
                         ("laya_predict_long", {"state": STATE, "questions": QUESTIONS})):
        assert error_code(call(tools, name, **kwargs)) == "unsupported_remote"
    assert Stub.calls == []
    down = remote("http://127.0.0.1:9")
    assert error_code(call(down, "laya_predict", state=STATE, questions=QUESTIONS)) == "unreachable"
    status = call(down, "laya_status")
    assert status["server"] is None and status["server_error"].startswith("unreachable") and status["loaded"] == []


def test_remote_http_error_mapping(stub, monkeypatch):
    import laya.mcp.tools as tools_mod

    monkeypatch.setattr(tools_mod, "validate_questions", lambda questions, *a, **k: questions)  # the server judges
    out = call(remote(stub), "laya_predict", state=STATE, questions={"q": {"type": "bogus", "instructions": "?"}})
    assert error_code(out) == "invalid_request" and out["message"] == "question 'q': type must be choice, score or noul"


# ---- the package --------------------------------------------------------------------------------------

def test_pyproject_declares_script_and_extra():
    import os
    tomllib = pytest.importorskip("tomllib")

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    assert project["scripts"]["laya-mcp-server"] == "laya.mcp.server:main"
    assert project["optional-dependencies"]["mcp"] == ["mcp>=2.2.0"]


def test_tools_module_is_torch_free():
    import subprocess

    code = "import sys, laya.mcp.tools; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_shortlist_embedding_cache_lets_evicted_agents_go(tiny_checkpoint):
    import gc
    import weakref

    from laya.mcp import tools as tools_mod
    from laya.router import Router

    router = Router(models={"a": tiny_checkpoint, "b": tiny_checkpoint}, default="a", device="cpu", max_loaded=1)
    tools = LayaTools(router, env={})
    labels = [f"label_{i}" for i in range(30)]
    questions = {"pick": {"type": "choice", "instructions": "Which label fits?", "criteria": labels}}
    assert "error" not in call(tools, "laya_shortlist", state=STATE, questions=questions, k=5, model="a")
    first = weakref.ref(router.agents()["a"])
    assert "error" not in call(tools, "laya_shortlist", state=STATE, questions=questions, k=5, model="b")
    assert router.loaded == ["b"]
    gc.collect()
    assert first() is None, "the evicted agent is still referenced (embedding cache)"
    assert len(tools_mod._EMBED_FNS) == 1


def _choice(k: int) -> dict:
    return {"type": "choice", "instructions": "Which?", "criteria": [f"o{i}" for i in range(k)]}


@pytest.mark.parametrize("questions, kwargs, words", [
    ({"big": _choice(101)}, {}, "too many choice options for 'big' (101 > 100); use laya_tournament"),
    ({"big": _choice(30)}, {"max_choice": 20}, "too many choice options for 'big' (30 > 20)"),
    ({"lv": {"type": "score", "instructions": "How?", "criteria": [str(i) for i in range(33)]}}, {},
     "too many score levels for 'lv' (33 > 32)"),
    ({f"q{i}": _choice(100) for i in range(6)}, {}, "too many answer options across questions (600 > 512)"),
])
def test_question_size_limits_name_the_breach(questions, kwargs, words):
    from laya.mcp.tools import ToolError, validate_questions

    with pytest.raises(ToolError) as raised:
        validate_questions(questions, **kwargs)
    assert raised.value.code == "invalid_questions" and raised.value.message.startswith(words)
    if "max_choice" in kwargs:
        assert "laya_tournament" not in raised.value.message
    assert validate_questions({"ok": _choice(3)}) == {"ok": _choice(3)}  # within the limits: returned as given

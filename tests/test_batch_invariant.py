"""batch_invariant=True: a request's result is bit-identical alone, inside any predict_batch (any company,
size, position, batch_size, sort_by_length) and through `laya serve` under concurrent clients (issue 28).

"Bit-identical" is checked on the JSON text of the whole result: every field, every float's repr."""

from __future__ import annotations

import asyncio
import json
import random

import pytest

import laya

QUESTION_SETS = [
    {"intent": {"type": "choice", "instructions": "What does the customer want?",
                "criteria": {"refund": "money back", "bug": "something is broken", "other": None}},
     "severity": {"type": "score", "instructions": "How severe is it?", "criteria": ["low", "medium", "high"]},
     "escalate": {"type": "noul", "instructions": "Should a human take over?"}},
    {"spam": {"type": "noul", "instructions": "Is this spam?", "labels": {"false": "ham", "true": "spam"}}},
    {"team": {"type": "choice", "instructions": "Which team owns it?",
              "criteria": ["billing", "mobile", "web", "security", "sales", "legal", "support"]},
     "mood": {"type": "score", "instructions": "Mood?", "criteria": ["calm", "mild", "annoyed", "angry", "livid"]}},
    {"urgent": {"type": "noul", "instructions": "Does this need a reply today?"},
     "lang": {"type": "choice", "instructions": "Which language is it in?", "criteria": ["en", "de", "fr"]}},
]
WORDS = ("invoice refund crash login password charge twice urgent cancel thanks please broken order "
         "account card shipping delayed error screen update").split()


def requests(n: int = 200) -> list[tuple]:
    """n distinct (state, question-set index) pairs of lengths 2..~250 words, strings and dicts."""
    rng = random.Random(28)
    out = []
    for i in range(n):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.choice([2, 5, 12, 30, 60, 120, 250])))
        state = f"#{i} {text}" if i % 3 else {"ticket": text, "id": i}
        out.append((state, i % len(QUESTION_SETS)))
    return out


def text(result: dict) -> str:
    return json.dumps(result, sort_keys=False)


def alone(agent, reqs: list[tuple]) -> list[str]:
    return [text(agent.predict(state, QUESTION_SETS[q])) for state, q in reqs]


def check_batches(agent, reqs: list[tuple], want: list[str], batches: int = 50) -> int:
    """Random server-style batches of 1-64 mixed requests in random order, each question set answered by one
    predict_batch (as the server merges them); returns the number of results that differ from `want`."""
    rng = random.Random(7)
    differ = 0
    for _ in range(batches):
        members = rng.sample(range(len(reqs)), rng.randint(1, 64))
        by_set: dict = {}
        for i in members:
            by_set.setdefault(reqs[i][1], []).append(i)
        for q, idx in by_set.items():
            kwargs = rng.choice([{}, {"batch_size": rng.randint(1, 16)},
                                 {"batch_size": rng.randint(2, 16), "sort_by_length": True}])
            results = agent.predict_batch([reqs[i][0] for i in idx], QUESTION_SETS[q], **kwargs)
            differ += sum(text(r) != want[i] for r, i in zip(results, idx))
    return differ


@pytest.fixture(scope="module")
def invariant(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cpu", batch_invariant=True)


def test_eager_answers_do_not_depend_on_batch_company(invariant):
    reqs = requests()
    want = alone(invariant, reqs)
    assert check_batches(invariant, reqs, want) == 0


def test_onnx_answers_do_not_depend_on_batch_company(tiny_checkpoint, onnx_graph):
    agent = laya.load(tiny_checkpoint, backend="onnx", onnx_path=onnx_graph, batch_invariant=True)
    assert agent.batch_invariant
    reqs = requests()
    want = alone(agent, reqs)
    assert check_batches(agent, reqs, want) == 0


def test_invariant_answers_equal_the_batched_forward_to_fp32_rounding(invariant, agent):
    """The invariant path is the same model: answers agree with the plain batched path (labels exactly,
    probabilities within one unit of the 4th decimal)."""
    for state, q in requests(40):
        a, b = invariant.predict(state, QUESTION_SETS[q]), agent.predict(state, QUESTION_SETS[q])
        for qid, x in a["answers"].items():
            y = b["answers"][qid]
            assert x.get("choice") == y.get("choice")
            assert abs(x["confidence"] - y["confidence"]) <= 1e-4 + 1e-12


def test_the_flag_is_checked_and_off_by_default(tiny_checkpoint, agent):
    assert agent.batch_invariant is False
    with pytest.raises(TypeError, match="batch_invariant must be True or False"):
        laya.load(tiny_checkpoint, device="cpu", batch_invariant="yes")


def test_laya_serve_with_64_concurrent_clients(tiny_checkpoint):
    pytest.importorskip("fastapi")
    httpx = pytest.importorskip("httpx")
    from laya.router import Router
    from laya.serve import ServeConfig, create_app

    cfg = ServeConfig(preload=True, models=("tiny",), max_concurrent=256, batch_window_ms=5.0, batch_invariant=True)
    router = Router(models={"tiny": tiny_checkpoint}, default="tiny", device="cpu",
                    agent_kwargs={"batch_invariant": True})
    reqs = requests(160)
    bodies = [{"state": s, "questions": QUESTION_SETS[q], "model": "tiny"} for s, q in reqs]
    app = create_app(router, cfg=cfg)
    app.state.server.start()
    try:
        async def fire(order: list[int]) -> dict:
            out: dict = {}
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://test", timeout=120) as c:
                async def client(k: int) -> None:
                    for i in order[k::64]:
                        r = await c.post("/v1/systemone", json=bodies[i])
                        assert r.status_code == 200, r.text
                        out[i] = r.json()["answers"]
                await asyncio.gather(*(client(k) for k in range(64)))
            return out

        serial = {}
        for i in range(len(bodies)):  # one at a time: nothing to batch with
            serial.update(asyncio.run(fire_one(app, httpx, bodies[i], i)))
        order = list(range(len(bodies)))
        random.Random(3).shuffle(order)
        before = app.state.server.batcher.forwards
        loaded = asyncio.run(fire(order))
        assert sum(text(loaded[i]) != text(serial[i]) for i in serial) == 0
        assert app.state.server.batcher.forwards - before < len(bodies)  # requests really were batched together
        models = asyncio.run(get(app, httpx, "/v1/models"))["data"]
        assert models and all(m["batch_invariant"] for m in models if m["id"] == "tiny")
    finally:
        app.state.server.stop()


async def fire_one(app, httpx, body: dict, i: int) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=120) as c:
        r = await c.post("/v1/systemone", json=body)
        assert r.status_code == 200, r.text
        return {i: r.json()["answers"]}


async def get(app, httpx, path: str) -> dict:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=60) as c:
        return (await c.get(path)).json()

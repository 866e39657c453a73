"""predict_long (spec §2.6): sliding windows over a state longer than a row, on the tiny checkpoint.

Pinned: the window/stride plan (defaults, clamping warnings, stride errors), window placement (the last
window ends at the state's end), one plain predict when the state fits, the deciding window per question
type, the `window` block, summed usage with `windows`, and that a window's answer equals predicting the
window's decoded text directly.
"""

from __future__ import annotations

import warnings

import pytest

from laya.long import WINDOW_BATCH_CAP, window_plan, window_starts
from laya.sequence import encode

QUESTIONS = {
    "intent": {"type": "choice", "instructions": "What does the customer want?",
               "criteria": {"refund": "money back", "bug": "something broken", "other": None}},
    "anger": {"type": "score", "instructions": "How angry is the writer?", "criteria": ["calm", "annoyed", "furious"]},
    "urgent": {"type": "noul", "instructions": "Does it need a reply today?"},
}
WORDS = ("refund invoice charged twice crash login password order shipping delayed angry please today week "
         "account billing error broken slow support").split()


def long_text(n_words: int) -> str:
    return " ".join(WORDS[(i * 7) % len(WORDS)] + ("." if i % 11 == 10 else "") for i in range(n_words))


def test_window_plan_defaults_and_rules():
    assert window_plan(2000, 400, 512, 192, None, None) == (312, 156)  # max(64, 512 - 192 - 8), half stride
    assert window_plan(2000, 2000, 1024, 256, None, None) == (760, 380)
    assert window_plan(2000, 400, 512, 192, 100, 30) == (100, 30)
    with pytest.raises(ValueError, match=r"stride=120 is larger than window=100"):
        window_plan(2000, 400, 512, 192, 100, 120)
    with pytest.raises(ValueError, match=r"predict_long: window must be a positive integer, got 0"):
        window_plan(2000, 400, 512, 192, 0, None)
    with pytest.warns(RuntimeWarning, match=r"window=500 is wider than the 400 state tokens"):
        assert window_plan(2000, 400, 512, 192, 500, None) == (400, 200)
    with pytest.warns(RuntimeWarning, match=r"default window of 312 tokens was cut to 100"):
        assert window_plan(2000, 100, 512, 192, None, None) == (100, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert window_plan(2000, 200, 512, 192, None, None) == (200, 100)  # cut, but not to half: quiet
    with pytest.warns(RuntimeWarning) as caught:
        assert window_plan(2000, 400, 512, 192, 500, 450) == (400, 200)
    assert [str(w.message).split(";")[0] for w in caught] == [
        "predict_long: window=500 is wider than the 400 state tokens a row has room for with these questions",
        "predict_long: stride=450 is larger than the shrunk window=400"]


def test_window_starts_cover_the_state_and_end_at_its_end():
    assert window_starts(10, 4, 2) == [0, 2, 4, 6]
    assert window_starts(11, 4, 3) == [0, 3, 6, 7]
    assert window_starts(4, 4, 2) == [0]
    for n, w, s in [(1000, 312, 156), (313, 312, 156), (777, 100, 33)]:
        starts = window_starts(n, w, s)
        assert starts[0] == 0 and starts[-1] + w == n and all(b - a <= s for a, b in zip(starts, starts[1:]))


def test_short_state_is_one_plain_predict(agent):
    text = "I was charged twice, please refund."
    result = agent.predict_long(text, QUESTIONS)
    plain = agent.predict(text, QUESTIONS)
    assert result["usage"].pop("windows") == 1
    assert result == plain


def test_long_state_windows_and_deciding_answers(agent):
    text = long_text(900)
    n = len(encode(agent.tok, text))
    result = agent.predict_long(text, QUESTIONS, window=96, stride=48)
    starts = window_starts(n, 96, 48)
    assert result["usage"]["windows"] == len(starts) > 2
    assert list(result["answers"]) == list(QUESTIONS)
    texts = [agent.tok.decode(encode(agent.tok, text)[s:s + 96]) for s in starts]
    per_window = agent.predict_batch(texts, QUESTIONS)
    assert result["usage"]["input_tokens"] == sum(r["usage"]["input_tokens"] for r in per_window)
    for qid, answer in result["answers"].items():
        block = answer.pop("window")
        assert block["count"] == len(starts) and block["token_start"] == starts[block["index"]]
        assert block["token_end"] == min(block["token_start"] + 96, n)
        assert answer == per_window[block["index"]]["answers"][qid]  # the deciding window's answer, unchanged
        key = "noul" if answer["type"] == "noul" else "answer_confidence"
        assert answer[key] == max(r["answers"][qid][key] for r in per_window)


def test_a_state_that_fits_the_room_is_not_windowed(agent):
    """Between the default window (152 on tiny: 256 - 96 - 8) and the room (~200): one plain call."""
    noul = {"urgent": QUESTIONS["urgent"]}
    room = laya_common().state_room(agent.tok, noul["urgent"], 256, 96)
    text = long_text(400)
    ids = encode(agent.tok, text)
    text = agent.tok.decode(ids[:room - 5])
    n = len(encode(agent.tok, text))
    assert 152 < n <= room
    result = agent.predict_long(text, noul)
    assert result["usage"].pop("windows") == 1 and result == agent.predict(text, noul)


def laya_common():
    import importlib
    return importlib.import_module("laya.common")


def test_a_hook_answer_counts_no_windows(agent):
    cached = {"model": "cache", "answers": {}, "usage": {"input_tokens": 0, "output_tokens": 0}}

    class Cache:
        def on_predict_start(self, ctx):
            ctx.skip([cached])

    for text in ("short one", long_text(900)):
        result = agent.predict_long(text, QUESTIONS, hooks=Cache())
        assert result["model"] == "cache" and result["usage"]["windows"] == 0


def test_default_window_width_and_the_pass_cap(agent, monkeypatch):
    text = long_text(2000)
    sizes = []
    real = agent.predict_batch

    def recording(states, questions, **kw):
        sizes.append(kw.get("batch_size"))
        return real(states, questions, **kw)

    monkeypatch.setattr(agent, "predict_batch", recording)
    result = agent.predict_long(text, QUESTIONS, batch_size=1000)
    block = result["answers"]["urgent"]["window"]
    assert block["token_end"] - block["token_start"] == 152 and result["usage"]["windows"] > 1
    assert sizes == [WINDOW_BATCH_CAP]  # a caller's batch_size never widens a pass
    agent.predict_long(text, QUESTIONS, batch_size=4)
    assert sizes[-1] == 4
    with pytest.raises(ValueError, match="predict_long: batch_size must be a positive integer, got 0"):
        agent.predict_long(text, QUESTIONS, batch_size=0)


def test_no_room_for_the_state_is_an_error(agent):
    crowded = {"team": {"type": "choice", "instructions": "Which team?",
                        "criteria": [f"team number {i}" for i in range(100)]}}
    with pytest.raises(ValueError, match=r"question 'team' leaves no room for state tokens"):
        agent.predict_long(long_text(900), crowded)


def test_default_window_and_bad_arguments(agent):
    text = long_text(2000)
    result = agent.predict_long(text, QUESTIONS)
    assert result["usage"]["windows"] > 1
    with pytest.raises(ValueError, match="aggregate must be 'auto'"):
        agent.predict_long(text, QUESTIONS, aggregate="mean")
    with pytest.raises(TypeError, match="got None"):
        agent.predict_long(None, QUESTIONS)
    assert agent.predict("still fine", QUESTIONS)["answers"]  # rejected calls leave the agent working

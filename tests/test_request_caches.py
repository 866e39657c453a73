"""The request path's per-question-set caches (laya/pipeline.py: QuestionSet.heads_for / plans_for) and
predict's inlined predict_batch: every answer must equal the one computed afresh, whatever the caller
changes in place between calls (question dicts, temperatures, binning maps, limits)."""

from __future__ import annotations

import copy

import pytest

import laya
import laya.pipeline as pipeline
from laya.hooks import PredictHook
from laya.questions import check_questions

QUESTIONS = {
    "category": {"type": "choice", "instructions": "Which team should handle this ticket?",
                 "criteria": {"billing": "charges or refunds", "technical": "something is broken",
                              "other": "anything else"}},
    "urgency": {"type": "score", "instructions": "How urgent is it?",
                "criteria": ["can wait", "this week", "today", "now"]},
    "refund": {"type": "noul", "instructions": "The customer asks for money back."},
}
STATES = ["I was charged twice for my plan, please refund the second charge.",
          {"subject": "Login broken", "body": "Since the update I cannot sign in at all."},
          ["hi", "the app crashes when I open settings", "still broken"],
          "word " * 300]


@pytest.fixture(scope="module")
def agent(tiny_checkpoint):
    return laya.load(tiny_checkpoint, device="cpu")


def fresh(agent, state, questions, **kw):
    """The same call with every remembered question set and plan forgotten, through predict_batch."""
    pipeline._checked.clear()
    return agent.predict_batch([state], copy.deepcopy(questions), **kw)[0]


def reference_usage(qs, rows, state_tokens):
    """_result's usage as it was computed before the one-pass loop."""
    dropped = max([r.state_tokens_dropped for r in rows])
    usage = {"input_tokens": sum([len(r.ids) for r in rows]), "output_tokens": 0, "state_tokens": state_tokens,
             "state_tokens_dropped": dropped, "truncated": dropped > 0,
             "truncated_questions": [q.qid for q, r in zip(qs, rows) if r.state_tokens_dropped > 0]}
    collapsed = {q.qid: {"total": q.k, "distinct": r.head.distinct, "tokens_per_option": r.head.tokens_per_option}
                 for q, r in zip(qs, rows) if r.head.tokens_per_option is not None or r.head.distinct < q.k}
    if collapsed:
        usage["options"] = collapsed
    return usage


@pytest.mark.parametrize("kw", [{}, {"max_len": 64, "head_max_len": 24}, {"min_confidence": 0.5},
                                {"lang": "de"}, {"max_len": 40, "head_max_len": 16}])
def test_predict_equals_predict_batch_and_a_fresh_call(agent, kw):
    for state in STATES:
        got = agent.predict(state, QUESTIONS, **kw)
        assert got == agent.predict_batch([state], QUESTIONS, **kw)[0]
        assert repr(got) == repr(fresh(agent, state, QUESTIONS, **kw))  # key order and float bits too


@pytest.mark.parametrize("limits", [(512, 192), (64, 24), (40, 16)])
def test_usage_matches_the_reference_fields(agent, limits):
    max_len, head_max_len = limits
    qs = check_questions(QUESTIONS)
    for state in STATES:
        got = agent.predict(state, QUESTIONS, max_len=max_len, head_max_len=head_max_len)["usage"]
        text = laya.questions.render_state(state)
        state_tokens, rows = agent._rows(text, laya.questions.keeps_tail(state), qs, max_len, head_max_len)
        assert repr(got) == repr(reference_usage(qs, rows, state_tokens))


def test_a_question_dict_changed_in_place_gives_the_new_answers(agent):
    questions = copy.deepcopy(QUESTIONS)
    state = STATES[0]
    before = agent.predict(state, questions)
    questions["category"]["criteria"]["shipping"] = "delivery problems"  # a fifth option, in place
    questions["urgency"]["instructions"] = "How soon must we answer?"
    after = agent.predict(state, questions)
    assert "shipping" in after["answers"]["category"]["probabilities"]
    assert "shipping" not in before["answers"]["category"]["probabilities"]
    assert repr(after) == repr(fresh(agent, state, questions))
    del questions["refund"]
    assert list(agent.predict(state, questions)["answers"]) == ["category", "urgency"]
    questions["category"]["criteria"] = {"yes": "", "no": ""}
    assert repr(agent.predict(state, questions)) == repr(fresh(agent, state, questions))


def test_calibration_changed_in_place_gives_the_new_answers(tiny_checkpoint):
    agent = laya.load(tiny_checkpoint, device="cpu")
    state = STATES[0]
    agent.temperature = [1.0, 1.0, 1.0]
    agent.temperature_by_options = {}
    base = agent.predict(state, QUESTIONS)
    agent.temperature[0] = 3.0  # in place: the cached plans must not be reused
    hot = agent.predict(state, QUESTIONS)
    assert hot["answers"]["category"] != base["answers"]["category"]
    assert repr(hot) == repr(fresh(agent, state, QUESTIONS))
    agent.temperature_by_options["choice:3-5"] = 0.5  # in place, a bucket entry
    by_bucket = agent.predict(state, QUESTIONS)
    assert by_bucket["answers"]["category"] != hot["answers"]["category"]
    assert repr(by_bucket) == repr(fresh(agent, state, QUESTIONS))
    agent.temperature_by_options["choice:3-5"] = 0.5000000001
    assert repr(agent.predict(state, QUESTIONS)) == repr(fresh(agent, state, QUESTIONS))
    agent.temperature[1] = 1  # an int equal to the float before: same arithmetic, plans rebuilt either way
    assert repr(agent.predict(state, QUESTIONS)) == repr(fresh(agent, state, QUESTIONS))
    binning = {"score:3-5": {"bins": 5, "values": [0.05, 0.3, 0.5, 0.7, 0.97]}}
    agent.binning_map = binning
    binned = agent.predict(state, QUESTIONS)
    assert repr(binned) == repr(fresh(agent, state, QUESTIONS))
    binning["score:3-5"]["values"] = [0.9] * 5  # the same map object, changed inside
    assert repr(agent.predict(state, QUESTIONS)) == repr(fresh(agent, state, QUESTIONS))
    binning.clear()  # same object, now empty (falsy): no binning
    cleared = agent.predict(state, QUESTIONS)
    assert repr(cleared) == repr(fresh(agent, state, QUESTIONS))
    assert cleared["answers"]["urgency"] != binned["answers"]["urgency"]
    assert repr(agent.predict(state, QUESTIONS, lang="de")) == repr(fresh(agent, state, QUESTIONS, lang="de"))


def test_head_max_len_between_calls(agent):
    state = STATES[3]
    for head_max_len in (192, 24, 192, 16, 24):
        got = agent.predict(state, QUESTIONS, max_len=128, head_max_len=head_max_len)
        assert repr(got) == repr(fresh(agent, state, QUESTIONS, max_len=128, head_max_len=head_max_len))


def test_predict_goes_through_predict_batch_when_hooked_or_patched(agent, monkeypatch):
    calls = []

    class Seen(PredictHook):
        def on_predict_start(self, ctx):
            calls.append("start")

    want = agent.predict(STATES[0], QUESTIONS)
    assert agent.predict(STATES[0], QUESTIONS, hooks=Seen()) == want and calls == ["start"]
    with agent.hooks_installed(Seen()):
        assert agent.predict(STATES[0], QUESTIONS) == want and calls == ["start", "start"]
    laya.hooks.add_default_hook(Seen())
    try:
        assert agent.predict(STATES[0], QUESTIONS) == want and calls == ["start"] * 3
    finally:
        laya.hooks.clear_default_hooks()
    real = agent.predict_batch
    monkeypatch.setattr(agent, "predict_batch", lambda *a, **kw: calls.append("patched") or real(*a, **kw))
    assert agent.predict(STATES[0], QUESTIONS) == want and calls[-1] == "patched"


@pytest.mark.parametrize("call,error", [
    (lambda a: a.predict("x", [1]), TypeError), (lambda a: a.predict("x", QUESTIONS, lang=3), TypeError),
    (lambda a: a.predict("x", QUESTIONS, min_confidence=2.0), ValueError),
    (lambda a: a.predict(None, QUESTIONS), TypeError), (lambda a: a.predict(3.5, QUESTIONS), TypeError),
    (lambda a: a.predict("x", {"q": {"type": "nope"}}), ValueError),
    (lambda a: a.predict("x", QUESTIONS, max_len=0), ValueError)])
def test_errors_are_predict_batchs(agent, call, error):
    with pytest.raises(error) as fast:
        call(agent)
    hooked = PredictHook()
    with agent.hooks_installed(hooked), pytest.raises(error) as slow:  # through predict_batch
        call(agent)
    assert str(fast.value) == str(slow.value)


@pytest.mark.parametrize("limits", [(512, 192), (64, 24), (40, 16), (30, 24), (12, 8)])
def test_tracked_rows_record_their_source_only_when_whole(agent, limits):
    """sequence.rows_for (the request path's rows, tracked for collate) against row_for (untracked): the
    same Rows or the same error; a tracked row that holds its head, the state slice and [SEP] unclipped
    records (state ids, start, stop) of that slice, every other row records None."""
    from laya.sequence import build_head, encode, row_for, rows_for, tokenizer_view

    max_len, head_max_len = limits
    qs = check_questions(QUESTIONS)
    sep = tokenizer_view(agent.tok).sep_id
    pairs = tuple((q, build_head(agent.tok, q, head_max_len)) for q in qs)
    for state in STATES:
        ids = encode(agent.tok, laya.questions.render_state(state))
        for keep_tail in (False, True):
            try:
                plain = [row_for(q, h, ids, keep_tail, max_len, sep, head_max_len) for q, h in pairs]
            except ValueError as e:
                with pytest.raises(ValueError) as got:
                    rows_for(pairs, ids, keep_tail, max_len, sep, head_max_len)
                assert str(got.value) == str(e)
                continue
            tracked = rows_for(pairs, ids, keep_tail, max_len, sep, head_max_len)
            assert tracked == plain and all(r.source is None for r in plain)
            for row, (q, head) in zip(tracked, pairs):
                if row.source is None:
                    assert len(row.ids) == max_len  # clipped: collate must copy the ids
                    continue
                source, start, stop = row.source
                assert source is ids
                assert row.ids == [*head.ids, *ids[start:stop], sep]


def test_remembered_heads_hold_the_tokenizer_view_weakly(agent):
    import gc
    import weakref

    from laya.sequence import tokenizer_view

    agent.predict(STATES[0], QUESTIONS)
    last = pipeline.question_set(QUESTIONS).last_heads
    assert isinstance(last[0], weakref.ref) and last[0]() is tokenizer_view(agent.tok)

    class View:  # a stand-in view that dies: its entry must not match anything afterwards
        pass

    qset = pipeline.QuestionSet(None, check_questions(QUESTIONS))
    gone = View()
    heads = qset.heads_for(gone, agent.tok, 96)
    ref = qset.last_heads[0]
    del gone
    gc.collect()
    assert ref() is None
    assert qset.heads_for(tokenizer_view(agent.tok), agent.tok, 96) == heads  # rebuilt, same content
    assert qset.last_heads[0]() is tokenizer_view(agent.tok)

"""The request path's cross-call caches: question sets (validation, decoding shapes) and their heads per
tokenizer. A changed question must never be answered from a stale entry, and answers must be the same
with and without the caches."""

import copy

import pytest
import torch

import laya
import laya.pipeline as pipeline
import laya.sequence as seq
from laya.answers import Calibration, DecodePlan
from laya.pipeline import question_set
from laya.questions import check_questions
from laya.sequence import build_head, tokenizer_view
from laya.wordpiece import compact_vocab

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?",
             "criteria": {"billing": "money", "tech": "bugs", "other": ""}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high"]},
    "refund": {"type": "noul", "instructions": "Asks for a refund.",
               "criteria": {"true": "asks for money back", "false": "does not"}},
}
STATE = "I was charged twice for my plan this month, please refund the duplicate payment today."


class Uncached(dict):
    """Not plain data (a dict subclass): validated afresh every call, heads built one by one."""


def changed_copies():
    """QUESTIONS with one thing changed each: every field that shapes a head or a decode."""
    edits = {
        "instructions": lambda q: q["team"].__setitem__("instructions", "Which queue?"),
        "option text": lambda q: q["team"]["criteria"].__setitem__("tech", "crashes"),
        "option label": lambda q: q["team"].__setitem__("criteria", {"billing": "money", "it": "bugs", "other": ""}),
        "option order": lambda q: q["team"].__setitem__("option_order", [2, 0, 1]),
        "score level": lambda q: q["urgency"]["criteria"].__setitem__(2, "on fire"),
        "noul labels": lambda q: q["refund"].__setitem__("labels", {"true": "yes", "false": "no"}),
        "type": lambda q: q["refund"].__setitem__("type", "choice"),
        "question order": lambda q: q.update({"team": q.pop("team")}),
        "one more question": lambda q: q.update({"extra": {"type": "noul", "instructions": "Angry?"}}),
        "label type": lambda q: q["urgency"].__setitem__("criteria", [1, 2, 3]),
    }
    for name, edit in edits.items():
        q = copy.deepcopy(QUESTIONS)
        edit(q)
        yield name, q


def test_equal_question_dicts_share_one_set_and_one_heads_tuple(tok):
    a, b = question_set(QUESTIONS), question_set(copy.deepcopy(QUESTIONS))
    assert a is b and a.key is not None
    heads = a.heads(tok, 96)
    assert heads is b.heads(tok, 96)
    assert heads == tuple(build_head(tok, q, 96) for q in check_questions(QUESTIONS))
    other = a.heads(tok, 40)  # head_max_len is part of the key
    assert other is not heads and other == tuple(build_head(tok, q, 40) for q in a.qs)


@pytest.mark.parametrize("name,changed", list(changed_copies()))
def test_a_changed_question_never_hits_a_stale_entry(agent, tok, name, changed):
    original = question_set(QUESTIONS)
    original.heads(tok, 96)
    qset = question_set(changed)
    assert qset is not original and qset.key != original.key
    fresh = check_questions(changed)
    assert list(qset.qs) == fresh
    assert qset.heads(tok, 96) == tuple(build_head(tok, q, 96) for q in fresh)
    assert agent.predict(STATE, changed) == agent.predict(STATE, Uncached(changed))


def test_a_question_dict_mutated_in_place_is_a_new_entry(agent, tok):
    q = copy.deepcopy(QUESTIONS)
    before = agent.predict(STATE, q)
    q["team"]["criteria"]["tech"] = "something is broken"
    after = agent.predict(STATE, q)
    assert after == agent.predict(STATE, Uncached(q))
    assert after["answers"]["team"]["probabilities"] != before["answers"]["team"]["probabilities"]


def test_answers_are_the_same_with_and_without_the_caches(agent, tok, monkeypatch):
    pipeline._checked.clear()
    tokenizer_view(tok).head_sets.clear()
    cold = agent.predict_batch([STATE, "Login fails with error E401.", {"turns": ["hi", "refund?"]}], QUESTIONS)
    warm = agent.predict_batch([STATE, "Login fails with error E401.", {"turns": ["hi", "refund?"]}], QUESTIONS)
    bare = agent.predict_batch([STATE, "Login fails with error E401.", {"turns": ["hi", "refund?"]}],
                               Uncached(QUESTIONS))
    assert cold == warm == bare
    assert question_set(Uncached(QUESTIONS)).key is None  # the uncached path really is uncached
    monkeypatch.setattr(seq, "HEAD_CACHE_SIZE", 2)
    for i in range(5):
        agent.predict(STATE, {"q": {"type": "noul", "instructions": f"Statement {i}."}})
    assert len(tokenizer_view(tok).head_sets) <= 2  # bounded


def test_heads_are_cached_per_tokenizer(agent, bpe_checkpoint):
    bpe = laya.load(bpe_checkpoint, device="cpu")
    qset = question_set(QUESTIONS)
    wordpiece_heads, bpe_heads = qset.heads(agent.tok, 96), qset.heads(bpe.tok, 96)
    assert wordpiece_heads != bpe_heads
    assert bpe_heads == tuple(build_head(bpe.tok, q, 96) for q in qset.qs)
    # alternating tokenizers: the last-view shortcut always answers with the asked tokenizer's view
    for tok in (agent.tok, bpe.tok, agent.tok, bpe.tok):
        assert tokenizer_view(tok).tok() is tok
    assert qset.heads(agent.tok, 96) is wordpiece_heads


@pytest.mark.parametrize("lang", [None, "de"])
def test_decode_plans_from_cached_shapes_match_fresh_plans(lang):
    cal = Calibration([1.5, 0.7, 2.0], {"choice:3-5": 3.0}, {"de": {"temperature": [0.9, 0.8, 1.1], "temperature_by_options": {}}},
                      {"noul:2": {"bins": 2, "values": [0.1, 0.9]}})
    for q, cached in zip(check_questions(QUESTIONS), question_set(QUESTIONS).plans(cal, lang)):
        fresh = DecodePlan(q, cal, lang)
        assert [getattr(cached, s) for s in DecodePlan.__slots__] == [getattr(fresh, s) for s in DecodePlan.__slots__]


def test_compact_vocab_keeps_the_mapping_in_id_order():
    vocab = {"b": 2, "[PAD]": 0, "##x": 5, "a": 1}
    compact = compact_vocab(vocab)
    assert compact == vocab and list(compact.values()) == [0, 1, 2, 5]
    assert compact_vocab({}) == {}


def test_collate_lays_rows_out_like_the_plain_reference(agent, tok):
    from laya.sequence import collate, encode, row_for

    view = tokenizer_view(tok)
    qs = question_set(QUESTIONS)
    heads = qs.heads(tok, 96)
    long_state = encode(tok, "word " * 300)
    rows = []
    for text, keep_tail, track in ((STATE, False, True), ("short", False, True), ("", False, False)):
        ids = encode(tok, text)
        rows += [row_for(q, h, ids, keep_tail, 256, view.sep_id, 96, track=track) for q, h in zip(qs.qs, heads)]
    rows += [row_for(q, h, long_state, True, 128, view.sep_id, 96, track=True) for q, h in zip(qs.qs, heads)]
    assert any(r.source is None for r in rows) and any(r.source is not None for r in rows)
    batch = collate(rows, 7)  # a pad id that is not 0: padding must not come from zero-filled memory
    width, k = max(len(r.ids) for r in rows), max(len(r.markers) for r in rows)
    assert batch.input_ids.tolist() == [r.ids + [7] * (width - len(r.ids)) for r in rows]
    assert batch.attention_mask.tolist() == [[1] * len(r.ids) + [0] * (width - len(r.ids)) for r in rows]
    assert batch.marker_pos.tolist() == [r.markers + [0] * (k - len(r.markers)) for r in rows]
    assert batch.marker_mask.tolist() == [[True] * len(r.markers) + [False] * (k - len(r.markers)) for r in rows]
    assert batch.qtype.tolist() == [r.qtype for r in rows]
    dtypes = [t.dtype for t in batch.tensors()]
    assert dtypes == [torch.int64, torch.int64, torch.int64, torch.bool, torch.int64]
    assert all(t.is_contiguous() for t in batch.tensors())

"""Token rows pinned to exact ids (real WordPiece tokenizer: CLS 101, SEP 102, MASK 103, PAD 0)."""

import pytest
import torch

from laya.questions import check_question, check_questions
from laya.sequence import build_head, build_row, collate, encode, state_room, tokenizer_view

CLS, SEP, MASK, PAD = 101, 102, 103, 0


def head_of(tok, qid, definition, head_max_len=192):
    return build_head(tok, check_question(qid, definition), head_max_len)


def test_special_token_ids(tok):
    assert (tok.cls_token_id, tok.sep_token_id, tok.mask_token_id, tok.pad_token_id) == (CLS, SEP, MASK, PAD)


def test_choice_head_ids_and_markers(tok):
    head = head_of(tok, "team", {"type": "choice", "instructions": "Which team?",
                                 "criteria": {"billing": "money problems", "tech": None}})
    # [CLS] choice question : which team ? [SEP] [MASK] billing : money problems [MASK] tech [SEP]
    assert head.ids == (101, 3601, 3160, 1024, 2029, 2136, 1029, 102, 103, 25640, 1024, 2769, 3471, 103, 6627, 102)
    assert head.markers == (8, 13)
    assert head.tokens_per_option is None and head.distinct == 2


def test_noul_with_labels_head(tok):
    head = head_of(tok, "u", {"type": "noul", "instructions": "Is it urgent?",
                              "labels": {"false": "calm", "true": "urgent"}})
    # slots in semantic order [false, true] with the default criteria texts
    assert head.ids == (101, 2053, 5313, 3160, 1024, 2003, 2009, 13661, 1029, 102,
                        103, 5475, 1024, 2053, 1010, 1996, 4861, 2515, 2025, 2907,
                        103, 13661, 1024, 2748, 1010, 1996, 4861, 4324, 102)
    assert head.markers == (10, 20)


def test_score_head_renders_levels_and_json(tok):
    head = head_of(tok, "s", {"type": "score", "instructions": "How angry?", "criteria": ["calm", {"a": 1}]})
    # level 1 is JSON text: {"a": 1}
    assert head.ids == (101, 3556, 3160, 1024, 2129, 4854, 1029, 102, 103, 2504, 1014, 1024, 5475,
                        103, 2504, 1015, 1024, 1063, 1000, 1037, 1000, 1024, 1015, 1065, 102)
    assert head.markers == (8, 13)


def test_option_text_capped_at_48_tokens(tok):
    long = " ".join(["refund"] * 100)
    head = head_of(tok, "q", {"type": "choice", "instructions": "Pick", "criteria": {"a": long, "b": None}})
    first, second = head.markers
    assert second - first == 1 + 48  # [MASK] + 48 option tokens


def test_squeeze_many_options(tok):
    criteria = {f"same shared prefix {i}": "a fairly long description of this particular option" for i in range(30)}
    q = check_question("many", {"type": "choice", "instructions": "which one of these many options applies here?",
                                "criteria": criteria})
    head = build_head(tok, q, 64)
    per = max(4, (64 - 16) // 30)
    assert head.tokens_per_option == per == 4
    ins = encode(tok, "choice question: which one of these many options applies here?")[:8]  # max(8, budget<0)
    assert head.ids[:10] == (CLS, *ins, SEP)
    assert head.markers == tuple(10 + per * i for i in range(30))
    assert len(head.ids) == 10 + 30 * per + 1
    for m in head.markers:
        assert head.ids[m] == MASK
        assert head.ids[m + 1:m + per] == tuple(encode(tok, " " + q.option_texts[head.markers.index(m)])[:per - 1])
    assert head.distinct == 1  # every span is cut to [MASK] same shared prefix


def test_long_state_keeps_head_and_list_keeps_tail(tok):
    q = check_question("q", {"type": "noul", "instructions": "Urgent?"})
    ids = list(range(2000, 2300))
    room = state_room(tok, q, 64, 192)
    head = build_head(tok, q, 192)
    assert room == 64 - len(head.ids) - 1
    row = build_row(tok, q, ids, keep_tail=False, max_len=64, head_max_len=192)
    assert row.ids == [*head.ids, *ids[:room], SEP] and len(row.ids) == 64
    assert (row.state_tokens_used, row.state_tokens_dropped) == (room, 300 - room)
    tail = build_row(tok, q, ids, keep_tail=True, max_len=64, head_max_len=192)
    assert tail.ids == [*head.ids, *ids[-room:], SEP]


def test_markers_lost_to_max_len_is_an_error(tok):
    q = check_question("q", {"type": "choice", "instructions": "Pick", "criteria": [f"x{i}" for i in range(20)]})
    with pytest.raises(ValueError, match=r"^question 'q': only \d+ of its 20 option markers fit in max_len=16 "
                                         r"with head_max_len=192; lower head_max_len"):
        build_row(tok, q, [], False, 16, 192)


def test_mask_token_in_text_becomes_space(tok):
    a = head_of(tok, "q", {"type": "noul", "instructions": "Is [MASK] here?"})
    b = head_of(tok, "q", {"type": "noul", "instructions": "Is   here?"})
    assert a.ids == b.ids and a.ids.count(MASK) == 2


def test_encode_matches_tokenizer_call(tok):
    text = "Ünïcode, emails@example.com and a very long line " * 40  # longer than the 128-token truncation
    assert encode(tok, text) == tok(text, add_special_tokens=False)["input_ids"]


def test_head_cache_reuses_heads_and_is_bounded(tok, monkeypatch):
    import laya.sequence as seq
    q = check_questions({"q": {"type": "noul", "instructions": "Urgent?"}})[0]
    assert build_head(tok, q, 192) is build_head(tok, q, 192)
    assert build_head(tok, q, 100) is not build_head(tok, q, 192)  # the budget is part of the key
    monkeypatch.setattr(seq, "HEAD_CACHE_SIZE", 3)
    for i in range(5):
        build_head(tok, check_questions({"q": {"type": "noul", "instructions": f"Urgent {i}?"}})[0], 192)
    assert len(tokenizer_view(tok).heads) <= 3


def test_collate_right_pads(tok):
    qs = check_questions({"a": {"type": "noul", "instructions": "Urgent?"},
                          "b": {"type": "choice", "instructions": "Pick", "criteria": ["x", "y", "z"]}})
    rows = [build_row(tok, q, [2000, 2001], False, 512, 192) for q in qs]
    batch = collate(rows, PAD)
    width = max(len(r.ids) for r in rows)
    assert batch.input_ids.shape == (2, width) and batch.input_ids.dtype == torch.long
    short = min(rows, key=lambda r: len(r.ids))
    i = rows.index(short)
    assert batch.input_ids[i, len(short.ids):].eq(PAD).all()
    assert batch.attention_mask[i].tolist() == [1] * len(short.ids) + [0] * (width - len(short.ids))
    assert batch.marker_pos.tolist()[0] == [*rows[0].markers, 0]
    assert batch.marker_mask.tolist() == [[True, True, False], [True, True, True]]
    assert batch.qtype.tolist() == [2, 0]


def test_encode_many_matches_encode(tok):
    from laya.sequence import encode_many
    texts = ["Ünïcode, emails@example.com " * 30, "", "short", "[MASK] kept as text here"]
    assert encode_many(tok, texts) == [encode(tok, t) for t in texts]


def test_collate_of_tracked_rows_equals_plain_rows(tok):
    """Rows the request path builds record their state's ids, so collate converts each state once; the
    tensors are exactly those of plain build_row rows, truncated and clipped rows included."""
    from laya.sequence import row_for
    qs = check_questions({"a": {"type": "noul", "instructions": "Urgent?"},
                          "b": {"type": "choice", "instructions": "Pick", "criteria": ["x", "y", "z"]}})
    heads = [build_head(tok, q, 192) for q in qs]
    clip = max(len(h.ids) for h in heads) - 1  # the longer head itself is cut: no state, no closing [SEP]
    assert all(h.markers[-1] < clip for h in heads)
    states = [list(range(2000, 2000 + n)) for n in (0, 3, 40, 300)]
    for max_len, keep_tail in ((512, False), (48, False), (48, True), (clip, False)):
        plain = [build_row(tok, q, s, keep_tail, max_len, 192) for s in states for q in qs]
        tracked = [row_for(q, h, s, keep_tail, max_len, SEP, 192, track=True) for s in states for q, h in zip(qs, heads)]
        assert plain == tracked
        assert any(r.source is not None for r in tracked) and all(r.source is None for r in plain)
        for x, y in zip(collate(plain, PAD).tensors(), collate(tracked, PAD).tensors()):
            assert x.dtype == y.dtype and x.is_contiguous() and y.is_contiguous() and torch.equal(x, y)

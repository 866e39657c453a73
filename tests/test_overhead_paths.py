"""The request path's spellings give exactly what the plain formulas give: decoding against the textbook decode (softmax, confidence helpers, round()), the bytes-built collate
against a numpy-filled reference, and a whole `predict` against a reference assembled from those parts.

"Exactly" means bit for bit: floats are compared through their IEEE bytes (0.0 is not -0.0, NaN equals NaN)
and dicts by their key order too.
"""

import math
import random
import struct

import numpy as np
import pytest
import torch

import laya
from laya.agent import act_probabilities
from laya.answers import (Calibration, answer_confidence, apply_binning_map, apply_min_confidence,
                          check_min_confidence, confidence_from_probs, decode_answer, resolve_lang_temperatures,
                          softmax, temp_bucket)
from laya.questions import check_question, check_questions, keeps_tail, render_state
from laya.sequence import Row, build_head, collate, row_for, tokenizer_view


def bits(value):
    """`value` with every float replaced by its IEEE bytes and every dict by its items in order."""
    if isinstance(value, float):
        return ("float", struct.pack("<d", value))
    if isinstance(value, dict):
        return ("dict", [(bits(k), bits(v)) for k, v in value.items()])
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [bits(v) for v in value])
    return (type(value).__name__, value)


# ---- decoding ---------------------------------------------------------------------------------

def reference_decode(q, logits_row, act_prob, cal, lang):
    """The textbook decode: softmax(z / T), slots back to options, the confidence helpers, round()."""
    k = q.k
    bucket = temp_bucket(q.qtype_id, k)
    t, lang_used = cal.temperature_for(q.qtype_id, k, lang)
    p = softmax([float(v) / t for v in logits_row[:k]])
    if q.option_order is not None:
        p = [p[q.option_order.index(option)] for option in range(k)]
    conf = confidence_from_probs(p, k)
    ans_conf = answer_confidence(p, k)
    if cal.binning_map and not lang_used:
        ans_conf = apply_binning_map(ans_conf, bucket, cal.binning_map)
    action = {"act_probability": round(float(act_prob), 4)}
    probs = [round(v, 4) for v in p]
    if q.qtype == "choice":
        return {"type": "choice", "choice": q.labels[int(np.argmax(p))], "probabilities": dict(zip(q.labels, probs)),
                "confidence": round(conf, 4), "answer_confidence": round(ans_conf, 4), "action": action}
    if q.qtype == "score":
        expected = sum([i * v for i, v in enumerate(p)])
        return {"type": "score", "score": round(expected, 4), "legend": dict(zip([str(i) for i in range(k)], q.legend)),
                "probabilities": dict(zip([str(i) for i in range(k)], probs)),
                "confidence": round(conf, 4), "answer_confidence": round(ans_conf, 4), "action": action}
    return {"type": "noul", "noul": round(p[1], 4), "confidence": round(max(p[1], 1.0 - p[1]), 4),
            "answer_confidence": round(ans_conf, 4), "action": action}


def random_question(rng: random.Random):
    kind = rng.choice(["choice", "choice", "score", "noul"])
    if kind == "noul":
        return check_question("n", {"type": "noul", "instructions": "Holds?"})
    k = rng.choice([1, 2, 3, 5, 8, 12]) if kind == "choice" else rng.choice([2, 3, 5, 7])
    if kind == "score":
        return check_question("s", {"type": "score", "instructions": "How much?",
                                    "criteria": [f"level text {i}" for i in range(k)]})
    definition = {"type": "choice", "instructions": "Which?", "criteria": {f"opt{i}": f"desc {i}" for i in range(k)}}
    if k > 1 and rng.random() < 0.4:
        order = list(range(k))
        rng.shuffle(order)
        definition["option_order"] = order
    return check_question("c", definition)


CALIBRATIONS = [
    Calibration([1.0, 1.0, 1.0], {}, {}),
    Calibration([1.7, 0.6, 2.3], {"choice:3-5": 0.8, "score:6-10": 4.5, "noul:2": 1.3, "choice:11+": 3.1}, {}),
    Calibration([1.2, 1.4, 0.9], {"choice:2": 2.0},
                resolve_lang_temperatures({"de": {"temperature": [2.5, 0.7, 1.9],
                                                  "temperature_by_options": {"score:3-5": 3.3}}}, [1.2, 1.4, 0.9]),
                binning_map={"choice:3-5": {"bins": 4, "values": [0.1, 0.35, 0.6, 0.95]},
                             "noul:2": {"bins": 2, "values": [0.2, 0.8]}}),
]


def test_decode_matches_the_textbook_formula_bit_for_bit():
    rng = random.Random(5)
    thresholds = [None, 0.4, {"default": 0.55, "choice:3-5": 0.2, "noul:2": 0.9}]
    for _ in range(6000):
        q = random_question(rng)
        scale = rng.choice([0.01, 0.5, 3.0, 30.0])
        logits = [rng.gauss(0, scale) for _ in range(q.k)] + [rng.gauss(0, 1)] * rng.randint(0, 3)  # padded slots
        if rng.random() < 0.1:
            logits[rng.randrange(q.k)] = logits[0]  # tied maxima: the first one is the choice
        if rng.random() < 0.1:
            logits = [float(np.float32(v)) for v in logits]  # what a float32 forward hands over
        act = rng.choice([rng.random(), 0.5, 0.99995, 0.00005, 1.0, 0.0])
        cal = rng.choice(CALIBRATIONS)
        lang = rng.choice([None, "de", "de-AT", "fr"])
        got, want = decode_answer(q, logits, act, cal, lang), reference_decode(q, logits, act, cal, lang)
        threshold = check_min_confidence(rng.choice(thresholds))
        if threshold is not None:
            apply_min_confidence(got, threshold)
            apply_min_confidence(want, threshold)
        assert bits(got) == bits(want), (q, logits, act, cal, lang)


def test_first_index_of_the_max_is_the_key_argmax():
    """decode_planned picks a choice as p.index(max(p)); the key-argmax it replaced,
    max(range(k), key=p.__getitem__), picks the same index for any list of floats: ties, NaNs (first
    or later), signed zeros, infinities and a shared 0.0 object (an option_order fill) included."""
    rng = random.Random(3)
    pool = [0.0, -0.0, 1.0, 0.25, 0.5, math.nan, math.inf, -math.inf, 1e-300]
    for _ in range(20000):
        k = rng.randint(1, 8)
        p = [rng.choice(pool) if rng.random() < 0.5 else rng.random() for _ in range(k)]
        if rng.random() < 0.2:
            shared = 0.0
            p = [shared if rng.random() < 0.5 else v for v in p]
        assert p.index(max(p)) == max(range(k), key=p.__getitem__), p


def test_decode_takes_float_rows_as_the_request_path_hands_them():
    """The request path gives decode_planned rows of plain floats (ndarray.tolist) and no float() per value;
    decode_answer converts any row (numpy, ints) first: both give the textbook answer, bit for bit."""
    q = check_question("c", {"type": "choice", "instructions": "Which?", "criteria": ["a", "b", "c"]})
    cal = CALIBRATIONS[1]
    for row in ([1, 3, 2], np.array([0.5, -1.25, 2.0], dtype=np.float32), np.array([2.0, 2.0, -1.0]),
                [math.nan, 1.0, 0.0]):
        want = reference_decode(q, [float(v) for v in row], 0.5, cal, None)
        assert bits(decode_answer(q, row, 0.5, cal)) == bits(want)
        assert all(type(v) is float for v in decode_answer(q, row, np.float32(0.5), cal)["probabilities"].values())


def test_decode_of_extreme_logits_matches_the_textbook_formula():
    q3 = check_question("c", {"type": "choice", "instructions": "Which?", "criteria": ["a", "b", "c"]})
    qn = check_question("n", {"type": "noul", "instructions": "Holds?"})
    cal = CALIBRATIONS[0]
    for logits in ([0.0, 0.0, 0.0], [1e4, -1e4, 0.0], [-1e4, -1e4, 3.0], [700.0, 699.0, -700.0], [1e-300, 0.0, -0.0]):
        assert bits(decode_answer(q3, logits, 0.25, cal)) == bits(reference_decode(q3, logits, 0.25, cal, None))
        assert bits(decode_answer(qn, logits[:2], 0.75, cal)) == bits(reference_decode(qn, logits[:2], 0.75, cal, None))


# ---- collation --------------------------------------------------------------------------------

def numpy_collate(rows, pad_id):
    """Collation as numpy buffers filled row by row (the layout `collate` must reproduce)."""
    n, width, k = len(rows), max(len(r.ids) for r in rows), max(len(r.markers) for r in rows)
    ids, mask = np.full((n, width), pad_id, dtype=np.int64), np.zeros((n, width), dtype=np.int64)
    pos, live = np.zeros((n, k), dtype=np.int64), np.zeros((n, k), dtype=np.bool_)
    for i, r in enumerate(rows):
        ids[i, :len(r.ids)], mask[i, :len(r.ids)] = r.ids, 1
        pos[i, :len(r.markers)], live[i, :len(r.markers)] = r.markers, True
    qtype = np.array([r.qtype for r in rows], dtype=np.int64)
    return tuple(torch.from_numpy(a) for a in (ids, mask, pos, live, qtype))


def test_collate_matches_numpy_buffers(tok):
    rng = random.Random(2)
    qs = check_questions({"a": {"type": "noul", "instructions": "Urgent?"},
                          "b": {"type": "choice", "instructions": "Pick one of these", "criteria": ["x", "y", "z", "w"]},
                          "c": {"type": "score", "instructions": "How much?", "criteria": ["low", "high", "very high"]}})
    sep = tokenizer_view(tok).sep_id
    for _ in range(60):
        states = [[rng.randrange(1000, 30000) for _ in range(rng.choice([0, 1, 5, 80, 400]))]
                  for _ in range(rng.randint(1, 4))]
        max_len = rng.choice([40, 64, 128, 512])
        rows = []
        for state in states:
            keep_tail = rng.random() < 0.5
            for q in qs:
                try:
                    rows.append(row_for(q, build_head(tok, q, 96), state, keep_tail, max_len, sep, 96,
                                        track=rng.random() < 0.8))
                except ValueError:  # markers cut off by a small max_len: such rows never reach collate
                    pass
        if not rows:
            continue
        pad = rng.choice([0, 7, 30521])
        batch = collate(rows, pad)
        for got, want in zip(batch.tensors(), numpy_collate(rows, pad)):
            assert got.dtype == want.dtype and got.shape == want.shape and torch.equal(got, want)
            assert got.is_contiguous() and got.storage_offset() == 0


def test_collate_tensors_are_writable_and_private(tok):
    q = check_question("a", {"type": "noul", "instructions": "Urgent?"})
    head = build_head(tok, q, 96)
    rows = [row_for(q, head, [2000, 2001, 2002], False, 64, tokenizer_view(tok).sep_id, 96, track=True)]
    first, second = collate(rows, 0), collate(rows, 0)
    first.input_ids.zero_()  # e.g. a backend writing into its inputs: nothing else may change
    first.marker_mask.fill_(False)
    assert torch.equal(second.input_ids, numpy_collate(rows, 0)[0]) and bool(second.marker_mask.all())
    assert list(head.ids) == collate(rows, 0).input_ids[0, :len(head.ids)].tolist()


def test_collate_of_rows_without_markers_or_tokens():
    rows = [Row([], [], 2, 0, 0, None), Row([5, 6], [], 0, 0, 0, None)]
    batch = collate(rows, 9)
    assert batch.input_ids.tolist() == [[9, 9], [5, 6]] and batch.marker_pos.shape == (2, 0)
    assert batch.marker_mask.dtype == torch.bool and batch.qtype.tolist() == [2, 0]
    empty = collate([Row([], [], 1, 0, 0, None)], 0)
    assert empty.input_ids.shape == (1, 0) and empty.attention_mask.dtype == torch.int64


# ---- the whole request ------------------------------------------------------------------------

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team should take this?",
             "criteria": {"billing": "money", "tech": "bugs", "account": "logins", "other": ""}},
    "only": {"type": "choice", "instructions": "The one option", "criteria": ["single"]},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "mid", "high", "now"]},
    "refund": {"type": "noul", "instructions": "Asks for a refund.",
               "criteria": {"true": "asks for money back", "false": "does not"}},
    "shuffled": {"type": "choice", "instructions": "Which product?", "criteria": ["app", "api", "web"],
                 "option_order": [2, 0, 1]},
}
STATES = ["I was charged twice this month, please refund the duplicate payment today.",
          {"subject": "Login broken", "body": "Since the update I cannot sign in at all."},
          ["hi", "the app crashes when I open settings", "still broken"]]


@pytest.mark.parametrize("lang,min_confidence", [(None, None), ("de", 0.5), (None, {"default": 0.3, "noul:2": 0.99})])
def test_predict_equals_the_reference_request_bit_for_bit(tiny_checkpoint, lang, min_confidence):
    """predict_batch against the request rebuilt from reference parts: numpy collation, the model's own
    forward, the textbook act softmax and the textbook decode, under checkpoint, per-bucket and per-language
    temperatures, binning and both forms of min_confidence."""
    agent = laya.load(tiny_checkpoint, device="cpu",
                      lang_temperatures={"de": {"temperature": [2.0, 0.7, 1.5], "temperature_by_options": {}}})
    agent.temperature, agent.temperature_by_options = [1.3, 0.8, 1.1], {"choice:3-5": 2.2, "choice:2": 0.6}
    agent.binning_map = {"score:3-5": {"bins": 5, "values": [0.05, 0.3, 0.5, 0.7, 0.97]}}
    results = agent.predict_batch(STATES, QUESTIONS, lang=lang, min_confidence=min_confidence)

    qs = check_questions(QUESTIONS)
    cal = Calibration(agent.temperature, agent.temperature_by_options, agent.lang_temperatures, agent.binning_map)
    rows = [r for s in STATES for r in agent._rows(render_state(s), keeps_tail(s), qs, 256, 96)[1]]
    with torch.no_grad():
        logits, act_logits = agent.model(*numpy_collate(rows, tokenizer_view(agent.tok).pad_id))
    act = [softmax(row) for row in act_logits.tolist()]  # float64, max-shifted, math.exp
    assert act == act_probabilities(act_logits)
    threshold = check_min_confidence(min_confidence)
    for s, result in enumerate(results):
        for j, q in enumerate(qs):
            row = s * len(qs) + j
            want = reference_decode(q, logits[row].tolist(), act[row][0], cal, lang)
            if threshold is not None:
                apply_min_confidence(want, threshold)
            assert bits(result["answers"][q.qid]) == bits(want), q.qid

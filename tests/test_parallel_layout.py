"""The parallel option layout (spec 3.9): positions, option ids, masks, and the config check."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch

from laya.parallel_layout import check_layout, parallel_masks, row_positions


def test_row_positions_by_hand():
    # [CLS] i i [SEP] | [MASK] a a | [MASK] b | [MASK] c c c | [SEP] | s s | [SEP]
    #   0   1 2   3      4    5 6    7     8    9    10 11 12   13     14 15  16
    positions, options = row_positions(17, head_len=14, markers=[4, 7, 9])
    assert positions.tolist() == [0, 1, 2, 3, 4, 5, 6, 4, 5, 4, 5, 6, 7, 8, 9, 10, 11]
    assert options.tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3, 0, 0, 0, 0]
    # A row clipped inside the state keeps the same numbering for what is left.
    clipped_pos, clipped_opt = row_positions(15, head_len=14, markers=[4, 7, 9])
    assert clipped_pos.tolist() == positions[:15].tolist() and clipped_opt.tolist() == options[:15].tolist()


def test_row_positions_single_option_equals_sequential():
    positions, options = row_positions(10, head_len=7, markers=[3])
    assert positions.tolist() == list(range(10))
    assert options.tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 0]


def test_masks_hide_other_options_and_pads_and_apply_the_window_on_positions():
    positions, options = row_positions(17, head_len=14, markers=[4, 7, 9])
    attn = torch.ones(1, 19, dtype=torch.long)
    attn[0, 17:] = 0  # two pad tokens
    pos = torch.tensor([positions.tolist() + [0, 0]])
    opt = torch.tensor([options.tolist() + [0, 0]])
    masks = parallel_masks(attn, pos, opt, sliding_window=2)
    full, sliding = masks["full_attention"][0, 0], masks["sliding_attention"][0, 0]
    assert full.shape == (19, 19) and full.dtype == torch.bool
    assert not full[:, 17:].any()  # pad keys never
    assert full[17:, :17].all()  # pad queries see every real token (no all-masked row)
    assert not full[5, 7] and not full[7, 5] and not full[8, 10]  # option a <-> option b, b <-> c
    assert full[5, 6] and full[5, 0] and full[0, 5] and full[15, 8]  # own option, shared tokens both ways
    # sliding counts positions, not indices: the closing [SEP] (index 13, position 8) sees option a's last
    # token (index 6, position 6) seven indices away, and not [CLS]..instruction tokens 5+ positions back.
    assert sliding[13, 6] and sliding[13, 12] and not sliding[13, 3]
    assert sliding[12, 11] and not sliding[12, 7]  # option c never sees option b, window or not
    assert (sliding <= full).all()
    gap = (pos[0][:, None] - pos[0][None, :]).abs()
    assert torch.equal(sliding, full & (gap <= 2))
    # against an element-by-element reference on random ids
    g = torch.Generator().manual_seed(0)
    r_attn = (torch.rand(3, 23, generator=g) > 0.2).long()
    r_pos, r_opt = torch.randint(0, 30, (3, 23), generator=g), torch.randint(0, 4, (3, 23), generator=g)
    got = parallel_masks(r_attn, r_pos, r_opt, sliding_window=5)
    for n in range(3):
        for i in range(23):
            for j in range(23):
                ok = bool(r_attn[n, j]) and (r_opt[n, i] == 0 or r_opt[n, j] == 0 or r_opt[n, i] == r_opt[n, j])
                assert bool(got["full_attention"][n, 0, i, j]) == ok
                assert bool(got["sliding_attention"][n, 0, i, j]) == (ok and abs(int(r_pos[n, i] - r_pos[n, j])) <= 5)


def test_check_layout():
    assert check_layout(None, "cfg") == "sequential"
    assert check_layout("parallel", "cfg") == "parallel"
    with pytest.raises(ValueError, match="'diagonal' in cfg"):
        check_layout("diagonal", "cfg")


def parallel_logits(agent, definition: dict, state: str, parallel: bool = True) -> torch.Tensor:
    """Logits [k] of one hand-built row, through the model with or without the parallel inputs."""
    from laya.questions import check_question
    from laya.sequence import build_row, collate, encode

    q = check_question("q", definition)
    row = build_row(agent.tok, q, encode(agent.tok, state), False, 256, 96)
    batch = collate([row], agent.tok.pad_token_id)
    extra = {}
    if parallel:
        positions, options = row_positions(len(row.ids), len(row.head.ids), row.markers)
        extra = {"position_ids": torch.from_numpy(positions)[None], "option_ids": torch.from_numpy(options)[None]}
    with torch.no_grad():
        logits, _ = agent.model(*batch.tensors(), **extra)
    return logits[0, :q.k]


def test_parallel_model_is_option_order_invariant_and_sequential_differs(tiny_checkpoint):
    """Each option reads as if alone (same positions, no cross-option attention; the sliding window of the
    tiny encoder, 8, counts positions): reordering the options permutes the logits and changes nothing else.
    The sequential layout is order-dependent, so the same check fails there."""
    import laya

    agent = laya.load(tiny_checkpoint, device="cpu")
    options = {"billing": "charges, refunds and invoices", "outage": "the service is down or slow",
               "account": "login, password, profile", "other": None}
    state = "I was charged twice for my subscription this month and I cannot log in to fix it either."
    order = [2, 0, 3, 1]
    base = parallel_logits(agent, {"type": "choice", "instructions": "Which team?", "criteria": options}, state)
    moved = parallel_logits(agent, {"type": "choice", "instructions": "Which team?", "criteria": options,
                                    "option_order": order}, state)
    assert torch.allclose(moved, base[order], atol=1e-5), (moved, base[order])
    seq = parallel_logits(agent, {"type": "choice", "instructions": "Which team?", "criteria": options}, state, False)
    seq_moved = parallel_logits(agent, {"type": "choice", "instructions": "Which team?", "criteria": options,
                                        "option_order": order}, state, False)
    assert not torch.allclose(seq_moved, seq[order], atol=1e-3)
    assert not torch.allclose(seq, base, atol=1e-3)


def test_parallel_with_one_option_equals_sequential(tiny_checkpoint):
    import laya

    agent = laya.load(tiny_checkpoint, device="cpu")
    definition = {"type": "choice", "instructions": "Is this billing?", "criteria": {"billing": "charges and refunds"}}
    state = "word " * 40
    assert torch.allclose(parallel_logits(agent, definition, state), parallel_logits(agent, definition, state, False),
                          atol=1e-5)


def test_parallel_inputs_need_a_modernbert_encoder_and_both_tensors(tiny_checkpoint):
    import laya

    agent = laya.load(tiny_checkpoint, device="cpu")
    attn = torch.ones(1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="both position_ids and option_ids"):
        agent.model.parallel_inputs(attn, torch.arange(5)[None], None)
    agent.model.encoder.config.model_type = "bert"
    try:
        with pytest.raises(ValueError, match="needs a ModernBERT encoder, this one is 'bert'"):
            agent.model.parallel_inputs(attn, torch.arange(5)[None], torch.zeros(1, 5, dtype=torch.long))
    finally:
        agent.model.encoder.config.model_type = "modernbert"


@pytest.fixture(scope="module")
def parallel_checkpoint(tiny_checkpoint, tmp_path_factory) -> str:
    """The tiny checkpoint with `option_layout: "parallel"` in its config (same weights)."""
    out = str(tmp_path_factory.mktemp("parallel") / "tiny-parallel")
    shutil.copytree(tiny_checkpoint, out)
    path = os.path.join(out, "rl_agent_config.json")
    cfg = json.load(open(path))
    cfg["option_layout"] = "parallel"
    json.dump(cfg, open(path, "w"))
    return out


TEAM = {"type": "choice", "instructions": "Which team handles this?",
        "criteria": {"billing": "charges, refunds and invoices", "outage": "the service is down or slow",
                     "account": "login, password, profile", "other": None}}


def test_agent_answers_in_the_parallel_layout(parallel_checkpoint, tiny_checkpoint):
    import laya

    agent = laya.load(parallel_checkpoint, device="cpu")
    assert agent.parallel_options and agent.backend == "eager"
    state = "I was charged twice for my subscription this month and I cannot log in to fix it either."
    answer = agent.predict(state, {"team": TEAM})["answers"]["team"]
    moved = agent.predict(state, {"team": {**TEAM, "option_order": [2, 0, 3, 1]}})["answers"]["team"]
    assert moved["probabilities"] == pytest.approx(answer["probabilities"], abs=2e-4)  # order does not matter
    sequential = laya.load(tiny_checkpoint, device="cpu").predict(state, {"team": TEAM})["answers"]["team"]
    assert sequential["probabilities"] != pytest.approx(answer["probabilities"], abs=1e-3)
    # the agent's numbers are the model's on the hand-built parallel row
    logits = parallel_logits(agent, TEAM, state)
    probs = torch.softmax(logits / agent.temperature[0], -1).tolist()
    assert list(answer["probabilities"].values()) == pytest.approx(probs, abs=1e-4)


def test_parallel_batch_equals_single_predicts(parallel_checkpoint):
    """Rows of different lengths padded into one batch: pads take no part (position and option ids 0)."""
    import laya

    agent = laya.load(parallel_checkpoint, device="cpu")
    questions = {"team": TEAM, "urgent": {"type": "noul", "instructions": "Is it urgent?"},
                 "severity": {"type": "score", "instructions": "How bad?", "criteria": ["minor", "major", "critical"]}}
    states = ["refund please", "the whole site has been down for three hours and customers are furious " * 3,
              {"message": "password reset link does not arrive", "tier": "gold"}]
    batch = agent.predict_batch(states, questions)
    for state, together in zip(states, batch):
        alone = agent.predict(state, questions)
        for qid in questions:
            a, b = together["answers"][qid], alone["answers"][qid]
            assert a.get("probabilities", a.get("noul")) == pytest.approx(b.get("probabilities", b.get("noul")),
                                                                          abs=2e-4)
        assert together["usage"] == alone["usage"]


def test_parallel_layout_is_eager_only(parallel_checkpoint, monkeypatch):
    import types

    import laya
    from laya.backends import BackendUnavailable
    from laya.onnx_agent import ONNXAgent

    agent = laya.load(parallel_checkpoint, device="cpu")
    with pytest.raises(BackendUnavailable, match="parallel option layout"):
        agent.set_backend("compile", strict=True)
    with pytest.warns(RuntimeWarning, match="parallel option layout"):
        assert agent.set_backend("compile") == "eager"
    assert agent.predict("refund please", {"team": TEAM})["answers"]["team"]["choice"] in TEAM["criteria"]
    # a parallel batch that reaches a non-eager forward is refused, never run sequentially
    from laya.backends.compile import LegacyCompiled

    monkeypatch.setattr(agent, "_backend", LegacyCompiled(agent))
    with pytest.raises(ValueError, match="parallel"):
        agent.predict("refund please", {"team": TEAM})
    monkeypatch.undo()
    assert agent.predict("refund please", {"team": TEAM})["answers"]["team"]["choice"] in TEAM["criteria"]
    with pytest.raises(ValueError, match="only the eager backend runs"):
        ONNXAgent(parallel_checkpoint, onnx_path="laya.onnx")


def test_exports_refuse_a_parallel_model(parallel_checkpoint, tmp_path):
    """The model carries its layout (build_model), so the library's exporters refuse it themselves."""
    import laya
    from laya.export import aoti, onnx as onnx_export

    model = laya.load(parallel_checkpoint, device="cpu").model
    assert model.option_layout == "parallel"
    with pytest.raises(ValueError, match="an ONNX export needs a checkpoint with the sequential layout"):
        onnx_export.export_module(model, str(tmp_path / "x.onnx"))
    with pytest.raises(ValueError, match="an AOTInductor package needs a checkpoint with the sequential layout"):
        aoti.build_package(model, str(tmp_path / "x.pt2"))
    assert not os.listdir(tmp_path)  # nothing written


def test_a_parallel_checkpoint_needs_a_modernbert_encoder(parallel_checkpoint, tmp_path):
    import laya

    bert = str(tmp_path / "bert-parallel")
    shutil.copytree(parallel_checkpoint, bert)
    path = os.path.join(bert, "encoder", "config.json")
    config = json.load(open(path))
    config["model_type"] = "bert"
    json.dump(config, open(path, "w"))
    with pytest.raises(ValueError, match="needs a ModernBERT encoder"):
        laya.load(bert, device="cpu")


def test_collate_items_adds_the_parallel_ids_for_every_row(tiny_checkpoint):
    import laya
    from laya.common import build_sequence, collate_items

    agent = laya.load(tiny_checkpoint, device="cpu")
    rows = [build_sequence(agent.tok, state, TEAM, 256, 96) for state in ("refund please", "word " * 30)]
    plain = collate_items(rows, agent.tok.pad_token_id)
    items = collate_items(rows, agent.tok.pad_token_id, parallel=True)
    assert set(plain) == {"input_ids", "attention_mask", "marker_pos", "marker_mask", "qtype"}
    assert set(items) == set(plain) | {"position_ids", "option_ids"}
    for i, row in enumerate(rows):
        positions, options = row_positions(len(row.ids), len(row.head.ids), row.markers)
        assert items["position_ids"][i, :len(row.ids)].tolist() == positions.tolist()
        assert items["option_ids"][i, :len(row.ids)].tolist() == options.tolist()
        assert not items["position_ids"][i, len(row.ids):].any() and not items["option_ids"][i, len(row.ids):].any()
    assert items["option_ids"].max() == 4 and len(rows[0].ids) < items["input_ids"].shape[1]  # row 0 is padded

"""compat-0.4.15 §17 R-TR-2 and §18 R-P2-1/2/5: low-level names of laya.common, laya.agent, laya.tl_kernels."""

import importlib
import inspect
import math
import subprocess
import sys

import pytest

common = importlib.import_module("laya.common")


def test_import_stays_torch_free():
    probe = "import sys, laya.common; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_temperature_helpers():
    assert (common.TEMP_MIN, common.TEMP_MAX) == (0.5, 5.0)
    for bad in (True, "2", float("nan"), float("inf"), -float("inf"), None):
        assert common.clamp_temperature(bad) == 1.0
    assert common.clamp_temperature(0.1) == 0.5 and common.clamp_temperature(9) == 5.0
    assert common.clamp_temperature(2, lo=1.0, hi=1.5) == 1.5
    assert common.temperature_rejected(True, 1.0) and common.temperature_rejected("x", 1.0)
    assert common.temperature_rejected(0.1, 0.5) and not common.temperature_rejected(2.0, 2.0)
    assert common.temp_bucket("choice", 4) == "choice:3-5" and common.temp_bucket(2, 2) == "noul:2"
    assert common.temp_bucket("score", 11) == "score:11+"
    out = common.resolve_lang_temperatures({"de-AT": {"temperature": [1.0, 2.0, 3.0]}}, [1.5, 1.5, 1.5])
    assert out == {"de": {"temperature": [1.0, 2.0, 3.0], "temperature_by_options": {}}}
    assert common.resolve_lang_temperatures({"fr": None}, [1.5, 1.5, 1.5])["fr"]["temperature"] == [1.5, 1.5, 1.5]


def test_rendering_helpers():
    assert common.render_criterion("as is") == "as is"
    assert common.render_criterion({"a": [1, "é"]}) == '{"a": [1, "é"]}'
    assert common.serialize_state("text") == "text"
    assert common.serialize_state({"k": "é", "n": 1}) == '{"k": "é", "n": 1}'
    assert common.serialize_state([1, 2]) == "[1, 2]"


def test_unpermute_probs():
    assert common.unpermute_probs([0.7, 0.2, 0.1], [2, 0, 1]) == [0.2, 0.1, 0.7]
    assert common.unpermute_probs([0.7, 0.3], None) == [0.7, 0.3]
    assert common.unpermute_probs([0.7, 0.3], [0, 1, 2]) == [0.7, 0.3]  # mismatched: unchanged


def test_layout_helpers():
    assert common.OPTION_LAYOUTS == ("sequential", "parallel")
    assert common.uses_parallel_layout({"option_layout": "parallel"})
    assert not common.uses_parallel_layout({}) and not common.uses_parallel_layout({"option_layout": None})
    with pytest.raises(ValueError, match=r"^option_layout must be one of sequential, parallel, got 'x'$"):
        common.uses_parallel_layout({"option_layout": "x"})
    ids = common.parallel_layout([3, 5], 8, 10)
    assert ids["option_ids"] == [0, 0, 0, 1, 1, 2, 2, 0, 0, 0]
    assert ids["position_ids"][3] == ids["position_ids"][5] == 3


def test_ece_bins_and_td_lambda_without_episodes():
    with pytest.raises(ValueError, match=r"^bins must be an integer of at least 1, got 0$"):
        common.ece_score([0.5], [True], bins=0)
    for bad in (True, 2.5, "3"):
        with pytest.raises(ValueError, match="bins must be an integer of at least 1"):
            common.ece_score([0.5], [True], bins=bad)
    torch = pytest.importorskip("torch")
    target = torch.tensor([[0.2, 0.8], [1.0, 0.0]])
    batch = {"target": target}
    out = common.td_lambda_targets(torch.tensor([0.1, 0.9]), batch)
    assert torch.equal(out, target) and out is not target
    plain = {"target": [[0.5, 0.5]]}
    copied = common.td_lambda_targets([0.3], plain)
    assert copied == [[0.5, 0.5]] and copied is not plain["target"]


def test_torch_names_and_signatures():
    pytest.importorskip("torch")
    import torch

    from laya.model import DecisionModel, build_model

    assert common.DecisionModel is DecisionModel and common.build_model is build_model
    assert list(inspect.signature(common.build_model).parameters) == ["cfg", "encoder_dir", "pretrained", "revision"]
    assert common.amp_dtype("bf16") is torch.bfloat16 and common.amp_dtype("fp16") is torch.float16
    assert common.amp_dtype(None) is torch.float16
    params = inspect.signature(common.build_sequence).parameters
    assert list(params) == ["tok", "state", "q", "max_len", "head_max_len", "option_order", "truncate_left",
                            "state_ids", "return_stats", "return_truncation_stats", "return_layout"]
    assert params["max_len"].default == 512 and params["head_max_len"].default == 192
    assert list(inspect.signature(common.build_head).parameters) == ["tok", "q", "head_max_len", "option_order"]
    assert inspect.signature(common.state_room).parameters["max_len"].default == 512
    import laya.agent

    assert laya.agent.MPS_AMP_MIN_ROWS_DEFAULT == 5


def test_sequence_adapters(tok):
    q = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "money", "tech": None}}
    ids, markers = common.build_sequence(tok, "word " * 300, q, 64)
    assert len(ids) == 64 and len(markers) == 2
    tail_ids, _ = common.build_sequence(tok, "start " + "word " * 300 + "finish", q, 64, truncate_left=True)
    head_ids, _ = common.build_sequence(tok, "start " + "word " * 300 + "finish", q, 64)
    assert tail_ids[-2] != head_ids[-2]  # the end of the state is kept
    _, _, stats, trunc, layout = common.build_sequence(tok, "word " * 300, q, 64, return_stats=True,
                                                       return_truncation_stats=True, return_layout=True)
    assert stats == {"options": 2, "options_distinct": 2, "tokens_per_option": None}
    assert trunc["truncated"] and trunc["state_tokens"] == trunc["state_tokens_used"] + trunc["state_tokens_dropped"]
    assert len(layout["position_ids"]) == 64
    swapped, _ = common.build_sequence(tok, "x", q, 64, option_order=[1, 0])
    plain, _ = common.build_sequence(tok, "x", q, 64)
    assert swapped != plain and sorted(swapped) == sorted(plain)
    given, _ = common.build_sequence(tok, "ignored", q, 64, state_ids=[5, 6, 7])
    assert given[-4:] == [5, 6, 7, tok.sep_token_id]
    head = common.build_head(tok, q, option_order=[1, 0])
    assert head.markers and common.collapsed_options(["q"], [head]) == {}
    squeezed = {"options": 3, "options_distinct": 2, "tokens_per_option": None}
    assert common.collapsed_options(["a"], [squeezed]) == {"a": {"total": 3, "distinct": 2, "tokens_per_option": None}}
    window, stride, room = common.window_budget(tok, {"q": q}, 128, 64)
    assert room == common.state_room(tok, q, 128, 64) and window <= room and stride == max(1, window // 2)
    enc = common.encode_text(tok, "hello", add_special_tokens=False)
    assert enc["input_ids"] == tok("hello", add_special_tokens=False)["input_ids"]


def test_tl_kernels_names():
    tl = importlib.import_module("laya.tl_kernels")
    assert tl.DTYPES == ("bfloat16", "float16") and tl.ACC == "float"
    for name in ("gemm_kernel", "gemm_geglu_kernel", "add_ln_kernel", "rope_kernel", "attn_kernel"):
        cpu = inspect.signature(getattr(tl, name)).parameters["cpu"]
        assert cpu.kind is inspect.Parameter.KEYWORD_ONLY and cpu.default is False
    assert callable(tl.compile_cpu)
    pytest.importorskip("tilelang")
    from tilelang.transform import PassConfigKey

    assert tl.FAST == {PassConfigKey.TL_ENABLE_FAST_MATH: True}
    assert math.isfinite(len(tl.FAST))


def test_window_batch_cap():
    assert common.window_batch_cap(10, 100, None) is None
    assert common.window_batch_cap(10, 100, 450) == 4
    assert common.window_batch_cap(10, 100, 450, batch_size=2) == 2
    assert common.window_batch_cap(3, 100, 10_000) == 3 and common.window_batch_cap(10, 100, 50) == 1


def test_collate_items_takes_encoded_training_items(tok):
    torch = pytest.importorskip("torch")
    import laya.train as T

    assert list(inspect.signature(common.collate_items).parameters)[:2] == ["batch", "pad_id"]
    choice = T.to_internal("q", {"type": "choice", "instructions": "i", "criteria": {"a": "A", "b": "B", "c": "C"}})
    noul = T.to_internal("n", {"type": "noul", "instructions": "is it"})
    items = [T.make_item(tok, choice, T.target_from_expected(choice, "b"), T.encode_state(tok, "hello there", 64), 32, 64),
             T.make_item(tok, noul, T.target_from_expected(noul, True), T.encode_state(tok, "x", 64), 32, 64)]
    encoded = [T.encode_item(tok, it, 64, 32, parallel=True) for it in items]
    batch = common.collate_items(encoded, tok.pad_token_id)
    width = max(len(e["input_ids"]) for e in encoded)
    assert batch["input_ids"].shape == (2, width) and batch["marker_mask"].tolist() == [[True] * 3, [True, True, False]]
    assert batch["qtype"].tolist() == [0, 2]
    assert batch["target"].tolist() == [[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]]
    assert batch["position_ids"].shape == (2, width)
    row = common.build_sequence(tok, "hello there", {"type": "choice", "instructions": "i",
                                                     "criteria": {"a": "A", "b": "B", "c": "C"}}, 64, 32)
    from_row = common.collate_items([row], tok.pad_token_id, parallel=True)
    n = len(row[0])
    assert torch.equal(from_row["input_ids"][0], batch["input_ids"][0, :n])
    assert torch.equal(from_row["position_ids"][0], batch["position_ids"][0, :n])
    assert torch.equal(common.td_lambda_targets(torch.tensor([0.5, 0.5]), batch), batch["target"])

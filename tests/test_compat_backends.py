"""compat-0.4.15 §18 R-P2-4: the published names of laya.backends and laya.backends.compile."""

import os
import warnings

import pytest

torch = pytest.importorskip("torch")

from laya import backends  # noqa: E402


def test_published_names():
    assert backends.NAMES == ("auto", "eager", "compile", "tilelang", "onnx") and backends.AUTO == "auto"
    for name in ("Backend", "BackendUnavailable", "bucket_shape", "pad_batch", "warn_fallback", "normalise",
                 "tilelang_available", "is_modernbert", "auto_policy", "make_backend", "install"):
        assert callable(getattr(backends, name)) and name in backends.__all__
    assert isinstance(backends.tilelang_available(), bool)


@pytest.mark.parametrize("args, want", [((0, 5, 512), (1, 16)), ((3, 17, 512), (4, 32)), ((5, 256, 512), (8, 256)),
                                        ((5, 257, 512), (8, 320)), ((9, 300, 300), (16, 300)),
                                        ((2, 600, 512), (2, 512)), ((1, 1000, None), (1, 1024))])
def test_bucket_shape(args, want):
    assert backends.bucket_shape(*args) == want


def test_pad_batch_pads_to_the_bucket():
    ids = torch.ones(3, 3, dtype=torch.long)
    tensors = (ids, torch.ones_like(ids), torch.tensor([[1]] * 3), torch.ones(3, 1, dtype=torch.bool),
               torch.ones(3, dtype=torch.long))
    (p_ids, p_mask, p_pos, p_live, p_qtype), original = backends.pad_batch(*tensors, 512, pad_id=9)
    assert original == (3, 3) and p_ids.shape == (4, 16)
    assert p_ids[3].tolist() == [9] * 16 and p_mask[3].sum() == 0 and p_pos[3].tolist() == [0]
    assert p_qtype.tolist() == [1, 1, 1, 0]
    (_, kept_mask, *_), _ = backends.pad_batch(*tensors, 512, keep_one_token=True)
    assert kept_mask[3].tolist() == [1] + [0] * 15


def test_warn_fallback_text():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        backends.warn_fallback("compile", "no CUDA device")
    assert [w.category for w in caught] == [RuntimeWarning]
    assert str(caught[0].message) == ("laya: backend 'compile' is unavailable (no CUDA device); using the eager "
                                      "forward instead.")


def test_is_modernbert_reads_agents_models_and_configs():
    from types import SimpleNamespace

    from transformers import BertConfig, ModernBertConfig

    assert backends.is_modernbert(ModernBertConfig()) and not backends.is_modernbert(BertConfig())
    assert backends.is_modernbert({"model_type": "modernbert"})
    encoder = SimpleNamespace(config=ModernBertConfig())
    assert backends.is_modernbert(SimpleNamespace(encoder=encoder))  # a DecisionModel
    assert backends.is_modernbert(SimpleNamespace(model=SimpleNamespace(encoder=encoder)))  # an agent
    assert not backends.is_modernbert(object())


def test_compile_constants(monkeypatch):
    from laya.backends import compile as C

    assert C.CACHE_DIR_ENV == "LAYA_INDUCTOR_CACHE_DIR" and C.WARMUP_ENV == "LAYA_COMPILE_WARMUP"
    assert C.DEFAULT_CACHE_DIR == os.path.join("~", ".cache", "laya", "inductor")
    assert C.WARMUP_SHAPES == ((1, 64, 3), (4, 128, 5), (8, 256, 6))
    monkeypatch.delenv("LAYA_COMPILE_WARMUP", raising=False)
    assert C.warmup_enabled() is True and C.warmup_enabled(default=False) is False
    monkeypatch.setenv("LAYA_COMPILE_WARMUP", " Off ")
    assert C.warmup_enabled() is False

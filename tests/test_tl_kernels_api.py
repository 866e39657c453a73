"""API contract of laya.tl_kernels, checked without TileLang (the module imports it lazily)."""

from __future__ import annotations

import importlib
import inspect

import pytest

K = importlib.import_module("laya.tl_kernels")

# name -> (positional shape args, option defaults in order)
EXPECTED = {
    "gemm_kernel": (
        ["N", "K"],
        dict(bias=False, act="none", bm=64, bn=128, bk=64, stages=3, threads=128, dtype="bfloat16", prefetch=0,
             release=False, min_blocks=1),
    ),
    "gemm_splitk_kernel": (
        ["N", "K", "splits"],
        dict(bias=False, bm=64, bn=64, bk=128, stages=3, threads=128, dtype="bfloat16", prefetch=0, release=False,
             min_blocks=1),
    ),
    "gemm_geglu_kernel": (["F", "K"], dict(bm=64, bn=64, bk=64, stages=2, threads=128, dtype="bfloat16", prefetch=0,
                                            release=False, min_blocks=1)),
    "add_ln_kernel": (["D"], dict(residual=True, bias=False, eps=1e-5, bm=4, threads=32, dtype="bfloat16",
                                  splits=0, release=False)),
    "add_ln_quant_kernel": (["D"], dict(residual=True, bias=False, eps=1e-5, bm=4, threads=32, dtype="bfloat16",
                                        release=False)),
    "quant_rows_kernel": (["D"], dict(glu=False, bm=1, threads=64, dtype="bfloat16")),
    "rope_kernel": (["H", "Dh"], dict(bm=32, threads=128, dtype="bfloat16")),
    "attn_kernel": (
        ["B", "L", "H", "Dh"],
        dict(window=0, bm=64, bn=64, stages=1, threads=128, min_blocks=1, dtype="bfloat16", release=False),
    ),
    "decide_features_kernel": (["d"], dict(width=64, threads=128, dtype="bfloat16")),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_factory_signature(name):
    sig = inspect.signature(getattr(K, name))
    shapes, options = EXPECTED[name]
    params = list(sig.parameters.values())
    names = [p.name for p in params]
    assert names == shapes + list(options) + ["cpu"]
    for p in params[: len(shapes)]:
        assert p.default is inspect.Parameter.empty
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    for p in params[len(shapes) : -1]:
        assert p.default == options[p.name], p.name
        assert p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    cpu = sig.parameters["cpu"]
    assert cpu.kind is inspect.Parameter.KEYWORD_ONLY and cpu.default is False
    # The GPU default dtype is bf16 and the factory exposes its PrimFunc builder for compile_cpu.
    assert sig.parameters["dtype"].default == "bfloat16"
    assert callable(getattr(K, name).get_tir)


def test_compile_cpu_signature():
    sig = inspect.signature(K.compile_cpu)
    kinds = [(p.name, p.kind) for p in sig.parameters.values()]
    assert kinds == [
        ("factory", inspect.Parameter.POSITIONAL_OR_KEYWORD),
        ("args", inspect.Parameter.VAR_POSITIONAL),
        ("kwargs", inspect.Parameter.VAR_KEYWORD),
    ]


def test_gpu_dtypes():
    assert K.GPU_DTYPES == ("bfloat16", "float16")


@pytest.mark.parametrize(
    "call",
    [
        lambda: K.gemm_kernel(64, 64, dtype="float32"),
        lambda: K.gemm_geglu_kernel(64, 64, dtype="float32"),
        lambda: K.add_ln_kernel(64, dtype="float32"),
        lambda: K.rope_kernel(2, 64, dtype="float32"),
        lambda: K.attn_kernel(2, 64, 2, 64, dtype="float32"),
        lambda: K.decide_features_kernel(64, dtype="float32"),
        lambda: K.gemm_kernel(64, 64, dtype="float64", cpu=True),
        lambda: K.gemm_kernel(64, 64, dtype="int8"),
    ],
)
def test_bad_dtype_raises_before_tilelang(call):
    # Rejected with a clear message before TileLang is touched (fp32 is CPU-only).
    with pytest.raises(ValueError, match="dtype"):
        call()


def test_fp32_message_points_to_cpu():
    with pytest.raises(ValueError, match="compile_cpu"):
        K.gemm_kernel.get_tir(64, 64, dtype="float32")


def test_bad_options_raise():
    with pytest.raises(ValueError, match="act"):
        K.gemm_kernel.get_tir(64, 64, act="tanh")
    with pytest.raises(ValueError, match="window"):
        K.attn_kernel.get_tir(2, 64, 2, 64, window=-1)
    with pytest.raises(ValueError, match="width"):
        K.decide_features_kernel.get_tir(64, width=48)
    with pytest.raises(ValueError, match="min_blocks must be >= 1, got 0"):
        K.attn_varlen_kernel.get_tir(64, 2, 64, min_blocks=0)
    with pytest.raises(ValueError, match="min_blocks=4 blocks of 256 threads leave each consumer thread 48 registers"):
        K.attn_varlen_kernel.get_tir(64, 2, 64, bm=128, threads=256, min_blocks=4)
    with pytest.raises(ValueError, match="min_blocks must be >= 1, got 0"):
        K.gemm_geglu_kernel.get_tir(64, 64, min_blocks=0)
    with pytest.raises(ValueError, match="min_blocks=4 blocks of 256 threads leave each consumer thread 48 registers"):
        K.gemm_kernel.get_tir(64, 64, bm=128, threads=256, min_blocks=4)


def test_consumer_registers_fit_the_blocks_asked_for():
    # The default (one block) keeps TileLang's 240; more blocks get what the block's launch registers, less the
    # producer's 24, leave: never more than the pool holds (setmaxnreg.inc would wait forever).
    assert K.consumer_registers(1, 128) == K.consumer_registers(1, 256) == 240
    assert (K.consumer_registers(2, 128), K.consumer_registers(3, 128), K.consumer_registers(2, 256)) == (232, 136, 104)
    for blocks in (1, 2, 3, 4):
        for threads in (128, 256):
            regs = K.consumer_registers(blocks, threads)
            # every block's consumers and producer fit in its share of the SM's register file, in 8s
            assert regs % 8 == 0 and blocks * (regs * threads + 128 * K.PRODUCER_REGISTERS) <= K.SM_REGISTERS


def test_no_top_level_tilelang_import():
    # TileLang is an optional extra: the module must import (and its signatures be inspectable)
    # without it, so every tilelang import lives inside a function.
    src = inspect.getsource(K)
    top = [ln for ln in src.splitlines() if ln.startswith(("import tilelang", "from tilelang"))]
    assert top == []

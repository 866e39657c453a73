"""Why laya.tl_kernels needs a CPU specialisation: the GPU one does not compile for target "c".

Pinned to the TileLang version these diagnostics were read from (0.1.15) and skipped on any other:
the day TileLang learns to lower fragments, fragment fill/reduce or bf16 on its C target, these
tests fail on the new version once the pin is moved, which is the signal to revisit `_Spec`.

Observed with TileLang 0.1.15 (Linux x86-64, g++ 12), unchanged GPU specialisations (cpu=False)
compiled for target "c" with the GPU pass configs:

* GEMM, GEGLU, attention (bf16 and fp16): their first statement on a fragment is a fill (T.clear),
  and it fails: "CPU fill only supports local and global buffers, but got dst scope `local.fragment`."
* LayerNorm (bf16 and fp16): "CPU reduce only supports local src and local/local.var dst buffers,
  got src scope `local.fragment` and dst scope `local.fragment`."
* RoPE has no fragment: bf16 fails with "Cannot convert type bfloat16 to C type"; fp16 fails in
  code generation on the programmatic-dependent-launch wait every GPU kernel opens with
  (``_Spec.chain``): "Unresolved call ... tl.pdl_sync", a GPU-only intrinsic.  (Before that wait
  existed, fp16 reached g++ and failed there: its vectorised half4 <-> float4 conversions do not
  exist in the C runtime headers.)

With cpu=True (local buffers, serial loops, vectorisation off) but still bf16, all five fail:
LayerNorm and RoPE with "Cannot convert type bfloat16 to C type"; GEMM, GEGLU and attention earlier,
in the host/device split, because their bf16 local tiles are dropped: "variables (...) are used,
but are not passed in as API arguments".  fp16 with cpu=True does compile in 0.1.15 (not relied on:
compile_cpu forces fp32).

Differences from the 0.1.14 notes: a fragment written by a T.Parallel loop alone no longer fails
layout inference on "c" (the probe below compiles); fill and reduce on fragments still fail.
"""

from __future__ import annotations

import shutil

import pytest

tilelang = pytest.importorskip("tilelang")
if shutil.which("g++") is None and shutil.which("c++") is None:
    pytest.skip("TileLang's C target needs a C++ compiler", allow_module_level=True)

from laya import tl_kernels as K  # noqa: E402

PINNED = "0.1.15"
pytestmark = [
    pytest.mark.fast_extra,
    pytest.mark.skipif(
        not str(getattr(tilelang, "__version__", "")).startswith(PINNED),
        reason=f"diagnostics recorded for TileLang {PINNED}; re-check them on this version",
    ),
]

FILL = "CPU fill only supports local and global buffers, but got dst scope `local.fragment`"
REDUCE = "CPU reduce only supports local src and local/local.var dst buffers"
BF16 = "Cannot convert type bfloat16 to C type"
PDL = 'Unresolved call ir.Op(span=None, struct_info_=None, name="tl.pdl_sync"'
DROPPED = "are used, but are not passed in as API arguments"

# small shapes: these compiles are expected to fail fast, before g++ runs
CASES = {
    "gemm": (K.gemm_kernel, (70, 67), {"bias": True, "act": "gelu"}),
    "geglu": (K.gemm_geglu_kernel, (70, 67), {}),
    "add_ln": (K.add_ln_kernel, (128,), {"bias": True}),
    "rope": (K.rope_kernel, (2, 64), {}),
    "attn": (K.attn_kernel, (3, 80, 2, 32), {"window": 17}),
}

GPU_SPEC_ON_C = {
    ("gemm", "bfloat16"): FILL,
    ("gemm", "float16"): FILL,
    ("geglu", "bfloat16"): FILL,
    ("geglu", "float16"): FILL,
    ("attn", "bfloat16"): FILL,
    ("attn", "float16"): FILL,
    ("add_ln", "bfloat16"): REDUCE,
    ("add_ln", "float16"): REDUCE,
    ("rope", "bfloat16"): BF16,
    ("rope", "float16"): PDL,
}

CPU_SPEC_BF16_ON_C = {"gemm": DROPPED, "geglu": DROPPED, "attn": DROPPED, "add_ln": BF16, "rope": BF16}


def _compile_c(prim, pass_configs):
    return tilelang.compile(prim, target="c", pass_configs=pass_configs, compile_flags=["-O0"])


@pytest.mark.parametrize("name,dtype", sorted(GPU_SPEC_ON_C))
def test_unchanged_gpu_specialisation_fails_on_c(name, dtype):
    factory, args, kwargs = CASES[name]
    with pytest.raises(Exception) as info:
        _compile_c(factory.get_tir(*args, dtype=dtype, **kwargs), K._gpu_pass_configs())
    assert GPU_SPEC_ON_C[(name, dtype)] in str(info.value)
    assert type(info.value).__name__ == "InternalError"


@pytest.mark.parametrize("name", sorted(CPU_SPEC_BF16_ON_C))
def test_cpu_specialisation_still_needs_fp32(name):
    factory, args, kwargs = CASES[name]
    with pytest.raises(Exception) as info:
        _compile_c(factory.get_tir(*args, dtype="bfloat16", cpu=True, **kwargs), K._cpu_pass_configs())
    assert CPU_SPEC_BF16_ON_C[name] in str(info.value)


def _fragment_probe(op):
    import tilelang.language as T

    n = 16

    @T.prim_func
    def probe(X: T.Tensor((n, n), "float32"), Y: T.Tensor((n, n), "float32")):
        with T.Kernel(1, threads=32):
            f = T.alloc_fragment((n, n), "float32")
            s = T.alloc_fragment((n,), "float32")
            for i, j in T.Parallel(n, n):
                f[i, j] = X[i, j] * 2.0
            if op == "fill":
                T.fill(f, 0.0)
            elif op == "reduce_sum":
                T.reduce_sum(f, s, dim=1)
            elif op == "reduce_max":
                T.reduce_max(f, s, dim=1)
            for i, j in T.Parallel(n, n):
                Y[i, j] = f[i, j]

    return probe


def test_fp32_fragment_probes():
    """fp32, no GEMM, no bf16: fill and reductions on fragments alone fail; plain use compiles."""
    _compile_c(_fragment_probe("none"), K._gpu_pass_configs())
    for op, expected in (("fill", FILL), ("reduce_sum", REDUCE), ("reduce_max", REDUCE)):
        with pytest.raises(Exception) as info:
            _compile_c(_fragment_probe(op), K._gpu_pass_configs())
        assert expected in str(info.value), op

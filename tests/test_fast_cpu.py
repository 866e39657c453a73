"""The TileLang kernels' fp32 CPU specialisation (target "c") against float64 torch references.

Needs tilelang and a C++ compiler (skipped otherwise).  When CUDA is present too, the same inputs
rounded to bf16/fp16 also compare the CPU specialisation against the GPU kernels.  Kernels are
compiled once per session (the factories cache them), which keeps this file well under the CI budget.
"""

from __future__ import annotations

import math
import shutil

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
if shutil.which("g++") is None and shutil.which("c++") is None:
    pytest.skip("TileLang's C target needs a C++ compiler", allow_module_level=True)

from _decide_cases import decide_inputs, ref_decide  # noqa: E402
from laya import tl_kernels as K  # noqa: E402
from laya.fast_tiles import ATTN_OCCUPIED  # noqa: E402

pytestmark = pytest.mark.fast_extra

SEED = 1234
TOL = 2e-5
TOL_ROPE = 2e-6
TOL_GPU = 0.05
TOL_GPU_ATTN = 0.02
HAS_CUDA = torch.cuda.is_available()
GPU_DTYPES = [torch.bfloat16, torch.float16]
TL_NAME = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason="CPU-vs-GPU comparison needs CUDA")


def gen(seed_offset=0):
    g = torch.Generator().manual_seed(SEED + seed_offset)
    return lambda *shape, scale=1.0: torch.randn(*shape, generator=g) * scale


def maxerr(a, b):
    return (a.double() - b.double()).abs().max().item()


# ----------------------------------------------------------------------------------------------
# references (float64)


def ref_gemm(A, W, b, act):
    y = A.double() @ W.double().T
    if b is not None:
        y = y + b.double()
    if act == "gelu":
        y = torch.nn.functional.gelu(y)
    elif act == "relu":
        y = y.relu()
    return y


def ref_geglu(A, W):
    F = W.shape[0] // 2
    y = A.double() @ W.double().T
    return torch.nn.functional.gelu(y[:, :F]) * y[:, F:]


def ref_ln(X, w, b, eps=1e-5):
    return torch.nn.functional.layer_norm(X.double(), X.shape[-1:], w.double(), None if b is None else b.double(), eps)


def ref_rope(qkv, cos, sin, H, Dh):
    M = qkv.shape[0]
    pos = torch.arange(M) % cos.shape[0]
    x = qkv[:, : 2 * H * Dh].double().view(M, 2 * H, Dh)
    c, s = cos.double()[pos][:, None], sin.double()[pos][:, None]
    x0, x1 = x[..., : Dh // 2], x[..., Dh // 2 :]
    return torch.cat([x0 * c - x1 * s, x1 * c + x0 * s], -1).reshape(M, -1)


def ref_attn(qkv, lens, window):
    B, L, _, H, Dh = qkv.shape
    q, k, v = (qkv[:, :, i].double().transpose(1, 2) for i in range(3))
    idx = torch.arange(L)
    allowed = idx[None, None, :] < lens.long()[:, None, None]  # [B, 1(query), L(key)]
    if window:
        allowed = allowed & ((idx[:, None] - idx[None, :]).abs() <= window)[None]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(Dh)
    s = s.masked_fill(~allowed[:, None], float("-inf"))
    out = torch.nan_to_num(s.softmax(-1)) @ v
    return out.transpose(1, 2).reshape(B, L, H * Dh)


def valid_rows_err(O, ref, lens):
    errs = [maxerr(O[b, : int(n)], ref[b, : int(n)]) for b, n in enumerate(lens.tolist()) if n > 0]
    return max(errs) if errs else 0.0


# ----------------------------------------------------------------------------------------------
# GEMM (M=17, N=70, K=67: none of them a tile multiple)

GEMM_CASES = [(False, "none"), (True, "gelu"), (True, "relu")]
M_, N_, K_ = 17, 70, 67


def gemm_inputs():
    r = gen(1)
    return r(M_, K_), r(N_, K_, scale=0.1), r(N_, scale=0.5)


@pytest.mark.parametrize("bias,act", GEMM_CASES)
def test_gemm_cpu(bias, act):
    A, W, b = gemm_inputs()
    kern = K.compile_cpu(K.gemm_kernel, N_, K_, bias=bias, act=act)
    C = torch.full((M_, N_), float("nan"))
    kern(A, W, b, C)
    assert maxerr(C, ref_gemm(A, W, b if bias else None, act)) < TOL
    # M is a runtime dimension: the same compiled kernel serves other row counts.
    A2 = gen(2)(130, K_)
    C2 = torch.empty(130, N_)
    kern(A2, W, b, C2)
    assert maxerr(C2, ref_gemm(A2, W, b if bias else None, act)) < TOL


def test_gemm_geglu_cpu():
    r = gen(3)
    A, W = r(M_, K_), r(2 * N_, K_, scale=0.1)
    kern = K.compile_cpu(K.gemm_geglu_kernel, N_, K_)
    C = torch.full((M_, N_), float("nan"))
    kern(A, W, C)
    assert maxerr(C, ref_geglu(A, W)) < TOL


# Split-K (K=67 in 2 or 3 slices; with bk=16 the 3-way split's last slice runs past K and is zero-filled)
SPLIT_CASES = [(2, False), (3, True)]


def splitk_partials(A, W, b, splits, bias):
    P = torch.full((splits, A.shape[0], W.shape[0]), float("nan"))
    K.compile_cpu(K.gemm_splitk_kernel, N_, K_, splits, bias=bias, bm=16, bn=32, bk=16)(A, W, b, P)
    return P


@pytest.mark.parametrize("splits,bias", SPLIT_CASES)
def test_gemm_splitk_cpu(splits, bias):
    A, W, b = gemm_inputs()
    P = splitk_partials(A, W, b, splits, bias)
    assert maxerr(P.sum(0), ref_gemm(A, W, b if bias else None, "none")) < TOL
    # each slice is a real part of the K sum: slice 0 holds the bias and the first 16*steps columns
    steps = math.ceil(math.ceil(K_ / splits) / 16)
    first = ref_gemm(A[:, :16 * steps], W[:, :16 * steps], b if bias else None, "none")
    assert maxerr(P[0], first) < TOL


@pytest.mark.parametrize("splits", [2, 3])
def test_add_ln_sums_split_partials(splits):
    X, _, w, b = ln_inputs()
    P = gen(11)(splits, LN_M, LN_D, scale=50.0)
    X0 = X.clone()
    Y = torch.full((LN_M, LN_D), float("nan"))
    K.compile_cpu(K.add_ln_kernel, LN_D, splits=splits, bias=True)(X, P, w, b, Y)
    total = P[0].clone()
    for s in range(1, splits):
        total += P[s]
    # the slices are summed in fp32 before the add (the GPU build keeps that order; the CPU build's
    # -ffast-math may reassociate, so fp32 rounding is allowed here)
    assert torch.allclose(X, X0 + total, rtol=1e-6, atol=1e-3)
    assert maxerr(Y, ref_ln(X0 + total, w, b)) < TOL


def test_split_options_are_checked():
    with pytest.raises(ValueError, match="splits must be >= 1"):
        K.gemm_splitk_kernel(64, 64, 0)
    with pytest.raises(ValueError, match="needs residual=True"):
        K.add_ln_kernel(64, residual=False, splits=2)


# ----------------------------------------------------------------------------------------------
# residual add + LayerNorm (all four combinations; residual stream around 3e3)

LN_M, LN_D = 17, 128
LN_CASES = [(True, True), (True, False), (False, True), (False, False)]


def ln_inputs():
    r = gen(4)
    return r(LN_M, LN_D, scale=3000.0), r(LN_M, LN_D, scale=50.0), 1 + r(LN_D, scale=0.1), r(LN_D, scale=0.1)


@pytest.mark.parametrize("residual,bias", LN_CASES)
def test_add_ln_cpu(residual, bias):
    X, R, w, b = ln_inputs()
    X0 = X.clone()
    Y = torch.full((LN_M, LN_D), float("nan"))
    K.compile_cpu(K.add_ln_kernel, LN_D, residual=residual, bias=bias)(X, R, w, b, Y)
    expect = X0 + R if residual else X0
    assert torch.equal(X, expect)  # the residual update is exact (and absent when residual=False)
    assert maxerr(Y, ref_ln(expect, w, b if bias else None)) < TOL


# ----------------------------------------------------------------------------------------------
# RoPE (M=35 rows over L=7 positions: position wrap-around; v untouched)

RH, RDh, RL, RM = 2, 64, 7, 35


def rope_inputs():
    r = gen(5)
    ang = torch.arange(RL)[:, None] * (10000.0 ** (-torch.arange(RDh // 2) / (RDh // 2)))[None]
    return r(RM, 3 * RH * RDh), ang.cos().float(), ang.sin().float()


def test_rope_cpu():
    qkv, cos, sin = rope_inputs()
    before = qkv.clone()
    K.compile_cpu(K.rope_kernel, RH, RDh)(qkv, cos, sin)
    assert maxerr(qkv[:, : 2 * RH * RDh], ref_rope(before, cos, sin, RH, RDh)) < TOL_ROPE
    assert torch.equal(qkv[:, 2 * RH * RDh :], before[:, 2 * RH * RDh :])


# ----------------------------------------------------------------------------------------------
# attention (B=3, L=80: partial tiles; lengths 80/39/0: full, ragged, empty)

AB, AL, AH, ADh = 3, 80, 2, 32
LENS = [80, 39, 0]
ATTN_CASES = [(w, dyn) for w in (0, 17) for dyn in (False, True)]


def attn_inputs(B=AB, L=AL, lens=LENS, seed=6):
    return gen(seed)(B, L, 3, AH, ADh), torch.tensor(lens, dtype=torch.int32)


@pytest.mark.parametrize("window,dynamic", ATTN_CASES)
def test_attn_cpu(window, dynamic):
    qkv, lens = attn_inputs()
    shape = (None, None) if dynamic else (AB, AL)
    kern = K.compile_cpu(K.attn_kernel, *shape, AH, ADh, window=window)
    O = torch.full((AB, AL, AH * ADh), float("nan"))
    kern(qkv, lens, O)
    assert torch.isfinite(O).all()  # padding rows included
    assert torch.count_nonzero(O[2]) == 0  # the empty sequence gives zeros
    assert valid_rows_err(O, ref_attn(qkv, lens, window), lens) < TOL
    if dynamic:
        # one compile serves other batch sizes and lengths (45 = a partial tile, ragged lengths)
        qkv2, lens2 = attn_inputs(B=2, L=45, lens=[45, 20], seed=7)
        O2 = torch.full((2, 45, AH * ADh), float("nan"))
        kern(qkv2, lens2, O2)
        assert torch.isfinite(O2).all()
        assert valid_rows_err(O2, ref_attn(qkv2, lens2, window), lens2) < TOL


def packed_from_dense(qkv, lens):
    """The real rows of a dense [B, L, ...] batch, one sequence after another, plus two trailing rows
    that belong to no sequence (a bucketed batch's dummies); and each sequence's first row."""
    rows = [qkv[b, : int(n)] for b, n in enumerate(lens.tolist())]
    dummies = gen(9)(2, *qkv.shape[2:])
    starts = torch.tensor([0] + [int(n) for n in lens.tolist()[:-1]], dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return torch.cat(rows + [dummies]).contiguous(), starts


def with_dummies(blocks):
    """A block table with no-op (negative) entries first, between live ones and last, as a graph's
    padded table has them last (and any order must work: each entry is independent)."""
    live = torch.from_numpy(blocks)
    return torch.cat([torch.tensor([-1]), live[:1], torch.tensor([-7]), live[1:], torch.full((3,), -1)]).to(torch.int32)


@pytest.mark.parametrize("window", [0, 17])
@pytest.mark.parametrize("lens,seed", [([80, 39, 0], 6), ([0, 64, 5, 65, 80, 1], 21)])
def test_attn_varlen_cpu_matches_dense_reference(window, lens, seed):
    # L = 80 with bm = 64: a sequence has up to two query blocks; 0-length sequences have none
    qkv, lens = attn_inputs(B=len(lens), lens=lens, seed=seed)
    packed, starts = packed_from_dense(qkv, lens)
    kern = K.compile_cpu(K.attn_varlen_kernel, AL, AH, ADh, window=window)
    blocks = K.varlen_blocks(lens.numpy(), AL, 64)
    assert len(blocks) == sum(-(-n // 64) for n in lens.tolist())
    O = torch.full((packed.shape[0], AH * ADh), float("nan"))
    kern(packed, starts, lens, with_dummies(blocks), O)
    ref = ref_attn(qkv, lens, window)
    offset = 0
    for b, n in enumerate(lens.tolist()):
        if n:
            assert maxerr(O[offset : offset + n], ref[b, :n]) < TOL
        offset += n
    assert torch.isnan(O[offset:]).all()  # rows of no sequence are not written


def test_attn_varlen_cpu_computes_only_listed_blocks():
    # The table is the launch: a block left out is not computed, an all-dummy table computes nothing.
    qkv, lens = attn_inputs(lens=[80, 39, 0], seed=8)
    packed, starts = packed_from_dense(qkv, lens)
    kern = K.compile_cpu(K.attn_varlen_kernel, AL, AH, ADh)
    O = torch.full((packed.shape[0], AH * ADh), float("nan"))
    kern(packed, starts, lens, torch.full((4,), -1, dtype=torch.int32), O)
    assert torch.isnan(O).all()
    kern(packed, starts, lens, torch.tensor([1, 2], dtype=torch.int32), O)  # seq 0 block 1, seq 1 block 0
    ref = ref_attn(qkv, lens, 0)
    assert torch.isnan(O[:64]).all() and maxerr(O[64:80], ref[0, 64:80]) < TOL
    assert maxerr(O[80:119], ref[1, :39]) < TOL and torch.isnan(O[119:]).all()


def test_varlen_blocks_lists_exactly_the_live_blocks():
    assert K.varlen_blocks([13, 60, 33], 256, 64).tolist() == [0, 4, 8]  # QB = 4: b * 4 + q
    assert K.varlen_blocks([130], 256, 64).tolist() == [0, 1, 2]
    assert K.varlen_blocks([0, 64, 65, 0, 300], 256, 64).tolist() == [4, 8, 9, 16, 17, 18, 19]  # 300 -> L
    assert K.varlen_blocks([128, 129], 512, 128).tolist() == [0, 4, 5]
    assert K.varlen_blocks([], 256, 64).dtype == "int32" and len(K.varlen_blocks([0, 0], 256, 64)) == 0


def test_rope_positions_cpu_matches_wrapped_rope():
    qkv, cos, sin = rope_inputs()
    expected = qkv.clone()
    K.compile_cpu(K.rope_kernel, RH, RDh)(expected, cos, sin)
    # Explicit positions r % L reproduce the implicit ones; a permutation of rows keeps its positions.
    order = torch.randperm(RM, generator=torch.Generator().manual_seed(3))
    shuffled = qkv[order].contiguous()
    positions = (order % RL).to(torch.int32)
    K.compile_cpu(K.rope_positions_kernel, RH, RDh)(shuffled, cos, sin, positions)
    assert maxerr(shuffled, expected[order]) < TOL_ROPE


def test_gpu_factories_reject_fp32():
    with pytest.raises(ValueError, match="dtype"):
        K.attn_kernel(2, 64, 2, 32, dtype="float32")


# ----------------------------------------------------------------------------------------------
# the decision tail (masked logits, confidence features, act-head input) against laya.model's own code

DEC_KS = (1, 2, 5, 16)  # against a 16-wide tile: 1, 2 and 5 leave padding columns, 16 fills it
DEC_BS = (1, 3, 7)
DEC_D = 72
DEC_WIDTH = 16
TOL_DEC = 1e-5


def check_decide(Lg, A, S, live, rows, tol):
    B, k = S.shape
    d = rows.shape[-1]
    ref_logits, ref_act = ref_decide(S, live, rows)
    assert torch.equal(Lg, ref_logits)  # live scores exact (fp32 copies), masked columns exactly -1e4
    assert (Lg[live == 0] == K.MASKED_LOGIT).all()
    assert torch.equal(A[:, :d], rows[:, 0])  # the CLS row, exact
    assert torch.isfinite(A).all()
    assert maxerr(A[:, d:], ref_act[:, d:]) <= tol
    # the inputs really hold the cases they are meant to
    if B > 1:
        assert ref_act[1, d] == 1.0  # one live column: top1 = 1
    if B > 2 and k > 1:
        assert ref_act[2, d + 1] == 0.0  # tie for the max: top1 - top2 = 0
        assert A[2, d + 1] == 0.0


def test_masked_logit_matches_model():
    from laya.model import MASKED_LOGIT, N_FEATURES

    assert K.MASKED_LOGIT == MASKED_LOGIT
    assert N_FEATURES == 4  # ActIn holds d + 4 columns


def test_decide_features_cpu():
    kern = K.compile_cpu(K.decide_features_kernel, DEC_D, width=DEC_WIDTH)
    for k in DEC_KS:  # k and B are runtime dimensions: one compiled kernel for every shape
        for B in DEC_BS:
            S, live, rows = decide_inputs(B, k, DEC_D, seed=SEED + 100 * k + B)
            Lg = torch.full((B, k), float("nan"))
            A = torch.full((B, DEC_D + 4), float("nan"))
            kern(S, live, rows, Lg, A)
            check_decide(Lg, A, S, live, rows, TOL_DEC)


def test_decide_features_cpu_narrowest_tile():
    # width 2: k = 1 leaves one padding column (its single-column top2 = 0), k = 2 none
    kern = K.compile_cpu(K.decide_features_kernel, DEC_D, width=2)
    for k in (1, 2):
        S, live, rows = decide_inputs(7, k, DEC_D, seed=SEED + k)
        Lg, A = torch.empty(7, k), torch.empty(7, DEC_D + 4)
        kern(S, live, rows, Lg, A)
        check_decide(Lg, A, S, live, rows, TOL_DEC)


def test_decide_features_cpu_detects_a_wrong_feature():
    # The check is sharp: a feature off by 1e-4 (or a wrong tie rule) fails it.
    S, live, rows = decide_inputs(3, 5, DEC_D, seed=SEED)
    Lg, A = torch.empty(3, 5), torch.empty(3, DEC_D + 4)
    K.compile_cpu(K.decide_features_kernel, DEC_D, width=DEC_WIDTH)(S, live, rows, Lg, A)
    check_decide(Lg, A, S, live, rows, TOL_DEC)
    bad = A.clone()
    bad[0, DEC_D + 2] += 1e-4
    with pytest.raises(AssertionError):
        check_decide(Lg, bad, S, live, rows, TOL_DEC)
    bad = A.clone()
    bad[2, DEC_D + 1] = bad[2, DEC_D]  # top2 = 0 instead of the tied top1
    with pytest.raises(AssertionError):
        check_decide(Lg, bad, S, live, rows, TOL_DEC)


def test_decide_features_options_are_checked():
    with pytest.raises(ValueError, match="d must be"):
        K.decide_features_kernel.get_tir(0)
    for width in (1, 6, 0):
        with pytest.raises(ValueError, match="width must be a power of two"):
            K.decide_features_kernel.get_tir(64, width=width)
    with pytest.raises(ValueError, match="dtype"):
        K.decide_features_kernel(64, dtype="float32")


# ----------------------------------------------------------------------------------------------
# CPU specialisation vs GPU kernels on the same (16-bit rounded) inputs


@pytest.fixture(scope="module")
def gpu_kernels():
    """Compile the GPU side of the comparisons in parallel, once (nvcc dominates otherwise)."""
    reqs = []
    for dt in TL_NAME.values():
        reqs += [(K.gemm_kernel, (N_, K_), dict(bias=b, act=a, dtype=dt)) for b, a in GEMM_CASES]
        reqs.append((K.gemm_geglu_kernel, (N_, K_), dict(dtype=dt)))
        reqs += [(K.gemm_splitk_kernel, (N_, K_, s), dict(bias=b, bm=16, bn=32, bk=16, dtype=dt))
                 for s, b in SPLIT_CASES]
        reqs += [(K.add_ln_kernel, (LN_D,), dict(residual=r, bias=b, dtype=dt)) for r, b in LN_CASES]
        reqs.append((K.rope_kernel, (RH, RDh), dict(dtype=dt)))
        for w, dyn in ATTN_CASES:
            shape = (None, None) if dyn else (AB, AL)
            reqs.append((K.attn_kernel, (*shape, AH, ADh), dict(window=w, dtype=dt)))
    try:
        K.compile_many(reqs)
    except Exception as e:  # fall back to one-by-one compiles inside the tests
        import warnings

        warnings.warn(f"parallel precompile failed: {type(e).__name__}: {e}")
    return K


def rounded(t, dt):
    """(GPU 16-bit copy, CPU fp32 copy of exactly the same values)."""
    t16 = t.to(dt)
    return t16.cuda(), t16.float().contiguous()


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
@pytest.mark.parametrize("bias,act", GEMM_CASES)
def test_gemm_cpu_vs_gpu(gpu_kernels, dt, bias, act):
    A, W, b = gemm_inputs()
    (Ag, Ac), (Wg, Wc) = rounded(A, dt), rounded(W, dt)
    Cc = torch.empty(M_, N_)
    K.compile_cpu(K.gemm_kernel, N_, K_, bias=bias, act=act)(Ac, Wc, b, Cc)
    Cg = torch.empty(M_, N_, dtype=dt, device="cuda")
    K.gemm_kernel(N_, K_, bias=bias, act=act, dtype=TL_NAME[dt])(Ag, Wg, b.cuda(), Cg)
    assert maxerr(Cg.cpu(), Cc) < TOL_GPU


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
@pytest.mark.parametrize("splits,bias", SPLIT_CASES)
def test_gemm_splitk_cpu_vs_gpu(gpu_kernels, dt, splits, bias):
    A, W, b = gemm_inputs()
    (Ag, Ac), (Wg, Wc) = rounded(A, dt), rounded(W, dt)
    Pc = splitk_partials(Ac, Wc, b, splits, bias)
    Pg = torch.full((splits, M_, N_), float("nan"), device="cuda")
    K.gemm_splitk_kernel(N_, K_, splits, bias=bias, bm=16, bn=32, bk=16, dtype=TL_NAME[dt])(Ag, Wg, b.cuda(), Pg)
    # fp32 partials of the same 16-bit operands: only the summation order differs
    assert maxerr(Pg.cpu(), Pc) < 1e-3


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
def test_geglu_cpu_vs_gpu(gpu_kernels, dt):
    r = gen(3)
    A, W = r(M_, K_), r(2 * N_, K_, scale=0.1)
    (Ag, Ac), (Wg, Wc) = rounded(A, dt), rounded(W, dt)
    Cc = torch.empty(M_, N_)
    K.compile_cpu(K.gemm_geglu_kernel, N_, K_)(Ac, Wc, Cc)
    Cg = torch.empty(M_, N_, dtype=dt, device="cuda")
    K.gemm_geglu_kernel(N_, K_, dtype=TL_NAME[dt])(Ag, Wg, Cg)
    assert maxerr(Cg.cpu(), Cc) < TOL_GPU


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
@pytest.mark.parametrize("residual,bias", LN_CASES)
def test_add_ln_cpu_vs_gpu(gpu_kernels, dt, residual, bias):
    X, R, w, b = ln_inputs()
    Rg, Rc = rounded(R, dt)
    Xc, Xg = X.clone(), X.cuda()
    Yc = torch.empty(LN_M, LN_D)
    K.compile_cpu(K.add_ln_kernel, LN_D, residual=residual, bias=bias)(Xc, Rc, w, b, Yc)
    Yg = torch.empty(LN_M, LN_D, dtype=dt, device="cuda")
    K.add_ln_kernel(LN_D, residual=residual, bias=bias, dtype=TL_NAME[dt])(Xg, Rg, w.cuda(), b.cuda(), Yg)
    assert torch.equal(Xg.cpu(), Xc)  # both residual streams are bit-identical
    assert maxerr(Yg.cpu(), Yc) < TOL_GPU


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
def test_rope_cpu_vs_gpu(gpu_kernels, dt):
    qkv, cos, sin = rope_inputs()
    qg, qc = rounded(qkv, dt)
    K.compile_cpu(K.rope_kernel, RH, RDh)(qc, cos, sin)
    K.rope_kernel(RH, RDh, dtype=TL_NAME[dt])(qg, cos.cuda(), sin.cuda())
    assert maxerr(qg.cpu(), qc) < TOL_GPU
    assert torch.equal(qg[:, 2 * RH * RDh :].cpu().float(), qc[:, 2 * RH * RDh :])


@needs_cuda
@pytest.mark.parametrize("dt", GPU_DTYPES)
@pytest.mark.parametrize("window,dynamic", ATTN_CASES)
def test_attn_cpu_vs_gpu(gpu_kernels, dt, window, dynamic):
    qkv, lens = attn_inputs()
    qg, qc = rounded(qkv, dt)
    shape = (None, None) if dynamic else (AB, AL)
    Oc = torch.empty(AB, AL, AH * ADh)
    K.compile_cpu(K.attn_kernel, *shape, AH, ADh, window=window)(qc, lens, Oc)
    Og = torch.full((AB, AL, AH * ADh), float("nan"), dtype=dt, device="cuda")
    K.attn_kernel(*shape, AH, ADh, window=window, dtype=TL_NAME[dt])(qg, lens.cuda(), Og)
    Og = Og.cpu()
    assert torch.isfinite(Og).all()
    assert torch.count_nonzero(Og[2]) == 0
    assert valid_rows_err(Og, Oc, lens) < TOL_GPU_ATTN


OCCUPANCY_TILES = [dict(bm=64, bn=64, stages=2, threads=128, min_blocks=2), ATTN_OCCUPIED,
                   dict(bm=128, bn=64, stages=2, threads=256, min_blocks=2)]


@pytest.mark.parametrize("varlen", [False, True])
def test_occupancy_annotations_only_when_asked_and_only_on_the_gpu(varlen):
    # min_blocks > 1 puts the launch bound and both register budgets into the GPU kernel; the default and the
    # CPU specialisation carry none of them (so the default's CUDA source is what it was before the option)
    def script(**kw):
        args = (AL, AH, ADh) if varlen else (None, None, AH, ADh)
        return (K.attn_varlen_kernel if varlen else K.attn_kernel).get_tir(*args, **kw).script()

    occupied = script(bm=64, bn=64, stages=2, threads=128, min_blocks=3)
    assert "min_blocks_per_sm" in occupied and "annotate_consumer_reg_alloc" in occupied
    assert "136" in occupied  # consumer_registers(3, 128)
    for plain in (script(), script(min_blocks=3, cpu=True, dtype="float32")):
        assert "min_blocks_per_sm" not in plain and "reg_alloc" not in plain


@pytest.mark.parametrize("factory,args", [("gemm_kernel", (64, 64)), ("gemm_splitk_kernel", (64, 64, 2)),
                                          ("gemm_geglu_kernel", (64, 64))])
def test_gemm_occupancy_annotations_only_when_asked_and_only_on_the_gpu(factory, args):
    def script(**kw):
        return getattr(K, factory).get_tir(*args, **kw).script()

    occupied = script(bm=128, bn=128, bk=64, stages=2, threads=256, min_blocks=2)
    assert "min_blocks_per_sm" in occupied and "annotate_consumer_reg_alloc" in occupied
    assert "104" in occupied  # consumer_registers(2, 256)
    for plain in (script(), script(min_blocks=2, cpu=True, dtype="float32")):
        assert "min_blocks_per_sm" not in plain and "reg_alloc" not in plain


@needs_cuda
@pytest.mark.parametrize("window", [0, 17])
@pytest.mark.parametrize("tile", OCCUPANCY_TILES)
def test_attn_varlen_gpu_with_several_blocks_per_sm(window, tile):
    # a smaller register budget per block (setmaxnreg) must neither hang nor change the results
    qkv, lens = attn_inputs(B=6, lens=[0, 64, 5, 65, 80, 1], seed=21)
    packed, starts = packed_from_dense(qkv, lens)
    qg, _ = rounded(packed, torch.bfloat16)
    kern = K.attn_varlen_kernel(AL, AH, ADh, window=window, **tile)
    O = torch.full((packed.shape[0], AH * ADh), float("nan"), dtype=torch.bfloat16, device="cuda")
    kern(qg, starts.cuda(), lens.cuda(), with_dummies(K.varlen_blocks(lens.numpy(), AL, tile["bm"])).cuda(), O)
    ref = ref_attn(qkv.to(torch.bfloat16).float(), lens, window)
    offset = 0
    for b, n in enumerate(lens.tolist()):
        if n:
            assert maxerr(O[offset : offset + n].cpu(), ref[b, :n]) < TOL_GPU_ATTN
        offset += n


@needs_cuda
@pytest.mark.parametrize("window", [0, 17])
def test_attn_dense_gpu_with_several_blocks_per_sm(window):
    qkv, lens = attn_inputs()
    qg, qc = rounded(qkv, torch.bfloat16)
    O = torch.full((AB, AL, AH * ADh), float("nan"), dtype=torch.bfloat16, device="cuda")
    K.attn_kernel(None, None, AH, ADh, window=window, **ATTN_OCCUPIED)(qg, lens.cuda(), O)
    assert torch.isfinite(O).all() and torch.count_nonzero(O[2]) == 0
    assert valid_rows_err(O.cpu(), ref_attn(qc.view(qkv.shape), lens, window), lens) < TOL_GPU_ATTN


@needs_cuda
@pytest.mark.parametrize("factory,tile", [
    ("gemm_kernel", dict(bm=128, bn=128, bk=64, stages=2, threads=256)),
    ("gemm_kernel", dict(bm=128, bn=128, bk=64, stages=2, threads=128)),
    ("gemm_splitk_kernel", dict(bm=128, bn=128, bk=64, stages=2, threads=256)),
    ("gemm_geglu_kernel", dict(bm=128, bn=64, bk=64, stages=3, threads=256)),
])
def test_gemms_with_two_blocks_per_sm_give_the_same_bits(factory, tile):
    # a smaller register budget per block must neither hang nor change the results: same tile, same MMA order
    r = gen(41)
    M, N, Kd = 300, 200, 136  # ragged in every dimension
    A = r(M, Kd).to(torch.bfloat16).cuda()
    W = r(2 * N if factory == "gemm_geglu_kernel" else N, Kd, scale=0.1).to(torch.bfloat16).cuda()
    b = r(N).cuda()

    def run(**kw):
        if factory == "gemm_geglu_kernel":
            out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
            K.gemm_geglu_kernel(N, Kd, **tile, **kw)(A, W, out)
        elif factory == "gemm_splitk_kernel":
            out = torch.full((2, M, N), float("nan"), device="cuda")
            K.gemm_splitk_kernel(N, Kd, 2, bias=True, **tile, **kw)(A, W, b, out)
        else:
            out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
            K.gemm_kernel(N, Kd, bias=True, **tile, **kw)(A, W, b, out)
        return out.cpu()

    one, two = run(), run(min_blocks=2)
    assert torch.isfinite(two).all()
    assert torch.equal(one, two)


# Weight prefetch before the PDL wait, and the early release of the next kernel (both off by default).
PF_N, PF_K = 200, 136  # 200 weight rows over 3 sharing blocks of 32 threads (bn=64): several rounds each
PF_TILE = dict(bm=64, bn=64, bk=64, stages=2, threads=32)


def test_prefetch_and_release_only_when_asked_and_only_on_the_gpu():
    asked = dict(prefetch=3, release=True)
    scripts = {
        "gemm": lambda **kw: K.gemm_kernel.get_tir(PF_N, PF_K, **PF_TILE, **kw).script(),
        "splitk": lambda **kw: K.gemm_splitk_kernel.get_tir(PF_N, PF_K, 2, **PF_TILE, **kw).script(),
        "geglu": lambda **kw: K.gemm_geglu_kernel.get_tir(PF_N, PF_K, **PF_TILE, **kw).script(),
    }
    for name, script in scripts.items():
        on = script(**asked)
        assert "laya_prefetch_l2" in on and "pdl_trigger" in on, name
        assert f"{PF_K * 2})" in on  # one bulk prefetch per weight row: K 16-bit values
        rounds = 5 if name == "geglu" else 3  # ceil(ceil(rows / 3 blocks) / 32 threads); GEGLU's W has 2F rows
        assert f"range({rounds})" in on, name
        for plain in (script(), script(cpu=True, dtype="float32", **asked)):
            assert "laya_prefetch_l2" not in plain and "pdl_trigger" not in plain, name
    ln = K.add_ln_kernel.get_tir(64, release=True).script()
    attn = K.attn_varlen_kernel.get_tir(AL, AH, ADh, release=True).script()
    assert "pdl_trigger" in ln and "pdl_trigger" in attn
    assert "pdl_trigger" not in K.add_ln_kernel.get_tir(64).script()


def test_prefetch_refuses_bad_settings_by_name():
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        K.gemm_kernel.get_tir(PF_N, PF_K, prefetch=-1)
    with pytest.raises(ValueError, match="K=67"):
        K.gemm_kernel.get_tir(PF_N, 67, prefetch=2)  # 134-byte rows: no 16-byte bulk prefetch
    K.gemm_kernel.get_tir(PF_N, 67, prefetch=2, cpu=True, dtype="float32")  # (a no-op on the CPU)


@needs_cuda
@pytest.mark.parametrize("prefetch", [1, 3, 64])
def test_chained_gemms_with_prefetch_and_release_give_the_same_bits(prefetch):
    # Each kernel reads the one before it: released early, a kernel must still wait for its input, and the
    # prefetch is only a cache hint.  Eager and as a CUDA graph (programmatic edges), bit for bit.
    r = gen(31)
    A = r(150, PF_K).to(torch.bfloat16).cuda()
    W1, W2 = (r(PF_K, PF_K, scale=0.1).to(torch.bfloat16).cuda() for _ in range(2))
    Wg = r(2 * PF_N, PF_K, scale=0.1).to(torch.bfloat16).cuda()
    b = r(PF_K).cuda()

    def chain(**kw):
        first = K.gemm_kernel(PF_K, PF_K, bias=True, **PF_TILE, **kw)
        second = K.gemm_splitk_kernel(PF_K, PF_K, 2, bias=True, **PF_TILE, **kw)
        geglu = K.gemm_geglu_kernel(PF_N, PF_K, **PF_TILE, **kw)
        C = torch.empty(150, PF_K, dtype=torch.bfloat16, device="cuda")
        P = torch.empty(2, 150, PF_K, device="cuda")
        S = torch.empty(150, PF_K, dtype=torch.bfloat16, device="cuda")
        G = torch.empty(150, PF_N, dtype=torch.bfloat16, device="cuda")

        def run():
            first(A, W1, b, C)
            second(C, W2, b, P)
            torch.sum(P, 0, out=S)
            geglu(S, Wg, G)
        return run, (C, P, G)

    run, want = chain()
    run()
    want = [t.clone() for t in want]
    run, got = chain(prefetch=prefetch, release=True)
    for _ in range(3):
        run()
        torch.cuda.synchronize()
        assert all(torch.equal(g, w) for g, w in zip(got, want))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    for t in got:
        t.zero_()
    graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(g, w) for g, w in zip(got, want))

"""GPU TileLang kernels against fp32 torch at ModernBERT-sized shapes (CUDA + tilelang, else skipped)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
if not torch.cuda.is_available():
    pytest.skip("the TileLang GPU kernels need CUDA", allow_module_level=True)

from _decide_cases import decide_inputs, ref_decide  # noqa: E402
from laya import tl_kernels as K  # noqa: E402

pytestmark = [pytest.mark.fast_extra, pytest.mark.gpu]

DTYPES = [torch.bfloat16, torch.float16]
TL = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
TOL = 0.05
TOL_ATTN = 0.02
DEV = "cuda"


def rnd(*shape, scale=1.0, seed=0, dtype=torch.float32):
    g = torch.Generator(device=DEV).manual_seed(seed)
    return (torch.randn(*shape, generator=g, device=DEV) * scale).to(dtype)


def err(a, b):
    return (a.float() - b.float()).abs().max().item()


GEMM_CASES = [
    (2304, 768, False, "none"),
    (768, 768, True, "gelu"),
    (3072, 768, True, "relu"),
    (3072, 1024, False, "none"),
    (1024, 1024, True, "gelu"),
]
GEGLU_CASES = [(1152, 768), (2624, 1024)]
LN_CASES = [(True, False), (True, True), (False, True), (False, False)]
ATTN_CASES = [(80, 0, True), (200, 64, True), (200, 0, True), (1024, 64, False), (1024, 0, False), (80, 64, False)]
ATTN_B, ATTN_H, ATTN_DH = 3, 12, 64
# (d, width, k): 770 a ragged CLS copy; k = width fills the tile; 128 is the first width wider than the
# thread count (the fast path builds it for 65-128 option columns)
DECIDE_CASES = ([(768, 64, k) for k in (1, 2, 5, 16, 64)] + [(770, 16, k) for k in (1, 5, 16)]
                + [(1024, 128, k) for k in (2, 65, 128)])
TOL_DECIDE = 1e-4  # fast-math exp/log/division


@pytest.fixture(scope="module", autouse=True)
def _precompile():
    """Compile every kernel this file uses in parallel first (nvcc dominates the run time)."""
    reqs = []
    for dt in TL.values():
        reqs += [(K.gemm_kernel, (N, Kd), dict(bias=b, act=a, dtype=dt)) for N, Kd, b, a in GEMM_CASES]
        reqs += [(K.gemm_geglu_kernel, c, dict(dtype=dt)) for c in GEGLU_CASES]
        reqs += [(K.add_ln_kernel, (768,), dict(residual=r, bias=b, dtype=dt)) for r, b in LN_CASES]
        reqs.append((K.rope_kernel, (12, 64), dict(dtype=dt)))
        for L, w, dyn in ATTN_CASES:
            shape = (None, None) if dyn else (ATTN_B, L)
            reqs.append((K.attn_kernel, (*shape, ATTN_H, ATTN_DH), dict(window=w, dtype=dt)))
        reqs.append((K.attn_kernel, (None, None, 2, 64), dict(window=0, dtype=dt)))
        reqs.append((K.rope_positions_kernel, (12, 64), dict(dtype=dt)))
        reqs += [(K.attn_varlen_kernel, (512, ATTN_H, ATTN_DH), dict(window=w, dtype=dt, **tiles))
                 for w in (0, 64) for tiles in ({}, dict(bm=128, bn=128, stages=2, threads=256))]
        reqs += [(K.decide_features_kernel, (d,), dict(width=w, dtype=dt)) for d, w in {c[:2] for c in DECIDE_CASES}]
    try:
        K.compile_many(reqs)
    except Exception as e:  # the tests then compile lazily, one by one
        import warnings

        warnings.warn(f"parallel precompile failed: {type(e).__name__}: {e}")


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("N,Kd,bias,act", GEMM_CASES)
def test_gemm(dt, N, Kd, bias, act):
    M = 200  # not a tile multiple
    A = rnd(M, Kd, seed=1, dtype=dt)
    W = rnd(N, Kd, scale=0.02, seed=2, dtype=dt)
    b = rnd(N, scale=0.5, seed=3)
    C = torch.full((M, N), float("nan"), dtype=dt, device=DEV)
    K.gemm_kernel(N, Kd, bias=bias, act=act, dtype=TL[dt])(A, W, b, C)
    ref = A.float() @ W.float().T + (b if bias else 0)
    ref = {"none": ref, "gelu": torch.nn.functional.gelu(ref), "relu": ref.relu()}[act]
    assert err(C, ref) < TOL


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("F,Kd", GEGLU_CASES)
def test_gemm_geglu(dt, F, Kd):
    M = 256 if Kd == 768 else 200
    A = rnd(M, Kd, seed=4, dtype=dt)
    W = rnd(2 * F, Kd, scale=0.02, seed=5, dtype=dt)
    C = torch.full((M, F), float("nan"), dtype=dt, device=DEV)
    K.gemm_geglu_kernel(F, Kd, dtype=TL[dt])(A, W, C)
    y = A.float() @ W.float().T
    assert err(C, torch.nn.functional.gelu(y[:, :F]) * y[:, F:]) < TOL


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("residual,bias", LN_CASES)
def test_add_ln(dt, residual, bias):
    M, D = 100, 768
    X = rnd(M, D, scale=3000.0, seed=6)
    R = rnd(M, D, scale=50.0, seed=7, dtype=dt)
    w, b = 1 + rnd(D, scale=0.1, seed=8), rnd(D, scale=0.1, seed=9)
    X0 = X.clone()
    Y = torch.full((M, D), float("nan"), dtype=dt, device=DEV)
    K.add_ln_kernel(D, residual=residual, bias=bias, dtype=TL[dt])(X, R, w, b, Y)
    expect = X0 + R.float() if residual else X0
    assert torch.equal(X, expect)
    ref = torch.nn.functional.layer_norm(expect, (D,), w, b if bias else None, 1e-5)
    assert err(Y, ref) < TOL


@pytest.mark.parametrize("dt", DTYPES)
def test_rope(dt):
    M, L, H, Dh = 200, 80, 12, 64  # 200 rows = 2.5 sequences: positions wrap
    qkv = rnd(M, 3 * H * Dh, seed=10, dtype=dt)
    inv = 10000.0 ** (-torch.arange(Dh // 2, device=DEV) / (Dh // 2))
    ang = torch.arange(L, device=DEV)[:, None] * inv[None]
    cos, sin = ang.cos().float().contiguous(), ang.sin().float().contiguous()
    before = qkv.clone()
    K.rope_kernel(H, Dh, dtype=TL[dt])(qkv, cos, sin)
    pos = torch.arange(M, device=DEV) % L
    x = before[:, : 2 * H * Dh].float().view(M, 2 * H, Dh)
    c, s = cos[pos][:, None], sin[pos][:, None]
    ref = torch.cat([x[..., : Dh // 2] * c - x[..., Dh // 2 :] * s, x[..., Dh // 2 :] * c + x[..., : Dh // 2] * s], -1)
    assert err(qkv[:, : 2 * H * Dh], ref.reshape(M, -1)) < TOL
    assert torch.equal(qkv[:, 2 * H * Dh :], before[:, 2 * H * Dh :])


def window_mask(L, window):
    """The bidirectional band, taken from transformers when it is installed (the convention to match)."""
    idx = torch.arange(L, device=DEV)
    try:
        from transformers.masking_utils import sliding_window_bidirectional_overlay

        f = sliding_window_bidirectional_overlay(window)
        return f(0, 0, idx[:, None], idx[None, :])
    except ImportError:
        return (idx[:, None] - idx[None, :]).abs() <= window


def sdpa_ref(qkv, lens, window):
    B, L, _, H, Dh = qkv.shape
    q, k, v = (qkv[:, :, i].float().transpose(1, 2) for i in range(3))
    keep = torch.arange(L, device=DEV)[None, None, :] < lens.long()[:, None, None]
    if window:
        keep = keep & window_mask(L, window)[None]
    bias = torch.zeros(B, 1, L, L, device=DEV).masked_fill(~keep[:, None], float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    return out.transpose(1, 2).reshape(B, L, H * Dh)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("L,window,dynamic", ATTN_CASES)
def test_attention(dt, L, window, dynamic):
    B, H, Dh = ATTN_B, ATTN_H, ATTN_DH
    lens = torch.tensor([L, L - 7, max(1, L // 3)], dtype=torch.int32, device=DEV)
    qkv = rnd(B, L, 3, H, Dh, seed=11, dtype=dt)
    shape = (None, None) if dynamic else (B, L)
    O = torch.full((B, L, H * Dh), float("nan"), dtype=dt, device=DEV)
    K.attn_kernel(*shape, H, Dh, window=window, dtype=TL[dt])(qkv, lens, O)
    assert torch.isfinite(O).all()
    ref = sdpa_ref(qkv, lens, window)
    for b, n in enumerate(lens.tolist()):
        assert err(O[b, :n], ref[b, :n]) < TOL_ATTN


@pytest.mark.parametrize("dt", DTYPES)
def test_attention_empty_sequence(dt):
    B, L, H, Dh = 2, 80, 2, 64
    lens = torch.tensor([0, 33], dtype=torch.int32, device=DEV)
    qkv = rnd(B, L, 3, H, Dh, seed=12, dtype=dt)
    O = torch.full((B, L, H * Dh), float("nan"), dtype=dt, device=DEV)
    K.attn_kernel(None, None, H, Dh, window=0, dtype=TL[dt])(qkv, lens, O)
    assert torch.count_nonzero(O[0]) == 0
    assert torch.isfinite(O).all()


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("window", [0, 64])
@pytest.mark.parametrize("tiles", [{}, dict(bm=128, bn=128, stages=2, threads=256)])  # defaults; fast.py's large
def test_attention_varlen_matches_dense(dt, window, tiles):
    """Packed rows (plus dummy rows of no sequence) against SDPA on the dense layout of the same batch;
    the launch is the live query blocks' table with no-op (-1) entries around them, as a graph pads it."""
    B, L, H, Dh = 5, 300, ATTN_H, ATTN_DH
    lens = torch.tensor([300, 77, 1, 0, 190], dtype=torch.int32, device=DEV)
    qkv = rnd(B, L, 3, H, Dh, seed=13, dtype=dt)
    packed = torch.cat([qkv[b, :n] for b, n in enumerate(lens.tolist())] + [rnd(5, 3, H, Dh, seed=14, dtype=dt)])
    starts = torch.cumsum(lens, 0, dtype=torch.int32) - lens
    O = torch.full((packed.shape[0], H * Dh), float("nan"), dtype=dt, device=DEV)
    live = torch.from_numpy(K.varlen_blocks(lens.cpu().numpy(), 512, tiles.get("bm", 64)))
    blocks = torch.cat([torch.full((2,), -1, dtype=torch.int32), live, torch.full((3,), -1, dtype=torch.int32)])
    K.attn_varlen_kernel(512, H, Dh, window=window, dtype=TL[dt], **tiles)(packed.contiguous(), starts, lens,
                                                                           blocks.to(DEV), O)
    ref = sdpa_ref(qkv, lens, window)
    for b, (start, n) in enumerate(zip(starts.tolist(), lens.tolist())):
        if n:  # (an empty sequence has no rows; SDPA's are NaN)
            assert err(O[start : start + n], ref[b, :n]) < TOL_ATTN
    assert torch.isnan(O[-5:]).all()  # rows of no sequence are left alone


@pytest.mark.parametrize("dt", DTYPES)
def test_rope_positions_matches_wrapped(dt):
    M, L, H, Dh = 200, 80, 12, 64
    qkv = rnd(M, 3 * H * Dh, seed=15, dtype=dt)
    ang = torch.arange(L, device=DEV)[:, None] * (10000.0 ** (-torch.arange(Dh // 2, device=DEV) / (Dh // 2)))[None]
    cos, sin = ang.cos().float().contiguous(), ang.sin().float().contiguous()
    expected = qkv.clone()
    K.rope_kernel(H, Dh, dtype=TL[dt])(expected, cos, sin)
    order = torch.randperm(M, device=DEV)
    shuffled = qkv[order].contiguous()
    K.rope_positions_kernel(H, Dh, dtype=TL[dt])(shuffled, cos, sin, (order % L).to(torch.int32))
    assert torch.equal(shuffled, expected[order])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("d,width,k", DECIDE_CASES)
def test_decide_features(dt, d, width, k):
    kern = K.decide_features_kernel(d, width=width, dtype=TL[dt])
    for B in (1, 3, 7):  # one compiled kernel, runtime B and k
        S, live, rows = decide_inputs(B, k, d, seed=100 * k + B)
        S, live, rows = S.to(dt).to(DEV), live.to(DEV), rows.to(DEV)  # 16-bit scores, as the scorer gives
        Lg = torch.full((B, k), float("nan"), device=DEV)
        A = torch.full((B, d + 4), float("nan"), device=DEV)
        kern(S, live, rows, Lg, A)
        ref_logits, ref_act = ref_decide(S, live, rows)
        assert torch.equal(Lg, ref_logits)  # the 16-bit scores widened exactly, masked columns -1e4
        assert torch.equal(A[:, :d], rows[:, 0])  # the CLS row, exact
        assert torch.isfinite(A).all()
        assert err(A[:, d:], ref_act[:, d:]) <= TOL_DECIDE
        if B > 2 and k > 1:
            assert ref_act[2, d + 1] == 0 and A[2, d + 1] == 0  # the tie: top2 == top1


def test_gpu_rejects_fp32():
    for call in (
        lambda: K.gemm_kernel(256, 256, dtype="float32"),
        lambda: K.attn_kernel(None, None, 2, 64, dtype="float32"),
        lambda: K.add_ln_kernel(256, dtype="float32"),
        lambda: K.decide_features_kernel(256, dtype="float32"),
    ):
        with pytest.raises(ValueError, match="dtype"):
            call()


def test_window_convention_matches_transformers():
    tr = pytest.importorskip("transformers.masking_utils")
    idx = torch.arange(200, device=DEV)
    got = tr.sliding_window_bidirectional_overlay(64)(0, 0, idx[:, None], idx[None, :])
    assert torch.equal(got, (idx[:, None] - idx[None, :]).abs() <= 64)
    assert math.isfinite(K.MASK_NEG)

"""laya.fp8's quantisation rule against a float64 reference, and the FP8 fast path's composition on the CPU.

The e4m3 grid is built here from its definition (1 sign, 4 exponent bits with bias 7, 3 mantissa bits,
subnormals, no infinities, 448 the largest finite value), not from torch's cast, so the cast is checked.
The composition test runs FastLaya(cpu=True, fp8=True) against the eager model whose four encoder
Linears multiply fake-quantised fp32 operands: the same rule at the same points.  Tolerances: 1e-3 on
logits and 1e-2 relative on act logits (fp32 summation order moves an element across a rounding
boundary now and then); FP8 against plain fp32 differs by ~2e-2 on this checkpoint, so a missed or
misplaced quantisation fails.
"""

from __future__ import annotations

import contextlib
import shutil

import pytest

torch = pytest.importorskip("torch")

from laya import fp8  # noqa: E402

pytestmark = pytest.mark.skipif(not hasattr(torch, "float8_e4m3fn"), reason="this torch has no float8_e4m3fn")


def e4m3_grid() -> torch.Tensor:
    """Every finite non-negative e4m3 value in float64, ascending."""
    values = [m / 8 * 2.0 ** -6 for m in range(8)]  # subnormals (and zero)
    values += [(1 + m / 8) * 2.0 ** (e - 7) for e in range(1, 16) for m in range(8) if (e, m) != (15, 7)]
    return torch.tensor(sorted(values), dtype=torch.float64)


def ref_round(v: torch.Tensor) -> torch.Tensor:
    """Nearest e4m3 value of float64 `v` (within +-448), ties to the even mantissa."""
    grid = e4m3_grid()
    a = v.abs().clamp(max=448.0)
    hi = torch.searchsorted(grid, a).clamp(max=len(grid) - 1)
    lo = (hi - 1).clamp(min=0)
    dlo, dhi = a - grid[lo], grid[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))  # grid index parity = mantissa parity
    out = torch.where(pick_hi, grid[hi], grid[lo])
    return out * v.sign()


def ref_quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    x = x.double()
    amax = x.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / 448.0, torch.ones_like(amax))
    return ref_round(x / scale[:, None]), scale


def test_grid_has_the_e4m3_values():
    grid = e4m3_grid()
    assert len(grid) == 127 and grid[-1] == 448.0 and grid[1] == 2.0 ** -9
    assert torch.equal(grid.float().to(fp8.E4M3).double(), grid)  # representable values survive the cast


def test_quantize_rows_matches_the_float64_rule():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 96, generator=g) * torch.logspace(-3, 3, 64)[:, None]
    q, scale = fp8.quantize_rows(x)
    ref_q, ref_scale = ref_quantize(x)
    assert q.dtype == fp8.E4M3 and scale.dtype == torch.float32 and scale.shape == (64,)
    assert torch.allclose(scale.double(), ref_scale, rtol=1e-6, atol=0)
    # the fp32 product x * (448 / amax) can differ from float64's x / scale in its last bit, which
    # moves a value across a rounding boundary only at an exact tie: allow one element in 10^3
    mismatch = (q.double() != ref_q).float().mean().item()
    assert mismatch <= 1e-3
    assert q.double().abs().amax(dim=1).eq(448.0).all()  # each row's largest value maps to 448


def test_ties_round_to_even_and_saturation_holds():
    # 448 is the row maximum; the others sit exactly halfway between two e4m3 neighbours
    grid = e4m3_grid()
    mids = (grid[40:60:2] + grid[41:61:2]) / 2  # between an even and an odd mantissa: round to the even one
    x = torch.cat([torch.tensor([448.0], dtype=torch.float64), mids, -mids]).float()[None]
    q, scale = fp8.quantize_rows(x)
    assert scale.item() == 1.0
    assert torch.equal(q.double()[0, 1:11], grid[40:60:2]) and torch.equal(q.double()[0, 11:], -grid[40:60:2])
    # values past 448 after scaling cannot occur (amax maps to 448) but the clamp is the cast's guard
    big = torch.tensor([[1e30, -1e30, 3.0]])
    qb, sb = fp8.quantize_rows(big)
    assert qb[0, :2].float().tolist() == [448.0, -448.0] and torch.isfinite(qb.float()).all()


def test_zero_rows_and_empty_rows_get_scale_one():
    x = torch.zeros(3, 32)
    x[1, 5] = -2.0
    q, scale = fp8.quantize_rows(x)
    assert scale.tolist() == [1.0, torch.tensor(2.0 / 448.0).item(), 1.0] and q[0].float().abs().sum() == 0
    assert fp8.dequantize_rows(q, scale)[1, 5].item() == -2.0
    q0, s0 = fp8.quantize_rows(torch.zeros(2, 0))
    assert q0.shape == (2, 0) and s0.tolist() == [1.0, 1.0]


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="NaN or infinite"):
        fp8.quantize_rows(torch.tensor([[1.0, float("nan")]]))
    with pytest.raises(ValueError, match="2-D"):
        fp8.quantize_rows(torch.ones(2, 3, 4))
    with pytest.raises(ValueError, match="multiples of 16"):
        fp8.Fp8Weight(torch.ones(24, 20))


def test_dequantised_error_is_within_half_an_e4m3_step():
    x = torch.randn(16, 256, generator=torch.Generator().manual_seed(3))
    q, scale = fp8.quantize_rows(x)
    err = (fp8.dequantize_rows(q, scale) - x).abs()
    # relative step of e4m3 normals is 2^-3: half of it, plus the subnormal floor of each row
    assert (err <= x.abs() * 2.0 ** -4 + scale[:, None] * 2.0 ** -10 + 1e-12).all()


def test_gemm_multiplies_the_dequantised_operands():
    g = torch.Generator().manual_seed(5)
    w, bias, a = torch.randn(48, 64, generator=g), torch.randn(48, generator=g), torch.randn(10, 64, generator=g) * 3
    weight = fp8.Fp8Weight(w, bias)
    assert weight.q.shape == (48, 64) and weight.scale.shape == (1, 48)
    assert torch.allclose(weight.scale.double().view(-1), w.double().abs().amax(1) / 448, rtol=1e-6)
    aq, ascale = fp8.quantize_rows(a)
    out = fp8.gemm(aq, ascale, weight, torch.float32)
    ref = fp8.dequantize_rows(aq, ascale).double() @ weight.dequantized().double().t() + bias.double()
    assert (out.double() - ref).abs().max().item() <= 1e-4 * ref.abs().max().item()


def test_supported_says_why_not_on_the_cpu():
    why = fp8.supported(torch.device("cpu"))
    assert why is not None and "CUDA" in why


def test_tilelang_backend_names_an_unknown_precision():
    from laya.backends.tilelang import TileLangBackend

    with pytest.raises(ValueError, match="precision='fp9'.*'fp8'"):
        TileLangBackend(object(), precision="fp9")


def test_fp8_needs_bf16_on_the_gpu(agent):
    from laya.fast import FastLaya

    with pytest.raises(ValueError, match="fp8=True runs bf16"):
        FastLaya(agent.model, dtype=torch.float16, fp8=True)


# ---- the composition (TileLang's CPU specialisation) -----------------------------------------------

@contextlib.contextmanager
def fake_quantised_encoder(encoder):
    """Each encoder Linear multiplies fp32 copies of its e4m3 operands (laya.fp8's rule) while inside."""
    saved = []
    for layer in encoder.layers:
        for lin in (layer.attn.Wqkv, layer.attn.Wo, layer.mlp.Wi, layer.mlp.Wo):
            weight = fp8.Fp8Weight(lin.weight, lin.bias)

            def forward(x, weight=weight):
                q, scale = fp8.quantize_rows(x.reshape(-1, x.shape[-1]))
                y = fp8.dequantize_rows(q, scale) @ weight.dequantized().t()
                y = y if weight.b is None else y + weight.b
                return y.reshape(*x.shape[:-1], -1)

            saved.append((lin, lin.__dict__.get("forward")))
            lin.forward = forward
    try:
        yield
    finally:
        for lin, previous in saved:
            del lin.forward
            if previous is not None:
                lin.forward = previous


@pytest.fixture(scope="module")
def fp8_model(tmp_path_factory):
    pytest.importorskip("tilelang")
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("TileLang's C target needs a C++ compiler")
    from make_checkpoint import make_checkpoint

    import laya

    path = make_checkpoint(str(tmp_path_factory.mktemp("fp8") / "tiny"), "tiny", "wordpiece", seed=7, std=0.1)
    agent = laya.load(path, device="cpu")
    from laya.fast import FastLaya

    return agent, FastLaya(agent.model, max_len=256, cpu=True, pad_id=agent.tok.pad_token_id, fp8=True)


@pytest.mark.fast_extra
@pytest.mark.parametrize("lens", [[7], [40], [150], [13, 60, 33, 20, 50], [200, 17]])
def test_fp8_composition_matches_fake_quantised_eager(fp8_model, lens):
    from _fast_requests import make_batch

    agent, fast = fp8_model
    batch = make_batch(lens, 3, seed=len(lens) * 7 + lens[0])
    live = batch[3]
    with torch.no_grad():
        fp32_logits, _ = agent.model(*batch)
        with fake_quantised_encoder(agent.model.encoder):
            ref_logits, ref_act = agent.model(*batch)
        logits, act = fast(*batch)
    assert (logits - ref_logits)[live].abs().max().item() <= 1e-3
    assert (act - ref_act).abs().max().item() <= 1e-2 * (ref_act.abs().max().item() + 1)
    assert fast.fp8 and all(isinstance(layer["qkv"], fp8.Fp8Weight) for layer in fast.layers)
    assert "up" not in fast.sets[0] and "qkv" not in fast.sets[0]  # the encoder's GEMMs are the 8-bit ones
    del fp32_logits

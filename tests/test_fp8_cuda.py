"""FP8 on the GPU (sm_90+): the quantising kernels against laya.fp8's rule, and precision='fp8' through the
Agent against the fake-quantised fp32 eager model (CUDA + tilelang + Hopper, else skipped).

Kernel tolerances: scales within 1e-6 relative; e4m3 values equal except where fast-math moves a value
across a rounding tie (at most 1 element in 10^3, and then by one e4m3 step).  End to end: FP8 with bf16
between its GEMMs against fp32 operands rounded to e4m3 by the same rule: within 5% of the logit scale
(bf16 rounding of the GEMM outputs also moves elements across e4m3 boundaries).
"""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tilelang")
if not torch.cuda.is_available():
    pytest.skip("the FP8 kernels need CUDA", allow_module_level=True)

import laya  # noqa: E402
from _fast_requests import make_batch  # noqa: E402
from laya import fp8  # noqa: E402
from laya import tl_kernels as K  # noqa: E402
from laya.backends.base import BackendUnavailable  # noqa: E402
from laya.device import Precision  # noqa: E402
from test_fp8 import fake_quantised_encoder  # noqa: E402

pytestmark = [pytest.mark.fast_extra, pytest.mark.gpu]
HOPPER = fp8.supported(torch.device("cuda")) is None
needs_hopper = pytest.mark.skipif(not HOPPER, reason="FP8 GEMMs need sm_90")


def assert_quantised_like_reference(q, scale, ref_q, ref_scale):
    assert torch.allclose(scale, ref_scale, rtol=1e-6, atol=0)
    diff = q.float() != ref_q.float()
    assert diff.float().mean().item() <= 1e-3
    if diff.any():  # one e4m3 step at most: 2^-3 relative, or the subnormal step
        step = ref_q.float().abs() * 2.0 ** -3 + 2.0 ** -9
        assert ((q.float() - ref_q.float()).abs() <= step + 1e-6)[diff].all()


@needs_hopper
@pytest.mark.parametrize("width,glu,rows", [(1024, False, 1), (1024, False, 300), (2624, True, 77), (64, True, 5)])
def test_quant_rows_kernel_matches_the_rule(width, glu, rows):
    g = torch.Generator().manual_seed(width + rows)
    x = (torch.randn(rows, 2 * width if glu else width, generator=g) * 3).to("cuda", torch.bfloat16)
    x[0] = 0  # an all-zero row: scale 1
    from laya.fast import quant_threads

    kernel = K.quant_rows_kernel(width, glu=glu, threads=quant_threads(width))
    q = torch.empty(rows, width, dtype=fp8.E4M3, device="cuda")
    scale = torch.empty(rows, dtype=torch.float32, device="cuda")
    kernel(x, q, scale)
    v = x.float()
    if glu:
        v = torch.nn.functional.gelu(v[:, :width]) * v[:, width:]
    ref_q, ref_scale = fp8.quantize_rows(v)
    assert scale[0].item() == 1.0 and q[0].float().abs().sum().item() == 0
    assert_quantised_like_reference(q, scale, ref_q, ref_scale)


@needs_hopper
@pytest.mark.parametrize("rows,bm,threads", [(3, 1, 128), (333, 4, 32)])
def test_add_ln_quant_kernel_matches_add_ln_then_the_rule(rows, bm, threads):
    d = 1024
    g = torch.Generator().manual_seed(rows)
    x = (torch.randn(rows, d, generator=g) * 30).cuda()
    r = torch.randn(rows, d, generator=g).to("cuda", torch.bfloat16)
    w, b = (torch.rand(d, generator=g) + 0.5).cuda(), torch.zeros(d).cuda()
    x_ref = x.clone()
    q = torch.empty(rows, d, dtype=fp8.E4M3, device="cuda")
    scale = torch.empty(rows, dtype=torch.float32, device="cuda")
    K.add_ln_quant_kernel(d, bm=bm, threads=threads)(x, r, w, b, q, scale)
    x_ref += r.float()
    assert torch.allclose(x, x_ref, rtol=1e-6, atol=1e-4)  # X += R in place, as add_ln
    y = torch.nn.functional.layer_norm(x_ref, (d,), w, None, 1e-5)
    ref_q, ref_scale = fp8.quantize_rows(y)
    assert torch.allclose(scale, ref_scale, rtol=1e-4, atol=0)  # (LayerNorm's own fp32 reordering)
    assert (q.float() - ref_q.float()).abs().max().item() <= 448 * 2.0 ** -3


@needs_hopper
def test_precision_fp8_through_the_agent_matches_fake_quantised_fp32(tmp_path):
    from make_checkpoint import make_checkpoint

    path = make_checkpoint(str(tmp_path / "tiny"), "tiny", "wordpiece", seed=7, std=0.1)
    agent = laya.load(path, device="cuda")
    agent.precision = Precision(torch.bfloat16, True)
    assert agent.set_backend("tilelang", strict=True, precision="fp8") == "tilelang"
    backend = agent.backend_object
    assert backend.precision == "fp8" and backend.fast.fp8
    fp32 = laya.load(path, device="cuda")
    fp32.precision = Precision(torch.float32, False)
    for lens in ([40], [13, 60, 33, 20, 50], [200, 17]):
        batch = make_batch(lens, 3, seed=sum(lens))
        with torch.no_grad(), fake_quantised_encoder(fp32.model.encoder):
            ref, _ = fp32.model(*(t.cuda() for t in batch))
        for _ in range(4):  # eager runs, then the captured graph's replays
            logits, act = backend.fast(*batch)
        live = batch[3]
        scale = ref.cpu()[live].abs().max().item()
        assert torch.isfinite(logits).all() and torch.isfinite(act).all()
        assert (logits - ref.cpu())[live].abs().max().item() <= 0.05 * scale + 1e-3
    answers = agent.predict("The invoice total is wrong again!", {"urgent": {"type": "noul", "instructions": "Urgent?"}})
    assert 0.0 <= answers["answers"]["urgent"]["noul"] <= 1.0
    agent.close()
    fp32.close()


def test_fp8_where_it_cannot_run_warns_once_and_runs_bf16(tiny_checkpoint, monkeypatch):
    monkeypatch.setattr(fp8, "supported", lambda device: "FP8 GEMMs need a Hopper GPU (sm_90) or newer, this one is sm_80")
    agent = laya.load(tiny_checkpoint, device="cuda")
    agent.precision = Precision(torch.bfloat16, True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert agent.set_backend("tilelang", precision="fp8") == "tilelang"
    texts = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert texts == ["laya: tilelang precision 'fp8' is unavailable (FP8 GEMMs need a Hopper GPU (sm_90) or newer, "
                     "this one is sm_80); using bf16 instead."]
    assert agent.backend_object.precision == "bf16" and not agent.backend_object.fast.fp8
    with pytest.raises(BackendUnavailable, match="sm_80"):
        agent.set_backend("tilelang", strict=True, precision="fp8")
    agent.close()

"""FP8 (e4m3) arithmetic of the fast path's 8-bit GEMMs: the quantisation rule, weights, the GEMM call.

One rule quantises every GEMM operand, row by row (a weight's output channel, an activation's token):
``amax = max |x|`` over the row in fp32, ``scale = amax / 448`` (1 for an all-zero row), and each element
becomes ``e4m3(clamp(x * (448 / amax), -448, 448))``, rounded to nearest even.  A GEMM multiplies the
e4m3 operands with fp32 accumulation and scales the result by ``scale_row * scale_channel``.  The
TileLang kernels that quantise activations on the GPU (``tl_kernels.quant_rows_kernel``,
``tl_kernels.add_ln_quant_kernel``) implement the same rule; ``quantize_rows`` here is its reference.
"""

from __future__ import annotations

import torch

E4M3 = torch.float8_e4m3fn
E4M3_MAX = 448.0  # the largest finite e4m3 value


def scales_of(amax: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(scale, inverse) per row from its fp32 absolute maximum: an all-zero row gets scale 1."""
    amax = amax.float()
    live = amax > 0
    one = torch.ones_like(amax)
    scale = torch.where(live, amax / E4M3_MAX, one)
    inverse = torch.where(live, E4M3_MAX / torch.where(live, amax, one), one)
    return scale, inverse


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(e4m3 values [M, K], fp32 scales [M]) of the rows of `x` (any float dtype), by the module's rule."""
    if x.dim() != 2:
        raise ValueError(f"quantize_rows takes a 2-D [rows, columns] tensor, got shape {tuple(x.shape)}")
    x = x.float()
    if not torch.isfinite(x).all():
        raise ValueError("quantize_rows got NaN or infinite values; the scale of such a row is undefined")
    scale, inverse = scales_of(x.abs().amax(dim=1) if x.shape[1] else x.new_zeros(x.shape[0]))
    q = (x * inverse[:, None]).clamp_(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return q, scale


def dequantize_rows(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """fp32 values of e4m3 rows `q` with their `scale`s."""
    return q.float() * scale.float()[:, None]


class Fp8Weight:
    """An encoder Linear in e4m3 with one scale per output channel, made once from the checkpoint's
    weight [N, K] (and its fp32 bias, None without); ``wt`` is the [K, N] column-major view of the
    values, the operand order ``torch._scaled_mm`` takes."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        if weight.shape[1] % 16 or weight.shape[0] % 16:
            raise ValueError(f"FP8 GEMMs need both weight dimensions to be multiples of 16, got {tuple(weight.shape)}")
        self.q, scale = quantize_rows(weight.detach())
        self.wt = self.q.t()
        self.scale = scale.view(1, -1).contiguous()
        self.b = None if bias is None else bias.detach().float().contiguous()

    def dequantized(self) -> torch.Tensor:
        """The fp32 weight [N, K] this GEMM multiplies by."""
        return dequantize_rows(self.q, self.scale.view(-1))


def gemm(a: torch.Tensor, a_scale: torch.Tensor, weight: Fp8Weight, out_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """``(a * a_scale[:, None]) @ (weight.q * weight.scale)^T (+ bias)`` with e4m3 operands and fp32
    accumulation (cuBLASLt on the GPU), in `out_dtype`."""
    if a.device.type == "cpu":  # the same arithmetic (e4m3 values are exact in fp32); torch <= 2.11's CPU
        # _scaled_mm takes per-tensor scales only
        out = (a.float() @ weight.q.float().t()).mul_(a_scale.float().view(-1, 1)).mul_(weight.scale).to(out_dtype)
    else:
        out = torch._scaled_mm(a, weight.wt, scale_a=a_scale.view(-1, 1), scale_b=weight.scale, out_dtype=out_dtype)
    return out if weight.b is None else out.add_(weight.b)


def supported(device: torch.device) -> str | None:
    """None where the 8-bit path can run on `device`, else why not (a sentence)."""
    if device.type != "cuda":
        return f"FP8 GEMMs need a CUDA GPU, this agent runs on {device.type}"
    if not hasattr(torch, "_scaled_mm"):
        return f"this torch ({torch.__version__}) has no FP8 GEMM (torch._scaled_mm)"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (9, 0):
        return f"FP8 GEMMs need a Hopper GPU (sm_90) or newer, this one is sm_{major}{minor}"
    return None

"""GEMMs through torch (cuBLAS on the GPU) with the TileLang kernels' call signatures: the fast path runs
them at the token-row classes where its tile table measured cuBLAS faster (laya.fast_tiles, `cublas`)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


class TorchGemm:
    """``out[M, N] = act(a @ w^T (+ b))`` in out's dtype; called as a gemm_kernel: ``(a, w, b, out)``."""

    def __init__(self, bias: bool, act: str = "none"):
        if act not in ("none", "relu", "gelu"):
            raise ValueError(f"act must be 'none', 'relu' or 'gelu', got {act!r}")
        self.bias, self.act = bias, act

    def __call__(self, a: torch.Tensor, w: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> None:
        if self.bias:
            torch.addmm(b.to(out.dtype), a, w.t(), out=out)
        else:
            torch.mm(a, w.t(), out=out)
        if self.act == "relu":
            out.relu_()
        elif self.act == "gelu":
            out.copy_(F.gelu(out))


class TorchGeglu:
    """``out[M, F] = gelu(a @ w[:F]^T) * (a @ w[F:]^T)``; called as gemm_geglu_kernel: ``(a, w, out)``."""

    def __init__(self, width: int):
        self.width = width

    def __call__(self, a: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
        h = torch.mm(a, w.t())
        torch.mul(F.gelu(h[:, :self.width]), h[:, self.width:], out=out)

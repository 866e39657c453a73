"""The optimiser side of a run: frozen parts, AdamW groups, the learning-rate schedule, the progress bar."""

from __future__ import annotations

import math
import sys
import time

import torch

from .config import TrainConfig


def freeze(model, config: TrainConfig) -> None:
    enc = model.encoder
    if config.freeze_encoder:
        enc.requires_grad_(False)
        return
    if config.freeze_embeddings or config.freeze_layers:
        enc.embeddings.requires_grad_(False)
    layers = getattr(getattr(enc, "encoder", enc), "layer", None) or getattr(enc, "layers", None) or []
    for layer in list(layers)[:config.freeze_layers]:
        layer.requires_grad_(False)


def make_optimizer(model, config: TrainConfig) -> torch.optim.Optimizer:
    groups = {"enc": [], "enc_nd": [], "head": [], "head_nd": []}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        side = "enc" if name.startswith("encoder.") else "head"
        groups[side + ("_nd" if p.dim() == 1 else "")].append(p)
    spec = [("enc", config.encoder_lr, config.weight_decay), ("enc_nd", config.encoder_lr, 0.0),
            ("head", config.head_lr, config.weight_decay), ("head_nd", config.head_lr, 0.0)]
    params = [{"params": groups[g], "lr": lr, "base_lr": lr, "weight_decay": wd} for g, lr, wd in spec if groups[g]]
    on_cuda = all(p.is_cuda for g in params for p in g["params"])
    return torch.optim.AdamW(params, betas=(0.9, 0.98), eps=1e-6, **({"fused": True} if on_cuda else {}))


def set_lr(opt, step: int, total: int, config: TrainConfig, progress: float | None = None) -> None:
    """Linear warm-up, then cosine down to min_lr. `progress` (0..1, e.g. the share of a time budget
    used) replaces step / total when it is further along, so a time-limited run still anneals."""
    warm = max(1, int(total * config.warmup_frac))
    done = step / max(1, total) if progress is None else max(step / max(1, total), progress)
    ramp = max((step + 1) / warm, done / config.warmup_frac if config.warmup_frac > 0 else 1.0)
    for g in opt.param_groups:
        if ramp < 1.0:
            g["lr"] = g["base_lr"] * ramp
        else:
            p = min(1.0, max(0.0, (done - config.warmup_frac) / max(1e-9, 1.0 - config.warmup_frac)))
            g["lr"] = config.min_lr + (g["base_lr"] - config.min_lr) * 0.5 * (1 + math.cos(math.pi * p))


class Bar:
    """A one-line progress bar on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.start = total, enabled, time.time()

    def show(self, step: int, note: str) -> None:
        if not self.enabled:
            return
        done = int(30 * step / max(1, self.total))
        rate = (time.time() - self.start) / max(1, step)
        print(f"\rlaya-train [{'#' * done}{'.' * (30 - done)}] {step}/{self.total} {note} "
              f"({rate:.1f}s/step)", end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr)

"""The stock PyTorch forward (the default everywhere)."""

from __future__ import annotations

from .base import Backend


class EagerBackend(Backend):
    name = "eager"
    runs_parallel_layout = True
    casts_weights_once = True

    def install(self) -> "EagerBackend":
        # Eager means the class forward: drop any instance-level forward left by someone else
        # (restored on uninstall through the base class bookkeeping).
        super().install()
        self.model.__dict__.pop("forward", None)
        return self

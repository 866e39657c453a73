"""Re-export: the torch.compile plumbing lives in laya.backends.compile."""

from .backends.compile import COMPILE_LOCK, check_compile_mode, compile_model, independent_dims, run_compiled

__all__ = ["COMPILE_LOCK", "check_compile_mode", "compile_model", "independent_dims", "run_compiled"]

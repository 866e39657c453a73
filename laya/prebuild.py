"""`laya prebuild`: build everything a checkpoint's fast path needs on this GPU, for a container image.

    laya prebuild --model PATH [--backend tilelang|compile] [--cache-dir DIR] [--device cuda[:N]]

tilelang: every kernel of every token-row class goes into the persistent kernel store (laya.kernel_cache;
DIR, else ``LAYA_KERNEL_CACHE``, else ``~/.cache/laya/kernels``); start the server with
``LAYA_KERNEL_CACHE=DIR`` (or leave the default) and it loads them instead of compiling.
compile: the backend's warm-up runs with Inductor's cache in DIR (``LAYA_INDUCTOR_CACHE_DIR``), then
``torch.compiler.save_cache_artifacts`` writes ``DIR/laya-compile-artifacts.bin``, which the compile
backend loads at install.  A line per stage goes to stderr; exit 0 when done, 2 on a failure (one line).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

ARTIFACTS_FILE = "laya-compile-artifacts.bin"  # the compile backend's Inductor mega-cache, in its cache dir


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya prebuild", description="Build a checkpoint's kernels ahead of serving.")
    p.add_argument("--model", required=True, help="checkpoint directory, Hub id or published alias")
    p.add_argument("--backend", default="tilelang", choices=("tilelang", "compile"))
    p.add_argument("--cache-dir", default=None, help="where the kernels go (default: the backend's cache dir)")
    p.add_argument("--device", default="cuda")
    return p


def _stage(message: str, start: float) -> None:
    print(f"laya prebuild: {message} ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)


def kernel_store_root(args: argparse.Namespace) -> str:
    """The store a tilelang prebuild fills: --cache-dir, else the environment's; refused if off or unwritable."""
    from . import kernel_cache

    root = args.cache_dir or kernel_cache.default_root()
    if root is None:
        raise ValueError(f"{kernel_cache.ENV} turns the kernel store off; pass --cache-dir DIR")
    error = kernel_cache.KernelStore(root).write_error()
    if error is not None:
        raise ValueError(f"cannot write kernels to {root} ({error}); pass --cache-dir with a writable directory")
    return root


def prebuild_tilelang(args: argparse.Namespace, agent, start: float) -> str:
    from . import kernel_cache

    root = args.cache_dir  # main resolved it (kernel_store_root) before loading
    agent.set_backend("tilelang", strict=True, kernel_cache=root, background=False)
    store = kernel_cache.active()  # the store the backend installed for `root`
    _stage(f"kernels built ({store.hits} loaded from the store, {store.misses} traced)", start)
    agent.warmup()
    _stage("warm-up done", start)
    return store.root


def prebuild_compile(args: argparse.Namespace, agent, start: float) -> str:
    import torch

    if args.cache_dir:  # the flag wins over both variables
        os.environ["LAYA_INDUCTOR_CACHE_DIR"] = os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.abspath(args.cache_dir)
    agent.set_backend("compile", strict=True, warmup=True)  # the install's warm-up compiles every shape
    _stage("compile warm-up done", start)
    root = agent.backend_object.cache_dir
    artifacts = torch.compiler.save_cache_artifacts()
    if artifacts is None:
        raise RuntimeError("torch.compiler.save_cache_artifacts() returned nothing to save")
    with open(os.path.join(root, ARTIFACTS_FILE), "wb") as f:
        f.write(artifacts[0])
    return root


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    try:
        import torch

        from .agent import Agent

        if not torch.cuda.is_available() and args.device.startswith("cuda"):
            raise RuntimeError("prebuild builds GPU kernels and this machine has no CUDA device")
        if args.backend == "tilelang":  # before minutes of loading: a store it cannot fill is refused now
            args.cache_dir = kernel_store_root(args)
        agent = Agent(args.model, device=args.device, backend="eager")
        _stage(f"checkpoint loaded: {args.model}", start)
        build = prebuild_tilelang if args.backend == "tilelang" else prebuild_compile
        root = build(args, agent, start)
    except Exception as e:  # noqa: BLE001 - one clear line, exit 2 (the CLI's convention)
        print(f"laya prebuild: failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    from .kernel_cache import directory_bytes

    _stage(f"done: {root} holds {directory_bytes(root) / 2**20:.1f} MB", start)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

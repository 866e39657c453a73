"""Background kernel builds in a child process that fills the persistent kernel store.

Tracing and lowering a TileLang kernel hold the GIL for long stretches, so a build thread inside a
serving process starves its event loop (serve_cold_h200_2026-12-02*.json: 6 s at p50 spent before the
server's first stage). The child traces and compiles each token-row class into the store and reports
it on stdout ("built C"); the parent then loads that class from the store in a fraction of a second.

    python -m laya.kernel_builder < payload.json   # {"cpu": bool, "classes": [[c, [[factory, args, kwargs]]]]}
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from .child_env import child_env
from .kernel_cache import ENV


def factory_name(factory: Any) -> str:
    """laya.tl_kernels attribute of a kernel factory (`attn_kernel` for the wrapper of `_attn_kernel`)."""
    return factory.__name__.lstrip("_")


def payload(classes: dict[int, dict], cpu: bool) -> dict:
    """What the child builds: {class: {key: (factory, args, kwargs)}} as JSON-ready lists."""
    return {"cpu": cpu, "classes": [[c, [[factory_name(f), list(a), dict(kw)] for f, a, kw in requests.values()]]
                                    for c, requests in sorted(classes.items())]}


class BuilderProcess:
    """The child process and the classes it has reported built."""

    def __init__(self, work: dict, store_root: str):
        env = child_env(**{ENV: store_root})
        self.proc = subprocess.Popen([sys.executable, "-m", "laya.kernel_builder"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
        self.done: set[int] = set()
        try:
            self.proc.stdin.write(json.dumps(work))
            self.proc.stdin.close()
        except OSError:
            pass  # the child died at once: wait_for says so

    def wait_for(self, c: int) -> bool:
        """Block until the child reports class `c` built (True) or exits without it (False)."""
        while c not in self.done:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                return False
            if line.startswith("built "):
                self.done.add(int(line.split()[1]))
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def build(work: dict) -> None:
    from . import tl_kernels as K

    for c, requests in work["classes"]:
        requests = [(getattr(K, name), tuple(args), kwargs) for name, args, kwargs in requests]
        if work["cpu"]:
            for factory, args, kwargs in requests:
                K.compile_cpu(factory, *args, **kwargs)
        else:
            K.compile_many(requests)
        print(f"built {c}", flush=True)


if __name__ == "__main__":
    build(json.load(sys.stdin))

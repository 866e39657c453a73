"""The model in its own process: the server's event loop and the forward's host work stop sharing one GIL.

The front process parses, validates, routes and batches as before; each forward is one call over a pipe to a
child process that owns the Router's agents (the shape TEI uses). `EngineRouter` stands in for the Router in
the front: routing stays local, loading and what /health reads about resident agents come from the child.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

from .. import stage_clock
from ..child_env import child_env

log = logging.getLogger("laya.serve")
AGENT_FIELDS = ("device", "backend", "revision", "cpu_fallback_count", "last_fallback_reason", "batch_invariant")


def engine_wanted(cfg: Any) -> bool:
    """Whether this server runs its forwards in a child: `on`, or `auto` on a CUDA device (on the CPU the forward
    is the whole cost, and a second process only adds a copy of the interpreter)."""
    mode = cfg.engine_process
    if mode != "auto" or cfg.ray:
        return mode == "on" and not cfg.ray
    from ..mcp.device import resolve_device

    try:
        return str(resolve_device(cfg.device)).startswith("cuda")
    except ValueError:
        return False


def _portable(error: BaseException) -> BaseException:
    """The error itself when it survives pickling, else the nearest built-in kind with its message (a ValueError
    stays a ValueError, so the front still answers 4xx for the client's mistakes)."""
    import pickle

    try:
        pickle.loads(pickle.dumps(error))
        return error
    except Exception:  # noqa: BLE001 - any unpicklable error is re-raised by kind
        kind = next((k for k in (ValueError, TypeError, MemoryError, RuntimeError) if isinstance(error, k)),
                    RuntimeError)
        return kind(f"{type(error).__name__}: {error}")


def _snapshot(router: Any) -> dict:
    """What the front shows about resident agents (/health, /v1/models), in plain values (no torch objects)."""
    from ..mcp.device import agent_device

    agents = {name: {**{f: getattr(agent, f, None) for f in AGENT_FIELDS}, "device": agent_device(agent)}
              for name, agent in router.agents().items()}
    return {"loaded": list(router.loaded), "agents": agents}


class _Pipe:
    """Pickled messages over a read fd and a write fd (multiprocessing's framing)."""

    def __init__(self, read_fd: int, write_fd: int):
        self._in, self._out = Connection(read_fd, writable=False), Connection(write_fd, readable=False)

    def send(self, message: Any) -> None:
        self._out.send(message)

    def recv(self) -> Any:
        return self._in.recv()

    def poll(self, timeout: float) -> bool:
        return self._in.poll(timeout)

    def close(self) -> None:
        self._in.close()
        self._out.close()


def _child(conn: _Pipe) -> None:
    """The engine's loop: build the router from the front's settings, then answer (op, args) messages."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group; the front decides shutdown
    cfg = conn.recv()
    logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from .app import build_router, run_forward
    from .gc_policy import FrozenHeap

    clock = stage_clock.StageClock()
    stage_clock.install(clock)
    try:
        if cfg.threads:
            import torch

            torch.set_num_threads(cfg.threads)
        router = build_router(cfg)
        heap = FrozenHeap(cfg.gc_freeze)
        heap.settle(router.loaded)
    except BaseException as e:  # noqa: BLE001 - the front reports it in one line
        conn.send(("error", _portable(e), None))
        return
    conn.send(("ok", None, _snapshot(router)))

    def infer(name: str, states: list, questions: dict, options: dict) -> tuple:
        clock.reset()
        results = run_forward(router, heap, cfg, name, states, questions, options)
        return results, clock.prep, clock.forward

    def preload(names: list | None) -> None:
        router.preload(names)
        heap.settle(router.loaded)

    ops = {"infer": infer, "preload": preload, "unload": router.unload}
    while True:
        try:
            op, args = conn.recv()
        except (EOFError, OSError):  # the front is gone
            return
        if op == "stop":
            conn.send(("ok", None, None))
            return
        try:
            reply = ("ok", ops[op](*args), _snapshot(router))
        except BaseException as e:  # noqa: BLE001 - every failure goes back to the caller
            reply = ("error", _portable(e), _snapshot(router))
        conn.send(reply)


class EngineProcess:
    """One child process and the pipe to it; calls are serialised (the batcher has one worker thread)."""

    def __init__(self, cfg: Any):
        self.cfg = cfg
        self.snapshot: dict = {"loaded": [], "agents": {}}
        self._lock = threading.Lock()
        self._proc: Any = None
        self._conn: Any = None

    def start(self) -> None:
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        # a fresh interpreter (not multiprocessing's spawn, which re-runs the caller's __main__) on two pipes
        to_child, from_child = os.pipe(), os.pipe()
        fds = (to_child[0], from_child[1])
        self._proc = subprocess.Popen([sys.executable, "-m", "laya.serve.engine", *map(str, fds)], pass_fds=fds,
                                      stdin=subprocess.DEVNULL, env=child_env())
        for fd in fds:
            os.close(fd)
        self._conn = _Pipe(from_child[0], to_child[1])
        self._conn.send(self.cfg)
        self._receive()

    def _receive(self) -> Any:
        try:
            status, value, snapshot = self._conn.recv()
        except (EOFError, OSError):
            code = self._proc.poll() if self._proc is not None else None
            self._drop()
            raise RuntimeError(f"the laya engine process exited (code {code}); the next request starts a new one") \
                from None
        if snapshot is not None:
            self.snapshot = snapshot
        if status == "error":
            raise value
        return value

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self._proc is not None:
            try:
                self._proc.wait(1.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5.0)
        self._proc = self._conn = None

    def call(self, op: str, *args: Any) -> Any:
        with self._lock:
            if self._proc is None:
                log.warning("laya serve: starting a new engine process")
                self._spawn()
            try:
                self._conn.send((op, args))
            except (BrokenPipeError, OSError):
                self._drop()
                raise RuntimeError("the laya engine process is gone; the next request starts a new one") from None
            return self._receive()

    def infer(self, name: str, states: list, questions: dict, options: dict) -> tuple[list, float, float]:
        return self.call("infer", name, states, questions, options)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def close(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._proc is None:
                return
            try:
                self._conn.send(("stop", ()))
                if self._conn.poll(timeout):
                    self._conn.recv()
            except (EOFError, OSError):
                pass
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass
            self._drop()


class EngineRouter:
    """The front's Router: routing, names and hooks are the local Router's; agents live in the engine."""

    def __init__(self, router: Any, engine: EngineProcess):
        self._router, self._engine = router, engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._router, name)

    def preload(self, names: list | None = None) -> "EngineRouter":
        self._engine.call("preload", names)
        return self

    def unload(self, name: str | None = None) -> None:
        self._engine.call("unload", name)

    def load(self, name: str) -> Any:
        raise RuntimeError("agents live in the engine process; call the engine, not the front's router")

    @property
    def loaded(self) -> list[str]:
        return list(self._engine.snapshot["loaded"])

    def agents(self) -> dict[str, Any]:
        return {name: SimpleNamespace(**info) for name, info in self._engine.snapshot["agents"].items()}

    @property
    def loaded_revisions(self) -> dict:
        return {name: info.get("revision") for name, info in self._engine.snapshot["agents"].items()}


if __name__ == "__main__":
    _child(_Pipe(int(sys.argv[1]), int(sys.argv[2])))

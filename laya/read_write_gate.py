"""A read/write gate: many concurrent inferences, or one writer (backend switch, OOM fallback) alone."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator


class ReadWriteGate:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._readers = 0
        self._writer: int | None = None  # thread id holding the write side
        self._writer_depth = 0
        self._writers_waiting = 0
        self._sleepers = 0  # threads inside _cond.wait(): releases only notify when someone waits

    def _wait(self) -> None:
        self._sleepers += 1
        try:
            self._cond.wait()
        finally:
            self._sleepers -= 1

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        counted = self.acquire_read()
        try:
            yield
        finally:
            self.release_read(counted)

    def acquire_read(self) -> bool:
        """Take the read side (`reading()` without the context manager, for the per-request path);
        pass what it returns to release_read."""
        if self._writer == threading.get_ident():  # the writer may run inference itself (the OOM retry does)
            return False
        with self._lock:
            while self._writer is not None or self._writers_waiting:
                self._wait()
            self._readers += 1
        return True

    def release_read(self, counted: bool) -> None:
        if not counted:
            return
        with self._lock:
            self._readers -= 1
            if self._readers == 0 and self._sleepers:
                self._cond.notify_all()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Exclusive access; never call it while holding the read side (release that first)."""
        me = threading.get_ident()
        with self._lock:
            if self._writer == me:
                self._writer_depth += 1
            else:
                self._writers_waiting += 1
                while self._writer is not None or self._readers:
                    self._wait()
                self._writers_waiting -= 1
                self._writer, self._writer_depth = me, 1
        try:
            yield
        finally:
            with self._lock:
                self._writer_depth -= 1
                if self._writer_depth == 0:
                    self._writer = None
                    if self._sleepers:
                        self._cond.notify_all()

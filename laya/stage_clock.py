"""Where a predict call's time goes, per thread: host prep (tokenise, rows, collate), the forward, and decode.

The server's inference worker installs a `StageClock` on its own thread and resets it before each predict call;
`Predictor` laps it at the stage boundaries. Any other caller gets the shared no-op clock (one thread-local
lookup per call), so the predict API and its cost are unchanged.
"""

from __future__ import annotations

import threading
import time

_local = threading.local()
_now = time.perf_counter


class StageClock:
    """Seconds spent per stage since `reset()`; each lap adds the time since the previous lap (or the reset)."""

    __slots__ = ("prep", "forward", "decode", "_last")

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> float:
        """Zero the stages; returns the perf_counter they count from."""
        self.prep = self.forward = self.decode = 0.0
        self._last = now = _now()
        return now

    def lap_prep(self) -> None:
        now = _now()
        self.prep += now - self._last
        self._last = now

    def lap_forward(self) -> None:
        now = _now()
        self.forward += now - self._last
        self._last = now

    def lap_decode(self) -> None:
        now = _now()
        self.decode += now - self._last
        self._last = now


class _Off:
    """The clock of a thread that installed none: every lap is a no-op."""

    __slots__ = ()

    def lap_prep(self) -> None:
        pass

    lap_forward = lap_decode = lap_prep


OFF = _Off()


def install(clock: StageClock | None) -> None:
    """Make `clock` this thread's clock (None: back to the no-op one)."""
    _local.clock = clock if clock is not None else OFF


def current() -> StageClock | _Off:
    return getattr(_local, "clock", OFF)

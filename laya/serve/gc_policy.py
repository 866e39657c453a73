"""Garbage-collector policy of a serving process: freeze what a checkpoint load leaves, collect young objects
less often.

A full collection over a loaded server's heap holds the GIL long enough to stall requests in flight
(benchmarks/RESULTS.md, bench_serve); frozen, the collector scans only what requests allocated.
"""

from __future__ import annotations

import gc
import threading
from typing import Iterable

# Young-generation collections every 20k net allocations instead of 700: a request allocates a few thousand
# tracked objects, most freed by reference counting long before a collection would look at them.
GC_THRESHOLD = (20000, 20, 20)


class FrozenHeap:
    """`settle(loaded)` after the loaded set changes; `restore()` on shutdown. A no-op when not enabled."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self._lock = threading.Lock()
        self._names: frozenset | None = None  # the checkpoints loaded when the heap was last frozen
        self._saved: tuple | None = None  # the thresholds to restore on stop

    def stale(self, loaded: Iterable[str]) -> bool:
        """Whether a checkpoint was loaded or evicted since the heap was frozen."""
        return self._saved is not None and frozenset(loaded) != self._names

    def settle(self, loaded: Iterable[str]) -> None:
        """Collect what loading left behind, then move every survivor to the permanent generation. After an
        eviction or an idle unload it unfreezes everything first, so the unloaded checkpoint can be freed."""
        if not self.enabled:
            return
        with self._lock:
            names = frozenset(loaded)
            if self._saved is None:
                self._saved = gc.get_threshold()
                gc.set_threshold(*GC_THRESHOLD)
            if self._names is not None and not names >= self._names:
                gc.unfreeze()  # something was unloaded: its frozen objects must become collectable again
            gc.collect()
            gc.freeze()
            self._names = names

    def restore(self) -> None:
        """The thresholds go back; frozen objects stay frozen (gc.unfreeze() releases them)."""
        with self._lock:
            if self._saved is not None:
                gc.set_threshold(*self._saved)
                self._saved = self._names = None

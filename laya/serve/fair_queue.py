"""The batcher's queue, fair per request: a request nobody has served yet goes first, partly served ones take
turns, so one large batch request is cut into forwards that interleave with small requests instead of holding
every later request until its last state is answered."""

from __future__ import annotations

import collections
from typing import Any, Iterator


class FairQueue:
    """Items grouped by the request that submitted them. Take with `pop()` between `begin()` and `end()`."""

    def __init__(self) -> None:
        self._fresh: collections.deque[collections.deque] = collections.deque()  # no item taken yet
        self._started: collections.deque[collections.deque] = collections.deque()  # partly served, in turn
        self._prefer_started = False  # the last forward took nothing from them: they go first (no starvation)
        self._took_started = False
        self._source: collections.deque | None = None  # the request the last pop() came from

    def __bool__(self) -> bool:
        return bool(self._fresh or self._started)

    def add(self, items: list) -> None:
        if items:
            self._fresh.append(collections.deque(items))

    def begin(self) -> None:
        self._took_started = False

    def end(self) -> None:
        """After a forward's items are taken: the partly served request at the head waits for its next turn."""
        if self._started and self._source is self._started[0] and len(self._started) > 1:
            self._started.rotate(-1)
        self._prefer_started = bool(self._started) and not self._took_started
        self._source = None

    def _head(self) -> collections.deque:
        if self._started and (self._prefer_started or not self._fresh):
            return self._started[0]
        return self._fresh[0]

    def peek(self) -> Any:
        return self._head()[0]

    def pop(self) -> Any:
        """The next item; a fresh request's remainder joins the partly served ones."""
        source = self._head()
        item = source.popleft()
        if self._started and source is self._started[0]:
            self._took_started = True
            if not source:
                self._started.popleft()
        else:
            self._fresh.popleft()
            if source:
                self._started.append(source)
        self._source = source
        return item

    def rest(self) -> list:
        """Every item left of the request the last pop() came from (it leaves the queue)."""
        source, out = self._source, []
        if source:
            out = list(source)
            source.clear()
            self._started = collections.deque(q for q in self._started if q is not source)
        return out

    def drain(self) -> Iterator[Any]:
        while self._fresh or self._started:
            source = (self._fresh or self._started).popleft()
            yield from source

"""The resident agents of one Router: an LRU of at most `max_loaded`, each checkpoint built once at a time."""

from __future__ import annotations

import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable

# One checkpoint build at a time in the process: two concurrent builds double peak memory.
BUILD_LOCK = threading.Lock()

Notify = Callable[..., None]  # notify(event, name, agent, error=None): on_load / on_evict / on_error


class AgentPool:
    """Agents by checkpoint name, least recently used first. Dropping an agent only forgets it: a request
    still running on it finishes."""

    def __init__(self, max_loaded: int, notify: Notify):
        self.max_loaded = max_loaded
        self.lock = threading.RLock()
        self._agents: OrderedDict[str, Any] = OrderedDict()
        self._pending: dict[str, Future] = {}
        self._generation: dict[str, int] = {}  # bumped when a name is re-pointed: stale builds are dropped
        self._notify = notify

    def resident(self, name: str, default: Any = None) -> Any:
        """The agent for `name` when resident (touching its LRU place), else `default` (an attached agent may be
        any object, None included)."""
        with self.lock:
            if name not in self._agents:
                return default
            self._agents.move_to_end(name)
            return self._agents[name]

    def get(self, name: str, build: Callable[[], Any], report_errors: bool = True) -> Any:
        """The agent for `name`, calling `build()` once even when several threads ask at the same time."""
        while True:
            with self.lock:
                if name in self._agents:
                    self._agents.move_to_end(name)
                    return self._agents[name]
                pending = self._pending.get(name)
                builder = pending is None
                if builder:
                    pending = self._pending[name] = Future()
                    generation = self._generation.get(name, 0)
            if not builder:
                agent = pending.result()  # re-raises the builder's error
                if agent is not None:
                    return agent
                continue  # the name was re-pointed during the build: look again
            agent = self._build(name, build, pending, generation, report_errors)
            if agent is not None:
                return agent

    def _build(self, name: str, build: Callable[[], Any], pending: Future, generation: int,
               report_errors: bool) -> Any:
        try:
            with BUILD_LOCK:
                agent = build()
        except BaseException as e:
            with self.lock:
                self._pending.pop(name, None)
            pending.set_exception(e)
            if report_errors:
                self._notify("on_error", name, None, error=e)
            raise
        with self.lock:
            self._pending.pop(name, None)
            fresh = self._generation.get(name, 0) == generation
            evicted = self._store(name, agent) if fresh else []
        pending.set_result(agent if fresh else None)
        if not fresh:
            return None
        for old_name, old_agent in evicted:  # evictions are reported before the load that caused them
            self._notify("on_evict", old_name, old_agent)
        self._notify("on_load", name, agent)
        return agent

    def _store(self, name: str, agent: Any) -> list[tuple[str, Any]]:
        """Insert as most recent and drop least-recently-used agents beyond max_loaded (lock held)."""
        self._agents[name] = agent
        self._agents.move_to_end(name)
        evicted = []
        while len(self._agents) > self.max_loaded:
            evicted.append(self._agents.popitem(last=False))
        return evicted

    def attach(self, name: str, agent: Any) -> None:
        """Make `agent` resident under `name`, raising max_loaded so nothing is evicted for it."""
        with self.lock:
            self._generation[name] = self._generation.get(name, 0) + 1  # a build under way is dropped
            previous = self._agents.pop(name, None)
            self._agents[name] = agent
            self.max_loaded = max(self.max_loaded, len(self._agents))
        if previous is not None and previous is not agent:
            self._notify("on_evict", name, previous)

    def reserve(self, names: list[str]) -> None:
        """Raise max_loaded so `names` and every resident agent fit together."""
        with self.lock:
            self.max_loaded = max(self.max_loaded, len(set(names) | set(self._agents)))

    def discard(self, name: str, wait: bool = False) -> None:
        """Forget `name` (a build under way is dropped; with `wait`, it is let finish first) and report it."""
        pending = self._pending.get(name)
        if wait and pending is not None:
            try:
                pending.result()
            except BaseException:  # noqa: BLE001 - the builder reports its own failure
                pass
        with self.lock:
            self._generation[name] = self._generation.get(name, 0) + 1
            stale = self._agents.pop(name, None)
        if stale is not None:
            self._notify("on_evict", name, stale)

    def unload(self, name: str | None = None) -> None:
        with self.lock:
            if name is None:
                dropped = list(self._agents.items())
                self._agents.clear()
            else:
                dropped = [(name, self._agents.pop(name))] if name in self._agents else []
        for old_name, old_agent in dropped:
            self._notify("on_evict", old_name, old_agent)

    def names(self) -> list[str]:
        with self.lock:
            return list(self._agents)

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return dict(self._agents)

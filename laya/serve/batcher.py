"""Dynamic batching: one inference worker thread per device gathers concurrent requests for a short window,
runs ONE predict call per compatible group, and scatters the results back.

A group is a set of items with the same key (checkpoint, question set, token budgets, language, abstention
and batch controls), so one `predict_batch` answers them all exactly as it would answer each alone. If a
grouped call raises, its members are retried one by one so only the bad one fails. The queue is fair per
request (`fair_queue.py`): a large batch request is taken a forward's worth (max_rows) at a time, and a request
that arrives meanwhile is in the next forward.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import stage_clock
from .fair_queue import FairQueue

log = logging.getLogger("laya.serve")


@dataclass
class Item:
    key: tuple  # group key; items with equal keys may share one predict call
    name: str  # checkpoint
    state: Any
    questions: dict
    rows: int  # question rows this item adds to a forward
    row_width: int  # assumed tokens per row, for the pass-size cap
    options: dict  # keyword arguments for predict_batch
    future: Future = field(default_factory=Future)
    enqueued: float = field(default_factory=time.perf_counter)
    request: int = 0  # the submit() call that queued it: without batching, one request's states still go together


@dataclass
class Timing:
    forward_id: int
    queue_ms: float
    inference_ms: float  # the whole forward call = prep_ms + forward_ms + decode_ms
    group_requests: int
    prep_ms: float = 0.0  # tokenise, rows, collate (and the call's set-up)
    forward_ms: float = 0.0  # the model's forward, results on the host
    decode_ms: float = 0.0  # answers from the logits, and the rest of the call
    done: float = 0.0  # perf_counter when the forward's results were set


class Batcher:
    """`infer(name, states, questions, options) -> list[result]` runs on this batcher's one worker thread."""

    def __init__(self, infer: Callable[[str, list, dict, dict], list], window_ms: float = 2.0,
                 max_rows: int = 256, max_batch_tokens: int = 131072, batching: bool = True,
                 on_forward: Callable[[int, int, float], None] | None = None, name: str = "laya-infer"):
        self.infer = infer
        self.window = max(0.0, window_ms) / 1000.0
        self.max_rows, self.max_batch_tokens, self.batching = max_rows, max_batch_tokens, batching
        self.on_forward = on_forward
        self._items = FairQueue()
        self._cond = threading.Condition()
        self._arriving = 0  # admitted requests not yet queued: worth waiting for within the window
        self._queued_rows = 0
        self._forwards = 0
        self._submits = 0
        self._abandoned = 0
        self._stop = False
        self._thread: threading.Thread | None = None
        self._name = name
        self._clock = stage_clock.StageClock()  # lapped by the predictor on the worker thread

    # ---- producer side (event loop) ----------------------------------------------------------------

    def start(self) -> None:
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stop = False
            self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
        with self._cond:  # whatever is left fails instead of hanging its caller
            for item in list(self._items.drain()):
                if not item.future.done():
                    item.future.set_exception(RuntimeError("the server is shutting down"))
            self._queued_rows = 0

    @property
    def stopping(self) -> bool:
        return self._stop

    @property
    def queued_rows(self) -> int:
        return self._queued_rows

    @property
    def forwards(self) -> int:
        """Predict calls that succeeded so far."""
        return self._forwards

    @property
    def abandoned(self) -> int:
        """Queued items dropped unanswered because their client had gone."""
        return self._abandoned

    def arriving(self, delta: int) -> None:
        with self._cond:
            self._arriving += delta
            if delta < 0:
                self._cond.notify_all()

    def submit(self, items: list[Item]) -> list[Future]:
        self.start()
        with self._cond:
            self._submits += 1
            for item in items:
                item.request = self._submits
            self._items.add(items)
            self._queued_rows += sum(i.rows for i in items)
            self._cond.notify_all()
        return [i.future for i in items]

    # ---- worker side -------------------------------------------------------------------------------

    def _take(self) -> list[Item]:
        """Wait for work, then gather more until the window closes, the row cap is hit, or nobody is coming."""
        with self._cond:
            first = None
            self._items.begin()
            while first is None:
                while not self._items and not self._stop:
                    self._cond.wait(0.5)
                if self._stop:
                    return []
                first = self._live()
            batch, rows = [first], first.rows
            if self.batching:
                deadline = first.enqueued + self.window
                while rows < self.max_rows:
                    if self._items:
                        if rows + self._items.peek().rows > self.max_rows:
                            break
                        item = self._live()
                        if item is not None:
                            batch.append(item)
                            rows += item.rows
                        continue
                    remaining = deadline - time.perf_counter()
                    if remaining <= 0 or self._arriving <= 0 or self._stop:
                        break
                    self._cond.wait(remaining)
            else:  # no batching across requests; a batch request's own states are still one call
                for item in self._items.rest():
                    if self._running(item):
                        batch.append(item)
                        rows += item.rows
            self._items.end()
            self._queued_rows -= rows
            return batch

    def _live(self) -> Item | None:
        """Pop the next item and mark it running; None (its rows released) when its caller cancelled it."""
        item = self._items.pop()
        return item if self._running(item) else None

    def _running(self, item: Item) -> bool:
        if item.future.set_running_or_notify_cancel():
            return True
        self._queued_rows -= item.rows
        self._abandoned += 1
        return False

    def _run(self) -> None:
        stage_clock.install(self._clock)
        while True:
            batch = self._take()
            if not batch:
                return
            try:
                self._run_batch(batch)
            except BaseException as e:  # noqa: BLE001 - the worker must survive anything one batch does
                log.exception("laya serve: batch failed outside a predict call")
                for item in batch:
                    if not item.future.done():
                        item.future.set_exception(e)

    def _run_batch(self, batch: list[Item]) -> None:
        groups: dict[tuple, list[Item]] = {}
        for item in batch:
            groups.setdefault(item.key, []).append(item)
        for members in groups.values():
            for part in self._passes(members):
                self._forward(part, retry_alone=len(part) > 1)

    def _passes(self, members: list[Item]) -> list[list[Item]]:
        """Split a group so rows x width stays under max_batch_tokens (one item always fits alone)."""
        out, part, tokens = [], [], 0
        for item in members:
            cost = item.rows * item.row_width
            if part and tokens + cost > self.max_batch_tokens:
                out.append(part)
                part, tokens = [], 0
            part.append(item)
            tokens += cost
        if part:
            out.append(part)
        return out

    def _forward(self, part: list[Item], retry_alone: bool) -> None:
        first = part[0]
        clock = self._clock
        started = clock.reset()
        try:
            results = self.infer(first.name, [i.state for i in part], first.questions, first.options)
        except Exception as e:  # noqa: BLE001 - scattered to the callers below
            if retry_alone:
                for item in part:
                    self._forward([item], retry_alone=False)
                return
            first.future.set_exception(e)
            return
        done = time.perf_counter()
        elapsed = done - started
        self._forwards += 1
        if self.on_forward is not None:
            self.on_forward(sum(i.rows for i in part), len(part), elapsed)
        ms, prep, forward = elapsed * 1000.0, clock.prep * 1000.0, clock.forward * 1000.0
        decode = max(0.0, ms - prep - forward)
        for item, result in zip(part, results):
            timing = Timing(self._forwards, (started - item.enqueued) * 1000.0, ms, len(part), prep, forward,
                            decode, done)
            item.future.set_result((result, timing))

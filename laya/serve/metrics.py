"""Prometheus metrics: prometheus_client when installed, else a small text exposition of the same series."""

from __future__ import annotations

import math
import threading
from typing import Any

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
# stages of one request run from tens of microseconds (JSON) to seconds (a queue behind a large batch)
STAGE_BUCKETS = (0.0001, 0.00025, 0.0005, *LATENCY_BUCKETS)
# where an answered request's time went, in order (the stage label of laya_request_stage_seconds)
STAGES = ("http", "queue", "prep", "forward", "decode", "wakeup")
TEXT_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Series:
    """Fallback counter/gauge/histogram keyed by label values."""

    def __init__(self, kind: str, name: str, doc: str, labels: tuple[str, ...], buckets: tuple = ()):
        self.kind, self.name, self.doc, self.labels, self.buckets = kind, name, doc, labels, buckets
        self.values: dict[tuple, Any] = {}
        self.lock = threading.Lock()

    def _add(self, key: tuple, amount: float, observe: bool) -> None:
        with self.lock:
            if not observe:
                self.values[key] = self.values.get(key, 0.0) + amount
                return
            counts, total = self.values.get(key, ([0] * len(self.buckets), 0.0))
            counts = [c + (amount <= b) for c, b in zip(counts, self.buckets)]
            self.values[key] = (counts, total + amount)
            self.values.setdefault(("__count__", *key), 0)
            self.values[("__count__", *key)] += 1

    def lines(self) -> list[str]:
        kind = "counter" if self.kind == "counter" else "gauge" if self.kind == "gauge" else "histogram"
        name = self.name + ("_total" if kind == "counter" else "")
        out = [f"# HELP {name} {self.doc}", f"# TYPE {name} {kind}"]
        with self.lock:
            items = [(k, v) for k, v in self.values.items() if not (k and k[0] == "__count__")]
            for key, value in sorted(items):
                labels = dict(zip(self.labels, key))
                if kind != "histogram":
                    out.append(f"{name}{_labels(labels)} {_num(value)}")
                    continue
                counts, total = value
                for bound, count in zip(self.buckets, counts):
                    out.append(f"{name}_bucket{_labels({**labels, 'le': _num(bound)})} {count}")
                n = self.values[("__count__", *key)]
                out.append(f"{name}_bucket{_labels({**labels, 'le': '+Inf'})} {n}")
                out.append(f"{name}_count{_labels(labels)} {n}")
                out.append(f"{name}_sum{_labels(labels)} {_num(total)}")
        return out


def _num(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else f"{float(value):.1f}"


def _labels(labels: dict) -> str:
    if not labels:
        return ""
    body = ",".join(f'{k}="{str(v).replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
                    for k, v in labels.items())
    return "{" + body + "}"


class _Handle:
    """One labelled child with the prometheus_client method names (inc / set / observe)."""

    def __init__(self, series: _Series, key: tuple):
        self.series, self.key = series, key

    def inc(self, amount: float = 1.0) -> None:
        self.series._add(self.key, amount, False)

    def set(self, value: float) -> None:
        with self.series.lock:
            self.series.values[self.key] = float(value)

    def observe(self, value: float) -> None:
        self.series._add(self.key, value, True)


class Metrics:
    """The server's series; `render()` gives (body, content type) for GET /metrics."""

    def __init__(self, use_prometheus: bool | None = None):
        try:
            import prometheus_client
        except ImportError:
            prometheus_client = None
        self._prom = prometheus_client if use_prometheus is not False else None
        if self._prom is not None:
            self._registry = prometheus_client.CollectorRegistry()  # per app: several apps in one process
        self._fallback: list[_Series] = []
        self.requests = self._make("counter", "laya_requests", "HTTP requests by route and status", ("route", "status"))
        self.latency = self._make("histogram", "laya_request_latency_seconds", "HTTP request latency", ("route",),
                                  LATENCY_BUCKETS)
        self.batch_rows = self._make("histogram", "laya_batch_rows", "question rows (states x questions) per forward",
                                     (), SIZE_BUCKETS)
        self.batch_items = self._make("histogram", "laya_batch_items", "states (request items) merged into one forward",
                                      (), SIZE_BUCKETS)
        self.inference = self._make("histogram", "laya_inference_seconds", "time of one batched predict call", (),
                                    LATENCY_BUCKETS)
        self.stages = self._make("histogram", "laya_request_stage_seconds",
                                 "answered requests' time by stage: http (body read, JSON, validation, routing, "
                                 "reply rendering), queue (waiting for a forward), prep (tokenise, collate), "
                                 "forward, decode, wakeup (answer ready until its request runs again)", ("stage",),
                                 STAGE_BUCKETS)
        self.queue_rows = self._make("gauge", "laya_queue_rows", "question rows waiting for the inference worker", ())
        self.inflight = self._make("gauge", "laya_inflight_requests", "requests admitted and not yet answered", ())
        self.tokens = self._make("counter", "laya_input_tokens", "input tokens run through the encoder", ("model",))

    def _make(self, kind: str, name: str, doc: str, labels: tuple[str, ...], buckets: tuple = ()) -> Any:
        if self._prom is not None:
            cls = {"counter": self._prom.Counter, "gauge": self._prom.Gauge, "histogram": self._prom.Histogram}[kind]
            extra = {"buckets": buckets} if kind == "histogram" else {}
            return cls(name, doc, labels, registry=self._registry, **extra)
        series = _Series(kind, name, doc, labels, buckets)
        self._fallback.append(series)
        return series

    @staticmethod
    def child(metric: Any, *labels: str) -> Any:
        if isinstance(metric, _Series):
            return _Handle(metric, tuple(labels))
        return metric.labels(*labels) if labels else metric

    def render(self) -> tuple[bytes, str]:
        if self._prom is not None:
            return self._prom.generate_latest(self._registry), self._prom.CONTENT_TYPE_LATEST
        lines = [line for series in self._fallback for line in series.lines()]
        return ("\n".join(lines) + "\n").encode("utf-8"), TEXT_CONTENT_TYPE

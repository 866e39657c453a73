"""Calibration and selective-prediction metrics over (confidence, correct) pairs; each is None on empty
input. Torch-free."""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np


def _pairs(conf: Sequence[float], correct: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(list(conf), dtype=np.float64)
    y = np.asarray([bool(v) for v in correct], dtype=np.float64)
    if c.shape != y.shape:
        raise ValueError(f"conf and correct must have the same length, got {c.size} and {y.size}")
    return c, y


def ece(conf: Sequence[float], correct: Sequence[Any], bins: int = 15) -> float | None:
    """Expected calibration error (the library's `ece_score`)."""
    from ..calibrate import ece_score

    c, y = _pairs(conf, correct)
    return None if c.size == 0 else float(ece_score(c, y.astype(bool), bins))


def brier(conf: Sequence[float], correct: Sequence[Any]) -> float | None:
    """Mean squared error of the confidence against correctness."""
    c, y = _pairs(conf, correct)
    return None if c.size == 0 else float(np.mean((c - y) ** 2))


def _tie_groups(c: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """Indices by confidence, highest first (stable), and the end of each run of equal confidences."""
    order = np.argsort(-c, kind="stable")
    ends = [i + 1 for i in range(c.size) if i + 1 == c.size or c[order[i + 1]] != c[order[i]]]
    return order, ends


def aurc(conf: Sequence[float], correct: Sequence[Any]) -> float | None:
    """Area under the risk-coverage curve: cases accepted by falling confidence, ties together; each
    accepted group weighs its share of the cases by the risk (error rate) once it is in."""
    c, y = _pairs(conf, correct)
    if c.size == 0:
        return None
    order, ends = _tie_groups(c)
    errors = np.cumsum(1.0 - y[order])
    area, start = 0.0, 0
    for end in ends:
        area += (end - start) / c.size * (errors[end - 1] / end)
        start = end
    return float(area)


def selective_accuracy(conf: Sequence[float], correct: Sequence[Any], coverage: float) -> float | None:
    """Accuracy of the ceil(coverage * n) most confident cases, widened to every case tied at the cut;
    None unless 0 < coverage <= 1 and there are cases."""
    c, y = _pairs(conf, correct)
    if c.size == 0 or isinstance(coverage, bool) or not isinstance(coverage, (int, float)) \
            or not math.isfinite(coverage) or not 0 < coverage <= 1:
        return None
    m = min(c.size, max(1, math.ceil(coverage * c.size)))
    order = np.argsort(-c, kind="stable")
    cut = c[order[m - 1]]
    kept = c >= cut
    return float(y[kept].mean())

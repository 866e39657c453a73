"""Warnings about a run's calibration split: too few items of a type, or a model that did not learn
(prior collapse: options barely separated, or calibration CE no better than the uniform answer)."""

from __future__ import annotations

import math

import numpy as np

from ..answers import softmax

CALIB_WARN_N = 50  # calibration items of one question type below which its temperature is a rough fit
COLLAPSE_LOGIT_RANGE = 0.05  # mean within-row logit range below which the options are not separated
COLLAPSE_CE_REL = 0.02  # calibration CE within this fraction of ln K: no better than the uniform answer
QTYPE_ORDER = ("choice", "score", "noul")


def collapse_stats(records: list) -> dict:
    """{"n", "mean_logit_range", "calibration_ce", "uniform_ce"} over calibration records
    (qtype, logits, target, k); the three means are None without records."""
    if not records:
        return {"n": 0, "mean_logit_range": None, "calibration_ce": None, "uniform_ce": None}
    spread = float(np.mean([np.ptp(np.asarray(r[1][:r[3]], dtype=float)) for r in records]))
    ce = float(np.mean([-(np.asarray(r[2][:r[3]], dtype=float)
                          * np.log(np.clip(np.asarray(softmax(r[1][:r[3]])), 1e-12, 1))).sum()
                        for r in records]))
    uniform = float(np.mean([math.log(max(2, r[3])) for r in records]))
    return {"n": len(records), "mean_logit_range": spread, "calibration_ce": ce, "uniform_ce": uniform}


def prior_collapse_message(records: list) -> str | None:
    """The prior-collapse warning text for these calibration records, or None when the model separates
    the options and beats the uniform answer."""
    stats = collapse_stats(records)
    if not stats["n"]:
        return None
    spread, ce, uniform = stats["mean_logit_range"], stats["calibration_ce"], stats["uniform_ce"]
    if spread < COLLAPSE_LOGIT_RANGE:
        return (f"prior collapse: mean logit range {spread:.3f}, calibration CE {ce:.3f} vs ln K "
                f"{uniform:.3f}; the model barely separates the options")
    if ce >= (1.0 - COLLAPSE_CE_REL) * uniform:
        return (f"no better than uniform: calibration CE {ce:.3f} vs ln K {uniform:.3f} at mean logit range "
                f"{spread:.3f}; the model separates the options but is confidently wrong on this data")
    return None


def calibration_warnings(records: list) -> list[str]:
    """Thin-calibration notes per question type, then the prior-collapse note."""
    notes = []
    for qtype, name in enumerate(QTYPE_ORDER):
        n = sum(1 for r in records if r[0] == qtype)
        if 0 < n < CALIB_WARN_N:
            notes.append(f"thin calibration: only {n} {name} items (< {CALIB_WARN_N}); its temperature is a "
                         "rough fit")
    collapse = prior_collapse_message(records)
    if collapse:
        notes.append(collapse)
    return notes

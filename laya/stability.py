"""OptionStabilityHook: how stable a choice answer is when its options are reordered or renamed.

The probe variants are extra questions of the same call (ids `<qid>::rel1`, `<qid>::rel2`, ...), so they
are answered in the same forward as the original; on end they are folded into a `reliability` block on
each probed choice answer and removed from the results. Importable as `laya.hooks.OptionStabilityHook`.
"""

from __future__ import annotations

import collections
import math
import numbers
import random
import threading
import weakref
import zlib
from typing import Any, Sequence

from .hooks import BaseHook, PredictContext

ALL_VARIANTS = ("reversed", "shuffle1", "shuffle2", "shuffle3", "letters", "letters_reversed", "letters_shuffle")
VARIANT_PRESETS = {"full": None, "fast": ("reversed", "letters_reversed")}
PROBES = ("reorder", "rename")
PROBE_PRESETS = {"reorder": ("reorder",), "rename": ("rename",), "all": PROBES}
VARIANT_MARK = "::rel"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def make_variants(labels: Sequence[Any], seed_key: str, n_shuffles: int = 3, relabel: bool = True,
                  include: Sequence[str] | None = None, reorder: bool = True) -> list[tuple[str, list, bool]]:
    """[(name, order, relabelled)]: "original", then (reorder) "reversed", "shuffle1".."shuffleN", then
    (relabel, at most 26 labels) "letters", "letters_reversed", "letters_shuffle". `include` keeps
    "original" and the named ones; a repeated (order, relabelled) is dropped. The shuffles come from one
    random.Random(crc32(seed_key)), in that order."""
    identity = list(range(len(labels)))
    rng = random.Random(zlib.crc32(str(seed_key).encode("utf-8")))
    out = [("original", identity, False)]
    if reorder:
        out.append(("reversed", identity[::-1], False))
        for n in range(1, n_shuffles + 1):
            order = identity[:]
            rng.shuffle(order)
            out.append((f"shuffle{n}", order, False))
    if relabel and len(labels) <= len(LETTERS):
        order = identity[:]
        rng.shuffle(order)
        out += [("letters", identity, True), ("letters_reversed", identity[::-1], True), ("letters_shuffle", order, True)]
    if include is not None:
        out = [v for v in out if v[0] == "original" or v[0] in include]
    seen: set = set()
    unique = []
    for name, order, relabelled in out:
        if (tuple(order), relabelled) not in seen:
            seen.add((tuple(order), relabelled))
            unique.append((name, order, relabelled))
    return unique


def decide_reliability(soft_stability: float, accept: float | None, escalate: float | None = None) -> str | None:
    """ACCEPT at or above `accept`, ESCALATE below `escalate` (when set), VERIFY between; None without accept."""
    if accept is None:
        return None
    if soft_stability >= accept:
        return "ACCEPT"
    if escalate is not None and soft_stability < escalate:
        return "ESCALATE"
    return "VERIFY"


def _unit(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value!r}")
    return float(value)


def calibrate_reliability(soft_scores: Sequence[float], correct: Sequence[bool], target_accuracy: float = 0.9,
                          max_escalate_accuracy: float = 1 / 3) -> tuple[float, float]:
    """(accept, escalate) from held-out soft stabilities and whether each answer was right: accept is the
    lowest score whose answers at or above it reach `target_accuracy` (1.01 if none); escalate the
    highest score below accept whose answers below it are at most `max_escalate_accuracy` right (0.0)."""
    target_accuracy = _unit(target_accuracy, "target_accuracy")
    max_escalate_accuracy = _unit(max_escalate_accuracy, "max_escalate_accuracy")
    scores, labels = list(soft_scores), list(correct)
    if len(scores) != len(labels):
        raise ValueError(f"soft_scores and correct must have the same length, got {len(scores)} and {len(labels)}")
    if not scores:
        raise ValueError("calibrate_reliability needs at least one (score, correct) pair")
    scores = [_unit(s, "soft_scores entries") for s in scores]
    for label in labels:
        if not isinstance(label, bool) and type(label).__name__ != "bool_":  # numpy's bool too, without numpy
            raise TypeError(f"correct must hold bools, got {type(label).__name__}")
    pairs = list(zip(scores, map(bool, labels)))
    distinct = sorted(set(scores))

    def accuracy(rows: list) -> float:
        return sum(ok for _, ok in rows) / len(rows)

    accept = next((t for t in distinct if accuracy([p for p in pairs if p[0] >= t]) >= target_accuracy), 1.01)
    escalate = 0.0
    for t in reversed([t for t in distinct if t < accept]):
        below = [p for p in pairs if p[0] < t]
        if below and accuracy(below) <= max_escalate_accuracy:
            escalate = t
            break
    return accept, escalate


# ---- constructor checks -------------------------------------------------------------------------------

def _threshold(value: Any, name: str, high: float) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or not 0.0 <= value <= high:
        raise ValueError(f"{name} must be None or a finite number in [0, {high:g}], got {value!r}")
    return float(value)


def _count(value: Any, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _check_probes(probes: Any) -> tuple | None:
    if probes is None or probes == "auto":
        return None
    if isinstance(probes, str):
        if probes not in PROBE_PRESETS:
            raise ValueError(f"probes must be None, 'auto', 'reorder', 'rename', 'all' or a list of 'reorder'/"
                             f"'rename', got {probes!r}")
        return PROBE_PRESETS[probes]
    if not isinstance(probes, (list, tuple)):
        raise TypeError(f"probes must be None, a string or a list of 'reorder'/'rename', got {type(probes).__name__}")
    bad = [p for p in probes if p not in PROBES]
    if not probes or bad:
        raise ValueError(f"probes must be a non-empty list of 'reorder'/'rename', got {list(probes)!r}")
    return tuple(p for p in PROBES if p in probes)


def _check_variants(variants: Any) -> tuple | None:
    if isinstance(variants, str):
        if variants not in VARIANT_PRESETS:
            raise ValueError(f"variants must be 'full', 'fast' or a list from ALL_VARIANTS, got {variants!r}")
        return VARIANT_PRESETS[variants]
    if not isinstance(variants, (list, tuple)):
        raise TypeError(f"variants must be 'full', 'fast' or a list from ALL_VARIANTS, got {type(variants).__name__}")
    bad = [v for v in variants if v not in ALL_VARIANTS]
    if not variants or bad:
        raise ValueError(f"variants must be a non-empty list from {ALL_VARIANTS}, got {list(variants)!r}")
    return tuple(variants)


def _share(flags: list) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def _blank_reliability(layout: str, answer: dict) -> dict:
    choice = answer.get("choice")
    p = (answer.get("probabilities") or {}).get(choice)
    return {"probes": [], "option_layout": layout, "decision": None, "soft_stability": None, "stability": None,
            "reorder_stability": None, "rename_stability": None, "n_variants": 1, "distinct_choices": [choice],
            "variant_choices": {"original": choice}, "variant_support": {"original": p}}


def _sorted(values: set) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


class OptionStabilityHook(BaseHook):
    """Probe every choice question with reordered and/or renamed copies in the same forward and attach
    `reliability` to its answer: soft_stability (mean probability the original and its variants give the
    original choice), stability (share of variants choosing it) and a decision, ACCEPT at or above
    `accept`, ESCALATE below `escalate`, VERIFY between (None when accept is None).

    probes: None/"auto" (reorder, plus rename when `relabel`; rename only for a parallel-layout
    checkpoint), "reorder", "rename", "all" or a list. variants: "full", "fast" or names from
    ALL_VARIANTS. Rename runs for at most `rename_max_options` (and 26) options. `seed`: the shuffles are a
    function of (seed, question id); without it, of the single state (or "batch")."""

    def __init__(self, *, accept: float | None, escalate: float | None, probes: Any = None, n_shuffles: int = 3,
                 relabel: bool = True, rename_max_options: int = 20, variants: Any = "full", seed: Any = None):
        self.accept = _threshold(accept, "accept", 1.01)
        self.escalate = _threshold(escalate, "escalate", 1.0)
        if self.accept is not None and self.escalate is not None and self.escalate > self.accept:
            raise ValueError(f"escalate ({escalate}) must not exceed accept ({accept})")
        self.probes = _check_probes(probes)
        self.n_shuffles = _count(n_shuffles, "n_shuffles", 0)
        if not isinstance(relabel, bool):
            raise TypeError(f"relabel must be a bool, got {type(relabel).__name__}")
        self.relabel = relabel
        self.rename_max_options = _count(rename_max_options, "rename_max_options", 2)
        self.variants = _check_variants(variants)
        self.seed = seed
        self._calls: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # ctx -> {qid: plan}
        self._issued: collections.Counter = collections.Counter()  # variant ids of calls in flight
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"OptionStabilityHook(accept={self.accept}, escalate={self.escalate}, probes={self.probes}, "
                f"n_shuffles={self.n_shuffles}, variants={self.variants}, seed={self.seed!r})")

    # ---- start: add the variants ----

    def _probes_for(self, k: int, layout: str) -> list:
        if self.probes is not None:
            probes = list(self.probes)
        elif layout == "parallel":
            probes = ["rename"] if self.relabel else []
        else:
            probes = ["reorder", "rename"] if self.relabel else ["reorder"]
        if "rename" in probes and not k <= min(self.rename_max_options, len(LETTERS)):
            probes.remove("rename")
        return probes

    def _seed_key(self, ctx: PredictContext, qid: Any) -> str:
        if self.seed is not None:
            base = str(self.seed)
        elif len(ctx.states) == 1:
            state = ctx.states[0]
            base = state if isinstance(state, str) else repr(state)
        else:
            base = "batch"
        return f"{base}|{qid}"

    @staticmethod
    def _variant_question(definition: dict, items: list, order: list, relabelled: bool) -> tuple[dict, dict]:
        """(variant definition, {label shown: original option index})."""
        base = {key: value for key, value in definition.items() if key not in ("criteria", "option_order")}
        if relabelled:
            criteria: Any = {}
            for slot, i in enumerate(order):
                label, desc = items[i]
                criteria[LETTERS[slot]] = desc if isinstance(desc, str) and desc.strip() else str(label)
            return {**base, "criteria": criteria}, {LETTERS[slot]: i for slot, i in enumerate(order)}
        if isinstance(definition["criteria"], dict):
            criteria = {items[i][0]: items[i][1] for i in order}
        else:
            criteria = [items[i][0] for i in order]
        return {**base, "criteria": criteria}, {items[i][0]: i for i in order}

    def _plan_question(self, ctx: PredictContext, qid: Any, definition: dict, layout: str, added: dict) -> dict:
        criteria = definition["criteria"]
        items = list(criteria.items()) if isinstance(criteria, dict) else [(label, None) for label in criteria]
        probes = self._probes_for(len(items), layout) if len(items) >= 2 else []
        variants = []
        if probes:
            made = make_variants([label for label, _ in items], self._seed_key(ctx, qid), self.n_shuffles,
                                 relabel="rename" in probes, include=self.variants, reorder="reorder" in probes)
            for n, (name, order, relabelled) in enumerate(made[1:], start=1):
                vid = f"{qid}{VARIANT_MARK}{n}"
                added[vid], mapping = self._variant_question(definition, items, order, relabelled)
                variants.append((vid, name, relabelled, mapping))
        return {"probes": probes, "labels": [label for label, _ in items], "variants": variants}

    def on_predict_start(self, ctx: PredictContext) -> None:
        from .questions import check_question

        questions = ctx.questions
        if not isinstance(questions, dict) or ctx.results is not None:
            return
        marked = [q for q in questions if isinstance(q, str) and VARIANT_MARK in q]
        with self._lock:
            if ctx in self._calls or (marked and all(self._issued[q] for q in marked)):
                return  # fired twice in one call, or the inner call of an outer probe: probe once
        if marked:
            raise ValueError(f"question id {marked[0]!r} must not contain {VARIANT_MARK!r}")
        cfg = getattr(ctx.agent, "cfg", None)
        layout = "parallel" if isinstance(cfg, dict) and cfg.get("option_layout") == "parallel" else "sequential"
        added: dict = {}
        plan: dict = {}
        for qid, definition in questions.items():
            if not isinstance(definition, dict) or definition.get("type") != "choice":
                continue
            try:
                check_question(qid, definition)
            except (ValueError, TypeError):
                continue  # the call itself reports the invalid question
            plan[qid] = self._plan_question(ctx, qid, definition, layout, added)
        if not plan:
            return
        ctx.questions = {**questions, **added}  # a new dict: the caller's is left as it was
        with self._lock:
            self._calls[ctx] = (layout, plan)
            self._issued.update(list(added))

    # ---- end: fold the variants back into reliability ----

    def _pop(self, ctx: PredictContext) -> tuple | None:
        with self._lock:
            entry = self._calls.pop(ctx, None)
            if entry is not None:
                self._issued.subtract(vid for p in entry[1].values() for vid, *_ in p["variants"])
                self._issued += collections.Counter()  # drop the ids that reached 0
        return entry

    def on_error(self, ctx: PredictContext) -> None:
        self._pop(ctx)

    def on_predict_end(self, ctx: PredictContext) -> None:
        entry = self._pop(ctx)
        if entry is None or not isinstance(ctx.results, list):
            return
        layout, plan = entry
        ctx.results = [self._fold(result, layout, plan, ctx.skipped) for result in ctx.results]

    def _reliability(self, answer: dict, layout: str, probe: dict, answers: dict) -> dict:
        labels = probe["labels"]
        choice = answer.get("choice")
        if not probe["variants"] or choice not in labels:
            return {**_blank_reliability(layout, answer), "probes": list(probe["probes"]) if probe["variants"] else []}
        original = labels.index(choice)
        choices = {"original": choice}
        support = {"original": float((answer.get("probabilities") or {}).get(choice, 0.0))}
        same: dict = {False: [], True: []}
        for vid, name, relabelled, mapping in probe["variants"]:
            v = answers.get(vid)
            if not isinstance(v, dict) or v.get("choice") not in mapping:
                continue
            choices[name] = labels[mapping[v["choice"]]]
            shown = next(label for label, i in mapping.items() if i == original)
            support[name] = round(float((v.get("probabilities") or {}).get(shown, 0.0)), 4)
            same[relabelled].append(choices[name] == choice)
        soft = sum(support.values()) / len(support)
        return {"probes": list(probe["probes"]), "option_layout": layout,
                "decision": decide_reliability(soft, self.accept, self.escalate), "soft_stability": soft,
                "stability": _share(same[False] + same[True]), "reorder_stability": _share(same[False]),
                "rename_stability": _share(same[True]), "n_variants": len(choices),
                "distinct_choices": _sorted(set(choices.values())), "variant_choices": choices,
                "variant_support": support}

    def _fold(self, result: Any, layout: str, plan: dict, skipped: bool) -> Any:
        if not isinstance(result, dict) or not isinstance(result.get("answers"), dict):
            return result
        answers = result["answers"]
        variant_ids = {vid for probe in plan.values() for vid, *_ in probe["variants"]}
        kept = {qid: a for qid, a in answers.items() if qid not in variant_ids}
        if not skipped:
            for qid, probe in plan.items():
                answer = kept.get(qid)
                if isinstance(answer, dict) and answer.get("type") == "choice":
                    kept[qid] = {**answer, "reliability": self._reliability(answer, layout, probe, answers)}
        out = {**result, "answers": kept}
        usage = result.get("usage")
        if isinstance(usage, dict):
            usage = dict(usage)
            if isinstance(usage.get("truncated_questions"), list):
                usage["truncated_questions"] = [q for q in usage["truncated_questions"] if q not in variant_ids]
            if isinstance(usage.get("options"), dict):
                options = {qid: v for qid, v in usage["options"].items() if qid not in variant_ids}
                if options:
                    usage["options"] = options
                else:
                    del usage["options"]
            out["usage"] = usage
        return out

"""Evals of narrowed choice questions: shortlisting by embedding similarity (`evaluate_shortlist`) and
tournaments (`evaluate_tournament`). Each case gets a status that says where a miss happened -- the
narrowing dropped the expected label, or the final decision picked another -- and the report gains the
narrowing metrics. Public as `laya.evals_shortlist` and `laya.evals_tournament`."""

from __future__ import annotations

from typing import Any

from .dataset import Dataset, EvalError, file_fingerprint
from .loop import evaluate
from .report import EvalReport, SLICE_DIMENSIONS, slice_cases

SHORTLIST_SCHEMA = "laya-shortlist-evals-report/1"
TOURNAMENT_SCHEMA = "laya-tournament-evals-report/1"


def _check_id(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EvalError(f"{name} must be a non-empty string naming what was evaluated, got {value!r}")
    return value


def _checked_dataset(dataset: Any, what: str) -> Dataset:
    from ..questions import check_questions

    if isinstance(dataset, str):
        dataset = Dataset.from_jsonl(dataset)
    elif not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    for i, ex in enumerate(dataset):
        labels = {q.qid: [str(x) for x in q.labels] for q in check_questions(ex.questions) if q.qtype == "choice"}
        for qid in ex.questions:
            if qid not in labels:
                raise EvalError(f"example {i} question {qid!r} is not a choice question; {what} evals take choice "
                                "questions only")
        for qid, expected in ex.expected.items():
            if not isinstance(expected, str) or expected not in labels[qid]:
                raise EvalError(f"example {i} expects {expected!r} for {qid!r}, which is not one of its labels")
    return dataset


def _status_counts(cases: list[dict], statuses: tuple, key: str) -> dict:
    return {s: sum(1 for c in cases if c.get(key) == s) for s in statuses}


def _rates(cases: list[dict], key: str, statuses: tuple, names: tuple) -> dict:
    """(share of cases whose label survived narrowing, accuracy among those); None without cases."""
    correct, miss_narrow, _ = statuses
    n = len(cases)
    survived = sum(1 for c in cases if c.get(key) != miss_narrow)
    right = sum(1 for c in cases if c.get(key) == correct)
    return {names[0]: survived / n if n else None, names[1]: right / survived if survived else None}


def _finish(report: EvalReport, key: str, statuses: tuple, names: tuple, schema: str, extra: dict) -> EvalReport:
    report.overall.update(_rates(report.cases, key, statuses, names))
    for dim in SLICE_DIMENSIONS:
        for value, members in slice_cases(report.cases, dim).items():
            if value in report.slices.get(dim, {}):
                report.slices[dim][value].update(_rates(members, key, statuses, names))
    report.config["schema"] = schema
    report.config.update(extra)
    return report


def _config(checkpoint_id: str, dataset_path: Any) -> dict:
    config = {"checkpoint_id": checkpoint_id}
    if dataset_path is not None:
        config.update({"dataset_path": str(dataset_path), "dataset_sha256": file_fingerprint(dataset_path)})
    return config


class _ShortlistRunner:
    def __init__(self, agent: Any, embed_fn: Any, k: int):
        self.agent, self.embed_fn, self.k = agent, embed_fn, k

    def predict(self, state: Any, questions: dict) -> dict:
        from ..shortlist import predict_shortlist

        return predict_shortlist(self.agent, state, questions, self.embed_fn, self.k)


def evaluate_shortlist(agent: Any, dataset: Any, embed_fn: Any, *, k: int = 20, checkpoint_id: str,
                       embedder_id: str, dataset_path: str | None = None) -> EvalReport:
    """Shortlist every choice question to `k` options with `embed_fn`, answer with `agent`, and say per
    case whether it was right, the shortlist dropped the expected label, or the decision missed it."""
    from ..shortlist import check_k

    try:
        k = check_k(k)
    except ValueError as e:
        raise EvalError(str(e)) from None
    if not callable(embed_fn):
        raise EvalError(f"embed_fn must be callable (texts -> array [n, d]), got {type(embed_fn).__name__}")
    _check_id(checkpoint_id, "checkpoint_id")
    _check_id(embedder_id, "embedder_id")
    dataset = _checked_dataset(dataset, "shortlist")
    report = evaluate(_ShortlistRunner(agent, embed_fn, k), dataset, config=_config(checkpoint_id, dataset_path))
    for case in report.cases:
        kept = [str(x) for x in (case.get("shortlist") or {}).get("kept", [])]
        case["shortlist_status"] = "correct" if case["correct"] else \
            "retrieval_miss" if str(case["expected"]) not in kept else "decision_miss"
    statuses = ("correct", "retrieval_miss", "decision_miss")
    block = {"k": k, "checkpoint_id": checkpoint_id, "embedder_id": embedder_id,
             "counts": _status_counts(report.cases, statuses, "shortlist_status")}
    return _finish(report, "shortlist_status", statuses,
                   ("shortlist_recall_at_k", "shortlist_accuracy_on_recalled"), SHORTLIST_SCHEMA, {"shortlist": block})


class _TournamentRunner:
    def __init__(self, agent: Any, group_size: int):
        self.agent, self.group_size = agent, group_size

    def predict(self, state: Any, questions: dict) -> dict:
        from ..shortlist import predict_tournament

        return predict_tournament(self.agent, state, questions, self.group_size)


def evaluate_tournament(agent: Any, dataset: Any, *, group_size: int = 16, checkpoint_id: str,
                        dataset_path: str | None = None) -> EvalReport:
    """Answer every choice question by tournament (groups of `group_size`) and say per case whether it was
    right, the expected label was eliminated before the final, or the final chose another."""
    from ..shortlist import check_group_size

    try:
        group_size = check_group_size(group_size)
    except ValueError as e:
        raise EvalError(str(e)) from None
    _check_id(checkpoint_id, "checkpoint_id")
    dataset = _checked_dataset(dataset, "tournament")
    report = evaluate(_TournamentRunner(agent, group_size), dataset, config=_config(checkpoint_id, dataset_path))
    for case in report.cases:
        block = case.get("tournament")
        finalists = None if block is None else [str(x) for x in block.get("finalists", [])]
        case["tournament_status"] = "correct" if case["correct"] else \
            "elimination_miss" if finalists is not None and str(case["expected"]) not in finalists \
            else "final_choice_miss"
    statuses = ("correct", "elimination_miss", "final_choice_miss")
    counts = _status_counts(report.cases, statuses, "tournament_status")
    return _finish(report, "tournament_status", statuses,
                   ("tournament_survival_rate", "tournament_accuracy_on_survivors"), TOURNAMENT_SCHEMA,
                   {"tournament_group_size": group_size, "tournament": {"counts": counts}})

"""Agreement of a student with a teacher that was run twice: how often the student gives the reference
teacher's label, against how often the teacher agrees with itself, with a paired case-bootstrap
interval for the difference. Runs are `laya-agreement-run/1` JSON documents. numpy only."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np

from ..questions import check_questions
from .dataset import EvalError

AGREEMENT_RUN_SCHEMA = "laya-agreement-run/1"
AGREEMENT_REPORT_SCHEMA = "laya-agreement-report/1"
PROTOCOL = "teacher-repeat-vs-student/1"
ROLES = ("reference", "repeat", "student")
LIMITATIONS = [
    "Agreement with a teacher is not accuracy: a student can agree with a wrong teacher.",
    "An abstained (null) student answer counts as a disagreement; student_coverage reports how often it answered.",
    "The interval resamples cases, not decisions: questions of one case move together.",
    "The teacher's repeat agreement bounds what a student can be expected to reach on these cases.",
    "Only choice questions are compared; the numbers hold for this case set and these settings only.",
]


def check_bootstrap(bootstrap_samples: Any, seed: Any) -> tuple[int, int]:
    if isinstance(bootstrap_samples, bool) or not isinstance(bootstrap_samples, int) \
            or not 100 <= bootstrap_samples <= 100000:
        raise EvalError(f"bootstrap_samples must be an integer between 100 and 100000, got {bootstrap_samples!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise EvalError(f"seed must be a non-negative integer, got {seed!r}")
    return bootstrap_samples, seed


def check_provenance(provenance: Any, where: str) -> dict:
    if not isinstance(provenance, dict):
        raise EvalError(f"{where} 'provenance' must be an object with 'revision' and 'settings'")
    if "revision" not in provenance:
        raise EvalError(f"{where} 'provenance' is missing 'revision'")
    if not isinstance(provenance.get("settings"), dict):
        raise EvalError(f"{where} 'provenance' 'settings' must be an object")
    return provenance


def _check_case(case: Any, where: str, nullable: bool) -> dict:
    if not isinstance(case, dict):
        raise EvalError(f"{where} must be an object, got {type(case).__name__}")
    for key in ("id", "state", "questions", "answers"):
        if key not in case:
            raise EvalError(f"{where} is missing {key!r}")
    if not isinstance(case["questions"], dict) or not isinstance(case["answers"], dict):
        raise EvalError(f"{where} 'questions' and 'answers' must be objects")
    try:
        questions = check_questions(case["questions"])
    except (ValueError, TypeError) as e:
        raise EvalError(f"{where}: {e}") from None
    for q in questions:
        if q.qtype != "choice":
            raise EvalError(f"{where} question {q.qid!r} is {q.qtype}; agreement compares choice questions only")
        label = case["answers"].get(q.qid)
        if label is None and nullable:
            continue
        if label not in [str(x) for x in q.labels]:
            raise EvalError(f"{where} answer {label!r} to {q.qid!r} is not one of its labels")
    if "tags" in case and not isinstance(case["tags"], list):
        raise EvalError(f"{where} 'tags' must be a list")
    return case


def check_run(run: Any, role: str) -> dict:
    """A validated run document (a dict or a JSON file path)."""
    if isinstance(run, str):
        from .cli_files import read_json_strict

        run = read_json_strict(run)
    if not isinstance(run, dict):
        raise EvalError(f"the {role} run must be an object, got {type(run).__name__}")
    if run.get("schema") != AGREEMENT_RUN_SCHEMA:
        raise EvalError(f"the {role} run's schema must be {AGREEMENT_RUN_SCHEMA!r}, got {run.get('schema')!r}")
    if not isinstance(run.get("run_id"), str) or not run["run_id"].strip():
        raise EvalError(f"the {role} run needs a non-empty string 'run_id'")
    check_provenance(run.get("provenance"), f"the {role} run")
    cases = run.get("cases")
    if not isinstance(cases, list) or not cases:
        raise EvalError(f"the {role} run's 'cases' must be a non-empty list")
    ids = [_check_case(c, f"{role} case {i}", role == "student")["id"] for i, c in enumerate(cases)]
    if len({json.dumps(x) for x in ids}) != len(ids):
        raise EvalError(f"the {role} run repeats a case id")
    return run


def _fingerprint(run: dict) -> str:
    return hashlib.sha256(json.dumps(run, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def _paired(runs: dict) -> list[tuple[dict, dict, dict]]:
    ref, rep, stu = runs["reference"], runs["repeat"], runs["student"]
    if ref["run_id"] == rep["run_id"]:
        raise EvalError(f"the reference and repeat runs need distinct run_id values, both are {ref['run_id']!r}")
    if ref["provenance"] != rep["provenance"]:
        raise EvalError("the reference and repeat runs must have equal provenance (one teacher, run twice)")
    by_id = {role: {json.dumps(c["id"]): c for c in runs[role]["cases"]} for role in ("repeat", "student")}
    out = []
    for case in ref["cases"]:
        key = json.dumps(case["id"])
        for role in ("repeat", "student"):
            other = by_id[role].get(key)
            if other is None:
                raise EvalError(f"the {role} run has no case {case['id']!r}")
            if other["state"] != case["state"] or other["questions"] != case["questions"]:
                raise EvalError(f"case {case['id']!r} has another state or questions in the {role} run")
        out.append((case, by_id["repeat"][key], by_id["student"][key]))
    if len(out) != len(by_id["repeat"]) or len(out) != len(by_id["student"]):
        raise EvalError("the three runs must hold the same case ids")
    return out


def _records(triples: list) -> list[dict]:
    records = []
    for ref, rep, stu in triples:
        for qid in ref["questions"]:
            r, t, s = ref["answers"][qid], rep["answers"][qid], stu["answers"].get(qid)
            records.append({"id": ref["id"], "qid": str(qid), "language": ref.get("language"),
                            "tags": [str(x) for x in ref.get("tags") or []], "reference": r, "repeat": t,
                            "student": s, "teacher_repeat_agree": r == t, "student_teacher_agree": s == r})
    return records


def _summary(records: list[dict]) -> dict:
    n = len(records)
    teacher = sum(r["teacher_repeat_agree"] for r in records) / n
    student = sum(r["student_teacher_agree"] for r in records) / n
    return {"n_cases": len({json.dumps(r["id"]) for r in records}), "n_decisions": n,
            "teacher_repeat_agreement": teacher, "student_teacher_agreement": student,
            "student_coverage": sum(r["student"] is not None for r in records) / n,
            "paired_agreement_delta": student - teacher}


def _ci95(records: list[dict], samples: int, seed: int) -> list[float] | None:
    per_case: dict[str, list[int]] = {}
    for r in records:
        row = per_case.setdefault(json.dumps(r["id"]), [0, 0, 0])
        row[0] += r["student_teacher_agree"]
        row[1] += r["teacher_repeat_agree"]
        row[2] += 1
    table = np.asarray(list(per_case.values()), dtype=np.float64)
    if len(table) < 2:
        return None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(table), size=(samples, len(table)))
    sums = table[picks].sum(axis=1)  # [samples, 3]
    deltas = (sums[:, 0] - sums[:, 1]) / sums[:, 2]
    return [float(np.percentile(deltas, 2.5)), float(np.percentile(deltas, 97.5))]


def _slices(records: list[dict]) -> dict:
    out: dict[str, dict] = {"qid": {}, "language": {}, "tag": {}}
    for dim in out:
        groups: dict[str, list] = {}
        for r in records:
            values = r["tags"] if dim == "tag" else ([] if r[dim] is None else [str(r[dim])])
            for v in values:
                groups.setdefault(v, []).append(r)
        out[dim] = {v: _summary(members) for v, members in sorted(groups.items())}
    return out


def compare_agreement(reference: Any, repeat: Any, student: Any, *, bootstrap_samples: int = 2000,
                      seed: int = 0) -> dict:
    """The `laya-agreement-report/1` of a student run against a teacher's reference and repeat runs."""
    from .. import __version__

    samples, seed = check_bootstrap(bootstrap_samples, seed)
    runs = {role: check_run(run, role) for role, run in zip(ROLES, (reference, repeat, student))}
    records = _records(_paired(runs))
    overall = {**_summary(records), "paired_delta_ci95": _ci95(records, samples, seed)}
    config = {"protocol": PROTOCOL, "bootstrap_samples": samples, "seed": seed, "confidence_level": 0.95,
              "resampling_unit": "case", "provenance": {role: runs[role]["provenance"] for role in ROLES},
              "run_ids": {role: runs[role]["run_id"] for role in ROLES},
              "input_sha256": {role: _fingerprint(runs[role]) for role in ROLES}, "laya_version": __version__}
    return {"schema": AGREEMENT_REPORT_SCHEMA, "config": config, "overall": overall, "slices": _slices(records),
            "cases": records, "limitations": list(LIMITATIONS)}


def _student_label(answer: Any) -> str | None:
    if not isinstance(answer, dict) or answer.get("choice") is None:
        return None
    if answer.get("abstention") == "abstained" or answer.get("low_confidence"):
        return None
    return str(answer["choice"])


def evaluate_agreement(runner: Any, reference: Any, repeat: Any, *, student_provenance: Any, model: str | None = None,
                       bootstrap_samples: int = 2000, seed: int = 0) -> dict:
    """Answer the reference run's cases with `runner` (the student) and compare it with both teacher runs."""
    check_bootstrap(bootstrap_samples, seed)
    ref = check_run(reference, "reference")
    check_run(repeat, "repeat")
    check_provenance(student_provenance, "the student run")
    if not callable(getattr(runner, "predict", None)):
        raise EvalError(f"runner must have a predict(state, questions) method, got {type(runner).__name__}")
    cases = []
    for case in ref["cases"]:
        result = runner.predict(case["state"], case["questions"], **({"model": model} if model else {}))
        answers = (result or {}).get("answers") or {}
        cases.append({**{k: case[k] for k in ("id", "state", "questions", "language", "tags") if k in case},
                      "answers": {qid: _student_label(answers.get(qid)) for qid in case["questions"]}})
    student = {"schema": AGREEMENT_RUN_SCHEMA, "run_id": "student", "provenance": student_provenance,
               "cases": cases}
    return compare_agreement(ref, repeat, student, bootstrap_samples=bootstrap_samples, seed=seed)

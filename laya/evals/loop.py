"""`evaluate(runner, dataset, ...)`: answer every example through a runner (anything with `predict`, and
optionally `predict_batch`), score the expected answers and build an `EvalReport`. Torch-free."""

from __future__ import annotations

import collections
import inspect
import json
import time
from typing import Any

from .dataset import Dataset, EvalError, Example, file_fingerprint, questions_fingerprint
from .evaluators import answer_confidence, answer_correct, check_evaluators
from .report import REPORT_SCHEMA, EvalReport, metric_table, slice_tables

ON_ERROR = ("fail", "skip")


def _parameters(fn: Any) -> list[inspect.Parameter]:
    try:
        return list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []


def accepts(fn: Any, name: str) -> bool:
    """`fn` takes a parameter called `name`, or **kwargs."""
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in _parameters(fn))


def _first_positional(fn: Any) -> str | None:
    for p in _parameters(fn):
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            return p.name
    return None


def _batch_mode(runner: Any, batch_size: int | None) -> str:
    batch = getattr(runner, "predict_batch", None)
    if batch_size is None or batch_size <= 1 or not callable(batch):
        return "single"
    if _first_positional(batch) == "requests":
        return "requests"
    return "states" if accepts(batch, "model") else "single"


def _check_call(runner: Any, dataset: Any, batch_size: Any, on_error: Any, min_confidence: Any) -> Dataset:
    if not callable(getattr(runner, "predict", None)):
        raise EvalError(f"runner must have a predict(state, questions) method, got {type(runner).__name__}")
    if isinstance(dataset, str):
        dataset = Dataset.from_jsonl(dataset)
    elif not isinstance(dataset, Dataset):
        dataset = Dataset(dataset)
    if on_error not in ON_ERROR:
        raise EvalError(f"on_error must be 'fail' or 'skip', got {on_error!r}")
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise EvalError(f"batch_size must be a positive integer or None, got {batch_size!r}")
    if min_confidence is not None:
        surfaces = [("predict", runner.predict)]
        if _batch_mode(runner, batch_size) != "single":
            surfaces.append(("predict_batch", runner.predict_batch))
        for name, fn in surfaces:
            if not accepts(fn, "min_confidence"):
                raise EvalError(f"min_confidence needs a runner whose {name} accepts min_confidence; "
                                f"{type(runner).__name__}.{name} does not")
    if not accepts(runner.predict, "model"):
        for i, ex in enumerate(dataset):
            if ex.model is not None:
                raise EvalError(f"example {i} asks for model {ex.model!r}, but {type(runner).__name__}.predict "
                                "takes no 'model'; drop the example's model or use a runner that routes")
    return dataset


def check_min_confidence_value(value: Any) -> Any:
    from ..answers import check_min_confidence

    try:
        return check_min_confidence(value)
    except (ValueError, TypeError) as e:
        raise EvalError(str(e)) from None


def _chunks(dataset: Dataset, size: int) -> list[list[int]]:
    """Runs of consecutive examples sharing model and question set, at most `size` long."""
    out: list[list[int]] = []
    last = None
    for i, ex in enumerate(dataset):
        key = (ex.model, json.dumps(ex.questions, ensure_ascii=False, default=repr))
        if out and key == last and len(out[-1]) < size:
            out[-1].append(i)
        else:
            out.append([i])
        last = key
    return out


def _call(runner: Any, mode: str, examples: list[Example], batch_size: int | None, sort_by_length: bool,
          min_confidence: Any) -> list[dict]:
    extra = {} if min_confidence is None else {"min_confidence": min_confidence}
    if mode == "single":
        ex = examples[0]
        if ex.model is not None:
            extra["model"] = ex.model
        return [runner.predict(ex.state, ex.questions, **extra)]
    batch = runner.predict_batch
    if sort_by_length and accepts(batch, "sort_by_length"):
        extra["sort_by_length"] = True
    if mode == "requests":
        requests = [{"state": ex.state, "questions": ex.questions, **({"model": ex.model} if ex.model else {})}
                    for ex in examples]
        results = batch(requests, batch_size=batch_size, **extra)
    else:
        results = batch([ex.state for ex in examples], examples[0].questions, model=examples[0].model,
                        batch_size=batch_size, **extra)
    results = list(results)
    if len(results) != len(examples):
        raise EvalError(f"the runner's predict_batch returned {len(results)} results for {len(examples)} states")
    return results


def _answer_all(runner: Any, dataset: Dataset, batch_size: int | None, sort_by_length: bool,
                min_confidence: Any, on_error: str, errored: list) -> tuple[dict, dict]:
    """({index: (result, latency_ms, cost_ms)}, timing block)."""
    mode = _batch_mode(runner, batch_size)
    chunks = _chunks(dataset, batch_size) if mode != "single" else [[i] for i in range(len(dataset))]
    groups = collections.deque(chunks)
    answered: dict[int, tuple] = {}
    started, calls = time.perf_counter(), 0
    while groups:
        members = groups.popleft()
        examples = [dataset[i] for i in members]
        t0 = time.perf_counter()
        try:
            results = _call(runner, mode, examples, batch_size, sort_by_length, min_confidence)
        except Exception as e:  # noqa: BLE001 - recorded per example under on_error="skip"
            if on_error == "fail":
                raise
            if len(members) > 1:  # one bad example must not cost its chunk: answer them one by one
                groups.extendleft([i] for i in reversed(members))
                continue
            errored += [{"index": i, "error": f"{type(e).__name__}: {e}"} for i in members]
            continue
        finally:
            calls += 1
        elapsed = (time.perf_counter() - t0) * 1000.0
        decisions = max(1, sum(len(ex.questions) for ex in examples))
        for i, result in zip(members, results):
            answered[i] = (result, elapsed / len(members), elapsed / decisions)
    total = (time.perf_counter() - started) * 1000.0
    timing = {"mode": mode, "calls": calls, "total_ms": total, "examples": len(answered),
              "decisions": sum(len(dataset[i].questions) for i in answered)}
    return answered, timing


def _case(i: int, ex: Example, qid: Any, answer: dict, result: dict, latency: float, cost: float,
          evaluators: list) -> dict:
    expected = ex.expected[qid]
    model = ex.model or (result.get("routing") or {}).get("model") or result.get("model")
    case = {"index": i, "qid": str(qid), "language": ex.language, "model": model, "tags": list(ex.tags),
            "expected": expected, "answer": answer, "confidence": answer_confidence(answer),
            "correct": answer_correct(answer, expected),
            "scores": {e.name: e.score(answer, expected) for e in evaluators},
            "latency_ms": latency, "cost_per_decision_ms": cost}
    for block in ("shortlist", "tournament"):
        if isinstance(result.get(block), dict) and qid in result[block]:
            case[block] = result[block][qid]
    return case


def _cases(dataset: Dataset, answered: dict, evaluators: list, on_error: str, errored: list) -> list[dict]:
    cases = []
    for i, ex in enumerate(dataset):
        if i not in answered:
            continue
        result, latency, cost = answered[i]
        answers = result.get("answers") if isinstance(result, dict) else None
        for qid in ex.expected:
            answer = answers.get(qid) if isinstance(answers, dict) else None
            if not isinstance(answer, dict):
                if on_error == "fail":
                    raise EvalError(f"runner returned no answer for question {str(qid)!r}")
                errored.append({"index": i, "question": str(qid), "error": "missing answer"})
                continue
            cases.append(_case(i, ex, qid, answer, result, latency, cost, evaluators))
    return cases


def _config(config: Any, dataset: Dataset, evaluators: list, timing: dict, settings: dict) -> dict:
    from .. import __version__

    if config is not None and not isinstance(config, dict):
        raise EvalError(f"config must be a dict or None, got {type(config).__name__}")
    out = dict(config or {})
    out.update({"schema": REPORT_SCHEMA, "laya_version": __version__, "coverage_metric_definition": 2,
                "questions_sha256": questions_fingerprint(dataset), "evaluators": [e.name for e in evaluators],
                "n_examples": len(dataset), **settings, "timing": timing})
    if dataset.path is not None:
        out.setdefault("dataset_path", dataset.path)
        out.setdefault("dataset_sha256", file_fingerprint(dataset.path))
    return out


def evaluate(runner: Any, dataset: Any, evaluators: Any = None, batch_size: int | None = None,
             on_error: str = "fail", config: dict | None = None, sort_by_length: bool = False,
             min_confidence: Any = None) -> EvalReport:
    """Answer every example of `dataset` through `runner` and report per-case scores, overall metrics and
    slices (language, model, qid, tag). `on_error="skip"` records failures under `config["errored"]`."""
    min_confidence = check_min_confidence_value(min_confidence)
    dataset = _check_call(runner, dataset, batch_size, on_error, min_confidence)
    evaluators = check_evaluators(evaluators)
    errored: list = []
    answered, timing = _answer_all(runner, dataset, batch_size, bool(sort_by_length), min_confidence, on_error,
                                   errored)
    cases = _cases(dataset, answered, evaluators, on_error, errored)
    settings = {"batch_size": batch_size, "on_error": on_error, "sort_by_length": bool(sort_by_length),
                "min_confidence": min_confidence, "n_cases": len(cases)}
    if on_error == "skip":
        settings["errored"] = errored
    names = [e.name for e in evaluators]
    return EvalReport(_config(config, dataset, evaluators, timing, settings), metric_table(cases, names),
                      slice_tables(cases, names), cases)

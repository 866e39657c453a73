"""The published `laya-evals` commands: validate, run, compare, agreement and evidence. Each returns
an exit status (0 ok, 1 a threshold / baseline / policy failed); `EvalError` means exit 2 (cli.main)."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from .cli_files import check_output_path, metric_values, read_json_strict
from .dataset import Dataset, EvalError
from .report import EvalReport, check_tolerances, failing_deltas, metric_number


def check_answerable(dataset: Dataset) -> None:
    """The library's own state and question checks on every example, before `run --on-error fail` answers."""
    from ..questions import check_questions, render_state

    for i, ex in enumerate(dataset):
        try:
            render_state(ex.state)
            check_questions(ex.questions)
        except (TypeError, ValueError) as e:
            raise EvalError(f"{dataset.path}: example {i} (counted from 0): {e}") from None


def cmd_validate(args: Any) -> int:
    dataset = Dataset.from_jsonl(args.dataset)
    qids = dataset.question_ids
    print(f"{len(dataset)} examples, {len(qids)} question id(s): {', '.join(qids)}")
    return 0


def parse_revisions(values: list | None) -> tuple[str | None, dict]:
    """`--revision SHA` (every checkpoint) and `--revision NAME=SHA` (one checkpoint), repeatable."""
    revision, revisions = None, {}
    for value in values or []:
        name, sep, sha = str(value).partition("=")
        if sep:
            if not name.strip() or not sha.strip():
                raise EvalError(f"--revision takes SHA or NAME=SHA, got {value!r}")
            revisions[name.strip()] = sha.strip()
        elif revision is not None:
            raise EvalError(f"--revision SHA given twice ({revision!r}, {value!r}); use NAME=SHA per checkpoint")
        else:
            revision = value.strip() or None
    return revision, revisions


def _custom_model(model: str | None) -> tuple[str | None, dict]:
    """(model name for the examples, extra Router models) for --model: a registry name or a path / Hub id."""
    from ..registry import canonical_name, looks_local

    if model is None or canonical_name(model) is not None or not looks_local(model):
        return model, {}
    return "custom", {"custom": model}


def _router_class() -> Any:
    """`laya.evals_cli.Router` when replaced there, else `laya.Router` (which may be replaced too)."""
    import laya
    from laya import evals_cli
    from laya.router import Router

    return evals_cli.Router if evals_cli.Router is not Router else laya.Router


def make_runner(args: Any) -> Any:
    """The runner of `run`: `OnnxRunner(agent)` with --onnx, else `RouterRunner(laya.Router(...))`."""
    import laya
    from laya import evals_cli

    from ..registry import BUNDLE_REPO

    revision, revisions = parse_revisions(args.revision)
    if args.onnx is not None:
        source = args.model or BUNDLE_REPO
        agent = laya.load(source, backend="onnx", onnx_path=args.onnx, calibration=args.calibration,
                          revision=revisions.get(source, revision))
        return evals_cli.OnnxRunner(agent, model_id=args.model or getattr(agent, "model_id", source))
    _, models = _custom_model(args.model)
    router = _router_class()(models=models or None, device=args.device, revision=revision,
                             revisions=revisions or None)
    return evals_cli.RouterRunner(router)


def _threshold_failures(args: Any, overall: dict) -> list[str]:
    failures = []
    if args.min_accuracy is not None:
        metric = "choice_accuracy" if overall.get("choice_accuracy") is not None else "noul_accuracy"
        value = overall.get(metric)
        if value is None:
            failures.append("--min-accuracy: the report has neither choice_accuracy nor noul_accuracy")
        elif value < args.min_accuracy:
            failures.append(f"{metric} {value:.4f} < --min-accuracy {args.min_accuracy:g}")
    limits = []
    if args.max_ece is not None:
        limits.append(("max", "ece", args.max_ece))
    limits += [("min", m, v) for m, v in metric_values(args.min, "--min").items()]
    limits += [("max", m, v) for m, v in metric_values(args.max, "--max").items()]
    for kind, metric, bound in limits:
        value = overall.get(metric)
        if value is None:
            failures.append(f"{metric}: missing from the report (--{kind} {metric}={bound:g})")
        elif (kind == "min" and value < bound) or (kind == "max" and value > bound):
            failures.append(f"{metric} {value:.4f} {'<' if kind == 'min' else '>'} {kind} {bound:g}")
    return failures


def baseline_failures(report: EvalReport, baseline: EvalReport, tolerances: dict) -> list[str]:
    comparable, reasons = report.comparable_to(baseline)
    if not comparable:
        return [f"not comparable with the baseline: {r}" for r in reasons]
    _, deltas = report.compare(baseline, tolerances)
    out = []
    for metric, d in failing_deltas(deltas).items():
        if d.get("missing"):
            out.append(f"{metric}: missing (baseline {d['baseline']}, now {d['value']})")
        else:
            out.append(f"{metric} regressed: {d['value']:.4f} vs baseline {d['baseline']:.4f} "
                       f"(diff {d['diff']:+.4f}, tolerance {d['tolerance']:g})")
    return out


def _policy_failures(args: Any, report: EvalReport, baseline: EvalReport | None) -> list[str]:
    from .gate_policy import apply_policy, load_policy

    if not args.gate_policy:
        return []
    return apply_policy(load_policy(args.gate_policy, baseline is not None), report, baseline)


def _print_overall(overall: dict, slices: dict, dims: list) -> None:
    for name, value in overall.items():
        print("%-18s %.4f" % (name, value) if isinstance(value, (int, float)) else "%-18s n/a" % name)
    for dim in dims:
        print(f"\nby {dim}:")
        for value, row in (slices.get(dim) or {}).items():
            shown = ", ".join(f"{k} {v:.4f}" for k, v in row.items() if k != "n" and isinstance(v, float)
                              and not k.endswith("_ms"))
            print(f"  {value} (n={row.get('n', 0)}): {shown}")


def _write(path: str | None, text: str) -> None:
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text if text.endswith("\n") else text + "\n")


def _report_failures(failures: list[str]) -> int:
    for reason in failures:
        print(f"FAIL: {reason}", file=sys.stderr)
    return 1 if failures else 0


def _run_inputs(args: Any) -> tuple[Dataset, list, EvalReport | None, dict]:
    from .evaluators import ScoreWithin, default_evaluators

    if args.calibration is not None and args.onnx is None:
        raise EvalError("--calibration needs --onnx (the Router applies each checkpoint's own calibration)")
    check_output_path(args.json, "--json")
    check_output_path(args.markdown, "--markdown")
    dataset = Dataset.from_jsonl(args.dataset)
    if args.on_error == "fail":  # (skip mode records a bad example as errored and goes on: R-EV-4)
        check_answerable(dataset)
    model = None if args.onnx is not None else _custom_model(args.model)[0]  # the ONNX agent serves one model
    if model is not None:
        dataset = Dataset([dataclasses.replace(ex, model=ex.model or model) for ex in dataset], path=dataset.path)
    evaluators = default_evaluators() + [ScoreWithin(t) for t in args.score_within or []]
    baseline = EvalReport.load(args.baseline) if args.baseline else None
    for metric, value in (baseline.overall if baseline is not None else {}).items():
        metric_number(value, repr(metric), "baseline")  # a non-numeric baseline metric fails before answering
    tolerances = check_tolerances(metric_values(args.tolerance, "--tolerance"))
    metric_values(args.min, "--min"), metric_values(args.max, "--max")  # bad M=V fails before answering
    if args.gate_policy:  # a bad policy file fails before anything is answered
        from .gate_policy import load_policy

        load_policy(args.gate_policy, baseline is not None)
    return dataset, evaluators, baseline, tolerances


def cmd_run(args: Any) -> int:
    from .loop import check_min_confidence_value, evaluate

    min_confidence = check_min_confidence_value(args.min_confidence)
    dataset, evaluators, baseline, tolerances = _run_inputs(args)
    config = {"command": "laya-evals run", "runner": "onnx" if args.onnx else "router", "model": args.model,
              "device": args.device, "revision": list(args.revision or []) or None}
    from laya import evals_cli

    report = evaluate(evals_cli.make_runner(args), dataset, evaluators, batch_size=args.batch_size, on_error=args.on_error,
                      config=config, sort_by_length=args.sort_by_length, min_confidence=min_confidence)
    _print_overall(report.overall, report.slices, args.slice or [])
    _write(args.json, report.to_json())
    _write(args.markdown, report.to_markdown())
    failures = _threshold_failures(args, report.overall)
    if baseline is not None:
        failures += baseline_failures(report, baseline, tolerances)
    failures += _policy_failures(args, report, baseline)
    return _report_failures(failures)


def cmd_compare(args: Any) -> int:
    report, baseline = EvalReport.load(args.report), EvalReport.load(args.baseline)
    tolerances = check_tolerances(metric_values(args.tolerance, "--tolerance"))
    comparable, reasons = report.comparable_to(baseline)
    deltas = report.compare(baseline, tolerances)[1]  # a non-numeric metric fails before any output
    print(f"comparable: {'yes' if comparable else 'no'}")
    if comparable:
        for metric, d in deltas.items():
            if d.get("diff") is not None:
                print("%-18s %.4f -> %.4f (%+.4f)" % (metric, d["baseline"], d["value"], d["diff"]))
    failures = baseline_failures(report, baseline, tolerances)
    failures += _policy_failures(args, report, baseline)
    return _report_failures(failures)


def cmd_agreement(args: Any) -> int:
    import json

    from .agreement_runs import compare_agreement

    check_output_path(args.json, "--json")
    runs = [read_json_strict(p) for p in (args.reference, args.repeat, args.student)]
    result = compare_agreement(*runs, bootstrap_samples=args.bootstrap_samples, seed=args.seed)
    for name, value in result["overall"].items():
        print("%-26s %s" % (name, f"{value:.4f}" if isinstance(value, float) else json.dumps(value)))
    _write(args.json, json.dumps(result, indent=2, ensure_ascii=False))
    return 0


def cmd_evidence(args: Any) -> int:
    from ..evidence import format_summary, inspect_checkpoint

    print(format_summary(inspect_checkpoint(args.checkpoint, args.report)))
    return 0

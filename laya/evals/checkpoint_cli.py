"""`laya-evals` on a checkpoint (our design, reached with `--data`, or `evidence` without `--checkpoint`):
measure a checkpoint on gold data, gate it, compare it, and record the evidence.

    laya-evals run       --model CKPT --data FILE [--onnx GRAPH] [--calibration FILE] [--revision REV]
                         [--min-accuracy A] [--max-ece E] [--row-policy any|all|warn] [--json|--markdown]
    laya-evals agreement --model CKPT --data FILE --against onnx GRAPH | --against model CKPT2
                         [--min-agreement A] [--max-dp D]
    laya-evals compare   --model A --model B [--model C ...] --data FILE
    laya-evals evidence  --model CKPT --data FILE [run flags] [--json] [--out FILE]
    laya-evals evidence  --from RUN.json [--json] [--out FILE]

Data (`--data`): the gold JSONL of training (rows `{"state", "questions", "gold": {qid:
{"probabilities": {...}}}}` or `"expected": {qid: answer}`; questions without gold are skipped), or
text+label rows — a CSV, a JSONL whose first row has no "questions" dict, or any file with an
explicit `--text-column` (`laya.train.data.is_text_label`, the rule `laya-train` uses) — turned into
one choice question over the labels seen (`--label-column`, `--question-id`, `--instructions`, as in `laya-train`). The loaders
are `laya.train.data`'s, so the questions are validated exactly as at inference.

Answering: every item goes through the public `predict_batch` of `laya.load(--model, device=--device,
revision=--revision, calibration=--calibration)` — or of an ONNXAgent with `--onnx GRAPH`
(`backend="onnx"`, `--device` ignored) — so temperatures, per-size temperatures and a calibration file
apply as they do for callers. Probabilities are taken as returned (4 decimals), in canonical option
order: choice labels, score levels 0..k-1, noul [false, true].

Metrics, per question type present and overall ("all"): n; accuracy (the argmax is one of the gold
maxima, so tied gold levels all count); Brier (multi-class sum of squares, 0..2); ECE of the top
probability against hits (`laya.calibrate.ece_score`, `--bins`, default 15); mean confidence (mean top
probability).

Gates (`run`, `evidence`): a judged row (each question type present, and "all") fails when accuracy <
`--min-accuracy` or ECE > `--max-ece`. `--row-policy any` (default): the run fails when any judged row
fails; `all`: only when every judged row fails; `warn`: failures are reported, never fatal. No gate
flag: the run passes. `agreement` gates: `--min-agreement` (argmax agreement of "all") and `--max-dp`
(largest |dp| over all items and options).

Exit status: 0 = done and gates pass; 1 = a gate failed; 2 = usage or input error (bad flag value,
missing or invalid data file, model or graph that cannot be loaded) with a message on stderr naming
the bad value. Output: a text table (default), `--json` (one JSON object on stdout) or `--markdown`.
`evidence` writes a markdown record (default) or JSON (`--json`) for audit trails: model id, revision,
weight/graph/calibration sha256, data file sha256, counts, metrics, gate verdicts, laya / torch /
onnxruntime / python versions, device, UTC date and the command line; `--out` writes it to a file.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
from typing import Any

from .cli_files import check_output_path, positive_int_arg
from .dataset import EvalError

EXIT_OK, EXIT_GATE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """Bad flag value or unusable input: exit status 2."""


# ---- parser ----------------------------------------------------------------------------------------------

def _fraction(what: str):
    def parse(value: str) -> float:
        from .items import finite_fraction

        try:
            return finite_fraction(value, what)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    parse.__name__ = what
    return parse


def _add_data(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("data")
    g.add_argument("--data", required=False, metavar="FILE", help="gold JSONL, or text+label CSV/JSONL")
    g.add_argument("--text-column", default=None, help="text+label data: the text column (default: text); giving it forces text+label mode")
    g.add_argument("--label-column", default="label", help="text+label data: the label column (default: label)")
    g.add_argument("--question-id", default="label", help="text+label data: the question id (default: label)")
    g.add_argument("--instructions", default="Which label fits the text?",
                   help="text+label data: the question's instructions")
    g.add_argument("--limit", type=positive_int_arg("--limit"), default=None, metavar="N",
                   help="evaluate the first N items only")
    g.add_argument("--bins", type=positive_int_arg("--bins"), default=15, help="ECE bins (default: 15)")


def _add_runtime(p: argparse.ArgumentParser, multi: bool = False) -> None:
    g = p.add_argument_group("model")
    if multi:
        g.add_argument("--model", action="append", metavar="CKPT",
                       help="a checkpoint directory, Hub id or registry name; give it two or more times")
    else:
        g.add_argument("--model", metavar="CKPT", help="checkpoint directory, Hub id or registry name")
        g.add_argument("--onnx", metavar="GRAPH", default=None,
                       help="answer with an ONNXAgent on this exported graph (backend='onnx')")
    g.add_argument("--subfolder", default=None, help="checkpoint subfolder inside the repo/directory")
    g.add_argument("--revision", default=None, help="Hub revision (commit sha, branch or 'reviewed')")
    g.add_argument("--calibration", metavar="FILE", default=None, help="calibration JSON (save_calibration) to apply")
    g.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N, mps, auto")
    g.add_argument("--batch-size", type=positive_int_arg("--batch-size"), default=32,
                   help="states per forward (default: 32)")


def _add_gates(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("gates")
    g.add_argument("--min-accuracy", type=_fraction("--min-accuracy"), default=None, metavar="A",
                   help="fail a row whose accuracy is below A (0..1)")
    g.add_argument("--max-ece", type=_fraction("--max-ece"), default=None, metavar="E",
                   help="fail a row whose ECE is above E (0..1)")
    g.add_argument("--row-policy", choices=("any", "all", "warn"), default="any",
                   help="any (default): fail if any judged row fails; all: fail only if every judged row "
                        "fails; warn: report, exit 0")


def _add_format(p: argparse.ArgumentParser, default_markdown: bool = False) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="one JSON object on stdout")
    if not default_markdown:
        g.add_argument("--markdown", action="store_true", help="a markdown report")
    else:
        g.add_argument("--markdown", action="store_true", help="markdown (the default)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya-evals", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{run,agreement,compare,evidence}")
    sub.required = True

    run = sub.add_parser("run", help="answer every item; metrics per question type; gates",
                         description="Answer every item of --data and report n, accuracy, Brier, ECE and mean "
                                     "confidence per question type and overall; exit 1 when the gates fail.")
    _add_runtime(run)
    _add_data(run)
    _add_gates(run)
    _add_format(run)

    agr = sub.add_parser("agreement", help="argmax agreement and max |dp| between two runtimes/checkpoints",
                         description="Answer the same items with --model and with --against (an ONNX graph of it, "
                                     "or another checkpoint) and report argmax agreement and |dp|.")
    _add_runtime(agr)
    _add_data(agr)
    agr.add_argument("--against", nargs=2, metavar=("KIND", "TARGET"), required=False,
                     help="'onnx GRAPH' (the same checkpoint through ONNXAgent) or 'model CKPT2'")
    agr.add_argument("--min-agreement", type=_fraction("--min-agreement"), default=None, metavar="A",
                     help="exit 1 when the overall argmax agreement is below A")
    agr.add_argument("--max-dp", type=_fraction("--max-dp"), default=None, metavar="D",
                     help="exit 1 when the largest |dp| exceeds D")
    _add_format(agr)

    cmp_ = sub.add_parser("compare", help="run metrics of two or more checkpoints side by side, with deltas",
                          description="The run metrics of each --model side by side; deltas are against the first.")
    _add_runtime(cmp_, multi=True)
    _add_data(cmp_)
    _add_format(cmp_)

    ev = sub.add_parser("evidence", help="an audit record (markdown or JSON) of a run",
                        description="Run (or read a `run --json` output with --from) and write an evidence record; "
                                    "the exit status follows the gates as for run.")
    ev.add_argument("--from", dest="from_run", metavar="RUN_JSON", default=None,
                    help="the JSON output of `laya-evals run --json` instead of running again")
    _add_runtime(ev)
    _add_data(ev)
    _add_gates(ev)
    _add_format(ev, default_markdown=True)
    ev.add_argument("--out", metavar="FILE", default=None, help="write the record here (stdout otherwise)")
    return p


# ---- running ---------------------------------------------------------------------------------------------

def _sha256(path: str | None) -> str | None:
    from ..checkpoint import file_sha256

    return file_sha256(path) if path and os.path.isfile(path) else None


def _load_items(args) -> list:
    from .items import load_eval_items

    if not args.data:
        raise UsageError("--data FILE is required")
    try:
        items = load_eval_items(args.data, args.text_column, args.label_column, args.question_id, args.instructions)
    except FileNotFoundError:
        raise UsageError(f"--data: file {args.data!r} not found") from None
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        raise UsageError(f"--data {args.data!r}: {e}") from None
    if args.limit is not None:
        items = items[:args.limit]
    if not items:
        raise UsageError(f"--data {args.data!r}: no item has gold probabilities or an expected answer")
    return items


def _load_agent(args, model: str, onnx: str | None = None):
    import laya

    if args.calibration is not None and not os.path.isfile(args.calibration):
        raise UsageError(f"--calibration: file {args.calibration!r} not found")
    if onnx is not None and not os.path.isfile(onnx):
        raise UsageError(f"ONNX graph {onnx!r} not found")
    kwargs: dict[str, Any] = dict(subfolder=args.subfolder, revision=args.revision, calibration=args.calibration)
    try:
        if onnx is not None:
            return laya.load(model, backend="onnx", onnx_path=onnx, **kwargs)
        return laya.load(model, device=args.device, **kwargs)
    except (FileNotFoundError, OSError, ValueError, ImportError) as e:
        raise UsageError(f"cannot load model {model!r}{f' with ONNX graph {onnx!r}' if onnx else ''}: {e}") from None


def _model_info(agent, model: str, onnx: str | None, args) -> dict:
    model_dir = getattr(agent, "model_dir", None)
    weights = os.path.join(model_dir, "model.safetensors") if model_dir else None
    info = {"model": model, "model_id": getattr(agent, "model_id", None), "subfolder": args.subfolder,
            "revision": getattr(agent, "revision", None) or args.revision, "model_dir": model_dir,
            "runtime": "onnx" if onnx else "torch", "device": None if onnx else str(getattr(agent, "device", "")),
            "weights_sha256": None if onnx else _sha256(weights)}
    if onnx:
        info["onnx_path"] = os.path.abspath(onnx)
        info["onnx_sha256"] = _sha256(onnx)
    if args.calibration:
        info["calibration"] = os.path.abspath(args.calibration)
        info["calibration_sha256"] = _sha256(args.calibration)
    return info


def _data_info(args, items) -> dict:
    counts: dict[str, int] = {}
    for it in items:
        counts[it.question.qtype] = counts.get(it.question.qtype, 0) + 1
    return {"path": os.path.abspath(args.data), "sha256": _sha256(args.data), "items": len(items),
            "by_type": counts, "limit": args.limit}


def _evaluate(args, model: str, onnx: str | None, items) -> dict:
    from .items import answer_items, metrics

    agent = _load_agent(args, model, onnx)
    probs = answer_items(agent, items, args.batch_size)
    return {"model": _model_info(agent, model, onnx, args),
            "metrics": metrics([it.record for it in items], probs, args.bins), "_probs": probs}


def _need_model(args) -> str:
    if not args.model:
        raise UsageError("--model CKPT is required")
    return args.model


def do_run(args) -> dict:
    from .items import judge_gates

    model = _need_model(args)
    items = _load_items(args)
    result = _evaluate(args, model, args.onnx, items)
    result.pop("_probs")
    gates = judge_gates(result["metrics"], args.min_accuracy, args.max_ece, args.row_policy)
    return {"command": "run", **result, "data": _data_info(args, items), "gates": gates,
            "exit_status": EXIT_OK if gates["passed"] else EXIT_GATE}


def do_agreement(args) -> dict:
    from .items import agreement

    model = _need_model(args)
    if not args.against:
        raise UsageError("--against is required: 'onnx GRAPH' or 'model CKPT2'")
    kind, target = args.against
    if kind not in ("onnx", "model"):
        raise UsageError(f"--against: kind {kind!r} is not 'onnx' or 'model'")
    items = _load_items(args)
    a = _evaluate(args, model, args.onnx, items)
    b = _evaluate(args, model, target, items) if kind == "onnx" else _evaluate(args, target, None, items)
    table = agreement(items, a["_probs"], b["_probs"])
    failures = []
    if args.min_agreement is not None and table["all"]["argmax_agreement"] < args.min_agreement:
        failures.append(f"argmax agreement {table['all']['argmax_agreement']:.4f} < {args.min_agreement:g}")
    if args.max_dp is not None and table["all"]["max_abs_dp"] > args.max_dp:
        failures.append(f"max |dp| {table['all']['max_abs_dp']:.4f} > {args.max_dp:g}")
    return {"command": "agreement", "model": a["model"], "against": b["model"], "data": _data_info(args, items),
            "agreement": table, "metrics": {"model": a["metrics"], "against": b["metrics"]},
            "gates": {"min_agreement": args.min_agreement, "max_dp": args.max_dp, "failures": failures,
                      "passed": not failures},
            "exit_status": EXIT_GATE if failures else EXIT_OK}


def do_compare(args) -> dict:
    models = args.model or []
    if len(models) < 2:
        raise UsageError(f"compare needs --model at least twice, got {len(models)}")
    items = _load_items(args)
    runs = []
    for m in models:
        r = _evaluate(args, m, None, items)
        r.pop("_probs")
        runs.append(r)
    base = runs[0]["metrics"]
    deltas = []
    for r in runs[1:]:
        d = {}
        for row, m in r["metrics"].items():
            if row in base:
                d[row] = {k: round(m[k] - base[row][k], 4) for k in ("accuracy", "brier", "ece", "confidence")}
        deltas.append(d)
    return {"command": "compare", "models": [r["model"] for r in runs], "data": _data_info(args, items),
            "metrics": [r["metrics"] for r in runs], "deltas": deltas, "exit_status": EXIT_OK}


def _environment(device: str | None, onnx: bool) -> dict:
    from .. import __version__

    env = {"laya": __version__, "python": platform.python_version(), "platform": platform.platform(),
           "device": device}
    try:
        import torch

        env["torch"] = torch.__version__
    except ImportError:
        env["torch"] = None
    if onnx:
        try:
            import onnxruntime

            env["onnxruntime"] = onnxruntime.__version__
        except ImportError:
            env["onnxruntime"] = None
    return env


def do_evidence(args, argv: list[str]) -> dict:
    if args.from_run:
        try:
            with open(args.from_run, encoding="utf-8") as f:
                run = json.load(f)
        except FileNotFoundError:
            raise UsageError(f"--from: file {args.from_run!r} not found") from None
        except (ValueError, RecursionError) as e:  # (invalid JSON or UTF-8, or nested too deep)
            raise UsageError(f"--from {args.from_run!r}: not JSON ({e})") from None
        if not isinstance(run, dict) or run.get("command") != "run" or "metrics" not in run:
            raise UsageError(f"--from {args.from_run!r}: not the output of `laya-evals run --json`")
        source = f"laya-evals run output {os.path.abspath(args.from_run)} (sha256 {_sha256(args.from_run)})"
        if args.min_accuracy is not None or args.max_ece is not None:  # gates given now: re-judge the metrics
            from .items import judge_gates

            gates = judge_gates(run["metrics"], args.min_accuracy, args.max_ece, args.row_policy)
            run = {**run, "gates": gates, "exit_status": EXIT_OK if gates["passed"] else EXIT_GATE}
            source += (f" (gates re-judged on its metrics: --min-accuracy {args.min_accuracy} --max-ece {args.max_ece}"
                       f" --row-policy {args.row_policy})")
    else:
        run = do_run(args)
        source = "laya-evals " + " ".join(argv)
    record = {"command": "evidence", "record_version": 1,
              "date": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat(),
              "source": source, "model": run["model"], "data": run["data"], "metrics": run["metrics"],
              "gates": run["gates"], "verdict": "pass" if run["gates"]["passed"] else "fail",
              "environment": run.get("environment") or _environment(run["model"].get("device"),
                                                                    run["model"].get("runtime") == "onnx"),
              "exit_status": run["exit_status"]}
    return record


# ---- rendering -------------------------------------------------------------------------------------------

_COLS = ("n", "accuracy", "brier", "ece", "confidence")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4f}"
    return "-" if v is None else str(v)


def _table(header: list[str], rows: list[list[Any]], markdown: bool) -> str:
    cells = [header] + [[_fmt(v) for v in r] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(cells[0]) + " |", "|" + "|".join("---" for _ in header) + "|"]
        return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in cells[1:]])
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def _metrics_table(table: dict, markdown: bool, gates: dict | None = None) -> str:
    header = ["type", *_COLS] + (["gate"] if gates else [])
    rows = []
    for name, m in table.items():
        row = [name, *(m[c] for c in _COLS)]
        if gates:
            g = gates["rows"].get(name)
            row.append("-" if g is None else ("pass" if g["passed"] else "FAIL: " + "; ".join(g["failures"])))
        rows.append(row)
    return _table(header, rows, markdown)


def _model_line(info: dict) -> str:
    where = info.get("onnx_path") if info.get("runtime") == "onnx" else info.get("device")
    rev = f" @ {info['revision']}" if info.get("revision") else ""
    return f"{info['model']}{rev} [{info.get('runtime')}{f' {where}' if where else ''}]"


def _gate_summary(gates: dict) -> str:
    if gates.get("min_accuracy") is None and gates.get("max_ece") is None:
        return "gates: none given -> pass"
    limits = ", ".join(f"{k} {gates[k]:g}" for k in ("min_accuracy", "max_ece") if gates.get(k) is not None)
    failed = ", ".join(gates["failed_rows"]) or "none"
    verdict = "PASS" if gates["passed"] else "FAIL"
    note = " (warn policy: not fatal)" if gates["policy"] == "warn" and gates["failed_rows"] else ""
    return f"gates ({limits}; policy {gates['policy']}): {verdict}{note}; failed rows: {failed}"


def render(result: dict, markdown: bool) -> str:
    cmd = result["command"]
    h = "## " if markdown else ""
    data = result["data"]
    data_line = f"data: {data['path']} ({data['items']} items, sha256 {data['sha256']})"
    if cmd == "run":
        return "\n".join([f"{h}laya-evals run: {_model_line(result['model'])}", data_line, "",
                          _metrics_table(result["metrics"], markdown, result["gates"]), "",
                          _gate_summary(result["gates"])])
    if cmd == "agreement":
        rows = [[name, a["n"], a["argmax_agreement"], a["max_abs_dp"], a["mean_abs_dp"]]
                for name, a in result["agreement"].items()]
        g = result["gates"]
        verdict = ("gates: none given" if g["min_agreement"] is None and g["max_dp"] is None
                   else f"gates: {'PASS' if g['passed'] else 'FAIL: ' + '; '.join(g['failures'])}")
        return "\n".join([f"{h}laya-evals agreement", f"model:   {_model_line(result['model'])}",
                          f"against: {_model_line(result['against'])}", data_line, "",
                          _table(["type", "n", "argmax_agreement", "max_abs_dp", "mean_abs_dp"], rows, markdown),
                          "", verdict])
    if cmd == "compare":
        names = [f"m{i}" for i in range(len(result["models"]))]
        lines = [f"{h}laya-evals compare"] + [f"{n}: {_model_line(m)}" for n, m in zip(names, result["models"])]
        lines += [data_line, ""]
        header = ["type", "metric"] + names + [f"{n}-m0" for n in names[1:]]
        rows = []
        for row in result["metrics"][0]:
            for c in _COLS:
                vals = [m.get(row, {}).get(c) for m in result["metrics"]]
                ds = [d.get(row, {}).get(c) for d in result["deltas"]] if c != "n" else [None] * len(result["deltas"])
                rows.append([row, c, *vals, *(f"{x:+.4f}" if x is not None else "-" for x in ds)])
        return "\n".join(lines + [_table(header, rows, markdown)])
    # evidence
    m, env = result["model"], result["environment"]
    ident = [("model", m.get("model")), ("model id", m.get("model_id")), ("subfolder", m.get("subfolder")),
             ("revision", m.get("revision")), ("runtime", m.get("runtime")), ("device", m.get("device")),
             ("weights sha256", m.get("weights_sha256")), ("onnx graph", m.get("onnx_path")),
             ("onnx sha256", m.get("onnx_sha256")), ("calibration", m.get("calibration")),
             ("calibration sha256", m.get("calibration_sha256"))]
    counts = ", ".join(f"{k} {v}" for k, v in data["by_type"].items())
    lines = ["# laya-evals evidence record", "", f"- date (UTC): {result['date']}",
             f"- verdict: **{result['verdict'].upper()}** (exit status {result['exit_status']})",
             f"- source: `{result['source']}`", "", "## Model", ""]
    lines += [f"- {k}: `{v}`" for k, v in ident if v is not None]
    lines += ["", "## Data", "", f"- file: `{data['path']}`", f"- sha256: `{data['sha256']}`",
              f"- items: {data['items']} ({counts})" + (f", first {data['limit']} only" if data.get("limit") else ""),
              "", "## Metrics", "", _metrics_table(result["metrics"], True, result["gates"]), "",
              "## Gates", "", _gate_summary(result["gates"]), "", "## Environment", ""]
    lines += [f"- {k}: `{v}`" for k, v in env.items() if v is not None]
    return "\n".join(lines)


def checkpoint_main(argv: list[str]) -> int:
    """Our checkpoint commands (`laya.evals.cli.main` sends `--data` runs and checkpoint-less evidence here)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse errors exit 2 with the bad value named
    try:
        check_output_path(getattr(args, "out", None), "--out")  # before the run, not after it
        if args.command == "run":
            result = do_run(args)
        elif args.command == "agreement":
            result = do_agreement(args)
        elif args.command == "compare":
            result = do_compare(args)
        else:
            result = do_evidence(args, argv)
    except (UsageError, EvalError) as e:
        print(f"laya-evals {args.command}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "run":
        result["environment"] = _environment(result["model"].get("device"), result["model"]["runtime"] == "onnx")
    if args.json:
        text = json.dumps(result, indent=2, default=str)
    else:
        text = render(result, markdown=args.markdown or args.command == "evidence")
    out = getattr(args, "out", None)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        print(f"laya-evals evidence: wrote {out} (verdict {result.get('verdict')})", file=sys.stderr)
    else:
        print(text)
    return int(result["exit_status"])


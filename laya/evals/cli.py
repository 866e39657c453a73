"""`laya-evals` (also `laya eval`): evaluate laya on labelled JSONL data.

    laya-evals validate DATASET
    laya-evals run DATASET [--model M] [--device D] [--onnx PATH [--calibration PATH]] [--revision SHA|NAME=SHA]...
                   [--batch-size N] [--sort-by-length] [--min-confidence P] [--on-error fail|skip]
                   [--baseline FILE] [--tolerance M=V]... [--min-accuracy X] [--max-ece X] [--score-within TOL]...
                   [--min M=V]... [--max M=V]... [--slice language|model|qid|tag]... [--gate-policy FILE]
                   [--json PATH] [--markdown PATH]
    laya-evals compare REPORT --baseline FILE [--tolerance M=V]... [--gate-policy FILE]
    laya-evals agreement REFERENCE REPEAT STUDENT [--bootstrap-samples 2000] [--seed 0] [--json PATH]
    laya-evals evidence --checkpoint DIR [--report FILE]

Checkpoint commands (our own design, chosen by `--data`; `evidence` with `--model`/`--from`):
    laya-evals run --model CKPT --data FILE [--min-accuracy A] [--max-ece E] [--row-policy any|all|warn]
    laya-evals agreement --model CKPT --data FILE --against onnx GRAPH | --against model CKPT2
    laya-evals compare --model A --model B --data FILE
    laya-evals evidence --model CKPT --data FILE | --from RUN.json   (an audit record)
They report n, accuracy, Brier, ECE and mean confidence per question type; `--row-policy any`
(default) fails the run when any judged row fails, `all` only when every row fails, `warn` never.

Exit status: 0 = done and every check passed; 1 = a threshold, the baseline comparison or the gate
policy failed (`FAIL: <reason>` lines on stderr); 2 = bad input (`laya-evals: <message>`).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .cli_files import positive_int_arg
from .dataset import EvalError

DIMENSIONS = ("language", "model", "qid", "tag")
CHECKPOINT_FLAGS = ("--data",)
CHECKPOINT_EVIDENCE_FLAGS = ("--data", "--from", "--model")


def _float(text: str) -> float:
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def _min_confidence(text: str) -> Any:
    """A number when the text is one; `run` checks it (or the text) with the library's check, as an EvalError."""
    try:
        return float(text)
    except ValueError:
        return text


def _add_run(sub) -> None:
    p = sub.add_parser("run", help="evaluate a dataset through the Router (or one ONNX graph)")
    p.add_argument("dataset", metavar="DATASET")
    p.add_argument("--model", default=None, help="checkpoint for examples that name none (name, path or Hub id)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:N, mps (default: the library's choice)")
    p.add_argument("--onnx", metavar="PATH", default=None, help="answer with an ONNX agent on this graph")
    p.add_argument("--calibration", metavar="PATH", default=None, help="calibration JSON for --onnx")
    p.add_argument("--revision", action="append", metavar="SHA|NAME=SHA", help="Hub revision (repeatable)")
    p.add_argument("--batch-size", type=positive_int_arg("--batch-size"), default=None)
    p.add_argument("--sort-by-length", action="store_true")
    p.add_argument("--min-confidence", type=_min_confidence, default=None, metavar="P")
    p.add_argument("--on-error", choices=("fail", "skip"), default="fail")
    p.add_argument("--baseline", metavar="FILE", default=None, help="a report to compare against")
    p.add_argument("--tolerance", action="append", metavar="M=V", help="allowed regression per metric")
    p.add_argument("--min-accuracy", type=_float, default=None, metavar="X",
                   help="choice_accuracy (else noul_accuracy) must reach X")
    p.add_argument("--max-ece", type=_float, default=None, metavar="X")
    p.add_argument("--score-within", type=_float, action="append", metavar="TOL", help="add a ScoreWithin(TOL)")
    p.add_argument("--min", action="append", metavar="M=V", help="overall metric M must be >= V")
    p.add_argument("--max", action="append", metavar="M=V", help="overall metric M must be <= V")
    p.add_argument("--slice", action="append", choices=DIMENSIONS, help="print this slice's metrics")
    p.add_argument("--gate-policy", metavar="FILE", default=None, help="a gate policy file (version 1)")
    p.add_argument("--json", metavar="PATH", default=None, help="write the report as JSON")
    p.add_argument("--markdown", metavar="PATH", default=None, help="write the report as markdown")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya-evals", description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="{validate,run,compare,agreement,evidence}")
    sub.required = True
    sub.add_parser("validate", help="check a dataset file").add_argument("dataset", metavar="DATASET")
    _add_run(sub)
    cmp_ = sub.add_parser("compare", help="compare a report with a baseline report")
    cmp_.add_argument("report", metavar="REPORT")
    cmp_.add_argument("--baseline", metavar="FILE", required=True)
    cmp_.add_argument("--tolerance", action="append", metavar="M=V")
    cmp_.add_argument("--gate-policy", metavar="FILE", default=None)
    agr = sub.add_parser("agreement", help="student vs a teacher run twice (laya-agreement-run/1 files)")
    for name in ("reference", "repeat", "student"):
        agr.add_argument(name, metavar=name.upper())
    agr.add_argument("--bootstrap-samples", type=int, default=2000)
    agr.add_argument("--seed", type=int, default=0)
    agr.add_argument("--json", metavar="PATH", default=None)
    ev = sub.add_parser("evidence", help="the evidence a checkpoint carries (read-only)")
    ev.add_argument("--checkpoint", metavar="DIR", required=True)
    ev.add_argument("--report", metavar="FILE", default=None)
    return p


def _has_flag(argv: list[str], flags: tuple) -> bool:
    return any(a == f or a.startswith(f + "=") for a in argv for f in flags)


def is_checkpoint_design(argv: list[str]) -> bool:
    """Our checkpoint commands: run/compare/agreement with `--data`, evidence without `--checkpoint`."""
    command = argv[0] if argv else None
    if command in ("run", "compare", "agreement"):
        return _has_flag(argv, CHECKPOINT_FLAGS)
    if command == "evidence":
        return not _has_flag(argv, ("--checkpoint",)) and _has_flag(argv, CHECKPOINT_EVIDENCE_FLAGS)
    return False


def _dispatch(args: argparse.Namespace) -> int:
    from . import cli_commands as c

    commands = {"validate": c.cmd_validate, "run": c.cmd_run, "compare": c.cmd_compare,
                "agreement": c.cmd_agreement, "evidence": c.cmd_evidence}
    return commands[args.command](args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if is_checkpoint_design(argv):
        from .checkpoint_cli import checkpoint_main

        return checkpoint_main(argv)
    args = build_parser().parse_args(argv)
    try:
        return _dispatch(args)
    except (EvalError, OSError, ValueError) as e:
        print(f"laya-evals: {e}", file=sys.stderr)
        return 2

"""`laya-train`: fine-tune a laya checkpoint (or a fresh head on an encoder) from a data file.

    laya-train --data data.jsonl --out runs/mine                 # gold-probability JSONL, convaiinnovations/laya base
    laya-train --data tickets.csv --label-column team --out runs/teams --base PATH
    laya-train --data data.jsonl --dry-run                       # validate + load the data, train nothing
Re-running with the same --out resumes from its trainer_state.pt. A positional DATA is still accepted.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import json
import os
import sys

from .loop import MINILM, TrainConfig

DEFAULT_BASE = "convaiinnovations/laya"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya-train", description=__doc__.splitlines()[0])
    p.add_argument("data_positional", nargs="?", default=None, metavar="DATA",
                   help="same as --data (kept for compatibility)")
    p.add_argument("--data", default=None,
                   help="gold-probability JSONL, or a CSV/JSONL with text and label columns")
    p.add_argument("--eval", "--eval-data", "--calib-data", dest="eval_data", default=None,
                   help="held-out file used for calibration and the temperature fit (default: 10%% of the data)")
    p.add_argument("--out", "--output-dir", dest="out", default=None,
                   help="output directory (checkpoint + resumable trainer state); required unless --dry-run")
    p.add_argument("--base", "--model", dest="base", default=DEFAULT_BASE,
                   help="laya checkpoint (directory or Hub id), encoder directory, or 'minilm' "
                        f"(default {DEFAULT_BASE})")
    # shown as "text" (the spec default) but None internally: an explicit flag forces text+label mode
    p.add_argument("--text-column", default=None, help="text+label data: the text column (default: text)")
    p.add_argument("--label-column", default="label")
    p.add_argument("--question-id", default="label")
    p.add_argument("--instructions", default="Which label fits the text?")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    defaults = TrainConfig()
    for name in ("epochs", "micro_batch", "grad_accum", "encoder_lr", "head_lr", "min_lr", "weight_decay",
                 "grad_clip", "rl_samples", "rl_weight", "seed", "freeze_layers", "head_layers", "max_len", "head_max_len", "max_steps",
                 "time_budget_s", "calib_min_bucket_n", "target_error", "min_abstain_n", "warmup_frac", "dropout",
                 "length_window", "save_every", "build_workers"):
        value = getattr(defaults, name)
        kind = float if isinstance(value, float) or name in ("epochs", "time_budget_s") else int
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=value)
    p.add_argument("--loss", choices=("rlcd", "soft-ce"), default=defaults.loss)
    p.add_argument("--device", default=defaults.device, help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
    p.add_argument("--amp", choices=("auto", "bf16", "off"), default=defaults.amp,
                   help="autocast dtype (auto: bf16 on CUDA, off on the CPU)")
    p.add_argument("--option-layout", choices=("sequential", "parallel"), default=defaults.option_layout,
                   help="option layout to train and save (parallel: ModernBERT encoders, transformers >= 5); "
                        "default: the base checkpoint's (sequential for a fresh encoder)")
    p.add_argument("--shuffle-options", action="store_true")
    p.add_argument("--fixed-rows", action="store_true", help="build the shuffled rows once, reuse them every epoch")
    p.add_argument("--freeze-encoder", action="store_true")
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--keep-state", action="store_true", help="keep trainer_state.pt after the run")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--dry-run", action="store_true",
                   help="validate and load the data, print what would be trained, train nothing")
    return p


def _load(path: str, args: argparse.Namespace) -> list:
    from .data import is_text_label, load_examples

    if os.path.isfile(path) and is_text_label(path, args.text_column_given):
        return load_examples(path, text_column=args.text_column, label_column=args.label_column,
                             question_id=args.question_id, instructions=args.instructions,
                             smoothing=args.label_smoothing)
    return load_examples(path, smoothing=args.label_smoothing)


def _summary(examples: list) -> dict:
    per_type = collections.Counter(e.question.qtype for e in examples)
    per_k = collections.Counter(f"{e.question.qtype}:{e.question.k}" for e in examples)
    return {"rows": len(examples), "rows_per_type": dict(sorted(per_type.items())),
            "rows_per_type_and_options": dict(sorted(per_k.items()))}


def _resolve_base(base: str) -> str:
    """'minilm' and local paths unchanged; anything else is a Hub id, downloaded (or read from the cache)."""
    if base == MINILM or os.path.exists(os.path.expanduser(base)):
        return os.path.expanduser(base)
    from ..checkpoint import resolve_checkpoint_dir

    try:
        return resolve_checkpoint_dir(base)[0]
    except Exception as e:  # offline, unknown repo, network: one readable line
        raise FileNotFoundError(f"base {base!r} is not a local path and could not be fetched from the Hub "
                                f"({type(e).__name__}: {e}); pass --base PATH or 'minilm'") from None


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.data and args.data_positional and args.data != args.data_positional:
        parser.error("give the data once: --data or a positional DATA, not both")
    args.data = args.data or args.data_positional
    args.text_column_given = args.text_column is not None  # decided before the spec default is filled in
    args.text_column = args.text_column or "text"
    if not args.data:
        parser.error("--data is required")
    if not args.out and not args.dry_run:
        parser.error("--out/--output-dir is required (unless --dry-run)")

    fields = {f for f in TrainConfig.__dataclass_fields__}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    config.progress = not args.no_progress
    try:
        config.validate()  # a dry run reports a plan a real run would refuse otherwise
        examples = _load(args.data, args)
        calib = _load(args.eval_data, args) if args.eval_data else None
        if args.dry_run:
            if not examples:
                raise ValueError(f"{args.data}: no training examples")
            plan = {"dry_run": True, "data": args.data, "eval_data": args.eval_data, "base": args.base,
                    "out": args.out, **_summary(examples),
                    "eval": _summary(calib) if calib is not None else None,
                    "config": {k: v for k, v in dataclasses.asdict(config).items() if k != "extra"}}
            print(json.dumps(plan, indent=2, default=str))
            return 0
        from .loop import train

        meta = train(examples, base=_resolve_base(args.base), out_dir=args.out, config=config, calib_data=calib)
    except (ValueError, OSError, RecursionError) as e:  # (FileNotFoundError, FileExistsError: OSErrors)
        print(f"laya-train: error: {e}", file=sys.stderr)
        return 2
    summary = {k: meta[k] for k in ("steps", "stopped_by", "train_examples", "final_loss", "elapsed_s")}
    summary["temperature"] = meta["temperature_fit"]["temperature"]
    summary["ece"] = meta["temperature_fit"].get("report")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""`laya-train`: fine-tune a laya checkpoint (or a fresh head on an encoder) from a data file.

    laya-train data.jsonl --out runs/mine                       # gold-probability JSONL, MiniLM base
    laya-train tickets.csv --text-column body --label-column team --out runs/teams --base PATH
Re-running with the same --out resumes from its trainer_state.pt.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .loop import MINILM, TrainConfig


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="laya-train", description=__doc__.splitlines()[0])
    p.add_argument("data", help="gold-probability JSONL, or a CSV/JSONL with text and label columns")
    p.add_argument("--out", required=True, help="output directory (checkpoint + resumable trainer state)")
    p.add_argument("--base", default=MINILM, help="laya checkpoint directory, encoder directory, or 'minilm'")
    p.add_argument("--calib-data", default=None, help="separate calibration file (default: 10%% of the data)")
    p.add_argument("--text-column", default=None)
    p.add_argument("--label-column", default="label")
    p.add_argument("--question-id", default="label")
    p.add_argument("--instructions", default="Which label fits the text?")
    p.add_argument("--label-smoothing", type=float, default=0.0)
    defaults = TrainConfig()
    for name in ("epochs", "micro_batch", "grad_accum", "encoder_lr", "head_lr", "min_lr", "weight_decay",
                 "grad_clip", "rl_samples", "rl_weight", "seed", "freeze_layers", "head_layers", "max_len", "head_max_len", "max_steps",
                 "time_budget_s", "calib_min_bucket_n", "target_error", "warmup_frac", "dropout", "length_window",
                 "save_every", "build_workers"):
        value = getattr(defaults, name)
        kind = float if isinstance(value, float) or name in ("epochs", "time_budget_s") else int
        p.add_argument("--" + name.replace("_", "-"), type=kind, default=value)
    p.add_argument("--loss", choices=("rlcd", "soft-ce"), default=defaults.loss)
    p.add_argument("--device", default=defaults.device, help="auto (CUDA when available), cpu, cuda, cuda:1, ...")
    p.add_argument("--amp", choices=("auto", "bf16", "off"), default=defaults.amp,
                   help="autocast dtype (auto: bf16 on CUDA, off on the CPU)")
    p.add_argument("--shuffle-options", action="store_true")
    p.add_argument("--fixed-rows", action="store_true", help="build the shuffled rows once, reuse them every epoch")
    p.add_argument("--freeze-encoder", action="store_true")
    p.add_argument("--freeze-embeddings", action="store_true")
    p.add_argument("--keep-state", action="store_true", help="keep trainer_state.pt after the run")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    args = build_parser().parse_args(argv)
    from .data import load_examples
    from .loop import train

    fields = {f for f in TrainConfig.__dataclass_fields__}
    config = TrainConfig(**{k: v for k, v in vars(args).items() if k in fields})
    config.progress = not args.no_progress
    kwargs = {}
    if args.text_column is not None or args.data.lower().endswith(".csv"):
        kwargs = dict(text_column=args.text_column or "text", label_column=args.label_column,
                      question_id=args.question_id, instructions=args.instructions, smoothing=args.label_smoothing)
    else:
        kwargs = dict(smoothing=args.label_smoothing)
    try:
        examples = load_examples(args.data, **kwargs)
        calib = load_examples(args.calib_data, **kwargs) if args.calib_data else None
        meta = train(examples, base=args.base, out_dir=args.out, config=config, calib_data=calib)
    except (ValueError, FileNotFoundError) as e:
        print(f"laya-train: error: {e}", file=sys.stderr)
        return 2
    summary = {k: meta[k] for k in ("steps", "stopped_by", "train_examples", "final_loss", "elapsed_s")}
    summary["temperature"] = meta["temperature_fit"]["temperature"]
    summary["ece"] = meta["temperature_fit"].get("ece")
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

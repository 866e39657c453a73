"""Fine-tuning laya checkpoints: data loading, the RLCD and soft-CE objectives, the training loop.

    from laya.train import TrainConfig, train
    train("data.jsonl", base="minilm", out_dir="runs/mini", config=TrainConfig(epochs=1))

The `laya-train` command wraps the same function (laya/train/cli.py, also `laya.train_cli`); `finetune`
and `dry_run` are the published entry points over it.
"""

from .collapse import (CALIB_WARN_N, COLLAPSE_CE_REL, COLLAPSE_LOGIT_RANGE, calibration_warnings, collapse_stats,
                       prior_collapse_message)
from .config import LOSSES, TrainConfig, optimizer_updates, update_budget_message
from .data import (Example, draw_option_order, load_examples, load_gold_jsonl, load_text_label, read_jsonl,
                   target_from_expected, target_from_gold, to_internal)
from .finetune import dry_run, finetune, load_checkpoint, resolve_checkpoint_dir, resolve_device, train_model
from .items import (calibration_report, encode_item, encode_state, evaluate_records, items_from_rows, make_item,
                    read_data, rows_from_csv)
from .loop import calibration_records, init_model, save_checkpoint, split_calibration, train
from .recalibrate import recalibrate
from .objectives import proper_reward, rlcd_loss, sigma_at, soft_ce_loss, td_lambda_targets

__all__ = ["CALIB_WARN_N", "COLLAPSE_CE_REL", "COLLAPSE_LOGIT_RANGE", "Example", "LOSSES", "TrainConfig",
           "calibration_records", "calibration_report", "calibration_warnings", "encode_item", "encode_state",
           "evaluate_records", "items_from_rows", "make_item", "read_data", "rows_from_csv", "collapse_stats", "draw_option_order", "dry_run",
           "finetune", "init_model", "load_checkpoint", "load_examples", "load_gold_jsonl", "load_text_label",
           "optimizer_updates", "prior_collapse_message", "proper_reward", "read_jsonl", "recalibrate",
           "resolve_checkpoint_dir", "resolve_device", "rlcd_loss", "save_checkpoint", "sigma_at", "soft_ce_loss",
           "split_calibration", "target_from_expected", "target_from_gold", "td_lambda_targets", "to_internal",
           "train", "train_model", "update_budget_message"]

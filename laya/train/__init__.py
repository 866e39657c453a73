"""Fine-tuning laya checkpoints: data loading, the RLCD and soft-CE objectives, the training loop.

    from laya.train import TrainConfig, train
    train("data.jsonl", base="minilm", out_dir="runs/mini", config=TrainConfig(epochs=1))

The `laya-train` command wraps the same function (laya/train/cli.py).
"""

from .data import Example, load_examples, load_gold_jsonl, load_text_label, target_from_expected
from .loop import TrainConfig, init_model, recalibrate, save_checkpoint, train
from .objectives import proper_reward, rlcd_loss, soft_ce_loss, td_lambda_targets

__all__ = ["Example", "TrainConfig", "init_model", "load_examples", "load_gold_jsonl", "load_text_label",
           "proper_reward", "recalibrate", "rlcd_loss", "save_checkpoint", "soft_ce_loss", "target_from_expected",
           "td_lambda_targets", "train"]

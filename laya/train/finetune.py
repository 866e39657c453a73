"""The published training entry points over our loop: finetune, dry_run and the small loaders they use."""

from __future__ import annotations

import collections
import json
import os
from typing import Any

from .config import TrainConfig, optimizer_updates


def resolve_device(device: Any = "auto") -> Any:
    """The training device: "auto" (any case) or None = CUDA when available, else the CPU."""
    import torch

    if device is None or (isinstance(device, str) and device.strip().lower() == "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device.strip() if isinstance(device, str) else device)


def resolve_checkpoint_dir(model_id_or_path: str, token: str | None = None) -> str:
    """A local checkpoint directory for a path or Hub id (downloaded when needed)."""
    from ..checkpoint import resolve_checkpoint_dir as resolve

    return resolve(model_id_or_path, token=token)[0]


def load_checkpoint(model_dir: str) -> tuple:
    """(model, tokenizer, cfg) of a laya checkpoint directory (or an encoder directory / "minilm" with a
    fresh head), in float32 for training."""
    from .loop import init_model

    return init_model(model_dir)


def _read_items(data: Any, config: TrainConfig, skipped: collections.Counter | None = None) -> list:
    """The examples of `data` (a path, or Examples and gold rows); rows and questions that cannot be used are
    counted in `skipped`."""
    from .data import Example, gold_examples, is_text_label, load_examples

    if not isinstance(data, str):  # rows in memory are classified as a gold file's rows are
        examples = []
        for row in data:
            if isinstance(row, Example):
                examples.append(row)
                continue
            examples += gold_examples(row, config.label_smoothing, skipped)
        return examples
    if not is_text_label(data, config.text_column != "text"):
        return load_examples(data, smoothing=config.label_smoothing, skipped=skipped)
    text_label = {"text_column": config.text_column, "label_column": config.label_column,
                  "question_id": config.question_id, "smoothing": config.label_smoothing}
    if config.instructions is not None:
        text_label["instructions"] = config.instructions
    return load_examples(data, skipped=skipped, **text_label)


def _rows_read(data: Any) -> int:
    """Rows in `data`: examples given, CSV records (not lines: a quoted text may span several), or JSONL lines."""
    from .data import ENCODING, csv_records

    if not isinstance(data, str):
        return len(data)
    if data.lower().endswith(".csv"):
        return len(csv_records(data))
    with open(data, encoding=ENCODING) as f:
        return sum(1 for line in f if line.strip())


def _budgets(model_dir: str, config: TrainConfig) -> tuple[int, int]:
    cfg: dict = {}
    path = os.path.join(model_dir, "rl_agent_config.json") if isinstance(model_dir, str) else ""
    if path and os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            cfg = json.load(f)
    return (int(config.max_len or cfg.get("max_len", 256)), int(config.head_max_len or cfg.get("head_max_len", 128)))


def dry_run(data: Any, model_dir: str, config: TrainConfig | None = None) -> dict:
    """What a run on `data` would train, without loading the model."""
    from .loop import split_calibration

    config = (config or TrainConfig()).validate()
    if not isinstance(data, str):
        data = list(data)  # read once: a generator has no second pass for the row count
    skipped: collections.Counter = collections.Counter()
    items = _read_items(data, config, skipped)
    if config.eval_data:
        train, calib = items, _read_items(config.eval_data, config, skipped)
    else:
        train, calib = split_calibration(items, config.calib_max, config.calib_frac, config.calib_seed)
    max_len, head_max_len = _budgets(model_dir, config)
    return {"data": data if isinstance(data, str) else None, "rows_read": _rows_read(data), "valid_items": len(items),
            "train_items": len(train), "calibration_items": len(calib),
            "effective_batch": config.micro_batch * config.grad_accum,
            "optimizer_updates": config.max_steps or optimizer_updates(len(train), config.micro_batch,
                                                                       config.grad_accum, config.epochs),
            "skipped": dict(skipped), "max_len": max_len, "head_max_len": head_max_len}


def _epoch_losses(output_dir: str) -> list[float]:
    from .loop import LOG_FILE

    by_epoch: dict = {}
    path = os.path.join(output_dir, LOG_FILE)
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                entry = json.loads(line)
                by_epoch.setdefault(entry["epoch"], []).append(entry["loss"])
    return [sum(v) / len(v) for _, v in sorted(by_epoch.items())]


def finetune(data: Any, model_dir: str, output_dir: str, config: TrainConfig | None = None,
             device: Any = "auto") -> dict:
    """Train `model_dir` on `data`, calibrate on the held-out split (config.eval_data, else a slice) and
    save the checkpoint to `output_dir`; returns the run's summary."""
    import dataclasses

    from .loop import train

    config = dataclasses.replace(config or TrainConfig(), device=str(device) if device is not None else "auto")
    skipped: collections.Counter = collections.Counter()
    items = _read_items(data, config, skipped)
    calib = _read_items(config.eval_data, config, skipped) if config.eval_data else None
    meta = train(items, base=model_dir, out_dir=output_dir, config=config, calib_data=calib)
    with open(os.path.join(output_dir, "rl_agent_config.json"), encoding="utf-8") as f:
        saved = json.load(f)
    fit = meta["temperature_fit"]
    return {"train_items": meta["train_examples"], "calibration_items": meta["calibration_examples"],
            "eval_items": len(calib) if calib is not None else 0, "skipped": dict(skipped),
            "epoch_loss": _epoch_losses(output_dir), "temperature": saved.get("temperature"),
            "temperature_by_options": saved.get("temperature_by_options", {}), "n_by_bucket": fit.get("n_by_bucket", {}),
            "calibration": fit, "abstention_thresholds": (saved.get("training") or {}).get("abstention_thresholds", {}),
            "train_report": meta, "output_dir": output_dir}


def _item_row(tok: Any, item: dict, max_len: int, head_max_len: int, rng: Any, types: tuple) -> tuple:
    """(Row, slot-order target) of an item, its options shuffled when rng is given and its type is in types."""
    from dataclasses import replace

    import numpy as np

    from ..sequence import build_row
    from .data import draw_option_order

    q, target = item["question"], np.asarray(item["target"], dtype=np.float64)
    order = draw_option_order(item, rng, types) if rng is not None else None
    if order is not None:
        q, target = replace(q, option_order=tuple(order)), target[order]
    return build_row(tok, q, item["state_ids"], item.get("keep_tail", False), max_len, head_max_len), target


def train_model(model: Any, tok: Any, items: list, config: TrainConfig, device: Any, max_len: int,
                head_max_len: int, on_epoch_end: Any = None, parallel: bool = False) -> list[float]:
    """Train `model` in place on items (items_from_rows) for config.epochs; returns each epoch's mean loss.
    `on_epoch_end(epoch, loss)` is called after every epoch. Same updates as `train`, without its files."""
    import math
    import random

    import torch

    from .config import shuffle_types
    from .loop import amp_dtype, batches, _one_update
    from .objectives import sigma_at_progress
    from .optim import freeze, make_optimizer, set_lr

    config = config.validate()
    if not items:
        raise ValueError("train_model needs at least one item")
    device = resolve_device(device)
    freeze(model, config)
    model.to(device).train()
    opt, dtype, types = make_optimizer(model, config), amp_dtype(config, device), shuffle_types(config)
    total = config.max_steps or optimizer_updates(len(items), config.micro_batch, config.grad_accum, config.epochs)
    gen = torch.Generator(device=device).manual_seed(config.seed * 1000)
    losses, step = [], 0
    for epoch in range(math.ceil(config.epochs)):
        rng = random.Random(f"{config.seed}:{epoch}")
        rows = [_item_row(tok, it, max_len, head_max_len, rng if types else None, types) for it in items]
        plan = batches(rows, config.micro_batch, rng, config.length_window)
        sums, n_rows = 0.0, 0
        for j in range(0, len(plan), config.grad_accum):
            if step >= total:
                break
            set_lr(opt, step, total, config)
            sigma = sigma_at_progress(step / total, config.sigma_start, config.sigma_end)
            loss_sum, _, n = _one_update(model, opt, tok, plan[j:j + config.grad_accum], config, parallel, device,
                                         dtype, sigma, gen)
            sums, n_rows, step = sums + loss_sum, n_rows + n, step + 1
        if n_rows:
            losses.append(sums / n_rows)
            if on_epoch_end is not None:
                on_epoch_end(epoch, losses[-1])
    return losses

"""Re-fitting a trained checkpoint's temperatures and abstention thresholds without retraining."""

from __future__ import annotations

import json
import os
import time
from typing import Sequence

import torch

from ..atomic_file import write_json_atomic
from .config import TrainConfig
from .data import Example, load_examples
from . import loop


def recalibrate(ckpt_dir: str, calib: str | Sequence[Example], config: TrainConfig | None = None,
                device: str = "cpu", source: str | None = None) -> dict:
    """Re-fit an already trained checkpoint's temperatures and abstention thresholds on `calib` (a path
    or examples) without retraining, and write them into the checkpoint in the published format:
    rl_agent_config.json `temperature` / `temperature_by_options` (read back through clamp_temperature
    at load), `training.abstention_thresholds`, the `temperature` tensor of model.safetensors, and a
    `training.recalibration` record (what was fitted on what, and the values it replaced). Only those
    change; the weights are untouched. Returns the recalibration record."""
    from safetensors import safe_open
    from safetensors.torch import save_file

    config = config or TrainConfig()
    examples = list(load_examples(calib) if isinstance(calib, str) else calib)
    if not examples:
        raise ValueError("no calibration examples")
    model, tok, cfg = loop.init_model(ckpt_dir)
    target = torch.device(device)
    model.to(target)
    # the autocast dtype training's own calibration (finish) and inference use: temperatures fitted on
    # fp32 logits would not match the bf16 logits they are later applied to on CUDA
    records = loop.calibration_records(model, tok, examples, cfg, 256 if target.type == "cuda" else 32,
                                       dtype=loop.amp_dtype(config, target))
    fit, thresholds, notes = loop.fit_calibration(records, config)
    config_path = os.path.join(ckpt_dir, "rl_agent_config.json")
    with open(config_path, encoding="utf-8") as f:
        raw = json.load(f)
    training = dict(raw.get("training") or {})
    record = {"date": time.strftime("%Y-%m-%d"), "calibration_examples": len(examples),
              "calibration_source": source or (calib if isinstance(calib, str) else "examples"),
              "calib_min_bucket_n": config.calib_min_bucket_n, "target_error": config.target_error,
              "temperature_fit": {k: v for k, v in fit.items() if k != "temperature_by_options"},
              "warnings": notes,
              "replaced": {"temperature": raw.get("temperature"), "temperature_by_options": raw.get("temperature_by_options"),
                           "abstention_thresholds": training.get("abstention_thresholds")}}
    raw["temperature"] = [round(t, 4) for t in fit["temperature"]]
    raw["temperature_by_options"] = {k: round(v, 4) for k, v in fit["temperature_by_options"].items()}
    training["abstention_thresholds"] = thresholds
    training["recalibration"] = record
    training["laya_train_calibration"] = loop.calibration_block(records, record["calibration_source"])
    raw["training"] = training
    weights = os.path.join(ckpt_dir, "model.safetensors")
    with safe_open(weights, "pt") as f:
        tensors, metadata = {k: f.get_tensor(k) for k in f.keys()}, f.metadata()
    if "temperature" in tensors:
        tensors["temperature"] = torch.tensor(raw["temperature"], dtype=tensors["temperature"].dtype)
        tmp = weights + ".tmp"
        save_file(tensors, tmp, metadata=metadata)
        os.replace(tmp, weights)
    write_json_atomic(config_path, raw, indent=2, ensure_ascii=False)
    return record

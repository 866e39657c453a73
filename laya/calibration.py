"""Calibration files: fitted temperatures (and optional histogram binning) saved beside a checkpoint."""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from typing import Any

from .answers import clamp_temperatures

CALIBRATION_VERSION = 2
TEMPERATURE_KEYS = ("temperature", "temperature_by_options")


def check_binning_map(binning_map: Any) -> dict | None:
    if binning_map is None:
        return None
    if not isinstance(binning_map, dict):
        raise ValueError(f"binning_map must be a dict {{bucket: {{'bins', 'values'}}}}, got {type(binning_map).__name__}")
    for bucket, entry in binning_map.items():
        if not isinstance(entry, dict) or "bins" not in entry or "values" not in entry:
            raise ValueError(f"binning_map[{bucket!r}] must have 'bins' and 'values'")
        values = entry["values"]
        if not isinstance(entry["bins"], int) or entry["bins"] < 1 or len(values) != entry["bins"]:
            raise ValueError(f"binning_map[{bucket!r}] needs an int 'bins' >= 1 and that many 'values'")
        bad = [v for v in values if isinstance(v, bool) or not isinstance(v, (int, float))
               or not math.isfinite(v) or not 0.0 <= v <= 1.0]
        if bad:
            raise ValueError(f"binning_map[{bucket!r}] has values outside [0, 1]: {bad[:5]}")
    return binning_map


def read_calibration(path: str, model_id_or_path: str | None = None, subfolder: str | None = None) -> dict:
    """{temperature_raw, temperature, temperature_by_options_raw, temperature_by_options, binning_map}."""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        raise ValueError(f"calibration file {path} must hold a JSON object")
    version = data.get("version", 1)
    if version not in (1, CALIBRATION_VERSION):
        raise ValueError(f"calibration file {path} has version {version!r}; this laya reads versions 1 and 2")
    for key, mine in (("model_id_or_path", model_id_or_path), ("subfolder", subfolder)):
        if key in data and mine is not None and data[key] != mine:
            warnings.warn(f"laya: calibration file {path} was fitted for {key}={data[key]!r}, not {mine!r}; "
                          "loading it anyway", RuntimeWarning, stacklevel=3)
    raw = data.get("temperature", [1.0, 1.0, 1.0])
    raw_map = data.get("temperature_by_options", {})
    temps, by_options = clamp_temperatures(raw, raw_map, source=f"calibration file {path}")
    return {"temperature_raw": raw, "temperature": temps, "temperature_by_options_raw": raw_map,
            "temperature_by_options": by_options, "binning_map": check_binning_map(data.get("binning_map"))}


def write_calibration(path: str, payload: dict) -> None:
    """Atomic write: a reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"version": CALIBRATION_VERSION, **payload}, f, ensure_ascii=False, indent=2)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise

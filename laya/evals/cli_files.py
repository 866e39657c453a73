"""Reading the JSON files and flag values `laya-evals` is given: duplicate keys refused, errors as `EvalError`."""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from .dataset import EvalError


def _no_duplicates(path: str):
    def hook(pairs: list) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise EvalError(f"{path} has the key {key!r} twice in one object; keep one")
            out[key] = value
        return out
    return hook


def read_json_strict(path: str, *, refuse_duplicate_keys: bool = True) -> Any:
    """The JSON document in `path`; `EvalError` when unreadable, invalid or (with `refuse_duplicate_keys`; else the
    last one wins) holding a duplicate key."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise EvalError(f"{path} cannot be read: {e}") from None
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates(path) if refuse_duplicate_keys else None)
    except (json.JSONDecodeError, RecursionError) as e:  # (RecursionError: nested too deep)
        raise EvalError(f"{path} is not valid JSON: {e}") from None


def metric_value(text: str, flag: str) -> tuple[str, float]:
    """`METRIC=NUMBER` of a repeatable flag (finite number)."""
    name, sep, value = str(text).partition("=")
    if not sep or not name.strip():
        raise EvalError(f"{flag} takes METRIC=VALUE, got {text!r}")
    try:
        number = float(value)
    except ValueError:
        raise EvalError(f"{flag} {text!r}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise EvalError(f"{flag} {text!r}: the value must be finite")
    return name.strip(), number


def metric_values(items: list | None, flag: str) -> dict[str, float]:
    return dict(metric_value(t, flag) for t in items or [])


def check_output_path(path: str | None, flag: str) -> None:
    """Refuse, before any work, an output file whose folder is missing or that names a folder."""
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise EvalError(f"{flag} {path}: the folder {folder} does not exist; create it or write elsewhere")
    if os.path.isdir(path):
        raise EvalError(f"{flag} {path} is a folder; give a file path")


def positive_int_arg(what: str):
    """An argparse `type` for a flag that takes a positive integer; `what` names the flag in the error."""
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a positive integer, got {value!r}") from None
        if n < 1:
            raise argparse.ArgumentTypeError(f"{what} must be a positive integer, got {value!r}")
        return n
    parse.__name__ = what
    return parse

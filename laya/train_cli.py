"""`laya-train` and `laya train`: the fine-tuning command (its implementation is laya/train/cli.py)."""

from __future__ import annotations

from .train.cli import build_parser, main

__all__ = ["build_parser", "main"]

if __name__ == "__main__":
    raise SystemExit(main())

"""`laya-evals` entry point (laya/evals/cli.py) and the runners it evaluates through."""

from .evals.cli import build_parser, main
from .evals.cli_commands import make_runner
from .evals.runners import OnnxRunner, RouterRunner

__all__ = ["OnnxRunner", "RouterRunner", "build_parser", "main", "make_runner"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

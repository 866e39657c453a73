"""`laya-evals` entry point (laya/evals/cli.py) and the runners it evaluates through.

`run` builds its runner from this module's names at call time (`make_runner`, `Router`, `RouterRunner`,
`OnnxRunner`), so a test or an embedding program can replace any of them here.
"""

from .evals.cli import build_parser, main
from .evals.cli_commands import make_runner
from .evals.runners import OnnxRunner, RouterRunner
from .router import Router

__all__ = ["OnnxRunner", "Router", "RouterRunner", "build_parser", "main", "make_runner"]

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

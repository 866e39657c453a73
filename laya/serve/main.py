"""Entry point of `laya serve` / `laya-serve`: settings from flags and LAYA_* variables, then uvicorn or Ray."""

from __future__ import annotations

import logging
import os
import sys

from .config import from_args


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("USE_TF", "0")
    try:
        cfg = from_args(argv)
    except ValueError as e:
        print(f"laya serve: error: {e}", file=sys.stderr)
        return 2
    logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if cfg.ray:
        try:
            from .ray import run as run_ray
        except ImportError as e:
            print(f"laya serve: error: --ray needs Ray Serve ({e}); pip install 'laya[ray]'", file=sys.stderr)
            return 2
        return run_ray(cfg)
    try:
        import uvicorn
        from .app import create_app
    except ImportError as e:
        print(f"laya serve: error: the server needs the serve extra ({e}); pip install 'laya[serve]'",
              file=sys.stderr)
        return 2
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level=cfg.log_level.lower(),
                access_log=cfg.access_log, timeout_keep_alive=5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

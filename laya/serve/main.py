"""Entry point of `laya serve` / `laya-serve`: settings from flags and LAYA_* variables, then uvicorn or Ray."""

from __future__ import annotations

import logging
import os
import sys

from .config import SettingError, from_args


def program_args() -> list[str]:
    """The command line when this process is the serve program (`laya-serve`, `python -m laya.serve`); a
    plain `laya.serve.main()` call from other code reads only the LAYA_* variables, like the published one."""
    prog = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    if os.path.basename(prog).startswith("laya") or os.path.dirname(prog) == os.path.dirname(__file__):
        return sys.argv[1:]
    return []


def _error(message: str) -> int:
    print(f"laya serve: error: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    """Exit status 2 for a refused flag or setting; SystemExit naming a malformed LAYA_PORT, LAYA_LOG_LEVEL,
    LAYA_EXTRA_MODELS or LAYA_DEFAULT_MODEL."""
    os.environ.setdefault("USE_TF", "0")
    args = program_args() if argv is None else list(argv)
    try:
        cfg = from_args(args)
    except SettingError as e:
        raise SystemExit(str(e)) from None
    except ValueError as e:
        return _error(str(e))
    logging.basicConfig(level=cfg.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if cfg.ray:
        try:
            from .ray import run as run_ray
        except ImportError as e:
            return _error(f"--ray needs Ray Serve ({e}); pip install 'laya[ray]'")
        return run_ray(cfg)
    import laya.serve as package  # its create_app, looked up now (a caller may stand in its own)

    try:
        import uvicorn

        app = package.create_app(cfg=cfg) if args else package.create_app()  # no flags: the env-read app
    except ImportError as e:
        return _error(f"the server needs the serve extra ({e}); pip install 'laya[serve]'")
    except ValueError as e:
        return _error(str(e))
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level=cfg.log_level.lower(), access_log=cfg.access_log)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

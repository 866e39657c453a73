"""Entry point of `laya serve` / `laya-serve`: settings from flags and LAYA_* variables, then uvicorn or Ray."""

from __future__ import annotations

import logging
import os
import sys
import traceback

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


def _http_protocol(cfg) -> dict:
    """uvicorn's HTTP protocol with the header deadline; nothing (uvicorn's own) if this uvicorn has no such class."""
    from .header_timeout import guarded_protocol

    try:
        return {"http": guarded_protocol(cfg.header_read_timeout)}
    except (ImportError, KeyError, AttributeError) as e:
        logging.getLogger("laya.serve").warning("laya serve: no header-read deadline on this uvicorn (%s)", e)
        return {}


def _start_failed(error: BaseException, cfg) -> int:
    """One line naming what failed (the traceback too with --log-level debug); exit status 2."""
    if cfg.log_level.lower() == "debug":
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
    text = " ".join(str(error).split()) or type(error).__name__
    if not isinstance(error, (ValueError, OSError)):  # a library's own error type says what kind of failure
        text = f"{type(error).__name__}: {text}"
    if cfg.extra_models and not text.startswith("laya serve:"):
        sources = ", ".join(f"{name}={source}" for name, source in cfg.extra_models.items())
        text = f"could not start serving {sources}: {text}"
    return _error(text)


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
        server = getattr(getattr(app, "state", None), "server", None)
        if server is not None:
            server.start()  # preload now: a checkpoint that cannot load is one line here, not uvicorn's traceback
    except ImportError as e:
        return _error(f"the server needs the serve extra ({e}); pip install 'laya[serve]'")
    except Exception as e:  # noqa: BLE001 - any start-up failure is the user's to fix: say what, exit 2
        return _start_failed(e, cfg)
    uvicorn.run(app, host=cfg.host, port=cfg.port, log_level=cfg.log_level.lower(), access_log=cfg.access_log,
                timeout_graceful_shutdown=cfg.shutdown_timeout, **_http_protocol(cfg))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

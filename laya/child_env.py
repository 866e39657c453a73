"""The environment of a laya child interpreter: the parent's, with this laya importable even when it is not
installed (a checkout on sys.path)."""

from __future__ import annotations

import os

PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def child_env(**extra: str) -> dict:
    path = os.pathsep.join(p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p)
    return dict(os.environ, **extra, PYTHONPATH=path)

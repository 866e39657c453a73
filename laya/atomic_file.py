"""Files replaced whole: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import uuid
from typing import Any


def write_json_atomic(path: str, payload: Any, **dump_options: Any) -> None:
    """`payload` as JSON at `path`, through a temporary file in the same folder renamed into place. A new file
    gets the umask's permissions and a replaced one keeps its mode, as a plain open() would leave them."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # short, so any target name fits
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mode = None
    try:
        with os.fdopen(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "w", encoding="utf-8") as f:
            json.dump(payload, f, **dump_options)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

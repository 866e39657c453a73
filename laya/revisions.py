"""Reviewed Hub revisions, the revision rule and SHA-256 digest checks (torch-free).

resolve_revision: the argument, else LAYA_REVISION; "reviewed" = the pinned SHA of the repo.
snapshot_revision: the SHA of a Hugging Face cache snapshot directory.
verify_digests: {artifact path: sha256} (argument or LAYA_SHA256_DIGESTS) checked before anything is parsed.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from typing import Any

__all__ = ["PINNED_REVISIONS", "REVIEWED", "resolve_revision", "snapshot_revision", "verify_digests"]

REVIEWED = "reviewed"
REVISION_ENV = "LAYA_REVISION"
DIGESTS_ENV = "LAYA_SHA256_DIGESTS"
ONNX_DIGEST_KEYS = ("onnx", "onnx_path")  # digest keys that name the ONNX graph rather than a checkpoint file
DEFAULT_ONNX_FILE = "laya.onnx"

PINNED_REVISIONS = {
    "convaiinnovations/laya": "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851",
    "convaiinnovations/laya-multilingual": "e4e9ddf21a7b1903b7acffd8814ad4307bf63a67",
    "convaiinnovations/laya-typed-decisions": "1a793eb568e6718f15941d08f85432581df534e3",
}


def resolve_revision(model_id_or_path: str, revision: str | None = None) -> str | None:
    """The revision to download, stripped, or None for the default branch.

    `revision` wins; None or "" falls back to LAYA_REVISION; a whitespace-only argument means no revision.
    "reviewed" (exact spelling) is the pinned SHA of the repo (matched case-insensitively).
    """
    from_env = revision is None or revision == ""
    chosen = os.environ.get(REVISION_ENV, "") if from_env else str(revision)
    chosen = chosen.strip()
    if not chosen:
        return None
    if chosen != REVIEWED:
        return chosen
    pinned = {k.lower(): v for k, v in PINNED_REVISIONS.items()}.get(str(model_id_or_path).strip().lower())
    if pinned is None:
        source = f"{REVISION_ENV}={REVIEWED}" if from_env else f"revision={REVIEWED!r}"
        raise ValueError(f"{source} has no pinned SHA for {model_id_or_path!r}; reviewed revisions exist for "
                         f"{', '.join(sorted(PINNED_REVISIONS))}. Pass an explicit revision= (a commit SHA) "
                         "or unset it.")
    return pinned


def snapshot_revision(path: Any) -> str | None:
    """The snapshot SHA when the real path sits directly in a `snapshots` directory (the Hub cache), else None."""
    if path is None:
        return None
    real = os.path.realpath(os.fspath(path)).rstrip("/\\")
    parent = os.path.basename(os.path.dirname(real))
    return os.path.basename(real) if parent == "snapshots" else None


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def digests_from_env() -> dict | None:
    """LAYA_SHA256_DIGESTS as a mapping (unset or blank: None)."""
    raw = os.environ.get(DIGESTS_ENV, "").strip()
    if not raw:
        return None
    try:
        digests = json.loads(raw)
    except json.JSONDecodeError:
        raise ValueError(f"{DIGESTS_ENV} must be a JSON object of artifact->sha256") from None
    if not isinstance(digests, dict):
        raise ValueError(f"{DIGESTS_ENV} must be a JSON object of artifact->sha256")
    return digests


def is_model_keyed(digests: dict) -> bool:
    """{model: {file: hex}}: the Router's form, applied per checkpoint (never as file names)."""
    return bool(digests) and all(isinstance(v, dict) for v in digests.values())


def _artifact_path(root: str, rel: Any, onnx_path: str | None) -> str:
    """The file a digest key names, refusing absolute or escaping paths."""
    if rel in ONNX_DIGEST_KEYS:
        graph = onnx_path or DEFAULT_ONNX_FILE
        return graph if os.path.isabs(graph) else os.path.join(root, graph)
    if not isinstance(rel, str) or not rel.strip():
        raise ValueError(f"laya: unsafe path in expected digests: {rel!r}")
    if os.path.isabs(rel) or rel.startswith(("/", "\\")) or os.path.splitdrive(rel)[0]:
        raise ValueError(f"laya: unsafe absolute path in expected digests: {rel!r}")
    # lexical, not realpath: a Hub cache snapshot's files are links into its blobs/ folder
    path = os.path.normpath(os.path.join(root, rel))
    if os.path.commonpath([root, path]) != root:
        raise ValueError(f"laya: unsafe path in expected digests: {rel!r}")
    return path


def verify_digests(model_dir: str, expected: Any = None, onnx_path: str | None = None) -> None:
    """Check {artifact path: sha256 hex} before anything in `model_dir` is parsed.

    None reads LAYA_SHA256_DIGESTS (unset: nothing to check; a model-keyed map is the Router's and is
    left to it). Keys `onnx`/`onnx_path` name the ONNX graph (`onnx_path`, default laya.onnx).
    """
    if expected is None:
        expected = digests_from_env()
        if expected is None or is_model_keyed(expected):
            return
    if not isinstance(expected, Mapping):
        raise ValueError("expected_sha256 must be a mapping of artifact paths to digests")
    root = os.path.abspath(model_dir)
    for rel, want in expected.items():
        path = _artifact_path(root, rel, onnx_path)
        if not isinstance(want, str):
            raise ValueError(f"laya: the expected digest of {rel!r} must be a sha256 hex string, got {want!r}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"laya: cannot verify {rel!r}: no such file under {model_dir}")
        got = file_sha256(path)
        if got.lower() != want.strip().lower():
            shown = (onnx_path or DEFAULT_ONNX_FILE) if rel in ONNX_DIGEST_KEYS else rel
            raise ValueError(f"laya: SHA-256 mismatch for {shown}: expected {want.strip().lower()}, got {got}. "
                             "The file differs from the one the digest was taken of; refusing to load it.")

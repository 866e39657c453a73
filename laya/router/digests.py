"""Per-checkpoint SHA-256 digests for the Router: `sha256_digests=` over a model-keyed LAYA_SHA256_DIGESTS."""

from __future__ import annotations

from typing import Any

from ..revisions import digests_from_env
from .registry import canonical_name


def env_digests() -> dict | None:
    """A model-keyed LAYA_SHA256_DIGESTS as {canonical name: {file: hex}}; None when unset or flat (a flat
    {file: hex} map is left to the Agent's own check)."""
    env = digests_from_env()
    if not env:
        return None
    nested = [isinstance(v, dict) for v in env.values()]
    if not any(nested):
        return None
    if not all(nested):
        raise ValueError("LAYA_SHA256_DIGESTS mixes per-checkpoint maps and file digests; use either "
                         "{checkpoint: {file: sha256}} or {file: sha256}")
    return {canonical_name(name): dict(files) for name, files in env.items()}


def check_digest_argument(sha256_digests: Any) -> dict:
    """`sha256_digests=` checked: {name: {file: hex} | {} | None}; names are resolved by the caller."""
    if sha256_digests is None:
        return {}
    if not isinstance(sha256_digests, dict):
        raise TypeError("sha256_digests must be {model name: {relative path: sha256 hex}}")
    for name, files in sha256_digests.items():
        if files is not None and not isinstance(files, dict):
            raise TypeError(f"sha256_digests[{name!r}] must be {{relative path: sha256 hex}} or None, "
                            f"got {type(files).__name__}")
    return sha256_digests


def merged_digests(agent_map: Any, entry: Any, has_entry: bool) -> dict | None:
    """agent_kwargs["expected_sha256"] merged file by file with the checkpoint's entry (which wins);
    None when both are absent."""
    if agent_map is None and not has_entry:
        return None
    return {**(agent_map or {}), **(entry or {})}

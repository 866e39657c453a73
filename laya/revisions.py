"""Reviewed Hub revisions and the revision rule (argument, else LAYA_REVISION; "reviewed" = pinned SHA)."""

from __future__ import annotations

import os

PINNED_REVISIONS = {
    "convaiinnovations/laya": "55cf4c4ebb4ebe31b2550e8bdf3bd21b99753851",
    "convaiinnovations/laya-multilingual": "e4e9ddf21a7b1903b7acffd8814ad4307bf63a67",
    "convaiinnovations/laya-typed-decisions": "1a793eb568e6718f15941d08f85432581df534e3",
}


def resolve_revision(repo_id: str, revision: str | None = None) -> str | None:
    """The revision to download: the argument wins (a blank one suppresses the env), else LAYA_REVISION."""
    if revision is not None:
        chosen = str(revision).strip()
    else:
        chosen = os.environ.get("LAYA_REVISION", "").strip()
    if not chosen:
        return None
    if chosen.lower() == "reviewed":
        pinned = {k.lower(): v for k, v in PINNED_REVISIONS.items()}.get(repo_id.lower())
        if pinned is None:
            raise ValueError(
                f"revision 'reviewed' has no pinned SHA for repo {repo_id!r}; known repos: "
                f"{', '.join(sorted(PINNED_REVISIONS))}. Pass an explicit revision instead.")
        return pinned
    return chosen

"""Optional bearer-key check with a constant-time comparison."""

from __future__ import annotations

import hmac


def bearer_ok(authorization: str | None, key: str | None) -> bool:
    """True when no key is configured, or the header is `Bearer <key>` (scheme case-insensitive)."""
    if not key:
        return True
    if not authorization:
        return False
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(token.strip().encode("utf-8", "surrogatepass"), key.encode("utf-8", "surrogatepass"))

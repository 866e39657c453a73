"""Optional bearer-key check with a constant-time comparison over bytes."""

from __future__ import annotations

import hmac


def _header_bytes(text: str) -> bytes:
    """The header's bytes as sent: ASGI servers decode headers as latin-1, so that round-trips; anything else
    (a caller's own str) is UTF-8, with lone surrogates kept rather than raising."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def bearer_ok(authorization: str | bytes | None, key: str | None) -> bool:
    """True when no key is configured, or the header is `Bearer <key>` (scheme case-insensitive). Never raises:
    a header with non-ASCII characters is simply not the key."""
    if not key:
        return True
    if not authorization:
        return False
    raw = authorization if isinstance(authorization, bytes) else _header_bytes(authorization)
    scheme, _, token = raw.strip().partition(b" ")
    if scheme.lower() != b"bearer":
        return False
    return hmac.compare_digest(token.strip(), key.encode("utf-8", "surrogatepass"))

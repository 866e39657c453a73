"""Comparing result dicts across paths (batched vs single, served vs direct, fused vs eager)."""

from __future__ import annotations


def assert_same(a, b, tol=1.01e-4):
    """Same keys (in order), labels, types and texts; floats equal up to `tol` (default one unit of the
    4th decimal: a padded batch reorders fp32 sums, so a value near a rounding boundary may land either
    side). JSON round trips may turn 1.0 into 1, so an int stands in for a float."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            assert_same(a[key], b[key], tol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y, tol)
    elif isinstance(a, float) and not isinstance(b, bool):
        assert isinstance(b, (int, float)) and abs(a - b) <= tol, (a, b)
    else:
        assert a == b

"""The one "is this a usable number?" predicate the argument and answer checks share (torch- and numpy-free)."""

from __future__ import annotations

import math
import numbers
from typing import Any

__all__ = ["is_real"]


def is_real(value: Any, *, finite: bool = False, huge_ints: bool = False, positive: bool = False,
            types: tuple = (numbers.Real,)) -> bool:
    """Whether `value` is an instance of `types` that is not a bool (numpy's bool is no numbers.Real), and:

    - `finite`: not NaN or ±inf. An int too large for a float (10**400) is not finite, as `float()` would
      overflow; with `huge_ints` it is, being compared with ±inf rather than converted.
    - `positive`: greater than 0.
    """
    if isinstance(value, bool) or not isinstance(value, types):
        return False
    if getattr(getattr(value, "dtype", None), "kind", None) in ("m", "M"):  # numpy registers timedelta64 as Integral
        return False
    if finite:
        if huge_ints:
            if not -math.inf < value < math.inf:
                return False
        else:
            try:
                if not math.isfinite(value):
                    return False
            except OverflowError:
                return False
    return not positive or bool(value > 0)

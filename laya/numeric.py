"""The one "is this a usable number?" predicate the argument and answer checks share (torch- and numpy-free),
`nesting_guard`, their one way of refusing an argument nested past Python's recursion limit, and `shown`, the repr
their error texts use."""

from __future__ import annotations

import contextlib
import math
import numbers
from typing import Any, Callable, Iterator

__all__ = ["is_real", "nesting_guard", "shown"]


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


@contextlib.contextmanager
def nesting_guard(name: str, fix: str, error: Callable[[str], Exception] = ValueError) -> Iterator[None]:
    """Turn a RecursionError raised inside the block (checking or showing `name`, nested past Python's recursion
    limit) into `error("<name> is nested too deeply (past Python's recursion limit); <fix>")`."""
    try:
        yield
    except RecursionError:
        raise error(f"{name} is nested too deeply (past Python's recursion limit); {fix}") from None


def shown(value: Any) -> str:
    """repr(value) for an error text; a number past Python's int-to-text digit limit (repr raises) is named."""
    try:
        return repr(value)
    except ValueError:
        return f"<{type(value).__name__} too large to print>"

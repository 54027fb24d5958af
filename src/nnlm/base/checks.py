"""Arguments of the Python API checked as the command line checks its flags: one line
naming the argument, as ``name=value``, never a failure deep inside numpy or torch.

numpy's integers are integers (``np.int64(8)`` is taken as 8); ``True`` is not an
integer, ``8.0`` is not an integer, NaN and infinities are not numbers.

    >>> import numpy as np
    >>> integer(np.int64(8), "h", low=0)
    8
    >>> number(float("nan"), "lm_weight")
    Traceback (most recent call last):
    nnlm.base.checks.ArgumentValueError: lm_weight=nan: a finite number
"""

from __future__ import annotations

import math
import numbers

from .errors import NnlmError


class ArgumentTypeError(NnlmError, TypeError):
    """An argument of the wrong type (one line naming it)."""


class ArgumentValueError(NnlmError, ValueError):
    """An argument out of its range (one line naming it)."""


def _range(value, name: str, low, high, low_open: bool, high_open: bool) -> None:
    too_low = low is not None and (value <= low if low_open else value < low)
    too_high = high is not None and (value >= high if high_open else value > high)
    if too_low or too_high:
        lo = "" if low is None else f"{'above' if low_open else 'at least'} {low:g}"
        hi = "" if high is None else f"{'below' if high_open else 'at most'} {high:g}"
        raise ArgumentValueError(f"{name}={value!r}: {' and '.join(x for x in (lo, hi) if x)}")


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python int, within [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ArgumentTypeError(f"{name}={value!r}: an integer, not "
                                f"{type(value).__name__}")
    value = int(value)
    _range(value, name, low, high, False, False)
    return value


def number(value, name: str, low: float | None = None, high: float | None = None,
           low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite Python float, within its range (ends open as asked)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name}={value!r}: a number, not {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise ArgumentValueError(f"{name}={value!r}: a finite number")
    _range(value, name, low, high, low_open, high_open)
    return value


def flag(value, name: str) -> bool:
    """``value`` as a Python bool: True, False or numpy's bools (not 0, 1 or a string,
    whose truth would be a guess)."""
    if not isinstance(value, bool) and type(value).__name__ != "bool_":
        raise ArgumentTypeError(f"{name}={value!r}: True or False, not "
                                f"{type(value).__name__}")
    return bool(value)

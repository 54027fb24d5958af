"""argparse types that range-check numbers at parse time, so a bad value is one line.

    >>> positive_int("3")
    3
    >>> fraction("1.5")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: 1.5 is not in [0, 1)
"""

from __future__ import annotations

import argparse
import math
import os


def ranged(kind, low=None, high=None, low_open=False, high_open=False, name=None):
    """A type function: ``kind(text)`` within [low, high] (ends open as asked), finite."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if kind is float and not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text} is not a finite number")
        too_low = low is not None and (value <= low if low_open else value < low)
        too_high = high is not None and (value >= high if high_open else value > high)
        if too_low or too_high:
            lo = "(-inf" if low is None else f"{'(' if low_open else '['}{low:g}"
            hi = "inf)" if high is None else f"{high:g}{')' if high_open else ']'}"
            raise argparse.ArgumentTypeError(f"{text} is not in {lo}, {hi}")
        return value

    parse.__name__ = name or kind.__name__
    return parse


positive_int = ranged(int, 1, name="positive integer")
nonnegative_int = ranged(int, 0, name="non-negative integer")
positive_float = ranged(float, 0, low_open=True, name="positive number")
nonnegative_float = ranged(float, 0, name="non-negative number")
fraction = ranged(float, 0, 1, high_open=True, name="fraction")
unit_interval = ranged(float, 0, 1, name="number in [0, 1]")
seed = ranged(int, 0, 2**32 - 1, name="seed")
open_fraction = ranged(float, 0, 1, low_open=True, high_open=True, name="fraction in (0, 1)")
finite_float = ranged(float, name="finite number")


SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def memory_size(text: str) -> int:
    """A memory size in bytes: ``500M``, ``2G``, ``1.5G``, plain bytes, or ``40%`` of the
    machine's physical memory (lmplz's ``-S`` syntax)."""
    t = text.strip().upper()
    try:
        if t.endswith("%"):
            share = float(t[:-1])
            if not 0 < share <= 100:
                raise argparse.ArgumentTypeError(f"{text}: a share of memory is in (0, 100]%")
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            return int(total * share / 100)
        unit = t[-1] if t and t[-1] in SIZE_UNITS else ""
        value = float(t[:len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a size (examples: 500M, 2G, 40%)") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text}: a size must be positive")
    return int(value * SIZE_UNITS[unit])

"""nltk.lm.util: log base 2, with -inf for a score of 0 (NLTK's)."""

from __future__ import annotations

from math import log

NEG_INF = float("-inf")
POS_INF = float("inf")


def log_base2(score):
    """Convenience function for computing logarithms with base 2."""
    if score == 0.0:
        return NEG_INF
    return log(score, 2)

"""Counts kept as sorted keys beside their values, looked up in one ``searchsorted``:
what the count-based estimators (add-k, deleted interpolation) and a mixture's context
buckets all read their counts with.

    >>> import numpy as np
    >>> lookup_counts(np.array([3, 7, 9]), np.array([5, 1, 2]), np.array([7, 8, 3]))
    array([1, 0, 5])
"""

from __future__ import annotations

import numpy as np


def lookup(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of each query in the sorted ``keys``, or -1 where absent."""
    if len(keys) == 0:
        return np.full(len(queries), -1, dtype=np.int64)
    pos = np.searchsorted(keys, queries)
    pos_c = np.minimum(pos, len(keys) - 1)
    return np.where(keys[pos_c] == queries, pos_c, -1)


def lookup_counts(keys: np.ndarray, counts: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """counts[i] where keys[i] == query, 0 where the query is absent."""
    pos = lookup(keys, queries)
    return np.where(pos >= 0, counts[np.maximum(pos, 0)], 0) if len(keys) else np.zeros(
        len(queries), counts.dtype)

"""Vectorized n-gram counting into suffix-keyed tables (no Python loop over tokens).

Sentences are counted the way KenLM counts them: ``<s> w1 ... wL </s>`` with a single
``<s>``, so n-grams near a sentence start are simply shorter (there is no ``<s> <s> w``).
Every k-gram g = (g1, ..., gk) of order k gets an id in its order's table, and is keyed
by its *suffix* (g2, ..., gk) and its first word::

    key_k(g) = id_{k-1}(g2 ... gk) * |V| + g1          (id_0 of the empty suffix is 0)

Tables are sorted by key, so ids are positions and lookups are ``np.searchsorted``.
Scoring a word w after context (..., c2, c1) then walks a chain of lookups, one per
order, each extending the previous n-gram by one word on the left::

    (w) -> (c1 w) -> (c2 c1 w) -> ...

Fitting needs no lookups at all: the id of the k-gram starting at position p follows
from the id of the (k-1)-gram starting at p + 1 by one ``np.unique`` per order.
Memory is proportional to the number of distinct n-grams plus 8 bytes a token per order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..stream import Stream
from ..vocab import BOS_ID


@dataclass
class OrderTable:
    """The distinct k-grams of one order, sorted by key.

    keys: int64, ``suffix * |V| + first_word``.
    counts: int64 raw occurrence counts.
    suffix: int64 id of (g2..gk) in order k-1 (0 for unigrams).
    prefix: int64 id of (g1..g_{k-1}) in order k-1, i.e. the n-gram's context (0 for unigrams).
    """

    keys: np.ndarray
    counts: np.ndarray
    suffix: np.ndarray
    prefix: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)

    def first_word(self, V: int) -> np.ndarray:
        return self.keys % V


def sentence_sequence(stream: Stream) -> tuple[np.ndarray, np.ndarray]:
    """``<s> w1 ... wL </s>`` for every line, concatenated, and each position's line end.

    Returns ``(seq, end)``: int64 ids and, for each position, the index one past the end
    of its sentence.
    """
    starts = stream.offsets[:-1]
    seq = np.insert(stream.ids.astype(np.int64), starts, BOS_ID)
    new_offsets = stream.offsets + np.arange(len(stream.offsets))  # each line grew by one
    lengths = np.diff(new_offsets)
    end = np.repeat(new_offsets[1:], lengths)
    return seq, end


def count_ngrams(stream: Stream, order: int, vocab_size: int) -> list[OrderTable]:
    """Tables for orders 1..order (index 0 holds unigrams)."""
    if order < 1:
        raise ValueError("order must be at least 1")
    V = vocab_size
    seq, end = sentence_sequence(stream)
    n = len(seq)
    positions = np.arange(n, dtype=np.int64)
    tables: list[OrderTable] = []
    prev_ids = np.zeros(n + 1, dtype=np.int64)  # id_0: the empty n-gram, everywhere
    for k in range(1, order + 1):
        valid = positions + k <= end  # the k-gram starting at p fits in its sentence
        p = positions[valid]
        suffix = prev_ids[p + 1] if k > 1 else np.zeros(len(p), np.int64)
        keys = suffix * V + seq[p]
        uniq, first, inverse, counts = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        prefix = prev_ids[p[first]] if k > 1 else np.zeros(len(uniq), np.int64)
        tables.append(OrderTable(uniq, counts.astype(np.int64), uniq // V, prefix))
        ids = np.full(n + 1, -1, dtype=np.int64)
        ids[p] = inverse
        prev_ids = ids
    return tables


def lookup_counts(keys: np.ndarray, counts: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """counts[i] where keys[i] == query, 0 where the query is absent."""
    pos = lookup(keys, queries)
    return np.where(pos >= 0, counts[np.maximum(pos, 0)], 0) if len(keys) else np.zeros(
        len(queries), counts.dtype)


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All positions in the ranges [lo[r], hi[r]), and the range r each came from.

    Example: lo = [2, 7], hi = [4, 8] -> rows [0, 0, 1], positions [2, 3, 7].
    """
    sizes = hi - lo
    rows = np.repeat(np.arange(len(lo)), sizes)
    positions = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
    return rows, positions


def lookup(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of each query in the sorted ``keys``, or -1 where absent."""
    if len(keys) == 0:
        return np.full(len(queries), -1, dtype=np.int64)
    pos = np.searchsorted(keys, queries)
    pos_c = np.minimum(pos, len(keys) - 1)
    return np.where(keys[pos_c] == queries, pos_c, -1)

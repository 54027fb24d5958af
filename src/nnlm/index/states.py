"""A decoder's histories over an index: each history's suffixes, as table ranges, found
from its parent's by one narrowing a suffix length.

A decoder extends hypotheses a word at a time, and scores many words after each. The
range of a history's suffix of k + 1 tokens lies inside the range of its parent's suffix
of k tokens (the same tokens without the last word), so a history's ranges are its
parent's narrowed by the new word (:func:`nnlm.index.search.narrow`): one search inside
each range, never a search of the whole table (a history met without its parent, as a
window that slid past its sentence's start, is searched whole). What follows each
suffix (its count, its distinct next tokens) is read once a history and kept with it, so
every word scored after it is a lookup. Both are kept for the histories used last (an
LRU of ``capacity``).

Through ``nnlm.Decoder`` on Brown's test text (``runs/inf5``, KN5 below): 94 us a word
scored once a state, 53 us a word when a decoder scores eleven words a state (KN5's own
part, 35 us).
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .index import Batch, Index
from .search import narrow


class HistoryStates:
    """The suffix ranges and next-token counts of histories (tuples of token ids)."""

    def __init__(self, index: Index, capacity: int = 1 << 16):
        self.index, self.capacity = index, capacity
        self._ranges: OrderedDict = OrderedDict()
        self._levels: OrderedDict = OrderedDict()

    def _remember(self, memo: OrderedDict, key, value):
        memo[key] = value
        if len(memo) > self.capacity:
            memo.popitem(last=False)
        return value

    def ranges(self, history: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per shard, int64 (lo, hi) of the history's suffixes of 0, 1, ..., L tokens,
        L the longest that occurs in some shard."""
        found = self._ranges.get(history)
        if found is not None:
            self._ranges.move_to_end(history)
            return found
        parent = self._ranges.get(history[:-1]) if history else None
        if parent is None:  # a history met without its parent: every suffix searched
            return self._remember(self._ranges, history, self._searched(history))
        out = []
        for shard, (lo, hi) in zip(self.index.shards, parent):
            depth = np.arange(len(lo), dtype=np.int64) * shard.width
            a, b = narrow(shard.text, shard.table, shard.ptr, shard.width, lo, hi, depth,
                          np.full(len(lo), history[-1], np.int64))
            out.append((np.concatenate(([0], a)), np.concatenate(([shard.tokens], b))))
        longest = max(int(np.flatnonzero(b > a)[-1]) for a, b in out)
        return self._remember(self._ranges, history,
                              [(a[:longest + 1], b[:longest + 1]) for a, b in out])

    def _searched(self, history: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The ranges of every suffix of ``history``, each searched in the whole table
        (one batched search a shard), up to the longest that occurs."""
        n = len(history)
        ids = np.fromiter((t for k in range(n + 1) for t in history[n - k:]), np.int64,
                          n * (n + 1) // 2)
        out = self.index._ranges(Batch.of(ids, np.arange(n + 1, dtype=np.int64)))
        longest = max(int(np.flatnonzero(b > a)[-1]) for a, b in out)
        return [(a[:longest + 1], b[:longest + 1]) for a, b in out]

    def levels(self, history: tuple[int, ...], first: int):
        """For the history's suffixes of ``first`` tokens and more that occur: their
        lengths, and flat (level, token, count) of what follows each (documents' ends
        left out, shards summed)."""
        key = (history, first)
        found = self._levels.get(key)
        if found is not None:
            self._levels.move_to_end(key)
            return found
        ranges = self.ranges(history)
        longest = len(ranges[0][0]) - 1
        lengths = np.arange(first, longest + 1, dtype=np.int64)
        if not len(lengths):
            return self._remember(self._levels, key, (lengths, None))
        batch = Batch.of(np.zeros(int(lengths.sum()), np.int64), lengths)
        rows, tokens, counts = self.index.followers(batch, [(lo[first:], hi[first:])
                                                            for lo, hi in ranges])
        return self._remember(self._levels, key, (lengths, (rows, tokens, counts)))

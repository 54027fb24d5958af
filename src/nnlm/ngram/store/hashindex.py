"""A vectorized open-addressing hash index over int64 keys: lookups in about one probe.

Binary search over a sorted table (``np.searchsorted``) costs ~20 dependent cache misses
per query on tables of a million n-grams; this index needs ~1.5 probes on average at
load factor <= 1/2. Linear probing; Fibonacci hashing. Built and queried with numpy
only: each round handles every still-unresolved key at once.
"""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
EMPTY = -1


class HashIndex:
    """Maps each key of ``keys`` (distinct, >= 0) to its position in ``keys``."""

    def __init__(self, keys: np.ndarray):
        keys = np.asarray(keys, np.int64)
        n = len(keys)
        self.bits = max(4, int(np.ceil(np.log2(max(2 * n, 1)))))
        size = 1 << self.bits
        self.mask = np.int64(size - 1)
        self.slot_keys = np.full(size, EMPTY, np.int64)
        self.slot_values = np.zeros(size, np.int64)
        pending = np.arange(n, dtype=np.int64)
        pos = self._home(keys)
        while len(pending):
            p = pos[pending]
            free = self.slot_keys[p] == EMPTY
            cand, cpos = pending[free], p[free]
            # several keys may want one free slot: write all, read back who got it
            self.slot_keys[cpos] = keys[cand]
            won = self.slot_keys[cpos] == keys[cand]
            self.slot_values[cpos[won]] = cand[won]
            placed = np.zeros(n, bool)
            placed[cand[won]] = True
            pending = pending[~placed[pending]]
            pos[pending] = (pos[pending] + 1) & self.mask

    def _home(self, keys: np.ndarray) -> np.ndarray:
        """Each key's home slot: the top ``bits`` bits of key * golden ratio (mod 2^64).
        Views, not copies: the multiply wraps as unsigned arithmetic should."""
        h = (keys.view(np.uint64) * GOLDEN) >> np.uint64(64 - self.bits)
        return h.view(np.int64)

    def lookup(self, queries: np.ndarray) -> np.ndarray:
        """Position of each query in the original keys, or -1 where absent.
        Negative queries (used as "no n-gram") are never found.

        The first probe is done for every query without compaction (a gather and a
        select cost less than filtering); only the ~15% that collided probe again.
        """
        q = np.ascontiguousarray(queries, np.int64)
        pos = self._home(q)
        found_key = self.slot_keys[pos]
        valid = q >= 0
        hit = (found_key == q) & valid
        out = np.where(hit, self.slot_values[pos], -1)
        rest = np.flatnonzero(~hit & (found_key != EMPTY) & valid)
        pos, q = pos[rest], q[rest]
        while len(rest):
            pos = (pos + 1) & self.mask
            found_key = self.slot_keys[pos]
            hit = found_key == q
            out[rest[hit]] = self.slot_values[pos[hit]]
            more = np.flatnonzero(~hit & (found_key != EMPTY))
            rest, pos, q = rest[more], pos[more], q[more]
        return out

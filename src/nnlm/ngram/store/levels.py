"""One order of a back-off model's n-grams in memory, and what its stored numbers may
hold.

An order k >= 2 is a sorted array of packed keys (context id * |V| + word) with each
n-gram's log-probability, back-off weight, context (prefix) and last word. The mapped
trie's levels (:mod:`nnlm.ngram.store.trie`) and KenLM's (``formats/kenlm_binary.py``)
offer the same interface over their own layouts, so the model above them
(:class:`nnlm.ngram.backoff.BackoffNgram`) does not know which it holds.
"""

from __future__ import annotations

import math

import numpy as np

from ...text.vocab import BOS_ID
from .hashindex import HashIndex


def expand_ranges(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All positions in the ranges [lo[r], hi[r]), and the range r each came from.

    Example: lo = [2, 7], hi = [4, 8] -> rows [0, 0, 1], positions [2, 3, 7].
    """
    sizes = hi - lo
    rows = np.repeat(np.arange(len(lo)), sizes)
    positions = np.repeat(lo - np.cumsum(sizes) + sizes, sizes) + np.arange(sizes.sum())
    return rows, positions


LOG10_E = math.log10(math.e)  # nnlm.lm's


def log10_entries(logp, log_bow=None, extends=None) -> np.ndarray:
    """float32 log10 p per entry, or (p, b) pairs whose b's sign of zero says whether the
    entry extends (KenLM's kNoExtensionBackoff is -0.0)."""
    if log_bow is None:
        return np.ascontiguousarray(np.asarray(logp, np.float64) * LOG10_E, np.float32)
    pb = np.empty((len(logp), 2), np.float32)
    pb[:, 0] = np.asarray(logp, np.float64) * LOG10_E
    pb[:, 1] = np.where(extends, np.asarray(log_bow, np.float64) * LOG10_E + 0.0, -0.0)
    return pb


class NgramLevel:
    """The stored n-grams of one order k >= 2."""

    def __init__(self, keys, logp, log_bow, prefix, last, n_prefixes: int):
        self.keys = np.asarray(keys, np.int64)
        self.logp = np.asarray(logp, np.float64)
        self.log_bow = np.asarray(log_bow, np.float64)
        self.prefix = np.asarray(prefix, np.int64)
        self.last = np.asarray(last, np.int64)
        self.n_prefixes = n_prefixes
        self._index: HashIndex | None = None
        self._by_prefix: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def _grouped(self) -> tuple[np.ndarray, np.ndarray]:
        """Entries grouped by context (CSR), built on first use: only full next-word
        distributions need it, and it costs 8 bytes an n-gram."""
        if self._by_prefix is None:
            order = np.argsort(self.prefix, kind="stable")
            offsets = np.searchsorted(self.prefix[order], np.arange(self.n_prefixes + 1))
            self._by_prefix = order, offsets.astype(np.int64)
        return self._by_prefix

    @property
    def by_prefix(self) -> np.ndarray:
        """Entry indices sorted by context."""
        return self._grouped()[0]

    @property
    def prefix_offsets(self) -> np.ndarray:
        """Where each context's entries start in :attr:`by_prefix` (one more than contexts)."""
        return self._grouped()[1]

    @property
    def hash_index(self) -> HashIndex:
        """The order's hash index over its keys, built on first use (scoring is dominated
        by its lookups)."""
        if self._index is None:
            self._index = HashIndex(self.keys)
        return self._index

    def find(self, queries: np.ndarray) -> np.ndarray:
        """Index of each key in ``queries`` (-1 where absent)."""
        return self.hash_index.lookup(queries)

    def hash_spec(self, extends: np.ndarray | None) -> tuple:
        """The order as nnlm.kenlm's compiled queries read it (``hash_level.h``): its hash
        index and one float32 entry per n-gram, log10 p and, below the top order
        (``extends`` given: :meth:`BackoffNgram.extends`), log10 back-off whose -0.0 says
        the n-gram cannot extend."""
        index = self.hash_index
        return ("hash", index.slot_keys, index.slot_values, index.bits, len(self),
                log10_entries(self.logp, None if extends is None else self.log_bow, extends))

    def first_and_suffix(self, ids: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
        """g1 and id(g2..gk) (one order down) of the entries ``ids``."""
        return np.divmod(self.keys[ids], V)[::-1]

    def find_pairs(self, ids: np.ndarray, words: np.ndarray, V: int) -> np.ndarray:
        """Index of each n-gram (words[i] followed by the (k-1)-gram ids[i]), -1 where
        absent or where a word is -1 (no word: KenLM's null context)."""
        query = ids * V + words
        query[words < 0] = -1
        return self.find(query)


def backoff_arrays_problem(arrays: dict) -> str | None:
    """Every log-probability and back-off weight is finite, but p(<s>) = 0: a -inf
    elsewhere would give some token probability 0 and a perplexity of infinity."""
    for name, a in arrays.items():
        if not name.startswith(("unigram_logp", "unigram_log_bow", "logp_", "log_bow_")):
            continue
        bad = np.isneginf(a)
        if name == "unigram_logp" and len(bad) > BOS_ID:
            bad[BOS_ID] = False
        if np.any(bad):
            return (f"array {name!r} holds -inf at entry {int(np.flatnonzero(bad)[0])} (a "
                    "probability or back-off weight of 0)")
    return None

"""The counts behind nnlm.nltk's models: every n-gram length as sorted id arrays, and
the statistics each smoothing reads, computed once.

NLTK keeps its counts as nested dictionaries of FreqDists (about 512 bytes a distinct
n-gram) and recomputes what a smoothing needs at every call: Kneser-Ney's continuation
counts scan every context of the order above, per word scored. Here each length k's
counted n-grams are a sorted (n, k) int32 array with their counts, and every row that
scoring can ask about (the counted n-grams, their prefixes, and their suffixes, which
Kneser-Ney's continuation counts group by) gets an id in a table per length, keyed by
(its prefix's id, its last word) as a sorted int64 array. Per id, once:

- ``count``: the row's count as a counted n-gram (0 where it is only a prefix or suffix);
- ``context_total``, ``context_types``: as a context, the total count of the n-grams one
  longer that extend it and how many distinct words do (NLTK's ``counts[ctx].N()`` and
  its ``_count_values_gt_zero``);
- ``continuations``: how many distinct words precede it in the n-grams one longer
  (Kneser-Ney's continuation count of the row);
- ``continuation_total``: as a context, the sum of ``continuations`` over the rows one
  longer that extend it (Kneser-Ney's lower-order denominator).

A batch of queries is answered by a few ``searchsorted`` calls per length, so scoring a
text costs array passes, not a Python call per n-gram and order.
"""

from __future__ import annotations

from array import array

import numpy as np

CHUNK = 1 << 22  # n-gram occurrences buffered per length before they are counted


class Level:
    """The rows of one length: their keys (prefix id * W + last word, sorted; the last
    word and the prefix's id are the key's remainder and quotient by W), and the
    statistics of the module docstring, per row."""

    def __init__(self, keys: np.ndarray, W: int):
        self.keys, self.W = keys, W
        n = len(keys)
        self.count = np.zeros(n, np.int64)
        self.context_total = np.zeros(n, np.int64)
        self.context_types = np.zeros(n, np.int32)
        self.continuations = np.zeros(n, np.int32)
        self.continuation_total = np.zeros(n, np.int64)

    @property
    def parents(self) -> np.ndarray:
        return self.keys // self.W

    def last_words(self, lo: int, hi: int) -> np.ndarray:
        return self.keys[lo:hi] % self.W

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The ids of ``keys`` (-1 where absent)."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where((self.keys[at] == keys) & (keys >= 0), at, -1)


def unique_rows(rows: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``rows`` in lexicographic order, each with its summed count."""
    if len(rows) == 0:
        return rows, counts
    order = np.lexsort(rows.T[::-1])
    rows, counts = rows[order], counts[order]
    new = np.ones(len(rows), bool)
    new[1:] = np.any(rows[1:] != rows[:-1], axis=1)
    starts = np.flatnonzero(new)
    return rows[starts], np.add.reduceat(counts, starts)


class NgramTables:
    """Counted n-grams of every length over word ids, and the levels built from them
    (:meth:`levels`, rebuilt after more counting)."""

    def __init__(self):
        self.words: list[str] = []  # id -> word
        self.ids: dict[str, int] = {}
        self._buffers: dict[int, array] = {}
        self._counted: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._levels: dict[int, Level] | None = None
        self.version = 0  # moves with every count added: views of the counts follow it

    # -- counting --------------------------------------------------------------------------
    def word_id(self, word: str) -> int:
        """The id of ``word``, given one if it has none."""
        wid = self.ids.get(word)
        if wid is None:
            wid = self.ids[word] = len(self.words)
            self.words.append(word)
        return wid

    def add(self, ngram: tuple) -> None:
        """Count one n-gram of words (strings, already looked up in the vocabulary)."""
        k = len(ngram)
        self._levels = None
        self.version += 1
        buffer = self._buffers.get(k)
        if buffer is None:
            buffer = self._buffers[k] = array("i")
        ids = self.ids
        for w in ngram:
            wid = ids.get(w)
            buffer.append(wid if wid is not None else self.word_id(w))
        if len(buffer) >= CHUNK * k:
            self._flush(k)

    def add_windows(self, sentences: list[np.ndarray], max_len: int) -> None:
        """Count every window of length 1..max_len inside each sentence (arrays of word
        ids, already padded): the everygrams of each, in bulk."""
        if not sentences:
            return
        flat = np.concatenate(sentences).astype(np.int32)
        lengths = np.array([len(s) for s in sentences], np.int64)
        ends = np.cumsum(lengths)  # each sentence's end in flat
        sentence_of = np.repeat(np.arange(len(sentences)), lengths)
        for k in range(1, max_len + 1):
            if len(flat) < k:
                break
            windows = np.lib.stride_tricks.sliding_window_view(flat, k)
            inside = np.arange(len(windows)) + k <= ends[sentence_of[:len(windows)]]
            rows, counts = unique_rows(np.ascontiguousarray(windows[inside]),
                                       np.ones(int(inside.sum()), np.int64))
            self._merge(k, rows, counts)

    def _flush(self, k: int) -> None:
        buffer = self._buffers.pop(k, None)
        if buffer:
            rows = np.frombuffer(buffer, np.int32).reshape(-1, k).copy()
            self._merge(k, *unique_rows(rows, np.ones(len(rows), np.int64)))

    def _merge(self, k: int, rows: np.ndarray, counts: np.ndarray) -> None:
        self._levels = None
        self.version += 1
        if k in self._counted:
            old_rows, old_counts = self._counted[k]
            rows, counts = unique_rows(np.concatenate([old_rows, rows]),
                                       np.concatenate([old_counts, counts]))
        self._counted[k] = (rows, counts)

    def set_counted(self, k: int, rows: np.ndarray, counts: np.ndarray) -> None:
        """Length k's counted n-grams, as :meth:`counted` gave them (a saved model's)."""
        self._merge(k, *unique_rows(rows, counts))

    def counted(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Length -> (distinct rows in lexicographic order, their counts)."""
        for k in list(self._buffers):
            self._flush(k)
        return self._counted

    # -- the levels ------------------------------------------------------------------------
    def levels(self) -> dict[int, Level]:
        """Length -> :class:`Level`, built on first use after counting."""
        if self._levels is None:
            self._levels = self._build()
        return self._levels

    def _build(self) -> dict[int, Level]:
        counted = self.counted()
        W = max(len(self.words), 1)
        if not counted:
            return {}
        top = max(counted)
        need: dict[int, np.ndarray] = {}
        for j in range(top, 0, -1):  # every row scoring can ask about, prefixes closed
            parts = []
            if j in counted:
                parts.append(counted[j][0])
            if j + 1 in need:
                parts.append(need[j + 1][:, :-1])
            if j + 1 in counted:
                parts.append(counted[j + 1][0][:, 1:])
            parts = [p for p in parts if len(p)]
            need[j] = unique_rows(np.concatenate(parts) if parts else
                                  np.zeros((0, j), np.int32),
                                  np.zeros(sum(len(p) for p in parts), np.int64))[0]
        levels: dict[int, Level] = {}
        for j in range(1, top + 1):
            rows = need.pop(j)
            parents = np.zeros(len(rows), np.int64) if j == 1 else \
                self._find_rows(levels, rows[:, :-1])
            levels[j] = Level(np.sort(parents * W + rows[:, -1].astype(np.int64)), W)
        for j, (rows, counts) in counted.items():
            levels[j].count[self._find_rows(levels, rows)] = counts
            if j >= 2:  # as the n-grams one longer than their context and their suffix
                below = levels[j - 1]
                n = len(below.keys)
                prefix = self._find_rows(levels, rows[:, :-1])
                below.context_total += np.bincount(prefix, weights=counts,
                                                   minlength=n).astype(np.int64)
                below.context_types += np.bincount(prefix, minlength=n).astype(np.int32)
                below.continuations += np.bincount(self._find_rows(levels, rows[:, 1:]),
                                                   minlength=n).astype(np.int32)
        for j in range(2, top + 1):
            has = levels[j].continuations > 0
            levels[j - 1].continuation_total += np.bincount(
                levels[j].parents[has], weights=levels[j].continuations[has],
                minlength=len(levels[j - 1].keys)).astype(np.int64)
        return levels

    def context_total(self, context: tuple) -> int:
        """How often n-grams one longer than ``context`` (words) were counted after it."""
        levels = self.levels()
        if not context:
            return int(levels[1].count.sum()) if 1 in levels else 0
        if len(context) not in levels:
            return 0
        row = np.array([[self.ids.get(w, -1) for w in context]], np.int64)
        return int(take(levels[len(context)].context_total, self._find_rows(levels, row))[0])

    def _find_rows(self, levels: dict[int, Level], rows: np.ndarray) -> np.ndarray:
        return find_rows(levels, rows, max(len(self.words), 1))


def find_rows(levels: dict[int, Level], rows: np.ndarray, W: int) -> np.ndarray:
    """The ids of ``rows`` (n, j) of word ids (-1 for an absent word) in the level of
    length j; -1 where the row was never seen."""
    n, j = rows.shape
    if j == 0:
        return np.zeros(n, np.int64)
    ids = np.zeros(n, np.int64)
    for t in range(j):
        if t + 1 not in levels:
            return np.full(n, -1, np.int64)
        word = rows[:, t].astype(np.int64)
        ok = (ids >= 0) & (word >= 0)
        keys = np.where(ok, ids * W + word, -1)
        ids = levels[t + 1].find(keys)
    return ids


def take(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """values[ids], 0 where an id is -1."""
    if len(values) == 0:
        return np.zeros(len(ids), values.dtype)
    return np.where(ids >= 0, values[np.maximum(ids, 0)], 0)

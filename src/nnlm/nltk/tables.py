"""The counts behind nnlm.nltk's models: every n-gram length as one sorted array of keys
with their counts, and the statistics each smoothing reads, computed once, when first read.

NLTK keeps its counts as nested dictionaries of FreqDists (about 512 bytes a distinct
n-gram) and recomputes what a smoothing needs at every call: Kneser-Ney's continuation
counts scan every context of the order above, per word scored. Here a k-gram of word ids
(w1, ..., wk) is one key: the ids' bits side by side in a uint64 where k ids fit in 64
bits (a :class:`KeyCodec`), a record of k uint32 otherwise; sorting keys sorts the
n-grams lexicographically, a prefix or a suffix of a key is a shift or a mask, and a
lookup is ``searchsorted``. Counting streams: each batch's n-grams are counted with one
sort and merged into the sorted counts of their length, and batches grow with the table,
so a text of any length costs its distinct n-grams (a key of 4 or 8 bytes and a count of 2
or 4 each, as the vocabulary and the counts need) and one batch.

The rows scoring can ask about are a :class:`Level` per length: the counted n-grams, and
the prefixes and suffixes of those one longer (for text as ``padded_everygram_pipeline``
gives it, these were all counted: the level is the counts themselves, shared). Per row,
read on first use (a model reads only its smoothing's):

- ``count``: the row's count as a counted n-gram (0 where it is only a prefix or suffix);
- ``context_total``, ``context_types``: as a context, the total count of the n-grams one
  longer that extend it and how many distinct words do (NLTK's ``counts[ctx].N()`` and
  its ``_count_values_gt_zero``);
- ``continuations``: how many distinct words precede it in the n-grams one longer
  (Kneser-Ney's continuation count of the row);
- ``continuation_total``: as a context, the sum of ``continuations`` over the rows one
  longer that extend it (Kneser-Ney's lower-order denominator).
"""

from __future__ import annotations

from array import array

import numpy as np

from ..base.sysmem import release_free_memory

BATCH_TOKENS = 1 << 16  # the least tokens counted at once (batches grow with the counts)
BLOCK = 1 << 16  # keys a block of counts holds (a merge copies one block at a time)
TRIM_BELOW = 1 << 22  # keys in the largest table below which each batch gives pages back
CHUNK = 1 << 16  # rows of the level above read at once when a statistic is computed
COUNT_TYPES = (np.uint16, np.int32, np.int64)  # the narrowest that holds them stores counts


class KeyCodec:
    """Keys of k-grams of word ids below 2**bits: a uint32 or uint64 where k * bits bits
    fit in one (the first word in the highest bits), else records of k uint32 (numpy
    compares them field by field). Either sorts lexicographically."""

    def __init__(self, k: int, bits: int):
        self.k, self.bits = k, bits
        self.packed = k * bits <= 64
        if self.packed:
            self.dtype = np.dtype(np.uint32 if k * bits <= 32 else np.uint64)
        else:
            self.dtype = np.dtype([(f"w{i}", np.uint32) for i in range(k)])

    def pack(self, rows: np.ndarray) -> np.ndarray:
        """Keys of ``rows`` (n, k) of word ids (each >= 0)."""
        n = len(rows)
        if self.packed:
            keys = np.zeros(n, self.dtype)
            for i in range(self.k):
                keys <<= self.dtype.type(self.bits)
                keys |= rows[:, i].astype(self.dtype)
            return keys
        keys = np.empty(n, self.dtype)
        for i in range(self.k):
            keys[f"w{i}"] = rows[:, i]
        return keys

    def unpack(self, keys: np.ndarray) -> np.ndarray:
        """The (n, k) int32 word ids of ``keys``."""
        rows = np.empty((len(keys), self.k), np.int32)
        if self.packed:
            mask = self.dtype.type((1 << self.bits) - 1)
            for i in range(self.k):
                rows[:, self.k - 1 - i] = (keys >> self.dtype.type(self.bits * i)) & mask
        else:
            for i in range(self.k):
                rows[:, i] = keys[f"w{i}"]
        return rows

    def prefix(self, keys: np.ndarray) -> np.ndarray:
        """The keys of each k-gram's first k - 1 words (in ``KeyCodec(k - 1)``'s form)."""
        shorter = KeyCodec(self.k - 1, self.bits)
        if self.packed:
            return (keys >> self.dtype.type(self.bits)).astype(shorter.dtype)
        return shorter.pack(self.unpack(keys)[:, :-1])

    def suffix(self, keys: np.ndarray) -> np.ndarray:
        """The keys of each k-gram's last k - 1 words."""
        shorter = KeyCodec(self.k - 1, self.bits)
        if self.packed:
            mask = self.dtype.type((1 << (self.bits * (self.k - 1))) - 1)
            return (keys & mask).astype(shorter.dtype)
        return shorter.pack(self.unpack(keys)[:, 1:])

    def prefix_range(self, keys: np.ndarray, prefix: np.ndarray) -> tuple[int, int]:
        """Where the k-grams starting with the k - 1 words ``prefix`` lie in ``keys``."""
        low = np.append(prefix, 0)[None, :]
        high = np.append(prefix, (1 << min(self.bits, 32)) - 1)[None, :]
        lo = int(np.searchsorted(keys, self.pack(low), "left")[0])
        return lo, int(np.searchsorted(keys, self.pack(high), "right")[0])


def count_keys(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys, sorted, and how often each occurs (``keys`` is sorted in place)."""
    if len(keys) == 0:
        return keys, np.zeros(0, np.int64)
    keys.sort()
    new = np.ones(len(keys), bool)
    new[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(new)
    return keys[starts], np.diff(starts, append=len(keys))


def merge_counts(keys: np.ndarray, counts: np.ndarray, more: np.ndarray,
                 more_counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two sorted distinct key arrays with counts, as one: the keys seen in both add
    their counts in place, the others are inserted (no sort of the whole)."""
    if len(keys) == 0:
        return more, _narrow(more_counts)
    at = np.searchsorted(keys, more)
    hit = np.zeros(len(more), bool)
    inside = at < len(keys)
    hit[inside] = keys[at[inside]] == more[inside]
    summed = counts[at[hit]].astype(np.int64) + more_counts[hit]
    wide = _count_type(max(summed.max(initial=0), more_counts.max(initial=0)))
    if np.iinfo(wide).max > np.iinfo(counts.dtype).max:
        counts = counts.astype(wide)
    counts[at[hit]] = summed
    new = ~hit
    if new.any():
        keys = np.insert(keys, at[new], more[new])
        counts = np.insert(counts, at[new], more_counts[new].astype(counts.dtype))
    return keys, counts


def _count_type(top: int) -> type:
    """The narrowest of :data:`COUNT_TYPES` that holds ``top``."""
    return next(t for t in COUNT_TYPES if top <= np.iinfo(t).max)


def _narrow(counts: np.ndarray) -> np.ndarray:
    """``counts`` in the narrowest type that holds them all."""
    dtype = _count_type(int(counts.max(initial=0)))
    return counts if counts.dtype == dtype else counts.astype(dtype)


class SortedCounts:
    """One length's counted keys and counts, sorted, in blocks of about :data:`BLOCK`
    keys: a batch merges into the blocks its keys fall in, each copied alone, so
    counting never holds a second copy of the table; :meth:`compact` joins them into
    one array, a block at a time, for the levels."""

    def __init__(self):
        self.blocks: list[tuple[np.ndarray, np.ndarray]] = []
        self._fences: np.ndarray | None = None  # each block's first key but the first's

    def __len__(self) -> int:
        return sum(len(keys) for keys, _ in self.blocks)

    def merge(self, keys: np.ndarray, counts: np.ndarray) -> None:
        """Add sorted distinct ``keys`` with their counts."""
        if not self.blocks:
            self.blocks = _split(keys, _narrow(counts))
        else:
            route = np.searchsorted(self._fences, keys, "right")  # each key's block
            bounds = np.searchsorted(route, np.arange(len(self.blocks) + 1))
            blocks, old = [], self.blocks
            self.blocks = []
            for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
                block = old.pop(0)  # the old block is freed once merged: one copy at a time
                if hi > lo:
                    block = merge_counts(*block, keys[lo:hi], counts[lo:hi])
                blocks.extend(_split(*block) if len(block[0]) > 2 * BLOCK else [block])
                del block
            self.blocks = blocks
        self._fences = np.array([keys[0] for keys, _ in self.blocks[1:]],
                                self.blocks[0][0].dtype)

    def compact(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, counts) as one array each, the blocks freed as they are copied."""
        if len(self.blocks) != 1:
            n = len(self)
            dtype = np.result_type(*(c.dtype for _, c in self.blocks))
            keys = np.empty(n, self.blocks[0][0].dtype)
            counts, at = np.empty(n, dtype), 0
            while self.blocks:
                block_keys, block_counts = self.blocks.pop(0)
                keys[at:at + len(block_keys)] = block_keys
                counts[at:at + len(block_keys)] = block_counts
                at += len(block_keys)
                del block_keys, block_counts
                release_free_memory()  # the block's pages, before the next is copied
            self.blocks = [(keys, counts)]
            self._fences = np.zeros(0, keys.dtype)
        return self.blocks[0]


def _split(keys: np.ndarray, counts: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    """Blocks of :data:`BLOCK` keys (copies: a block never keeps a larger array alive)."""
    if len(keys) <= 2 * BLOCK:
        return [(keys, counts)]
    return [(keys[lo:lo + BLOCK].copy(), counts[lo:lo + BLOCK].copy())
            for lo in range(0, len(keys), BLOCK)]


class Level:
    """The rows of one length k, sorted keys, with the statistics of the module
    docstring, each computed from the level above on first read."""

    STATS = ("context_total", "context_types", "continuations", "continuation_total")

    def __init__(self, codec: KeyCodec, keys: np.ndarray, count: np.ndarray):
        self.codec, self.keys, self.count = codec, keys, count
        self.above: Level | None = None
        self._stats: dict[str, np.ndarray] = {}
        self._sums: dict[str, int] = {}

    def stat(self, name: str) -> np.ndarray:
        """The statistic ``name`` per row (``count`` or one of :attr:`STATS`)."""
        if name == "count":
            return self.count
        values = self._stats.get(name)
        if values is None:
            values = self._stats[name] = self._compute(name)
            release_free_memory()  # its int64 sums, narrowed: their pages back
        return values

    def total(self, name: str) -> int:
        """The statistic summed over the rows."""
        if name not in self._sums:
            self._sums[name] = int(self.stat(name).sum(dtype=np.int64))
        return self._sums[name]

    def _compute(self, name: str) -> np.ndarray:
        n, above = len(self.keys), self.above
        out = np.zeros(n, np.int64)
        if above is None:
            return out.astype(COUNT_TYPES[0])
        for lo in range(0, len(above.keys), CHUNK):
            keys = above.keys[lo:lo + CHUNK]
            if name == "continuations":  # distinct words before each row
                ids = self.find(above.codec.suffix(keys))
                counted = (above.count[lo:lo + CHUNK] > 0) & (ids >= 0)
                np.add.at(out, ids[counted], 1)
                continue
            ids = self.find(above.codec.prefix(keys))
            weights = {"context_total": above.count[lo:lo + CHUNK],
                       "context_types": above.count[lo:lo + CHUNK] > 0}.get(name)
            if weights is None:  # continuation_total
                weights = above.stat("continuations")[lo:lo + CHUNK]
            np.add.at(out, ids, weights.astype(np.int64))
        return _narrow(out)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """The row ids of ``keys`` (-1 where absent)."""
        if len(self.keys) == 0:
            return np.full(len(keys), -1, np.int64)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[at] == keys, at, -1)


class NgramTables:
    """Counted n-grams of every length over word ids, and the levels built from them
    (:meth:`levels`, rebuilt after more counting)."""

    def __init__(self):
        self.words: list[str] = []  # id -> word
        self.ids: dict[str, int] = {}
        self.bits = 1  # word ids are below 2**bits; keys are packed with it
        self._buffers: dict[int, array] = {}
        self._counted: dict[int, SortedCounts] = {}
        self._levels: dict[int, Level] | None = None
        self.version = 0  # moves with every count added: views of the counts follow it

    # -- words -----------------------------------------------------------------------------
    def word_id(self, word: str) -> int:
        """The id of ``word``, given one if it has none."""
        wid = self.ids.get(word)
        if wid is None:
            wid = self.ids[word] = len(self.words)
            self.words.append(word)
            if wid >> self.bits:
                self.reserve(wid + 1)
        return wid

    def reserve(self, words: int) -> None:
        """Make room in the keys for ``words`` word ids (re-keying what was counted)."""
        bits = max(int(words - 1).bit_length(), 1)
        if bits <= self.bits:
            return
        rows = {k: (self.codec(k).unpack(keys), counts)
                for k, (keys, counts) in self.counted_keys().items()}
        self.bits = bits
        self._counted = {}
        for k, (r, c) in rows.items():
            self._counted[k] = SortedCounts()
            self._counted[k].merge(self.codec(k).pack(r), c)
        self._levels = None

    def codec(self, k: int) -> KeyCodec:
        return KeyCodec(k, self.bits)

    # -- counting --------------------------------------------------------------------------
    def add(self, ngram: tuple) -> None:
        """Count one n-gram of words (strings, already looked up in the vocabulary)."""
        k = len(ngram)
        self._touch()
        ids = self.ids  # first: a new word may re-key (and flush) what was counted
        row = [wid if (wid := ids.get(w)) is not None else self.word_id(w) for w in ngram]
        buffer = self._buffers.get(k)
        if buffer is None:
            buffer = self._buffers[k] = array("i")
        buffer.extend(row)
        if len(buffer) >= self.batch_tokens() * k:
            self._flush(k)

    def batch_tokens(self) -> int:
        """Tokens to count at once: at least :data:`BATCH_TOKENS`, and an eighth of the
        largest table, so that merging batches into it stays linear in the text (a
        batch's temporaries are a few times its tokens in bytes)."""
        largest = max((len(table) for table in self._counted.values()), default=0)
        return max(BATCH_TOKENS, largest // 8)

    def add_windows(self, flat: np.ndarray, lengths: np.ndarray, max_len: int) -> None:
        """Count every window of length 1..max_len inside each sentence (``flat``: the
        sentences' word ids one after another, already padded; ``lengths``: theirs)."""
        if len(flat) == 0:
            return
        self._touch()
        flat = np.asarray(flat, np.int32)
        # tokens from each position to its sentence's end: a window fits where it is >= k
        room = np.repeat(np.cumsum(lengths, dtype=np.int64).astype(np.int32), lengths)
        room -= np.arange(len(flat), dtype=np.int32)
        for k in range(1, max_len + 1):
            if len(flat) < k:
                break
            keys = self.codec(k).pack(np.lib.stride_tricks.sliding_window_view(flat, k))
            self._merge(k, *count_keys(keys[room[:len(keys)] >= k]))
            del keys
        # the batch's temporaries and the blocks merges replaced lie free between live
        # blocks in the heap: given back, a small table costs its size, not its history
        # (a large one's batches are large too, and their pages are reused as they are)
        if max(len(table) for table in self._counted.values()) < TRIM_BELOW:
            release_free_memory()

    def _touch(self) -> None:
        self._levels = None
        self.version += 1

    def _flush(self, k: int) -> None:
        buffer = self._buffers.pop(k, None)
        if buffer:
            rows = np.frombuffer(buffer, np.int32).reshape(-1, k)
            self._merge(k, *count_keys(self.codec(k).pack(rows)))

    def _flush_all(self) -> None:
        for k in list(self._buffers):
            self._flush(k)

    def _merge(self, k: int, keys: np.ndarray, counts: np.ndarray) -> None:
        self._touch()
        self._counted.setdefault(k, SortedCounts()).merge(keys, counts)

    def set_counted(self, k: int, rows: np.ndarray, counts: np.ndarray) -> None:
        """Length k's counted n-grams, as :meth:`counted` gave them (a saved model's)."""
        self._merge(k, *_sum_duplicates(self.codec(k).pack(rows), counts))

    def orders(self) -> list[int]:
        """The n-gram lengths counted, ascending."""
        return sorted(set(self._counted) | set(self._buffers))

    def counted(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Length k's distinct n-grams as rows (n, k) of word ids in lexicographic
        order, with their counts (none: empty arrays)."""
        keys, counts = self.counted_keys().get(k, (None, None))
        if keys is None:
            return np.zeros((0, k), np.int32), np.zeros(0, np.int64)
        return self.codec(k).unpack(keys), counts

    def counted_keys(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Length -> (sorted distinct keys, counts), as stored."""
        self._flush_all()
        return {k: table.compact() for k, table in self._counted.items()}

    def total(self, k: int) -> int:
        """Every count of length k, summed."""
        counted = self.counted_keys().get(k)
        return 0 if counted is None else int(counted[1].sum(dtype=np.int64))

    # -- the levels ------------------------------------------------------------------------
    def levels(self) -> dict[int, Level]:
        """Length -> :class:`Level`, built on first use after counting."""
        if self._levels is None:
            self._levels = self._build()
        return self._levels

    def _build(self) -> dict[int, Level]:
        counted = self.counted_keys()
        if not counted:
            return {}
        top = max(counted)
        need: dict[int, np.ndarray] = {}
        for j in range(top, 0, -1):  # every row scoring can ask about, prefixes closed
            own = counted[j][0] if j in counted else np.zeros(0, self.codec(j).dtype)
            above = self.codec(j + 1)
            need[j] = _union(own, [(above.prefix, need.get(j + 1)),
                                   (above.suffix, counted.get(j + 1, (None,))[0])])
        levels: dict[int, Level] = {}
        for j in range(1, top + 1):
            keys = need.pop(j)
            if j in counted and keys is counted[j][0]:
                count = counted[j][1]  # the counts themselves: nothing copied
            else:
                count = np.zeros(len(keys), COUNT_TYPES[0] if j not in counted
                                 else counted[j][1].dtype)
                if j in counted:
                    count[np.searchsorted(keys, counted[j][0])] = counted[j][1]
            levels[j] = Level(self.codec(j), keys, count)
            if j > 1:
                levels[j - 1].above = levels[j]
        return levels

    def context_total(self, context: tuple) -> int:
        """How often n-grams one longer than ``context`` (words) were counted after it."""
        if not context:
            return self.total(1)
        levels = self.levels()
        if len(context) not in levels:
            return 0
        row = np.array([[self.ids.get(w, -1) for w in context]], np.int64)
        return int(take(levels[len(context)].stat("context_total"),
                        self.find(levels, row))[0])

    def find(self, levels: dict[int, Level], rows: np.ndarray) -> np.ndarray:
        """The ids of ``rows`` (n, j) of word ids (-1 for an absent word) in the level
        of length j; -1 where the row was never seen (0 for j = 0: the empty context)."""
        n, j = rows.shape
        if j == 0:
            return np.zeros(n, np.int64)
        level = levels.get(j)
        if level is None:
            return np.full(n, -1, np.int64)
        known = (rows >= 0).all(axis=1) & (rows < (1 << self.bits)).all(axis=1)
        ids = level.find(level.codec.pack(np.where(known[:, None], rows, 0)))
        return np.where(known, ids, -1)


def _union(own: np.ndarray, parts: list) -> np.ndarray:
    """``own`` (sorted, distinct) with the keys it lacks among ``part(keys)`` for each
    (part, keys) of ``parts``, read a chunk at a time; ``own`` itself where it has them
    all (text as ``padded_everygram_pipeline`` gives it: nothing is copied)."""
    missing = []
    for part, keys in parts:
        for lo in range(0, 0 if keys is None else len(keys), CHUNK):
            chunk = part(keys[lo:lo + CHUNK])
            if len(own):
                at = np.minimum(np.searchsorted(own, chunk), len(own) - 1)
                chunk = chunk[own[at] != chunk]
            if len(chunk):
                missing.append(np.unique(chunk))
    if not missing:
        return own
    return np.unique(np.concatenate([own, *missing]))


def _sum_duplicates(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.argsort(keys, kind="stable")
    keys, counts = keys[order], np.asarray(counts, np.int64)[order]
    new = np.ones(len(keys), bool)
    new[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(new)
    return keys[starts], np.add.reduceat(counts, starts) if len(keys) else counts


def take(values: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """values[ids] as int64 (float64 for floats), 0 where an id is -1."""
    if len(values) == 0:
        return np.zeros(len(ids), np.int64)
    out = values[np.maximum(ids, 0)]
    out = out.astype(np.float64 if out.dtype.kind == "f" else np.int64)
    out[ids < 0] = 0
    return out

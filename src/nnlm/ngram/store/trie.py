"""nnlm's compact n-gram file: a memory-mapped trie of reversed n-grams, as KenLM's.

A back-off model's n-grams of order k >= 2 are sorted by ``key = id(g2..gk) * |V| + g1``
(:mod:`nnlm.ngram.backoff`): each stored (k-1)-gram's extensions one word further left
are one contiguous run, sorted by that word. That is KenLM's trie over reversed n-grams
(Heafield 2011, section 3.2), and it needs no keys at all: per order, only

* ``word_k``: g1 of every entry, bit-packed in ceil(log2 |V|) bits;
* ``child_{k-1}``: where each (k-1)-gram's run starts in order k (one more entry than
  the order has; the run ends where the next starts): bit-packed, or 64 to a cache
  line as a straight line plus 7-bit corrections (:mod:`.run_pointers`: 8-10 bits a
  pointer instead of ~20, one line read a lookup), whichever is smaller for the order
  (format 1 always bit-packed them, and still loads);
* ``logp_k`` and ``log_bow_k``: float32 natural logs, or with ``quantize=(P, B)``
  codes of P and B bits into per-order tables of 2^P and 2^B centers, binned as KenLM's
  ``build_binary -q P -b B`` does (equal-count bins, each the mean of its values;
  Federico & Bertoldi 2006). Unigrams stay float32, as in KenLM; so does the top
  order's lack of back-offs. A back-off of 1 is stored as -0.0 where the n-gram cannot
  matter as a context (no longer n-gram starts with it) and +0.0 where it can: KenLM's
  HasExtension, which decoders' state minimization asks per word and which the reversed
  trie could not tell without a search; quantized back-offs keep those two as codes 0
  and 1, as KenLM's do.

Finding the k-gram (g1, g2..gk) is a binary search for g1 in the run of g2..gk, so
lookups chain exactly as the hash index's did. Bigrams are the exception: their runs
are the longest (every left neighbour of a frequent word; 9 halvings on average in
running Brown text, 60% of all the search steps), so order 2 (and 3) also has
``slots``, an open-addressing table (load 0.6, linear probing) of entry numbers + 1,
bit-packed: one or two probes instead, for about 4-5 bytes an n-gram of the order;
only where the order is a minority of the model and not its top order (trie_write's
``hashed_orders``: on a KN3 the tables would make the file larger than KenLM's trie).
Entry numbers (ids) are the same as the in-memory model's, so every scorer in
:class:`BackoffNgram` works unchanged. The vocabulary is in the file too, mapped
(:mod:`.vocab_table`).

The file: ``NNLMTRIE``, the uint32 0x01020304 in the writer's byte order (a file from
a big-endian machine is named as such, not misread), a uint32 format version, a uint64
length and a JSON header (sizes, bit widths, the binding to config.json, and each
section's offset and length), then the sections, each 64-byte aligned. Every section
is checked against the file's size before anything is mapped, so a truncated file is
one line, never a read past the end; corrupt pointers are clamped to their order, so
that no lookup reads outside the mapping either.

This module holds the format and the mapped level; :mod:`.trie_layout` its constants and
checks (without numpy), :mod:`.trie_write` writes a file and :mod:`.trie_map` opens one.
"""

from __future__ import annotations

import numpy as np

from ...base.compiled import extension
from ...base.errors import NnlmError
from . import bits as bitpack
from .levels import NgramLevel
from .trie_layout import (  # noqa: F401 - the format's constants, named here too
    ALIGN,
    BYTE_ORDER_MARK,
    FILE_NAME,
    FORMAT_VERSION,
    HEADER_FIELDS,
    MAGIC,
    PREFIX,
    STANDALONE,
)
from .values import Quantized

# -- the bigram table ------------------------------------------------------------------
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
SLOT_LOAD = 0.6


def home_slots(keys: np.ndarray, size: int) -> np.ndarray:
    """Each key's first slot in a table of ``size``: the top 32 bits of key * golden
    ratio (mod 2^64), scaled to the table (Lemire's multiply-shift; _trie.c agrees)."""
    h = (np.asarray(keys, np.int64).view(np.uint64) * GOLDEN) >> np.uint64(32)
    return ((h * np.uint64(size)) >> np.uint64(32)).astype(np.int64)


def build_slots(keys: np.ndarray) -> tuple[np.ndarray, int]:
    """The table of order 2: slot -> entry number + 1 (0: empty), for ``keys``
    (``word2 * |V| + word1``, distinct). Vectorized linear probing, as HashIndex."""
    n = len(keys)
    size = max(16, int(np.ceil(n / SLOT_LOAD)))
    table = np.zeros(size, np.int64)
    pending = np.arange(n, dtype=np.int64)
    pos = home_slots(keys, size)
    while len(pending):
        p = pos[pending]
        free = table[p] == 0
        cand, cpos = pending[free], p[free]
        table[cpos] = cand + 1  # several may want one slot: the last write wins it
        won = table[cpos] == cand + 1
        placed = np.zeros(n, bool)
        placed[cand[won]] = True
        pending = pending[~placed[pending]]
        pos[pending] = (pos[pending] + 1) % size
    return table, size


# -- the mapped level ------------------------------------------------------------------
class TrieLevel(NgramLevel):
    """Order k >= 2 of a mapped trie, with :class:`NgramLevel`'s interface: ``find``,
    ``logp``, ``log_bow`` read the mapping; ``keys``, ``prefix`` and ``last`` (only
    pruning, ARPA output and full next-word distributions need them) are rebuilt from
    the trie on first use and kept."""

    coding = None  # a file whose values are coded as counts: its value_codes.Coding

    def __init__(self, k: int, vocab_size: int, words: np.ndarray, word_bits: int,
                 pointers, n: int, logp, log_bow, lower: TrieLevel | None, slots=None,
                 slot_bits: int = 0, n_slots: int = 0):
        self.k, self.V, self.n = k, vocab_size, n
        self.slots, self.slot_bits, self.n_slots = slots, slot_bits, n_slots
        self.words, self.word_bits = words, word_bits
        # order k-1's run pointers (.run_pointers.Packed or .Linear)
        self.pointers = pointers
        self.n_prefixes = pointers.count - 1
        self.logp = logp
        self._log_bow = log_bow
        self.lower = lower
        self._lazy: dict[str, np.ndarray] = {}
        self._by_prefix = None
        self._index = None  # nnlm.kenlm's per-call path builds a hash index over keys

    def __len__(self) -> int:
        return self.n

    @property
    def log_bow(self):
        if self._log_bow is None:  # the top order: every back-off is 1
            self._log_bow = np.zeros(self.n, np.float32)
        return self._log_bow

    @log_bow.setter
    def log_bow(self, value):
        self._log_bow = value

    def c_spec(self, top: bool) -> tuple | None:
        """The order as the C loops take it (``_trie.score_run``, and nnlm.kenlm's
        compiled queries; both read it by ``trie_level.h``), where it lies: ("trie",
        words, word_bits, run pointers, n_parents, n, slots, slot_bits, n_slots, then
        (values, centers, bits) of logp and of log_bow (bits 0: float32; the top order's
        back-offs empty)). None where the numbers are not the file's (set in memory, not
        float32)."""
        if self.coding is not None:  # values coded as counts (value_codes)
            return self.coding.c_spec(self._trie_spec(b"", b"", 0, b"", b"", 0), self.k, top)
        parts = []
        for v in (self.logp, None if top else self._log_bow):
            if isinstance(v, Quantized):
                parts += [v.codes, v.centers, v.bits]
            elif v is None and top:
                parts += [b"", b"", 0]
            elif isinstance(v, np.ndarray) and v.dtype == np.float32 and v.ndim == 1 \
                    and len(v) == self.n:
                parts += [np.ascontiguousarray(v), b"", 0]
            else:
                return None
        return self._trie_spec(*parts)

    def _trie_spec(self, *values) -> tuple:
        return ("trie", self.words, self.word_bits, self.pointers.c_spec(), self.n_prefixes,
                self.n, b"" if self.slots is None else self.slots, self.slot_bits,
                self.n_slots, *values)

    def runs(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[start, end) of each parent's run of children in this order, clamped to it
        (``parents`` < n_prefixes)."""
        start = np.minimum(self.pointers.at(parents), self.n)
        return start, np.clip(self.pointers.at(parents + 1), start, self.n)

    def find(self, queries: np.ndarray) -> np.ndarray:
        """Index of each key (``id(g2..gk) * |V| + g1``) in this order, -1 where absent."""
        q = np.asarray(queries, np.int64)
        parent, word = np.divmod(q, self.V)
        return self.find_pairs(np.where(q >= 0, parent, -1), word)

    def find_pairs(self, ids: np.ndarray, words: np.ndarray, V: int | None = None) -> np.ndarray:
        """Index of each n-gram (words[i] followed by the (k-1)-gram ids[i]), -1 where
        absent or where an id or word is -1: a binary search in the run of ids[i]."""
        ids = np.ascontiguousarray(ids, np.int64)
        words = np.ascontiguousarray(words, np.int64)
        if _native is not None:
            out = np.empty(len(ids), np.int64)
            slots = b"" if self.slots is None else self.slots
            _native.find(self.words, self.word_bits, self.pointers.c_spec(),
                         self.n_prefixes, self.n, ids, words, out, slots, self.slot_bits,
                         self.n_slots, self.V)
            return out
        out = np.full(len(ids), -1, np.int64)
        idx = np.flatnonzero((ids >= 0) & (ids < self.n_prefixes) & (words >= 0))
        parent, word = ids[idx], words[idx]
        lo, end = self.runs(parent)
        if self.slots is not None:
            out[idx] = self._probe(parent, word, lo, end)
            return out
        hi = end.copy()
        act = np.flatnonzero(lo < hi)
        while len(act):  # every unresolved query halves its run at once
            mid = (lo[act] + hi[act]) >> 1
            less = bitpack.unpack(self.words, self.word_bits, mid) < word[act]
            lo[act] = np.where(less, mid + 1, lo[act])
            hi[act] = np.where(less, hi[act], mid)
            act = act[lo[act] < hi[act]]
        inside = np.flatnonzero(lo < end)
        hit = bitpack.unpack(self.words, self.word_bits, lo[inside]) == word[inside]
        out[idx[inside[hit]]] = lo[inside[hit]]
        return out

    def _probe(self, parent, word, lo, end) -> np.ndarray:
        """Order 2's table lookups (numpy): probe until an empty slot or the entry in
        ``parent``'s run [lo, end) whose word is ``word``."""
        out = np.full(len(parent), -1, np.int64)
        pos = home_slots(parent * self.V + word, self.n_slots)
        rest = np.arange(len(parent))
        rounds = 0
        while len(rest):
            entry = bitpack.unpack(self.slots, self.slot_bits, pos[rest]) - 1
            empty = entry < 0
            inside = ~empty & (entry >= lo[rest]) & (entry < end[rest]) & (entry < self.n)
            hit = inside.copy()
            hit[inside] = bitpack.unpack(self.words, self.word_bits,
                                         entry[inside]) == word[rest[inside]]
            out[rest[hit]] = entry[hit]
            rest = rest[~hit & ~empty]
            pos[rest] = (pos[rest] + 1) % self.n_slots
            rounds += 1
            if rounds > self.n_slots:  # no empty slot at all: a corrupt table
                raise NnlmError("order 2: its table has no empty slot; the model file is "
                                "corrupt")
        return out

    def _run_starts(self) -> np.ndarray:
        """Where each (k-1)-gram's run starts, decoded (8 bytes a (k-1)-gram), checked."""
        if "starts" not in self._lazy:
            try:
                self._lazy["starts"] = self.pointers.decode()
            except NnlmError as e:
                raise NnlmError(f"order {self.k}: {e}; the model file is corrupt") from None
        return self._lazy["starts"]

    def first_and_suffix(self, ids: np.ndarray, V: int | None = None):
        """g1 and id(g2..gk) (one order down) of the entries ``ids``."""
        ids = np.asarray(ids, np.int64)
        first = bitpack.unpack(self.words, self.word_bits, ids)
        if len(first) and int(first.max()) >= self.V:
            raise NnlmError(f"order {self.k}: a word id is past the vocabulary; the model "
                            "file is corrupt")
        return first, np.searchsorted(self._run_starts(), ids, side="right") - 1

    def _parent_of_each(self) -> np.ndarray:
        """id(g2..gk) of every entry: the run each entry lies in."""
        if "suffix" not in self._lazy:
            starts = self._run_starts()
            self._lazy["suffix"] = np.repeat(np.arange(self.n_prefixes, dtype=np.int64),
                                             np.diff(starts))
        return self._lazy["suffix"]

    def first_words(self) -> np.ndarray:
        """g1 of every entry."""
        if "first" not in self._lazy:
            first = bitpack.unpack_all(self.words, self.word_bits, self.n)
            if len(first) and int(first.max()) >= self.V:
                raise NnlmError(f"order {self.k}: a word id is past the vocabulary; the "
                                "model file is corrupt")
            self._lazy["first"] = first
        return self._lazy["first"]

    @property
    def keys(self) -> np.ndarray:
        return self._parent_of_each() * self.V + self.first_words()

    @property
    def last(self) -> np.ndarray:
        if "last" not in self._lazy:
            suffix = self._parent_of_each()
            self._lazy["last"] = suffix if self.lower is None else self.lower.last[suffix]
        return self._lazy["last"]

    @property
    def prefix(self) -> np.ndarray:
        """id(g1..g_{k-1}) at order k-1: for k = 2 the word g1; above, the extension by
        g1 of the prefix of g2..gk (every stored n-gram's prefix is stored)."""
        if "prefix" not in self._lazy:
            first = self.first_words()
            if self.lower is None:
                self._lazy["prefix"] = first
            else:
                inner = self.lower.prefix[self._parent_of_each()]
                found = self.lower.find(inner * self.V + first)
                if np.any(found < 0):
                    raise NnlmError(f"order {self.k}: an n-gram's context is not stored; the "
                                    "model file is corrupt")
                self._lazy["prefix"] = found
        return self._lazy["prefix"]


# the C loops, or None (no compiler, or NNLM_NO_C=1): the numpy search above does the work
_native = extension("nnlm.ngram.store._trie")


def compiled_loops():
    """The compiled lookup and scoring loops (``_trie.c``), or None (no compiler, or
    NNLM_NO_C=1): read at each call, so that a switch set later is seen."""
    return _native

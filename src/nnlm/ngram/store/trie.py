"""nnlm's compact n-gram file: a memory-mapped trie of reversed n-grams, as KenLM's.

A back-off model's n-grams of order k >= 2 are sorted by ``key = id(g2..gk) * |V| + g1``
(:mod:`nnlm.ngram.backoff`): each stored (k-1)-gram's extensions one word further left
are one contiguous run, sorted by that word. That is KenLM's trie over reversed n-grams
(Heafield 2011, section 3.2), and it needs no keys at all: per order, only

* ``word_k``: g1 of every entry, bit-packed in ceil(log2 |V|) bits;
* ``child_{k-1}``: where each (k-1)-gram's run starts in order k (one more entry than
  the order has; the run ends where the next starts), bit-packed too;
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
running Brown text, 60% of all the search steps), so order 2 also has ``slots``, an
open-addressing table (load 0.6, linear probing) of entry numbers + 1, bit-packed: one
or two probes instead, for about 4 bytes a bigram. Entry numbers (ids) are the same as
the in-memory model's, so every scorer in :class:`BackoffNgram` works unchanged.

The file: ``NNLMTRIE``, the uint32 0x01020304 in the writer's byte order (a file from
a big-endian machine is named as such, not misread), a uint32 format version, a uint64
length and a JSON header (sizes, bit widths, the binding to config.json, and each
section's offset and length), then the sections, each 64-byte aligned. Every section
is checked against the file's size before anything is mapped, so a truncated file is
one line, never a read past the end; corrupt pointers are clamped to their order, so
that no lookup reads outside the mapping either.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from pathlib import Path

import numpy as np

from ...errors import NnlmError
from ...jsonfiles import Int, Optional, check_fields
from ..backoff import NgramLevel
from . import bits as bitpack
from .values import (  # noqa: F401 - re-exported: the trie's numbers
    MAX_CODE_BITS,
    Quantized,
    code_values,
    encode,
    extension_of,
    make_centers,
    quantize_backoffs,
    signed_backoffs,
)

MAGIC = b"NNLMTRIE"
BYTE_ORDER_MARK = 0x01020304
FORMAT_VERSION = 1
FILE_NAME = "ngrams.trie"
ALIGN = 64
_PREFIX = struct.Struct("<8sIIQ")  # magic, byte-order mark, version, JSON length

HEADER_FIELDS = {"order": Int(min=1, max=64), "vocab_size": Int(min=3), "counts": list,
                 "binding": str, "sections": dict, "word_bits": Int(min=1, max=64),
                 "child_bits": list, "quantize": Optional(list), "unk_extends": bool,
                 "slots": dict, "values": dict, "model": Optional(dict)}


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

    def __init__(self, k: int, vocab_size: int, words: np.ndarray, word_bits: int,
                 parents: np.ndarray, parent_bits: int, n_prefixes: int, n: int,
                 logp, log_bow, lower: TrieLevel | None, slots=None, slot_bits: int = 0,
                 n_slots: int = 0):
        self.k, self.V, self.n = k, vocab_size, n
        self.slots, self.slot_bits, self.n_slots = slots, slot_bits, n_slots
        self.words, self.word_bits = words, word_bits
        self.parents, self.parent_bits = parents, parent_bits  # child pointers of order k-1
        self.n_prefixes = n_prefixes
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

    def runs(self, parents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """[start, end) of each parent's run of children in this order, clamped to it."""
        start = bitpack.unpack(self.parents, self.parent_bits, parents)
        end = bitpack.unpack(self.parents, self.parent_bits, parents + 1)
        start = np.minimum(start, self.n)
        return start, np.clip(end, start, self.n)

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
            _native.find(self.words, self.word_bits, self.parents, self.parent_bits,
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
        """Where each (k-1)-gram's run starts, unpacked (8 bytes a (k-1)-gram), checked."""
        if "starts" not in self._lazy:
            starts = bitpack.unpack_all(self.parents, self.parent_bits, self.n_prefixes + 1)
            if np.any(np.diff(starts) < 0) or starts[-1] != self.n or starts[0] != 0:
                raise NnlmError(f"order {self.k}: its run pointers are not increasing; the "
                                "model file is corrupt")
            self._lazy["starts"] = starts
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


try:  # the C loops; without a compiler, the numpy search above does the work
    from . import _trie as _native  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the build
    _native = None


# -- writing ---------------------------------------------------------------------------
def _child_pointers(model, k: int) -> np.ndarray:
    """Where each order-k entry's run of extensions starts in order k+1 (n_k + 1 values)."""
    n_k = len(model.vocab) if k == 1 else len(model.levels[k - 2])
    upper = model.levels[k - 1]
    suffix = upper.keys // len(model.vocab)
    return np.searchsorted(suffix, np.arange(n_k + 1)).astype(np.int64)


# orders with a table beside their runs (see the module docstring): float32 files buy
# speed with it (about 4 bytes an n-gram of those orders); quantized ones want size
HASHED_ORDERS = (2, 3)
HASHED_ORDERS_QUANTIZED = ()
def _sections(model, quantize, meta: dict, standalone: bool = False):
    """Yield (name, array) for every section of ``model``'s file, one at a time, filling
    ``meta`` (bit widths, tables, value codes) as they are made; ``standalone`` adds the
    vocabulary (UTF-8 words end to end, and where each starts)."""
    V = len(model.vocab)
    n = model.order
    if standalone:
        encoded = [w.encode("utf-8") for w in model.vocab.words]
        offsets = np.zeros(V + 1, np.int64)
        np.cumsum([len(w) for w in encoded], out=offsets[1:])
        yield "vocab_words", np.frombuffer(b"".join(encoded), np.uint8)
        yield "vocab_offsets", offsets
    yield "unigram_logp", model.unigram_logp.astype(np.float32)
    yield "unigram_log_bow", signed_backoffs(model.unigram_log_bow, model.extends(1))
    for k in range(1, n + 1):
        if k < n:
            pointers = _child_pointers(model, k)
            meta["child_bits"].append(bitpack.width(int(pointers[-1])))
            yield f"child_{k}", bitpack.pack(pointers, meta["child_bits"][-1])
            del pointers
        if k == 1:
            continue
        level = model.levels[k - 2]
        yield f"word_{k}", bitpack.pack(level.keys % V, meta["word_bits"])
        if k in (HASHED_ORDERS if quantize is None else HASHED_ORDERS_QUANTIZED):
            table, n_slots = build_slots(level.keys)
            meta["slots"][str(k)] = [n_slots, bitpack.width(len(level))]
            yield f"slots_{k}", bitpack.pack(table, meta["slots"][str(k)][1])
            del table
        for name in ["logp"] + (["log_bow"] if k < n else []):
            values = np.asarray(getattr(level, name))
            if name == "log_bow":
                values = signed_backoffs(values, model.extends(k))
            coded = code_values(values, name, quantize)
            meta["values"][f"{name}_{k}"] = None if coded is None else [coded[2], len(coded[1])]
            if coded is None:
                yield f"{name}_{k}", values.astype(np.float32)
            else:
                yield f"{name}_codes_{k}", bitpack.pack(coded[0], coded[2])
                yield f"{name}_centers_{k}", coded[1]


def header_room(order: int) -> int:
    """Bytes kept for the header before the first section (it is written last, once every
    section's place is known): generous for its ~6 sections an order."""
    return -(-(4096 + 640 * order) // ALIGN) * ALIGN


STANDALONE = "standalone"  # the binding of a one-file model (no config.json to bind to)


def write_trie(model, path: str | os.PathLike, binding: str,
               quantize: tuple[int, int] | None = None, standalone: bool = False) -> int:
    """Write the back-off ``model`` as a trie file at ``path`` (inside a directory that
    :func:`nnlm.fileio.atomic_path` stages). Returns the file's size in bytes.
    ``standalone``: a model in one file, its vocabulary and settings inside (what
    pyctcdecode and other KenLM clients want: they copy one file with the decoder).

    Streams: each section goes to the file as soon as it is made, so writing adds one
    section's arrays to the model's memory, not the whole file; the header, whose
    section table is known only at the end, goes into room kept for it at the start."""
    n = model.order
    meta = {"word_bits": bitpack.width(len(model.vocab) - 1), "child_bits": [], "slots": {},
            "values": {}}
    start = header_room(n)
    table = {}
    offset = 0
    if standalone:
        binding = STANDALONE
        meta["model"] = {"kind": model.kind, "config": model.config(),
                         "vocab_fingerprint": model.vocab.fingerprint}
    with open(path, "wb") as f:
        for name, a in _sections(model, quantize, meta, standalone):
            f.seek(start + offset)
            f.write(np.ascontiguousarray(a).data)
            table[name] = [offset, a.nbytes, a.dtype.str, len(a)]
            offset += -(-a.nbytes // ALIGN) * ALIGN
        f.truncate(start + offset)
        header = {"order": n, "vocab_size": len(model.vocab), "counts": model.num_ngrams(),
                  "binding": binding, **meta, "quantize": list(quantize) if quantize else None,
                  "unk_extends": bool(getattr(model, "unk_extends", False)), "sections": table}
        text = json.dumps(header).encode()
        text += b" " * (start - _PREFIX.size - len(text))  # JSON allows trailing blanks
        if _PREFIX.size + len(text) != start:
            raise NnlmError(f"{path}: the header outgrew its room ({len(text)} bytes)")
        f.seek(0)
        f.write(_PREFIX.pack(MAGIC, BYTE_ORDER_MARK, FORMAT_VERSION, len(text)) + text)
    return start + offset


# -- mapping ---------------------------------------------------------------------------
def read_trie_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a trie file and where its sections start, checked."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(_PREFIX.size)
            if len(prefix) < _PREFIX.size or prefix[:8] != MAGIC:
                raise NnlmError(f"{path}: not an nnlm trie file (no NNLMTRIE at the start)")
            magic, mark, version, length = _PREFIX.unpack(prefix)
            if mark != BYTE_ORDER_MARK:
                raise NnlmError(f"{path}: written on a machine of the other byte order; "
                                "convert it there to ARPA (nnlm ngram convert)")
            if version > FORMAT_VERSION:
                raise NnlmError(f"{path}: trie format version {version} is newer than this "
                                f"nnlm reads ({FORMAT_VERSION}); upgrade nnlm")
            size = os.fstat(f.fileno()).st_size
            if _PREFIX.size + length > size:
                raise NnlmError(f"{path}: truncated inside its header ({size} bytes)")
            text = f.read(length)
    except OSError as e:
        raise NnlmError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NnlmError(f"{path}: its header is damaged ({e})") from None
    if not isinstance(header, dict):
        raise NnlmError(f"{path}: its header is damaged (not a JSON object)")
    check_fields(header, HEADER_FIELDS, str(path))
    start = -(-(_PREFIX.size + length) // ALIGN) * ALIGN
    return header, start


def _expected_sections(header: dict) -> dict[str, tuple[str, int]]:
    """name -> (dtype, length) of every section the header's sizes call for."""
    n, V, counts = header["order"], header["vocab_size"], header["counts"]
    out = {"unigram_logp": ("<f4", V), "unigram_log_bow": ("<f4", V)}
    if "model" in header:
        words = header["sections"].get("vocab_words")
        out["vocab_words"] = ("|u1", words[3] if isinstance(words, list) and len(words) == 4
                              and isinstance(words[3], int) else -1)
        out["vocab_offsets"] = ("<i8", V + 1)
    for k in range(1, n + 1):
        if k < n:
            out[f"child_{k}"] = ("<u8", bitpack.packed_words(counts[k - 1] + 1,
                                                             header["child_bits"][k - 1]))
        if k == 1:
            continue
        out[f"word_{k}"] = ("<u8", bitpack.packed_words(counts[k - 1], header["word_bits"]))
        if str(k) in header["slots"]:
            out[f"slots_{k}"] = ("<u8", bitpack.packed_words(*header["slots"][str(k)]))
        for name in ["logp"] + (["log_bow"] if k < n else []):
            coding = header["values"].get(f"{name}_{k}")
            if coding is None:
                out[f"{name}_{k}"] = ("<f4", counts[k - 1])
            else:
                out[f"{name}_codes_{k}"] = ("<u8", bitpack.packed_words(counts[k - 1],
                                                                         coding[0]))
                out[f"{name}_centers_{k}"] = ("<f4", coding[1])
    return out


def map_trie(path: str | os.PathLike, binding: str | None, vocab_size: int) -> dict:
    """Map a trie file; returns the header plus ``unigram_logp``, ``unigram_log_bow``
    (float64 copies: small, and summed in) and ``levels`` (:class:`TrieLevel`).
    Sizes, bit widths, the binding and every section's bounds are checked first."""
    path = Path(path)
    header, start = read_trie_header(path)
    n, counts = header["order"], header["counts"]
    if len(counts) != n or not all(isinstance(c, int) and c >= 0 for c in counts):
        raise NnlmError(f"{path}: its header's n-gram counts do not match its order {n}")
    if header["vocab_size"] != vocab_size or counts[0] != vocab_size:
        raise NnlmError(f"{path}: made for a vocabulary of {header['vocab_size']} words, not "
                        f"this model's {vocab_size}; the model directory was mixed")
    if binding is not None and header["binding"] != binding:
        raise NnlmError(f"{path}: belongs to another model (fingerprint {header['binding']}, "
                        f"config.json wants {binding}); retrain or restore the directory")
    q = header["quantize"]
    if len(header["child_bits"]) != n - 1 or not all(
            isinstance(b, int) and 1 <= b <= 64 for b in header["child_bits"]) or (
            q is not None and (len(q) != 2 or not all(isinstance(b, int) and 1 <= b <= 25
                                                     for b in q))):
        raise NnlmError(f"{path}: its header's bit widths are damaged")
    slots = header["slots"]
    for key, entry in slots.items():
        if not (key.isdigit() and 2 <= int(key) <= n and isinstance(entry, list)
                and len(entry) == 2 and all(isinstance(x, int) for x in entry)
                and counts[int(key) - 1] < entry[0] < 1 << 40 and 1 <= entry[1] <= 64):
            raise NnlmError(f"{path}: its header's table sizes are damaged")
    for key, coding in header["values"].items():
        if coding is not None and not (
                isinstance(coding, list) and len(coding) == 2
                and all(isinstance(x, int) for x in coding)
                and 1 <= coding[0] <= MAX_CODE_BITS and 1 <= coding[1] <= 1 << coding[0]):
            raise NnlmError(f"{path}: its header's value codes ({key}) are damaged")
    size = path.stat().st_size
    expected = _expected_sections(header)
    table = header["sections"]
    for name, (dtype, length) in expected.items():
        entry = table.get(name)
        if not (isinstance(entry, list) and len(entry) == 4 and entry[2] == dtype
                and entry[3] == length and isinstance(entry[0], int) and entry[0] >= 0
                and entry[1] == length * np.dtype(dtype).itemsize):
            raise NnlmError(f"{path}: section {name} is missing or has the wrong shape; the "
                            "file is damaged")
        if start + entry[0] + entry[1] > size:
            raise NnlmError(f"{path}: truncated ({size} bytes; section {name} ends at byte "
                            f"{start + entry[0] + entry[1]}); copy or write it again")
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def section(name):
        dtype, length = expected[name]
        return np.frombuffer(mapping, dtype, length, start + table[name][0])

    def values(name, k):
        coding = header["values"].get(f"{name}_{k}")
        if coding is None:
            return section(f"{name}_{k}")
        return Quantized(section(f"{name}_codes_{k}"), coding[0],
                         section(f"{name}_centers_{k}"), counts[k - 1])

    unigram_logp = section("unigram_logp").astype(np.float64)
    unigram_log_bow = section("unigram_log_bow").astype(np.float64)
    # what is small is checked whole at opening: the unigrams and every code table (the
    # orders' float32 arrays are not read; a bad number there shows in the scores,
    # which nnlm.lm.check_logprobs refuses)
    small = {"unigram_logp": unigram_logp, "unigram_log_bow": unigram_log_bow}
    small.update({key: section(f"{key.rsplit('_', 1)[0]}_centers_{key.rsplit('_', 1)[1]}")
                  for key, coding in header["values"].items() if coding is not None})
    for key, a in small.items():
        if np.isnan(a).any() or np.isposinf(a).any():
            raise NnlmError(f"{path}: {key} holds NaN or +inf; the file is damaged")
    from ..backoff import BackoffNgram

    problem = BackoffNgram.saved_array_problem(small)
    if problem:
        raise NnlmError(f"{path}: {problem}; the model is corrupt")
    levels: list[TrieLevel] = []
    for k in range(2, n + 1):
        levels.append(TrieLevel(
            k, vocab_size, section(f"word_{k}"), header["word_bits"],
            section(f"child_{k - 1}"), header["child_bits"][k - 2], counts[k - 2],
            counts[k - 1], values("logp", k), values("log_bow", k) if k < n else None,
            levels[-1] if levels else None,
            *((section(f"slots_{k}"), slots[str(k)][1], slots[str(k)][0])
              if str(k) in slots else ())))
    if "model" in header:
        header["words"] = _embedded_words(path, section("vocab_words"),
                                          section("vocab_offsets"), vocab_size)
    return {**header, "unigram_logp": unigram_logp, "unigram_log_bow": unigram_log_bow,
            "levels": levels,
            "file_bytes": size}


def _embedded_words(path: Path, blob: np.ndarray, offsets: np.ndarray, V: int) -> list[str]:
    if offsets[0] != 0 or offsets[-1] != len(blob) or np.any(np.diff(offsets) < 0):
        raise NnlmError(f"{path}: its vocabulary section is damaged")
    data = blob.tobytes()
    try:
        return [data[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(),
                                                          offsets[1:].tolist())]
    except UnicodeDecodeError:
        raise NnlmError(f"{path}: a word of its vocabulary is not UTF-8") from None


def load_trie_file(path: str | os.PathLike):
    """A one-file model (``write_trie(..., standalone=True)``; ``nnlm ngram convert IN
    OUT.nnlm``): its kind, settings and vocabulary come from its header."""
    from ...jsonfiles import Fields
    from ...models import _model_class
    from ...vocab import Vocabulary

    path = Path(path)
    header, _ = read_trie_header(path)
    if "model" not in header:
        raise NnlmError(f"{path}: the trie file of a model directory, not a one-file model; "
                        "load the directory that holds it")
    check_fields(header, {"model": Fields({"kind": str, "config": dict,
                                           "vocab_fingerprint": str})}, str(path))
    cls = _model_class(header["model"]["kind"])
    from ..backoff import BackoffNgram

    if not issubclass(cls, BackoffNgram):
        raise NnlmError(f"{path}: holds a {header['model']['kind']} model; one-file models are "
                        "back-off models")
    mapped_words = map_trie(path, STANDALONE, header["vocab_size"])["words"]
    try:
        vocab = Vocabulary(mapped_words)
    except ValueError as e:
        raise NnlmError(f"{path}: its vocabulary is damaged ({e})") from None
    if vocab.fingerprint != header["model"]["vocab_fingerprint"]:
        raise NnlmError(f"{path}: its vocabulary does not match its fingerprint; the file is "
                        "damaged")
    return cls.from_trie(path, STANDALONE, vocab, header["model"]["config"])


def is_trie_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that starts as nnlm's trie files do."""
    from ...fileio import read_head

    p = Path(path)
    return p.is_file() and read_head(p, len(MAGIC)) == MAGIC

"""KenLM's probing binary files, written: any back-off model as ``build_binary probing``
would build it from the model's ARPA file (read: :mod:`.kenlm_binary`).

cc_net's reference models, and so DataTrove's, cc_net's and Dolma's perplexity stages,
come as ``LANG.arpa.bin``: KenLM's probing format, which the kenlm module maps in a
moment where an ARPA file takes a parse. Written from the format's facts in KenLM's
source (lm/binary_format.cc, lm/search_hashed.cc, lm/vocab.cc, lm/read_arpa.hh,
lm/blank.hh, util/probing_hash_table.hh), not from its code. After the header
(:mod:`.kenlm_header`):

* the vocabulary: a uint32 version (0) and the word count, then an open-addressing
  table of (uint64 MurmurHash64A of the word, uint32 id) entries, packed, holding every
  word but ``<unk>`` (always id 0); the other ids follow the ARPA file's unigram order;
* the unigrams, (float32 log10 p, float32 log10 b) by id, and a spare entry of zeros
  after them (a file without ``<unk>`` keeps its count, and ``<unk>`` takes the spare);
* per order 2..n-1, a table of (uint64 key, float32 p, float32 b), and for order n
  of (uint64 key, float32 p). A key hashes the n-gram's ids newest word first
  (CombineWordHash); its bucket is key mod the table's size, else the next empty one
  (key 0), each order's n-grams inserted in the ARPA file's order;
* the words, NUL-terminated, ``<unk>`` first, in id order.

Every table has max(entries + 1, multiplier * entries) buckets (the product in float32;
1.5 as build_binary's ``-p`` default). Two flags ride in the numbers' sign bits:

* a probability's sign bit is clear where some longer n-gram ends with this one (it
  "extends left"; the value read is always the negative one). Above the unigrams every
  probability starts negative; a unigram keeps the sign it was read with;
* a back-off of -0.0 says the n-gram is context of no longer n-gram and its weight is 1,
  so a state can drop it (KenLM's HasExtension); +0.0 a weight of 1 that must be kept.

log10 values are the model's rounded to float32, ``-inf`` written as -99 as in the ARPA
file. The file is ``build_binary``'s from the ARPA file nnlm writes for the model (the
same words, ids and insertion order) byte for byte, where the numbers are those of the
ARPA file: a model read from it, or from any ARPA file nnlm wrote (tests/
test_kenlm_write.py holds one to the other). From another tool's ARPA file the ids and
buckets may differ from ``build_binary``'s (nnlm's vocabulary puts ``<s>`` and ``</s>``
first, its orders are sorted), never the scores.
"""

from __future__ import annotations

import math
import os
import struct
from pathlib import Path

import numpy as np

from ...base.compiled import extension
from ...base.errors import NnlmError
from ...base.sysmem import check_allocation
from ...text.fileio import atomic_path
from ...text.vocab import UNK, UNK_ID
from ..backoff import BackoffNgram
from .arpa_write import ARPA_ZERO, LOG10_E
from .kenlm_binary import combine
from .kenlm_header import FIXED, PROBING_VERSION, SANITY, float32, probing_buckets

_C = extension("nnlm.ngram.formats._kenlm_build")

MULTIPLIER = 1.5  # build_binary's -p default
VOCAB_ENTRY = np.dtype([("key", "<u8"), ("id", "<u4")])  # packed: 12 bytes
UNIGRAM = np.dtype([("p", "<f4"), ("b", "<f4")])
MIDDLE = np.dtype([("key", "<u8"), ("p", "<f4"), ("b", "<f4")])
LONGEST = np.dtype([("key", "<u8"), ("p", "<f4")])  # packed: 12 bytes
SIGN = np.uint32(0x80000000)
_M64 = (1 << 64) - 1
COLLISION = ("two n-grams (or words) of the model hash alike in KenLM's probing format, "
             "which cannot hold it; write nnlm's format or KenLM's trie instead")


def murmur64a(data: bytes) -> int:
    """KenLM's word hash (MurmurHash64A, seed 0), in Python: the path without the compiled
    part, and the C one's oracle."""
    m, r = 0xC6A4A7935BD1E995, 47
    h = (len(data) * m) & _M64
    blocks = len(data) // 8
    for b in range(blocks):
        k = int.from_bytes(data[8 * b:8 * b + 8], "little")
        k = (k * m) & _M64
        k ^= k >> r
        k = (k * m) & _M64
        h = ((h ^ k) * m) & _M64
    tail = data[8 * blocks:]
    if tail:
        h = ((h ^ int.from_bytes(tail, "little")) * m) & _M64
    h ^= h >> r
    h = (h * m) & _M64
    return h ^ (h >> r)


def word_hashes(words: list[bytes]) -> np.ndarray:
    """MurmurHash64A of each word (uint64)."""
    if _C is None:
        return np.array([murmur64a(w) for w in words], np.uint64)
    offsets = np.zeros(len(words) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, words), np.int64, len(words)), out=offsets[1:])
    out = np.empty(len(words), np.uint64)
    _C.murmur64a(b"".join(words), offsets, out)
    return out


def place(keys: np.ndarray, buckets: int) -> np.ndarray:
    """The bucket of each key, inserted in order by linear probing into ``buckets``
    buckets (KenLM's ProbingHashTable with IdentityHash); a repeated key or a key 0 (the
    empty mark) is an NnlmError."""
    keys = np.ascontiguousarray(keys, np.uint64)
    slots = np.empty(len(keys), np.int64)
    if _C is not None:
        table = np.zeros(buckets, np.uint64)
        try:
            _C.place(keys, table, slots)
        except ValueError:
            raise NnlmError(COLLISION) from None
        return slots
    occupied: set[int] = set()
    seen: set[int] = set()
    for i, key in enumerate(keys.tolist()):
        if key == 0 or key in seen:
            raise NnlmError(COLLISION)
        seen.add(key)
        b = key % buckets
        while b in occupied:
            b = b + 1 if b + 1 < buckets else 0
        occupied.add(b)
        slots[i] = b
    return slots


def _log10(values: np.ndarray) -> np.ndarray:
    """Natural-log values as the ARPA file holds them, in float32: log10, -inf as -99,
    the positive ones KenLM would clamp to 0 clamped."""
    v = np.asarray(values, np.float64)
    out = np.where(np.isneginf(v), ARPA_ZERO, v * LOG10_E).astype(np.float32)
    out[out > 0] = 0.0
    return out


def _signed(values: np.ndarray, negative: np.ndarray) -> np.ndarray:
    """float32 ``values`` with their sign bit set where ``negative``, cleared elsewhere."""
    bits = np.abs(values).view(np.uint32)
    return np.where(negative, bits | SIGN, bits).view(np.float32)


def _backoffs(model: BackoffNgram, k: int, log_bow: np.ndarray) -> np.ndarray:
    """float32 log10 back-offs of order k, a weight of 1 signed by whether it extends."""
    b = _log10(log_bow)
    zero = b == 0
    return np.where(zero, np.where(model.extends(k), np.float32(0.0), np.float32(-0.0)), b)


def _check(model: BackoffNgram, path: Path, multiplier: float) -> None:
    if not isinstance(model, BackoffNgram):
        raise NnlmError(f"{path}: not written: KenLM's format holds back-off n-gram models, "
                        f"not a {getattr(model, 'kind', type(model).__name__)} model")
    if model.order < 2:
        raise NnlmError(f"{path}: not written: KenLM's binary format needs order 2 or more "
                        "(KenLM assumes at least a bigram model)")
    if not getattr(model, "normalized", True):
        raise NnlmError(f"{path}: not written: a {model.kind} model's penalty for contexts "
                        "never seen has no KenLM form; keep its nnlm directory")
    if not (isinstance(multiplier, (int, float)) and math.isfinite(multiplier)
            and 1.0 < multiplier <= 100.0):
        raise NnlmError(f"{path}: probing multiplier {multiplier!r}: give a number above 1 "
                        "and at most 100 (build_binary's -p; 1.5 by default)")
    if "<UNK>" in model.vocab.index:
        raise NnlmError(f"{path}: not written: the vocabulary holds <UNK>, which KenLM reads "
                        "as <unk>")


def write_kenlm_probing(model: BackoffNgram, path: str | os.PathLike,
                        multiplier: float = MULTIPLIER) -> int:
    """Write ``model`` as a KenLM probing file at ``path`` (atomically; module docstring);
    its size in bytes. The kenlm module, and so DataTrove, cc_net and pyctcdecode,
    load it as they load ``build_binary``'s."""
    path = Path(path)
    _check(model, path, multiplier)
    counts = [int(c) for c in model.num_ngrams()]
    words = [w.encode("utf-8") for w in model.vocab.words]
    if model.vocab.words[UNK_ID] != UNK:
        raise NnlmError(f"{path}: not written: the vocabulary's word 0 is not {UNK}")
    # a model of an ARPA file without <unk> (unk_extends: read_arpa's mark of it) keeps
    # KenLM's closed-vocabulary form: the file's count, <unk> in the spare unigram slot
    closed = bool(getattr(model, "unk_extends", False))
    counts[0] -= closed
    header, vocab_buckets, tables, offsets = probing_plan(counts, multiplier)
    # the largest order's buckets and keys, its slots and values, twice over
    check_allocation(8 * 4 * max([vocab_buckets, *tables]) + 40 * max(counts),
                     f"{path}: KenLM's probing tables", "write nnlm's format instead")
    blob = b"\0".join(words) + b"\0"
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            f.truncate(int(offsets[-1]) + len(blob))
        image = np.memmap(tmp, np.uint8, "r+")
        image[:len(header)] = np.frombuffer(header, np.uint8)
        _write_vocab(image[offsets[1]:offsets[2]], words, vocab_buckets)
        _write_orders(model, image, offsets, tables)
        image[offsets[-1]:] = np.frombuffer(blob, np.uint8)
        image.flush()
        del image
    return int(offsets[-1]) + len(blob)


def probing_plan(counts: list[int], multiplier: float) -> tuple[bytes, int, list[int],
                                                                list[int]]:
    """A probing file's layout for ``counts`` (the header's: the ARPA file's unigram
    count): (the header's bytes, the vocabulary's buckets, each order's buckets from 2
    on, the offsets of the header, vocabulary, unigrams, each order and the words)."""
    order, mult = len(counts), float32(multiplier)
    vocab_buckets = probing_buckets(counts[0], mult)
    tables = [probing_buckets(n, mult) for n in counts[1:]]
    header = SANITY + FIXED.pack(order, mult, 0, 1, PROBING_VERSION) \
        + struct.pack(f"<{order}Q", *counts)
    header += b"\0" * (-len(header) % 8)
    sizes = [len(header), 8 + vocab_buckets * VOCAB_ENTRY.itemsize,
             (counts[0] + 1) * UNIGRAM.itemsize]
    sizes += [n * (LONGEST if k == order else MIDDLE).itemsize
              for k, n in enumerate(tables, start=2)]
    return header, vocab_buckets, tables, [int(x) for x in np.cumsum([0, *sizes])]


def _write_vocab(region: np.ndarray, words: list[bytes], buckets: int) -> None:
    region[:8] = np.frombuffer(struct.pack("<II", 0, len(words)), np.uint8)
    hashes = word_hashes(words[1:])  # <unk> is id 0 and not in the table
    table = region[8:].view(VOCAB_ENTRY)
    slots = place(hashes, buckets)
    table["key"][slots] = hashes
    table["id"][slots] = np.arange(1, len(words), dtype=np.uint32)


def _write_orders(model: BackoffNgram, image: np.ndarray, offsets, tables) -> None:
    """The unigrams and each order's table; the flags of order k are known once order
    k + 1 is read, so each order is written when the next one has been seen."""
    order, V = model.order, len(model.vocab)
    uni = image[offsets[2]:offsets[3]].view(UNIGRAM)
    p = _log10(model.unigram_logp)  # <s>: -99, as the ARPA file has it
    uni["b"][:V] = _backoffs(model, 1, model.unigram_log_bow)
    kid = np.arange(V, dtype=np.uint64)  # KenLM's ids are nnlm's: <unk> 0, then in order
    below_keys, below_slots, below = None, None, None
    ends_here = np.zeros(V, bool)  # unigrams some bigram ends with
    for k, (level, buckets) in enumerate(zip(model.levels, tables), start=2):
        first, suffix = level.first_and_suffix(np.arange(len(level)), V)
        first, suffix = np.asarray(first, np.int64), np.asarray(suffix, np.int64)
        if k == 2:
            keys = combine(kid[suffix], first)
            ends_here[suffix] = True
        else:
            keys = combine(below_keys[suffix], first)
            extended = np.zeros(len(below_keys), bool)
            extended[suffix] = True
            _finish(below, below_slots, extended)
        region = image[offsets[k + 1]:offsets[k + 2]]
        table = region.view(LONGEST if k == order else MIDDLE)
        slots = place(keys, buckets)
        table["key"][slots] = keys
        if k < order:
            table["b"][slots] = _backoffs(model, k, level.log_bow)
        below, below_keys, below_slots = (table, _log10(level.logp)), keys, slots
        del first, suffix
    uni["p"][:V] = _signed(p, (p.view(np.uint32) & SIGN).astype(bool) & ~ends_here)
    _finish(below, below_slots, np.zeros(len(below_keys), bool))


def _finish(below, slots: np.ndarray, extended: np.ndarray) -> None:
    """An order's probabilities, negative but where a longer n-gram ends with it."""
    table, p = below
    table["p"][slots] = _signed(p, ~extended)

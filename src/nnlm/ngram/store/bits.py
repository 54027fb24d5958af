"""Fixed-width bit packing: an array of n unsigned integers below 2^b in n*b bits.

KenLM's trie packs word ids and pointers the same way (``util::BitPacked``): each field
takes exactly the bits its largest value needs, so a 50k-word vocabulary costs 16 bits
an n-gram instead of 64. The packed form is a little-endian uint64 array with one
spare word at the end, so that reading any field touches two aligned words and never
reads past the array. Both directions are vectorized with numpy.
"""

from __future__ import annotations

import numpy as np

from ...base.compiled import extension
from .trie_layout import packed_words, width  # noqa: F401 - part of this module's API

_ONE = np.uint64(1)


def pack(values: np.ndarray, bits: int) -> np.ndarray:
    """``values`` (each in [0, 2^bits)) as a packed uint64 array."""
    values = np.ascontiguousarray(values).astype(np.uint64, copy=False)
    n = len(values)
    out = np.zeros(packed_words(n, bits), np.uint64)
    if n == 0:
        return out
    native = _native()
    if native is not None:
        native.pack(values, bits, out)
        return out
    if bits < 64 and int(values.max()) >> bits:
        raise ValueError(f"a value needs more than {bits} bits")
    chunk = 1 << 22  # bounds the temporaries
    for lo in range(0, n, chunk):
        v = values[lo:lo + chunk]
        pos = np.arange(lo, lo + len(v), dtype=np.uint64) * np.uint64(bits)
        word = (pos >> np.uint64(6)).astype(np.int64)
        off = pos & np.uint64(63)
        # the fields never overlap, so OR is a sum; words are non-decreasing: reduceat
        _add_sorted(out, word, v << off)
        spill = np.flatnonzero(off + np.uint64(bits) > np.uint64(64))
        if len(spill):
            _add_sorted(out, word[spill] + 1, v[spill] >> (np.uint64(64) - off[spill]))
    return out


class Streamed:
    """A section written as its pieces come (``chunks``: arrays of ``dtype``)."""

    def __init__(self, dtype, chunks):
        self.dtype, self.chunks = np.dtype(dtype), chunks


def pack_stream(chunks, bits: int):
    """Yield, piece by piece, what :func:`pack` makes of the ``chunks`` (arrays of values)
    laid end to end: whole groups of 64 values fill exactly ``bits`` words, so each
    group's words are final; the rest waits for the next chunk, and the last piece ends
    with the spare word. A writer streams a section of any length this way."""
    carry = np.zeros(0, np.uint64)
    for chunk in chunks:
        values = np.asarray(chunk)
        # ids come as int64: the same bits (pack refuses a negative one as too wide)
        values = values.view(np.uint64) if values.dtype == np.int64 else \
            values.astype(np.uint64, copy=False)
        if len(carry):
            values = np.concatenate([carry, values])
        whole = len(values) // 64 * 64
        if whole:
            yield pack(values[:whole], bits)[:whole * bits // 64]
        carry = values[whole:]
    yield pack(carry, bits)


def _native():
    """The compiled loops (nnlm.ngram.store._trie), or None (:mod:`nnlm.base.compiled`)."""
    return extension("nnlm.ngram.store._trie")


def _add_sorted(out: np.ndarray, index: np.ndarray, parts: np.ndarray) -> None:
    """out[index] |= parts, for non-decreasing ``index`` (one reduceat, no np.add.at)."""
    starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
    out[index[starts]] |= np.bitwise_or.reduceat(parts, starts)


def unpack(data: np.ndarray, bits: int, index) -> np.ndarray:
    """The values at ``index`` (int array, or a scalar) of a packed array, as int64."""
    pos = np.asarray(index, np.int64).astype(np.uint64) * np.uint64(bits)
    word = (pos >> np.uint64(6)).astype(np.int64)
    off = pos & np.uint64(63)
    low = data[word] >> off
    # the next word's bits, shifted in two steps so that no shift is by 64
    high = (data[word + 1] << _ONE) << (np.uint64(63) - off)
    mask = np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
    return ((low | high) & mask).astype(np.int64)


def unpack_all(data: np.ndarray, bits: int, n: int, chunk: int = 1 << 22) -> np.ndarray:
    """All ``n`` values of a packed array, as int64 (in chunks: bounded temporaries)."""
    out = np.empty(n, np.int64)
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        out[lo:hi] = unpack(data, bits, np.arange(lo, hi))
    return out

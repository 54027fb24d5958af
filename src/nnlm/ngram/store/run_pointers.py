"""The run pointers of the trie: where each (k-1)-gram's run of children starts in order k.

Order k-1's pointers are N = n_{k-1} + 1 non-decreasing numbers from 0 to U = n_k. A
lookup needs two neighbours, ptr[i] and ptr[i + 1], on the path of every query, so a
layout must answer in one memory access and a few instructions. Two layouts; for each
order the writer takes the linear one where it is smaller and its exceptions are light
(:func:`choose_layout`):

* :class:`Packed`: ceil(log2(U + 1)) bits a pointer (format 1's only layout).
* :class:`Linear`: 64 pointers to a 64-byte cache line, each the block's straight line
  plus a small correction (frame of reference on a linear prediction, as learned
  indexes do). Word 0 holds base (40 bits), slope (16 bits, in 1/256) and the
  corrections' width c (3 bits); words 1-7 the 64 corrections of c <= 7 bits, so that

      ptr[64 j + t] = base + (t * slope >> 8) + correction[t]

  One line read, a multiply, a shift: no search. A block whose corrections need more
  than 7 bits (a (k-1)-gram with many extensions among sparse ones) is an exception:
  word 0's top bit is set, the rest is its number among the exceptions, whose 64
  pointers are bit-packed whole in ``exceptions`` (one more load).

8-10 bits a pointer instead of 19-23: the pointers were a sixth of the file at 10M
tokens. Two denser codes were tried first and are slower to read: Elias-Fano (Elias
1974, Fano 1971; Pibiri & Venturini 2017 code n-gram tries with it: 3.2 bits a pointer,
but a sample and a bit vector are two dependent loads, and bulk scoring fell to
0.45-0.65x), and its unary half cut at cache lines (4-8 bits, one line, but a select in
it cost more than the load it saved: 0.75-0.91x).
"""

from __future__ import annotations

import numpy as np

from ...base.errors import NnlmError
from . import bits as bitpack
from .trie_layout import BASE_BITS, LINE_WORDS, SHIFT, B
from .trie_layout import pointer_sections as sections  # noqa: F401 - this module's API
from .trie_layout import pointer_spec_ok as spec_ok  # noqa: F401

CORRECTION_BITS = 7     # at most: 64 x 7 = 448 bits, words 1-7
SLOPE_BITS = 16
EXCEPTION = np.uint64(1 << 63)
MAX_HEAVY = 0.2        # see choose_layout
CHUNK = 1 << 12  # blocks fitted at a time (262,144 pointers): temporaries of ~15 MB


def _blocks(values: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Blocks lo..hi of ``values``, the last padded with the last value: (hi - lo, B)."""
    part = np.asarray(values[lo * B:hi * B], np.int64)
    padded = np.full((hi - lo) * B, int(values[-1]), np.int64)
    padded[:len(part)] = part
    return padded.reshape(-1, B)


def _fit(blocks: np.ndarray):
    """Each block's base, slope, correction width and corrections, and which fit a line
    (a width of 8 stands for any wider)."""
    t = np.arange(B, dtype=np.int64)
    slope = ((blocks[:, -1] - blocks[:, 0]) << 8) // (B - 1)
    raw = blocks - blocks[:, :1] - ((t[None, :] * slope[:, None]) >> 8)
    low = raw.min(axis=1)
    corrections = raw - low[:, None]
    top = corrections.max(axis=1)
    width = sum((top >= 1 << k).astype(np.int64) for k in range(CORRECTION_BITS + 1))
    base = blocks[:, 0] + low
    fits = (width <= CORRECTION_BITS) & (slope < 1 << SLOPE_BITS) & (base >= 0)
    return base, slope, width, corrections, fits


def _chunks(values: np.ndarray):
    """(first block, blocks) of ``values``, CHUNK blocks at a time."""
    n_blocks = -(-len(values) // B)
    for lo in range(0, n_blocks, CHUNK):
        yield lo, _blocks(values, lo, min(n_blocks, lo + CHUNK))


def _slices(values, size: int | None = None):
    """``values`` in slices of ``size`` (default: CHUNK blocks): an array on disk (a
    writer's spilled pointers) is read a slice at a time, never whole."""
    size = size or CHUNK * B
    for lo in range(0, len(values), size):
        yield np.asarray(values[lo:lo + size], np.int64)


def _non_decreasing(values) -> bool:
    """Whether ``values`` never decrease, slice by slice (each slice's first value
    against the one before it)."""
    last = None
    for part in _slices(values):
        if np.any(np.diff(part) < 0) or (last is not None and part[0] < last):
            return False
        last = part[-1]
    return True


def choose_layout(values: np.ndarray) -> str:
    """``"linear"`` where it is smaller than ``"packed"`` and its exceptions are few."""
    width = bitpack.width(int(values[-1]))
    if int(values[-1]) >> BASE_BITS:
        return "packed"
    n_exc = under = 0
    for _, blocks in _chunks(values):
        fits = _fit(blocks)[-1]
        n_exc += int((~fits).sum())
        under += int((blocks[~fits, -1] - blocks[~fits, 0]).sum())
    linear_bytes = 8 * (LINE_WORDS * -(-len(values) // B) + 1
                        + bitpack.packed_words(n_exc * B, width))
    # the share of the order's n-grams under exceptions, which lookups reach in
    # proportion (a frequent context is looked up and extended often): above a fifth
    # (the unigrams' and the bigrams' pointers, whose heavy words fill the exceptions)
    # the second load costs more than the bytes saved are worth
    if under > max(1, int(values[-1])) * MAX_HEAVY or \
            linear_bytes >= 8 * bitpack.packed_words(len(values), width):
        return "packed"
    return "linear"


def encode(values: np.ndarray, layout: str | None = None) -> dict:
    """Non-decreasing ``values`` (>= 0; an array, or anything sliced like one, such as
    pointers spilled to disk) in ``layout`` (default: :func:`choose_layout`'s):
    ``{"kind": "packed", "bits", "packed"}`` or ``{"kind": "linear", "lines",
    "exceptions", "n_exceptions"}``."""
    coded = encode_lazily(values, layout)
    if coded["kind"] == "packed":
        coded["packed"] = np.concatenate(list(coded["packed"]))
    else:
        coded["lines"] = np.concatenate(list(coded["lines"]))
        _finish(coded)
    return coded


def encode_lazily(values, layout: str | None = None) -> dict:
    """:func:`encode`'s coding with its big array an iterator of chunks (the packed
    fields, or the lines: a writer streams them to the file); a linear coding's
    exceptions are known once its lines have all been made (:func:`streamed_sections`)."""
    if isinstance(values, (list, tuple)) or not hasattr(values, "__getitem__"):
        values = np.asarray(values, np.int64)
    if len(values) == 0 or int(values[0]) < 0 or not _non_decreasing(values):
        raise ValueError("run pointers are non-decreasing numbers >= 0")
    width = bitpack.width(int(values[-1]))
    if (layout or choose_layout(values)) == "packed":
        return {"kind": "packed", "bits": width,
                "packed": bitpack.pack_stream(_slices(values), width)}
    if int(values[-1]) >> BASE_BITS:
        raise ValueError(f"the linear layout holds pointers below 2^{BASE_BITS}")
    coded = {"kind": "linear", "bits": width, "blocks": []}
    coded["lines"] = _lines(values, coded["blocks"])
    return coded


def _lines(values, exceptions: list):
    """The linear layout's lines, CHUNK blocks at a time, then the spare word (a field's
    read of the word after it stays in the array); the blocks that do not fit a line go
    to ``exceptions``, numbered in order."""
    for _, blocks in _chunks(values):
        base, slope, cbits, corrections, fits = _fit(blocks)
        lines = np.zeros((len(blocks), LINE_WORDS), np.uint64)
        ok, exc = np.flatnonzero(fits), np.flatnonzero(~fits)
        lines[ok, 0] = (base[ok].astype(np.uint64)
                        | slope[ok].astype(np.uint64) << np.uint64(40)
                        | cbits[ok].astype(np.uint64) << np.uint64(56))
        lines[exc, 0] = EXCEPTION | np.arange(len(exceptions), len(exceptions) + len(exc),
                                              dtype=np.uint64)  # its number
        exceptions.extend(blocks[exc])
        for c in range(1, CORRECTION_BITS + 1):  # the blocks of one width at once
            rows = ok[cbits[ok] == c]
            for t in range(B):
                word, off = 1 + (t * c >> 6), t * c & 63
                v = corrections[rows, t].astype(np.uint64)
                lines[rows, word] |= v << np.uint64(off)
                if off + c > 64:
                    lines[rows, word + 1] |= v >> np.uint64(64 - off)
        yield lines.reshape(-1)
    yield np.zeros(1, np.uint64)


def _finish(coded: dict) -> None:
    """A linear coding's exceptions, packed, once its lines are made."""
    blocks = coded.pop("blocks")
    coded["n_exceptions"] = len(blocks)
    coded["exceptions"] = bitpack.pack(np.concatenate(blocks), coded["bits"]) if blocks \
        else np.zeros(1, np.uint64)


def header_entry(coded: dict) -> list:
    """The header's entry for what :func:`encode` made."""
    if coded["kind"] == "packed":
        return ["packed", coded["bits"]]
    return ["linear", coded["n_exceptions"]]


def named_sections(coded: dict, k: int) -> list[tuple[str, np.ndarray]]:
    """(section name, array) of what :func:`encode` made, in the file's order."""
    if coded["kind"] == "packed":
        return [(f"child_{k}", coded["packed"])]
    return [(f"child_lines_{k}", coded["lines"]), (f"child_exceptions_{k}", coded["exceptions"])]


def streamed_sections(coded: dict, k: int):
    """(section name, :class:`~.bits.Streamed` or array) of what :func:`encode_lazily`
    made, in the file's order: the lines are made as the writer takes them, and the
    exceptions after them (then :func:`header_entry` may be asked)."""
    if coded["kind"] == "packed":
        yield f"child_{k}", bitpack.Streamed(np.uint64, coded["packed"])
        return
    yield f"child_lines_{k}", bitpack.Streamed(np.uint64, coded["lines"])
    _finish(coded)  # the writer has taken every line by now
    yield f"child_exceptions_{k}", coded["exceptions"]


class Packed:
    """Bit-packed fields of ``bits`` bits."""

    kind = 0  # pointers.h: Pointers.linear

    def __init__(self, packed: np.ndarray, bits: int, count: int, top: int):
        self.packed, self.bits, self.count, self.top = packed, bits, count, top

    def c_spec(self) -> tuple:
        """What the C loops take (pointers.h): (kind, fields or lines, exceptions, bits
        of a field or of an exception, exceptions' count)."""
        return (self.kind, self.packed, b"", self.bits, 0)

    def at(self, i: np.ndarray) -> np.ndarray:
        """ptr[i] for each i < count (numpy; the C loops read the same)."""
        return bitpack.unpack(self.packed, self.bits, i)

    def decode(self) -> np.ndarray:
        """All ``count`` pointers, int64, checked (a damaged array is one line)."""
        return _checked(bitpack.unpack_all(self.packed, self.bits, self.count), self.top)


class Linear:
    """64 pointers a cache line on a straight line plus corrections (module docstring)."""

    kind = 1

    def __init__(self, lines: np.ndarray, exceptions: np.ndarray, n_exceptions: int,
                 count: int, top: int):
        self.lines, self.exceptions = lines, exceptions
        self.n_exceptions, self.count, self.top = n_exceptions, count, top
        self.bits = bitpack.width(top)

    def c_spec(self) -> tuple:
        return (self.kind, self.lines, self.exceptions, self.bits, self.n_exceptions)

    def at(self, i: np.ndarray) -> np.ndarray:
        """ptr[i] for each i < count, as pointers.h's block_pointer reads it: the line's
        head, then the correction (two words of the line) or the exception's field. A
        damaged exception number reads as past every order (the callers clamp)."""
        i = np.asarray(i, np.int64)
        line = (i >> SHIFT) * LINE_WORDS
        t = (i & (B - 1)).astype(np.uint64)
        head = self.lines[line]
        exc = (head & EXCEPTION) != 0
        c = (head >> np.uint64(56)) & np.uint64(7)
        pos = t * c
        word = line + 1 + (pos >> np.uint64(6)).astype(np.int64)
        off = pos & np.uint64(63)
        low = self.lines[word] >> off
        high = (self.lines[word + 1] << np.uint64(1)) << (np.uint64(63) - off)
        correction = (low | high) & ((np.uint64(1) << c) - np.uint64(1))
        out = ((head & np.uint64((1 << BASE_BITS) - 1))
               + ((t * ((head >> np.uint64(40)) & np.uint64(0xFFFF))) >> np.uint64(8))
               + correction).astype(np.int64)
        if exc.any():
            number = (head[exc] & ~EXCEPTION).astype(np.int64)
            ok = number < self.n_exceptions
            fields = np.where(ok, number, 0) * B + t[exc].astype(np.int64)
            out[exc] = np.where(ok, bitpack.unpack(self.exceptions, self.bits, fields),
                                np.iinfo(np.int64).max)
        return out

    def decode(self) -> np.ndarray:
        lines = self.lines[:-1].reshape(-1, LINE_WORDS)
        head = lines[:, 0]
        exc = (head & EXCEPTION) != 0
        out = np.empty((len(lines), B), np.int64)
        base = (head & np.uint64((1 << BASE_BITS) - 1)).astype(np.int64)
        slope = ((head >> np.uint64(40)) & np.uint64(0xFFFF)).astype(np.int64)
        cbits = ((head >> np.uint64(56)) & np.uint64(7)).astype(np.int64)
        t = np.arange(B, dtype=np.int64)
        out[:] = base[:, None] + ((t[None, :] * slope[:, None]) >> 8)
        for c in range(1, CORRECTION_BITS + 1):
            rows = np.flatnonzero(~exc & (cbits == c))
            for j in range(B):
                pos = j * c
                word, off = 1 + (pos >> 6), pos & 63
                v = lines[rows, word] >> np.uint64(off)
                if off + c > 64:
                    v |= lines[rows, word + 1] << np.uint64(64 - off)
                out[rows, j] += (v & np.uint64((1 << c) - 1)).astype(np.int64)
        number = (head[exc] & ~EXCEPTION).astype(np.int64)
        if len(number) != self.n_exceptions or np.any(number != np.arange(len(number))):
            raise NnlmError("its run pointers are damaged (the exceptions' numbers)")
        if len(number):
            out[exc] = bitpack.unpack_all(self.exceptions, self.bits,
                                          len(number) * B).reshape(-1, B)
        return _checked(out.reshape(-1)[:self.count], self.top)


def _checked(values: np.ndarray, top: int) -> np.ndarray:
    if values[0] != 0 or values[-1] != top or np.any(np.diff(values) < 0):
        raise NnlmError("its run pointers are not increasing")
    return values

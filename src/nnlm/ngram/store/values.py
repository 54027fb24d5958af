"""The numbers of nnlm's n-gram trie (:mod:`.trie`): how each order's probabilities and
back-offs are stored.

* float32, as KenLM stores them;
* losslessly as codes into a table of the order's distinct values, where there are few
  (KN back-offs gamma(h) depend only on small counts: a few hundred per order);
* quantized (``quantize=(P, B)``), as KenLM's ``build_binary -q P -b B``: per-order
  tables of 2^P and 2^B centers of equal-count bins, each the mean of its values
  (Federico & Bertoldi 2006), two back-off codes reserved for exact zeros.

A back-off of 1 (log 0) keeps KenLM's sign of zero: -0.0 where the n-gram cannot extend
(no longer n-gram starts with it), +0.0 where it can (KenLM's HasExtension).
"""

from __future__ import annotations

import numpy as np

from ...base.errors import NnlmError
from . import bits as bitpack
from .trie_layout import MAX_CODE_BITS  # as KenLM's: the C scorer reads codes of <= 25 bits


def make_centers(values: np.ndarray, bins: int) -> np.ndarray:
    """``bins`` float32 centers of equal-count bins of the sorted ``values``, each the
    mean of its bin (KenLM's ``MakeBins``); an empty bin repeats the previous center.
    Where there are fewer values than bins the first bins are empty: KenLM makes them
    -inf, which no value is ever coded to; here they repeat the first full bin's center,
    so that a table holds no infinity (an order of a small model, quantized)."""
    v = np.sort(np.asarray(values, np.float64))
    ends = (len(v) * np.arange(1, bins + 1, dtype=np.int64)) // bins
    starts = np.r_[0, ends[:-1]]
    sums = np.r_[0.0, np.cumsum(v)]
    counts = ends - starts
    centers = np.full(bins, -np.inf)
    full = counts > 0
    centers[full] = (sums[ends[full]] - sums[starts[full]]) / counts[full]
    for i in np.flatnonzero(~full):  # KenLM: an empty bin repeats the one before
        centers[i] = centers[i - 1] if i else -np.inf
    if full.any():
        centers[: np.argmax(full)] = centers[np.argmax(full)]
    return centers.astype(np.float32)


def encode(values: np.ndarray, centers: np.ndarray) -> np.ndarray:
    """The code of the nearest center to each value (centers sorted)."""
    values = np.asarray(values, np.float32)
    hi = np.clip(np.searchsorted(centers, values), 1, len(centers) - 1)
    lo = hi - 1
    nearer_lo = np.abs(values - centers[lo]) <= np.abs(centers[hi] - values)
    return np.where(nearer_lo, lo, hi).astype(np.int64)


def quantize_backoffs(values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Codes and centers for back-offs: codes 0 and 1 are exactly -0.0 and +0.0 (a
    back-off of 1, the most common one, for an n-gram that cannot and one that can
    extend: KenLM's two reserved values); the rest are binned."""
    values = np.asarray(values, np.float32)
    nonzero = values != 0
    if bins < 3:
        raise NnlmError("back-offs need at least 2 bits (two codes are reserved)")
    tail = np.sort(make_centers(values[nonzero], bins - 2)) if nonzero.any() \
        else np.zeros(bins - 2, np.float32)
    centers = np.r_[np.float32(-0.0), np.float32(0.0), tail].astype(np.float32)
    codes = np.where(np.signbit(values), 0, 1).astype(np.int64)
    codes[nonzero] = 2 + encode(values[nonzero], tail)
    return codes, centers


class Quantized:
    """A read-only array of float32 values stored as bit-packed codes into ``centers``:
    indexing (by ids or a slice) decodes only the entries asked for; ``np.asarray``
    decodes all. Whole-array arithmetic goes through ``np.asarray``."""

    def __init__(self, codes: np.ndarray, bits: int, centers: np.ndarray, n: int):
        self.codes, self.bits, self.centers, self.n = codes, bits, centers, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            index = np.arange(self.n)[index]
        index = np.asarray(index)
        native = bitpack._native()
        if native is not None and index.ndim == 1 and self.n:
            codes = np.empty(len(index), np.int64)
            native.gather(self.codes, self.bits, self.n,
                           np.ascontiguousarray(index, np.int64), codes)
        else:
            codes = bitpack.unpack(self.codes, self.bits, index)
        return self.centers[np.minimum(codes, len(self.centers) - 1)]

    def __array__(self, dtype=None, copy=None):
        out = self.centers[bitpack.unpack_all(self.codes, self.bits, self.n)]
        return out if dtype is None else out.astype(dtype)




def quantized_values(values: np.ndarray, name: str, quantize: tuple[int, int]):
    """(codes, centers, bits) for one order's probabilities or back-offs, quantized to
    ``quantize`` = (P, B) bits. The lossless coding of an order with few distinct values
    is :func:`lossless_centers`' and :func:`lossless_codes`'."""
    b = quantize[0] if name == "logp" else quantize[1]
    if name == "logp":
        centers = make_centers(values, 1 << b)
        return encode(values, centers), centers, b
    codes, centers = quantize_backoffs(values, 1 << b)
    return codes, centers, b


def lossless_centers(n: int, each) -> tuple[np.ndarray, int] | None:
    """The sorted distinct float32 values of an order's ``n`` values and their code width,
    or None where codes would not pay: KN back-offs gamma(h) depend only on small counts,
    so an order of 700k has a few hundred (9-12 bits each, not 32). ``each(fn, *args)``:
    fn(piece, offset, *args) for every piece of the values in order (float32 arrays,
    ``offset`` the piece's first index), so that an order held in pieces (on a cluster's
    workers) is coded as the whole array is, without being gathered."""
    step = max(1, n // 65536)
    sample = np.concatenate([np.zeros(0, np.float32), *each(sampled, step)])
    if len(sample) > 4096 and len(np.unique(sample)) > len(sample) // 4:
        return None  # many distinct values (probabilities are): no full sort to find out
    distinct = np.zeros(0, np.uint32)
    for found in each(distinct_bits):
        distinct = np.union1d(distinct, found)
        if len(distinct) > 1 << MAX_CODE_BITS:
            return None
    # by bit pattern, so that +0.0 and -0.0 (extends or not) stay two values
    centers = distinct.view(np.float32)
    b = bitpack.width(max(len(centers) - 1, 0))
    if len(centers) == 0 or b > MAX_CODE_BITS or b * n + 32 * len(centers) >= 0.9 * 32 * n:
        return None
    return centers.astype(np.float32), b


def sampled(piece: np.ndarray, offset: int, step: int) -> np.ndarray:
    """The entries of ``piece`` whose index in the whole array is a multiple of ``step``."""
    return piece[(-offset) % step::step]


def distinct_bits(piece: np.ndarray, offset: int = 0) -> np.ndarray:
    """The distinct bit patterns of a float32 ``piece``, sorted."""
    return np.unique(np.asarray(piece, np.float32).view(np.uint32))


def lossless_codes(piece: np.ndarray, offset: int, centers: np.ndarray) -> np.ndarray:
    """Each float32 value's index among ``centers`` (:func:`lossless_centers`' table)."""
    return np.searchsorted(centers.view(np.uint32),
                           np.asarray(piece, np.float32).view(np.uint32)).astype(np.int64)


def signed_backoffs(values, extends: np.ndarray) -> np.ndarray:
    """float32 back-offs whose zeros say by their sign whether the n-gram extends (+0.0)
    or not (-0.0); a back-off other than 1 always extends."""
    out = np.asarray(values, np.float32) + np.float32(0.0)  # -0.0 becomes +0.0
    out[~extends] = np.float32(-0.0)
    return out


def extension_of(backoffs) -> np.ndarray:
    """Which n-grams extend, from :func:`signed_backoffs`' signs of zero."""
    b = np.asarray(backoffs)
    return ~((b == 0) & np.signbit(b))

"""The two searches of a suffix-array shard, batched: :func:`find` (each pattern's range
of table entries) and :func:`followers` (the distinct tokens after each range's common
prefix, with counts). Everything an index answers is made of these two.

A shard is infini-gram's layout (:mod:`nnlm.index.files`): token ids as little-endian
integers of ``width`` bytes, and a table of byte offsets, ``ptr`` bytes each, sorted as
the byte strings they start. Both searches compare bytes, so a pattern is its tokens'
little-endian bytes.

The compiled module ``nnlm.index._suffix`` answers both in C; without it (no compiler at
install, or ``NNLM_NO_C=1``) the numpy paths here give the same answers, a batch at a
time: a binary search advanced for every pattern at once, about log2(N) steps.
"""

from __future__ import annotations

import numpy as np

from ..base.compiled import extension

_C = None  # the compiled module, once looked up; False where there is none


def compiled():
    global _C
    if _C is None:
        _C = extension("nnlm.index._suffix") or False
    return _C or None


def table_entries(table, ptr: int, lo: int, hi: int) -> np.ndarray:
    """int64 byte offsets of table entries ``lo .. hi - 1``."""
    raw = np.frombuffer(table, np.uint8, (hi - lo) * ptr, lo * ptr).reshape(-1, ptr)
    wide = np.zeros((hi - lo, 8), np.uint8)
    wide[:, :ptr] = raw
    return wide.view("<i8").ravel()


def _entries_at(table, ptr: int, rows: np.ndarray) -> np.ndarray:
    raw = np.frombuffer(table, np.uint8)
    cols = rows[:, None] * ptr + np.arange(ptr)
    wide = np.zeros((len(rows), 8), np.uint8)
    wide[:, :ptr] = raw[cols]
    return wide.view("<i8").ravel()


def _compare(text, table, ptr, rows, patterns, lengths, depth=0):
    """-1, 0, 1 per row: its suffix (from ``depth`` bytes on: one for all rows, or one
    each) against its padded pattern (``lengths`` bytes of it); 0 where the pattern is a
    prefix of the suffix."""
    data = np.frombuffer(text, np.uint8)
    at = _entries_at(table, ptr, rows) + depth
    m = patterns.shape[1]
    cols = at[:, None] + np.arange(m)
    inside = cols < len(data)
    got = np.where(inside, data[np.minimum(cols, len(data) - 1)], 0).astype(np.int16)
    valid = np.arange(m) < lengths[:, None]
    # a byte past the text's end is below every byte: the shorter suffix is the smaller
    got = np.where(inside, got, -1)
    diff = np.where(valid, np.sign(got - patterns.astype(np.int16)), 0)
    first = np.argmax(diff != 0, axis=1)
    return diff[np.arange(len(rows)), first]


SAMPLE_ENTRIES = 1 << 20  # a sample of 8 MB a shard, read at its first query: at 1B
# tokens (2 shards) 0.16-0.2 s once, and batched counts 1.2x faster than with 2^18 entries
# (two fewer steps of the table's search for each bound)


def sample_keys(text, table, ptr: int) -> tuple[np.ndarray, int]:
    """The first 8 bytes (a big-endian uint64, 0 past the text's end) of every stride-th
    suffix of the table, and the stride (at least 16, so that the sample has at most
    about :data:`SAMPLE_ENTRIES`): a search starts there within a stride of its answer,
    two cache misses a step of the table's binary search saved for each level the
    sample settles. Keys sort as their suffixes do, so the sample is sorted."""
    n = len(table) // ptr
    stride = max(16, 1 << max(0, int(n // SAMPLE_ENTRIES).bit_length()))
    rows = np.arange(0, n, stride, dtype=np.int64)
    at = _entries_at(table, ptr, rows)
    data = np.frombuffer(text, np.uint8)
    cols = at[:, None] + np.arange(8)
    raw = np.where(cols < len(data), data[np.minimum(cols, len(data) - 1)], 0)
    return np.ascontiguousarray(raw.astype(np.uint8)).view(">u8").ravel().astype(
        np.uint64), stride


def find(text, table, ptr: int, patterns: bytes, offsets: np.ndarray, sample=None
         ) -> tuple[np.ndarray, np.ndarray]:
    """int64 ``lo, hi`` (Q each): the table entries whose suffixes start with each pattern
    (``offsets`` cut ``patterns``); ``hi - lo`` is the pattern's count. ``sample``: the
    shard's :func:`sample_keys`, which the compiled search starts from."""
    q = len(offsets) - 1
    lo, hi = np.empty(q, np.int64), np.empty(q, np.int64)
    c = compiled()
    if c is not None:
        offsets = np.ascontiguousarray(offsets, np.int64)
        if sample is not None:
            c.find(text, table, ptr, patterns, offsets, lo, hi, sample[0], sample[1])
        else:
            c.find(text, table, ptr, patterns, offsets, lo, hi)
        return lo, hi
    return _find_numpy(text, table, ptr, patterns, offsets)


def _padded(patterns: bytes, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.diff(offsets)
    flat = np.frombuffer(patterns, np.uint8)
    m = int(lengths.max(initial=0))
    cols = offsets[:-1, None] + np.arange(m)
    out = np.where(np.arange(m) < lengths[:, None], flat[np.minimum(cols, max(len(flat) - 1,
                                                                            0))]
                   if len(flat) else 0, 0)
    return out.astype(np.uint8), lengths


def _find_numpy(text, table, ptr, patterns, offsets):
    padded, lengths = _padded(patterns, offsets)
    n = len(table) // ptr
    q = len(lengths)

    def bound(upper: bool) -> np.ndarray:
        lo, hi = np.zeros(q, np.int64), np.full(q, n, np.int64)
        while True:
            active = np.flatnonzero(lo < hi)
            if not len(active):
                return lo
            mid = lo[active] + (hi[active] - lo[active]) // 2
            c = _compare(text, table, ptr, mid, padded[active], lengths[active])
            go_right = c <= 0 if upper else c < 0
            lo[active] = np.where(go_right, mid + 1, lo[active])
            hi[active] = np.where(go_right, hi[active], mid)

    return bound(False), bound(True)


def narrow(text, table, ptr: int, width: int, lo: np.ndarray, hi: np.ndarray,
           depth: np.ndarray, tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Within each range (its suffixes sharing their first ``depth`` bytes), the entries
    whose next token is ``tokens[i]``: the range of the context one token longer."""
    lo, hi, depth = (np.ascontiguousarray(a, np.int64) for a in (lo, hi, depth))
    pattern = np.ascontiguousarray(tokens, f"<u{width}")
    c = compiled()
    if c is not None:
        out_lo, out_hi = np.empty_like(lo), np.empty_like(hi)
        c.narrow(text, table, ptr, lo, hi, depth, pattern.tobytes(), out_lo, out_hi)
        return out_lo, out_hi
    raw = pattern.view(np.uint8).reshape(-1, width)
    out_lo, out_hi = lo.copy(), hi.copy()
    for upper in (False, True):
        a, b = (out_lo.copy(), hi.copy())
        while True:
            active = np.flatnonzero(a < b)
            if not len(active):
                break
            mid = a[active] + (b[active] - a[active]) // 2
            c_ = _compare(text, table, ptr, mid, raw[active],
                          np.full(len(active), width), depth[active])
            right = c_ <= 0 if upper else c_ < 0
            a[active] = np.where(right, mid + 1, a[active])
            b[active] = np.where(right, b[active], mid)
        if upper:
            out_hi = a
        else:
            out_lo = a
    return out_lo, out_hi


def followers(text, table, ptr: int, width: int, lo: np.ndarray, hi: np.ndarray,
              depth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The distinct tokens ``depth`` bytes into each range's suffixes: ``tokens`` (uint32,
    the separator's all-ones value included), ``counts`` (int64), the int64 ``offsets``
    (Q + 1) that cut both by range, and ``ends`` (int64, Q): suffixes that end before a
    token there (only at the text's very end). Tokens come in the table's order."""
    lo, hi, depth = (np.ascontiguousarray(a, np.int64) for a in (lo, hi, depth))
    c = compiled()
    if c is not None:
        tokens, counts, offsets, ends = c.followers(text, table, ptr, width, lo, hi, depth)
        return (np.frombuffer(tokens, np.uint32), np.frombuffer(counts, np.int64),
                np.frombuffer(offsets, np.int64), np.frombuffer(ends, np.int64))
    data = np.frombuffer(text, np.uint8)
    toks, cnts, offsets, ends = [], [], [0], []
    for a, b, d in zip(lo.tolist(), hi.tolist(), depth.tolist()):
        at = table_entries(table, ptr, a, b) + d
        inside = at + width <= len(data)
        ends.append(int((~inside).sum()))
        at = at[inside]
        raw = data[at[:, None] + np.arange(width)] if len(at) else np.zeros((0, width),
                                                                              np.uint8)
        wide = np.zeros((len(at), 4), np.uint8)
        wide[:, :width] = raw
        values = wide.view("<u4").ravel()
        # runs of equal tokens, in table order (the C path's order)
        starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]]) if len(values) \
            else np.zeros(0, np.int64)
        toks.append(values[starts])
        cnts.append(np.diff(np.r_[starts, len(values)]))
        offsets.append(offsets[-1] + len(starts))
    return (np.concatenate(toks).astype(np.uint32) if toks else np.zeros(0, np.uint32),
            np.concatenate(cnts).astype(np.int64) if cnts else np.zeros(0, np.int64),
            np.array(offsets, np.int64), np.array(ends, np.int64))

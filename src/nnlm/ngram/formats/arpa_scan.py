"""Byte-level scanning of ARPA n-gram sections into arrays, compiled with numba.

An ARPA section is one n-gram a line: ``log10p w1 ... wk [log10bow]``, fields separated
by blanks (space, tab, CR, VT, FF). Reading it with Python's ``str.split`` and ``float``
costs about 60 ns a field; Brown's KN5 file (2.4 M n-grams, 94 MB) took 5.6 s to load
where KenLM takes 1.4 s. These kernels walk the bytes once: each line's numbers are
parsed in place, and each word is hashed (FNV-1a) and found in a table of the unigrams
by comparing its bytes, so no Python string is made for any word above the unigrams.

What they do not judge they hand back: a line they cannot read stops the scan with its
status and position, and :mod:`nnlm.ngram.formats.arpa_read` re-reads that one line in Python to say
what is wrong with it (bad UTF-8, a field count, ``nan``, a word not among the unigrams).
The kernels are compiled on first use and cached beside this file (``cache=True``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

DONE, HEADER, BAD_LINE, UNKNOWN_WORD = 0, 1, 2, 3  # why a scan stopped

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_POW10 = np.array([10.0**i for i in range(23)])  # exact doubles: 10^0 .. 10^22
_MANTISSA_LIMIT = 10**17  # digits beyond the 18th only shift the exponent


@njit(inline="always")
def _blank(c) -> bool:
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(inline="always")
def _ends_field(c) -> bool:
    return c == 10 or _blank(c)


@njit(inline="always")
def _sign(buf, i, n):
    """(negative, position after an optional '+' or '-')."""
    if i < n and (buf[i] == 45 or buf[i] == 43):
        return buf[i] == 45, i + 1
    return False, i


@njit
def _number(buf, i, n):
    """The decimal number at buf[i:] (sign, digits, point, exponent) -> (value, end, ok).

    Up to 18 significant digits are kept exactly in an integer; the value is then one
    multiplication or division by an exact power of ten (correctly rounded for the
    seven-digit numbers ARPA files hold). ``nan`` and ``inf`` are not read here."""
    neg, i = _sign(buf, i, n)
    mant = 0
    exp10 = 0
    digits = 0
    while i < n and 48 <= buf[i] <= 57:
        if mant < _MANTISSA_LIMIT:
            mant = mant * 10 + (buf[i] - 48)
        else:
            exp10 += 1
        digits += 1
        i += 1
    if i < n and buf[i] == 46:
        i += 1
        while i < n and 48 <= buf[i] <= 57:
            if mant < _MANTISSA_LIMIT:
                mant = mant * 10 + (buf[i] - 48)
                exp10 -= 1
            digits += 1
            i += 1
    if digits == 0:
        return 0.0, i, False
    if i < n and (buf[i] == 101 or buf[i] == 69):
        eneg, i = _sign(buf, i + 1, n)
        e = 0
        edigits = 0
        while i < n and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            edigits += 1
            i += 1
        if edigits == 0:
            return 0.0, i, False
        exp10 += -e if eneg else e
    value = float(mant)
    if exp10 > 0:
        value = value * (_POW10[exp10] if exp10 <= 22 else 10.0**exp10)  # inf past 1e308
    elif exp10 >= -22:
        value = value / _POW10[-exp10]
    elif exp10 >= -300:
        value = value / 10.0 ** (-exp10)
    else:  # two steps: 10^-exp10 itself would overflow
        value = value / 1e300 / 10.0 ** (-exp10 - 300)
    return (-value if neg else value), i, True


@njit
def _hash(buf, s, e):
    h = _FNV_OFFSET
    for i in range(s, e):
        h = (h ^ np.uint64(buf[i])) * _FNV_PRIME
    return h


@njit
def _slot(h, bits):
    return np.int64((h * _GOLDEN) >> np.uint64(64 - bits))


@njit
def _same(buf, s, e, words, start, length) -> bool:
    if e - s != length:
        return False
    for j in range(length):
        if buf[s + j] != words[start + j]:
            return False
    return True


@njit(cache=True)
def word_table(words, starts, lengths, bits):
    """An open-addressing table of the unigrams (slots hold unigram indices, -1: empty),
    and the index of the first unigram that repeats an earlier one (-1: none)."""
    slots = np.full(1 << bits, -1, np.int64)
    mask = (1 << bits) - 1
    for u in range(len(starts)):
        s, e = starts[u], starts[u] + lengths[u]
        slot = _slot(_hash(words, s, e), bits)
        while slots[slot] >= 0:
            if _same(words, s, e, words, starts[slots[slot]], lengths[slots[slot]]):
                return slots, u
            slot = (slot + 1) & mask
        slots[slot] = u
    return slots, -1


@njit(cache=True, nogil=True)
def scan(buf, pos, n, k, line, m, logp, bow, ids, lines, words, starts, lengths, slots,
         bits, remap):
    """Read n-gram lines of order ``k`` from buf[pos:n] (whole lines) into row m on of
    ``logp``, ``bow``, ``ids`` (k word ids a row; for k = 1 the word's start and length
    in ``buf`` instead) and ``lines`` (file line numbers; ``line`` is pos's). Rows past
    the arrays' end are counted, not stored (the caller compares with the declared count).

    Returns (pos, line, m, status): where and why it stopped. ``DONE``: at n.
    ``HEADER``: at a line starting with a backslash. ``BAD_LINE`` and ``UNKNOWN_WORD``:
    at the start of the line it could not read.
    """
    cap = len(logp)
    mask = (1 << bits) - 1
    while pos < n:
        i = pos
        while i < n and _blank(buf[i]):
            i += 1
        if i >= n:
            return n, line, m, DONE
        if buf[i] == 10:  # a blank line
            pos = i + 1
            line += 1
            continue
        if buf[i] == 92:
            return pos, line, m, HEADER
        p, i, ok = _number(buf, i, n)
        if not ok or i >= n or not _blank(buf[i]):
            return pos, line, m, BAD_LINE
        for j in range(k):
            while i < n and _blank(buf[i]):
                i += 1
            if i >= n or buf[i] == 10:
                return pos, line, m, BAD_LINE
            s = i
            while i < n and not _ends_field(buf[i]):
                i += 1
            if k == 1:
                if m < cap:
                    ids[m, 0] = s
                    ids[m, 1] = i - s
                continue
            slot = _slot(_hash(buf, s, i), bits)
            while True:
                u = slots[slot]
                if u < 0:
                    return pos, line, m, UNKNOWN_WORD
                if _same(buf, s, i, words, starts[u], lengths[u]):
                    break
                slot = (slot + 1) & mask
            if m < cap:
                ids[m, j] = remap[u]
        while i < n and _blank(buf[i]):
            i += 1
        b = 0.0
        if i < n and buf[i] != 10:
            b, i, ok = _number(buf, i, n)
            if not ok:
                return pos, line, m, BAD_LINE
            while i < n and _blank(buf[i]):
                i += 1
            if i < n and buf[i] != 10:
                return pos, line, m, BAD_LINE
        if m < cap:
            logp[m] = p
            bow[m] = b
            lines[m] = line
        m += 1
        line += 1
        pos = i + 1
    return pos, line, m, DONE


@njit
def _row_slot(rows, r, bits):
    h = _FNV_OFFSET
    for j in range(rows.shape[1]):
        h = (h ^ np.uint64(rows[r, j])) * _FNV_PRIME
    return _slot(h, bits)


@njit
def _same_row(a, i, b, j) -> bool:
    for c in range(a.shape[1]):
        if a[i, c] != b[j, c]:
            return False
    return True


@njit(cache=True)
def rows_table(rows, bits):
    """An open-addressing table of the distinct rows of ``rows`` (M, j) (word-id tuples):
    slots hold row indices, -1 empty. A repeated row keeps its first index."""
    slots = np.full(1 << bits, -1, np.int64)
    mask = (1 << bits) - 1
    for r in range(rows.shape[0]):
        slot = _row_slot(rows, r, bits)
        while slots[slot] >= 0 and not _same_row(rows, slots[slot], rows, r):
            slot = (slot + 1) & mask
        if slots[slot] < 0:
            slots[slot] = r
    return slots


@njit(cache=True)
def find_rows(slots, bits, rows, queries):
    """For each row of ``queries`` (Q, j), the index of the equal row of ``rows``, or -1."""
    mask = (1 << bits) - 1
    out = np.empty(queries.shape[0], np.int64)
    for q in range(queries.shape[0]):
        slot = _row_slot(queries, q, bits)
        out[q] = -1
        while slots[slot] >= 0:
            if _same_row(rows, slots[slot], queries, q):
                out[q] = slots[slot]
                break
            slot = (slot + 1) & mask
    return out

"""Byte-level scanning of ARPA n-gram sections into arrays: C where it was built, Python
beside it.

An ARPA section is one n-gram a line: ``log10p w1 ... wk [log10bow]``, fields separated
by blanks (space, tab, CR, VT, FF). Reading it with Python's ``str.split`` and ``float``
costs about 60 ns a field; Brown's KN5 file (2.4 M n-grams, 94 MB) took 5.6 s to load
where KenLM takes 1.4 s. The compiled part (``_arpa_scan.c``) walks the bytes once: each
line's numbers are parsed in place, and each word is hashed (FNV-1a) and found in a table
of the unigrams by comparing its bytes, so no Python string is made for any word above
the unigrams. The Python functions here do the same with ``bytes.split`` and dicts, to
the same numbers (the tests compare them); they answer where no C compiler was found.

What the scan does not judge it hands back: a line it cannot read stops the scan with its
status and position, and :mod:`nnlm.ngram.formats.arpa_read` re-reads that one line in
Python to say what is wrong with it (bad UTF-8, a field count, ``nan``, a word not among
the unigrams).
"""

from __future__ import annotations

import re

import numpy as np

from ...base.compiled import extension

DONE, HEADER, BAD_LINE, UNKNOWN_WORD = 0, 1, 2, 3  # why a scan stopped

_C = extension("nnlm.ngram.formats._arpa_scan")


def word_table(words: np.ndarray, starts: np.ndarray, lengths: np.ndarray, bits: int):
    """A table of the unigrams (``words``: their UTF-8 bytes end to end, uint8; unigram u
    is ``words[starts[u]:starts[u] + lengths[u]]``) for :func:`scan`, and the index of
    the first unigram that repeats an earlier one (-1: none). ``bits``: the table has
    2 ** bits slots (at least twice the unigrams)."""
    if _C is None:
        table: dict[bytes, int] = {}
        data = words.tobytes()
        for u, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist())):
            if table.setdefault(data[s:s + n], u) != u:
                return table, u
        return table, -1
    slots = np.full(1 << bits, -1, np.int64)
    repeat = _C.word_table(words, _int64(starts), _int64(lengths), slots, bits)
    return slots, repeat


def scan(buf, pos, n, k, line, m, logp, bow, ids, lines, words, starts, lengths, slots,
         bits, remap):
    """Read n-gram lines of order ``k`` from buf[pos:n] (whole lines) into row m on of
    ``logp``, ``bow``, ``ids`` (k word ids a row; for k = 1 the word's start and length
    in ``buf`` instead) and ``lines`` (file line numbers; ``line`` is pos's). Rows past
    the arrays' end are counted, not stored (the caller compares with the declared count).
    ``words`` .. ``slots``, ``bits``: :func:`word_table`'s table (k > 1); ``remap``: a
    unigram's index to its word id.

    Returns (pos, line, m, status): where and why it stopped. ``DONE``: at n.
    ``HEADER``: at a line starting with a backslash. ``BAD_LINE`` and ``UNKNOWN_WORD``:
    at the start of the line it could not read.
    """
    if _C is not None:
        return _C.scan(buf, pos, n, k, line, m, logp, bow, ids, lines, words, starts,
                       lengths, slots, bits, remap)
    return _scan(bytes(buf[:n]), pos, n, k, line, m, logp, bow, ids, lines, slots, remap)


def rows_table(rows: np.ndarray, bits: int):
    """A table of the distinct rows of ``rows`` (M, j) (word-id tuples) for
    :func:`find_rows`; a repeated row keeps its first index. ``bits``: 2 ** bits slots,
    more than M."""
    rows = _int64(rows)
    if _C is None:
        keys = _row_keys(rows)
        return dict(zip(reversed(keys), range(len(keys) - 1, -1, -1)))  # the first wins
    slots = np.full(1 << bits, -1, np.int64)
    _C.rows_table(rows, rows.shape[1], slots, bits)
    return slots


def find_rows(slots, bits: int, rows: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """For each row of ``queries`` (Q, j), the index of the equal row of ``rows`` (the
    rows :func:`rows_table` made ``slots`` of), or -1."""
    queries = _int64(queries)
    if _C is None:
        get = slots.get
        return np.array([get(q, -1) for q in _row_keys(queries)], np.int64)
    out = np.empty(len(queries), np.int64)
    _C.find_rows(slots, bits, _int64(rows), queries, queries.shape[1], out)
    return out


def _int64(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, np.int64)


def _row_keys(rows: np.ndarray) -> list[bytes]:
    """Each row's bytes, as one dict key."""
    return rows.view(np.dtype((np.void, 8 * rows.shape[1]))).ravel().tolist()


# the Python path ------------------------------------------------------------------------

_BLANKS = b" \t\r\x0b\x0c"  # bytes.split() splits on these and the newline
_NUMBER = re.compile(rb"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?)([0-9]+))?")
_DIGITS_KEPT = 18  # significant digits the compiled reader keeps exactly
_POW10 = [10.0**i for i in range(23)]  # exact doubles: 10^0 .. 10^22


def _scan(data: bytes, pos, n, k, line, m, logp, bow, ids, lines, table, remap):
    """:func:`scan` in Python, line by line, with the compiled reader's rules."""
    cap = len(logp)
    remap = remap.tolist() if k > 1 else None
    while pos < n:
        end = data.find(b"\n", pos, n)
        if end < 0:
            end = n
        text = data[pos:end]
        fields = text.split()
        if not fields:  # a blank line, or blanks up to the end
            if end >= n:
                return n, line, m, DONE
            pos, line = end + 1, line + 1
            continue
        if fields[0][:1] == b"\\":
            return pos, line, m, HEADER
        p = _number(fields[0])
        if p is None or len(fields) < 2:
            return pos, line, m, BAD_LINE
        if k == 1:  # the word's place in the buffer: after the blanks and the number
            lead = len(text) - len(text.lstrip(_BLANKS))
            row = [data.index(fields[1], pos + lead + len(fields[0])), len(fields[1])]
        else:
            row = []
            for word in fields[1:k + 1]:
                u = table.get(word)
                if u is None:
                    return pos, line, m, UNKNOWN_WORD
                row.append(remap[u])
        if len(fields) < k + 1:
            return pos, line, m, BAD_LINE
        b = 0.0
        if len(fields) == k + 2:
            b = _number(fields[k + 1])
        if len(fields) > k + 2 or b is None:
            return pos, line, m, BAD_LINE
        if m < cap:
            logp[m], bow[m], lines[m] = p, b, line
            ids[m] = row
        m, line, pos = m + 1, line + 1, end + 1
    return min(pos, n), line, m, DONE


def _number(field: bytes) -> float | None:
    """The decimal number ``field`` holds (sign, digits, point, exponent), as the compiled
    reader computes it (its first 18 significant digits as an exact integer, then one
    multiplication or division by a power of ten), or None: ``nan`` and ``inf`` are no
    numbers here."""
    match = _NUMBER.fullmatch(field)
    if match is None:
        return None
    sign, whole, frac, esign, exp = match.groups()
    frac = frac or b""
    digits = whole + frac
    if not digits:
        return None
    zeros = len(digits) - len(digits.lstrip(b"0"))
    kept = min(len(digits), zeros + _DIGITS_KEPT)
    exp10 = max(0, len(whole) - kept) - max(0, kept - len(whole))
    if exp:
        e = 0
        for c in exp:  # as the compiled reader caps it
            if e < 100000:
                e = e * 10 + c - 48
        exp10 += -e if esign == b"-" else e
    value = float(int(digits[:kept]))
    if exp10 > 0:
        value = value * (_POW10[exp10] if exp10 <= 22 else _power(exp10))
    elif exp10 >= -22:
        value = value / _POW10[-exp10]
    elif exp10 >= -300:
        value = value / _power(-exp10)
    else:  # two steps: 10^-exp10 itself would overflow
        value = value / 1e300 / _power(-exp10 - 300)
    return -value if sign == b"-" else value


def _power(e: int) -> float:
    """10.0 ** e as C's pow gives it: infinity past the largest double."""
    try:
        return 10.0**e
    except OverflowError:
        return float("inf")

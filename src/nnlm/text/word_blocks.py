"""A corpus's words numbered in C: the fast path of :func:`~nnlm.text.corpus.read_corpus`
and :func:`~nnlm.text.corpus.read_stream` for whitespace-split text.

Blocks of whole lines go to ``nnlm.text._words`` as bytes; it splits them as
``str.split()`` does and numbers each word in order of first occurrence, as the Python
path's dict does, without making a str of each word. At 50 M tokens reading falls from
7.9 s to about 2 s. Everything the Python path checks is checked the same way, with the
same messages: bytes that are not UTF-8 and NUL bytes (the block is handed to
:func:`~nnlm.text.fileio.decode_block`, which names the line and column), ``<s>`` and
``</s>`` in the text, a text with no tokens. Without the compiled module (no C compiler
at install, or ``NNLM_NO_C=1``) :func:`encode` answers None and the caller reads in
Python.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..base.compiled import extension
from ..base.errors import NnlmError, where
from .fileio import decode_block, iter_byte_blocks, source_name
from .vocab import BOS, EOS, special_error

# the compiled reader, or None (no compiler, or NNLM_NO_C=1): the Python path reads
_words = extension("nnlm.text._words")

BOM = "\ufeff".encode()


class SpecialToken(NnlmError):
    """``<s>`` or ``</s>`` in a text (the message names the line)."""


class Refused(Exception):
    """The C path refused a block that Python decodes: read the corpus in Python."""


def encode(paths: list, words: list[str] | None = None
           ) -> tuple[np.ndarray, np.ndarray, list[str]] | None:
    """(int32 ids of every token, int64 tokens of each non-blank line, the words by id)
    of the files ``paths`` read one after another; ids number ``words`` first (a fixed
    vocabulary: ids from ``len(words)`` on are words outside it), then each new word in
    order of first occurrence. None where the compiled module is missing."""
    table = table_of(words)
    if table is None:
        return None
    try:
        parts = [_encode_file(path, table) for path in paths]
    except Refused:
        return None
    ids = parts[0][0] if len(parts) == 1 else np.concatenate([p[0] for p in parts])
    lengths = parts[0][1] if len(parts) == 1 else np.concatenate([p[1] for p in parts])
    return ids, lengths, _words.words(table)


def table_of(words: list[str] | None = None):
    """A word table numbering ``words`` first (a fixed vocabulary), or None without the
    compiled module."""
    if _words is None:
        return None
    table = _words.new()
    for word in words or ():
        _words.find(table, word.encode(), True)
    return table


def iter_encoded(path, table) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """(int32 ids, int64 tokens of every line, blank ones 0, bytes read) a block of whole
    lines at a time, through ``table``; ``<s>``, ``</s>``, bytes that are not UTF-8 and
    NUL bytes refused as the Python path refuses them. Raises :class:`Refused` where the
    compiled path refused a block that Python decodes (never seen: the caller then reads
    in Python)."""
    name = source_name(path)
    for first, block in iter_byte_blocks(path):
        size = len(block)
        if first == 1 and block.startswith(BOM):
            block = block[len(BOM):]
        out = _words.encode(table, block)
        if out is None:
            decode_block(block, name, first)  # raises, naming the line and column
            raise Refused
        ids, counts = np.frombuffer(out[0], np.int32), np.frombuffer(out[1], np.int64)
        _check_special(table, ids, block, path, name, first)
        yield ids, counts, size


def _encode_file(path, table) -> tuple[np.ndarray, np.ndarray]:
    return joined(path, ((ids, counts) for ids, counts, _ in iter_encoded(path, table)))


def joined(path, blocks) -> tuple[np.ndarray, np.ndarray]:
    """(every id, the non-blank lines' lengths) of ``blocks``, pairs of a block's ids and
    every line's length; a text with no tokens refused, naming ``path``."""
    id_blocks, length_blocks, lines = [], [], 0
    for ids, lengths in blocks:
        lines += len(lengths)
        id_blocks.append(ids)
        length_blocks.append(lengths[lengths > 0])
    ids = np.concatenate(id_blocks) if id_blocks else np.zeros(0, np.int32)
    if len(ids) == 0:
        raise NnlmError(f"{path}: no tokens: all {lines} lines are blank")
    return ids, np.concatenate(length_blocks)


def count(paths: list) -> dict[str, int] | None:
    """Token counts of the files ``paths``, or None where the compiled module is missing
    or the text holds ``<s>`` or ``</s>`` (the Python path then names the line as
    :func:`~nnlm.text.corpus.count_words` always has)."""
    read = count_arrays(paths)
    return None if read is None else dict(zip(read[0], read[1].tolist()))


def count_arrays(paths: list) -> tuple[list[str], np.ndarray] | None:
    """(the words in order of first occurrence, their token counts) of the files
    ``paths``, counted a block at a time: memory holds the table and one block's ids,
    never the text's (a 1B-token text's ids are 4 GB). None as :func:`count`."""
    table = table_of()
    if table is None:
        return None
    totals = np.zeros(0, np.int64)
    try:
        for path in paths:
            tokens = lines = 0
            for ids, lengths, _ in iter_encoded(path, table):
                tokens += len(ids)
                lines += len(lengths)
                counted = np.bincount(ids)
                if len(counted) > len(totals):
                    totals = np.concatenate([totals, np.zeros(len(counted) - len(totals),
                                                              np.int64)])
                totals[:len(counted)] += counted
            if tokens == 0:
                raise NnlmError(f"{path}: no tokens: all {lines} lines are blank")
    except (Refused, SpecialToken):
        return None
    words = _words.words(table)
    return words, np.concatenate([totals, np.zeros(len(words) - len(totals), np.int64)])


def _check_special(table, ids: np.ndarray, block: bytes, path, name, first: int) -> None:
    """Refuse ``<s>`` or ``</s>`` in the text, naming the first line that holds one."""
    special = [i for i in (_words.find(table, w.encode(), False) for w in (BOS, EOS))
               if i >= 0]
    if not special or not np.isin(ids, special).any():
        return
    lines = [line.split() for line in decode_block(block, name, first)]
    bad = next(i for i, tokens in enumerate(lines) if BOS in tokens or EOS in tokens)
    raise SpecialToken(special_error(where(path, first + bad), lines[bad]))

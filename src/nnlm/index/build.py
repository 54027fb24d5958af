"""Building an index: text -> token ids with their documents -> a suffix array per shard
(:mod:`nnlm.index.files` has the layout).

The suffix array is libdivsufsort's (Mori; through pydivsufsort), the suffix sorter
that suffix-array tools have long relied on: O(n log n) in the worst case, fast on text,
with little memory beside its output. A shard of ``w``-byte tokens is sorted as integers
whose numeric order is the order of their little-endian bytes (each id byte-swapped), so
the table is exactly the order infini-gram's byte-wise indexer gives.

Out of core: the text is read :data:`BLOCK_TOKENS` words at a time into shards of at
most :func:`shard_tokens` tokens for ``memory`` bytes (the sort's peak is about 14 bytes
a u16 token, 28 a u32 one); each shard is sorted on its own, ``workers`` at a time (each
within ``memory / workers``), and queries sum over the shards, as infini-gram's do. The
whole index is written under a temporary name and appears in one step, so a full disk
or a kill leaves no half-written index.

Each line of text is one sentence, stored as ``<s> words </s>`` (nnlm's boundaries, so
that an n-gram model over the index sees where sentences start and end); a document is
a line (``documents="lines"``) or a run of lines between blank lines (``"paragraphs"``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import repeat
from multiprocessing import get_context
from pathlib import Path

import numpy as np
from pydivsufsort import divsufsort

from ..base.errors import NnlmError
from ..base.progress import progress_bar
from ..text import word_blocks
from ..text.corpus import count_words, warn_unknown_share_of
from ..text.fileio import atomic_path, iter_line_blocks
from ..text.specials import BOS_ID, EOS_ID, UNK_ID
from ..text.vocab import Vocabulary
from . import files

DOCUMENTS = ("lines", "paragraphs")
SORT_BYTES = {2: 14, 4: 28}  # the sort's peak bytes a token, by token width: 12 and 24
# (suffix_array's) and the table's writing


def shard_tokens(memory: int, width: int, workers: int = 1) -> int:
    """Tokens a shard may hold for ``memory`` bytes shared by ``workers`` sorts (and at
    most what 32-bit suffix offsets reach: 2**31 bytes of text)."""
    return max(1, min(memory // workers // SORT_BYTES[width], (1 << 31) // width - 1))


BLOCK_TOKENS = 1 << 24  # text is encoded and cut into shards this many words at a time


def encode_documents(path, vocab: Vocabulary) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """A text's word ids (int32; unknown words: ``<unk>``) and every line's length in
    words, blank lines kept as 0 (they end paragraphs), about :data:`BLOCK_TOKENS` words
    at a time, with the bytes each block read (for progress)."""
    ids: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    held = read = 0
    seen = False
    for block_ids, block_lengths, size in _blocks(path, vocab):
        ids.append(block_ids)
        lengths.append(block_lengths)
        held += len(block_ids)
        read += size
        seen = seen or held > 0
        if held >= BLOCK_TOKENS:
            yield np.concatenate(ids), np.concatenate(lengths), read
            ids, lengths, held, read = [], [], 0, 0
    if not seen:
        raise NnlmError(f"{path}: no tokens: every line is blank")
    if lengths:
        yield np.concatenate(ids), np.concatenate(lengths), read


def _blocks(path, vocab: Vocabulary) -> Iterator[tuple[np.ndarray, np.ndarray, int]]:
    """(word ids, every line's length, bytes read) a block of lines at a time: through the
    compiled reader (its table numbers the vocabulary's words first, so ids from |V| on
    are words outside it), or str.split and the vocabulary's dict without it."""
    table = word_blocks.table_of(vocab.words)
    if table is not None:
        for ids, lengths, size in word_blocks.iter_encoded(path, table):
            yield np.where(ids < len(vocab), ids, np.int32(UNK_ID)), lengths, size
        return
    get = vocab.index.get
    for _, block in iter_line_blocks(path):
        words = [line.split() for line in block]
        flat = [w for line in words for w in line]
        yield (np.fromiter(map(get, flat, repeat(UNK_ID)), np.int32, len(flat)),
               np.fromiter(map(len, words), np.int64, len(words)),
               sum(map(len, block)) + len(block))


def token_stream(ids: np.ndarray, lengths: np.ndarray, width: int, documents: str,
                 continues: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The tokens of a shard: each sentence as ``<s> words </s>``, each document after the
    separator; and the separators' positions. Blank lines start a new document
    (``paragraphs``; ``continues``: the first line goes on the paragraph before it) or
    are skipped (``lines``)."""
    blank = lengths == 0
    starts = (~blank & np.r_[not continues, blank[:-1]]) if documents == "paragraphs" \
        else ~blank
    keep = ~blank
    n, first = lengths[keep], starts[keep].astype(np.int64)
    size = n + 2 + first
    out_start = np.zeros(len(n) + 1, np.int64)
    np.cumsum(size, out=out_start[1:])
    out = np.empty(int(out_start[-1]), f"<u{width}")
    out[out_start[:-1][first == 1]] = files.separator(width)
    out[out_start[:-1] + first] = BOS_ID
    out[out_start[1:] - 1] = EOS_ID
    word_start = np.zeros(len(n), np.int64)
    np.cumsum(n[:-1], out=word_start[1:])
    where = np.repeat(out_start[:-1] + first + 1 - word_start, n) + np.arange(len(ids))
    out[where] = ids
    return out, out_start[:-1][first == 1]


def suffix_array(stream: np.ndarray) -> np.ndarray:
    """Token positions of ``stream`` (little-endian ids) in the order of the byte strings
    that start there: libdivsufsort over its bytes as they lie (no copy), then the
    suffixes that start inside a token dropped in place, a block at a time. The peak is
    the text and 4 bytes a byte of it: 10 bytes a u16 token, 20 a u32 one."""
    width = stream.dtype.itemsize
    sa = divsufsort(np.ascontiguousarray(stream).view(np.uint8))
    kept, step = 0, 1 << 22
    for lo in range(0, len(sa), step):
        block = sa[lo:lo + step]
        whole = block[block % width == 0] // width  # a copy: writing before lo is safe
        sa[kept:kept + len(whole)] = whole
        kept += len(whole)
    return sa[:kept]


def build_index(texts: Sequence, output: str | os.PathLike, vocab: Vocabulary | None = None,
                min_count: int = 1, documents: str = "lines", memory: int = 4 << 30,
                workers: int = 1) -> Path:
    """Index ``texts`` (files, read in order) into the folder ``output`` (see the module);
    ``vocab``: fixed (else built from the texts with ``min_count``)."""
    if documents not in DOCUMENTS:
        raise NnlmError(f"documents={documents!r}: choose from {', '.join(DOCUMENTS)}")
    texts = [texts] if isinstance(texts, (str, os.PathLike)) else list(texts)
    fixed = vocab is not None
    if vocab is None:
        vocab = Vocabulary.from_counts(count_words(texts), min_count)
    size = sum(os.path.getsize(p) if os.path.isfile(p) else 0 for p in texts)
    seen = {str(path): [0, 0] for path in texts}  # tokens, of them <unk>: per text

    def counted(path):
        for block in encode_documents(path, vocab):
            seen[str(path)][0] += len(block[0])
            seen[str(path)][1] += int(np.count_nonzero(block[0] == UNK_ID))
            yield block

    out = _write_index((b for path in texts for b in counted(path)), size, vocab, documents,
                       memory, workers, Path(output))
    for path, (n, unknown) in seen.items() if fixed else ():  # a vocabulary for another text
        warn_unknown_share_of(n, unknown, path)
    return out


def _write_index(encoded, size: int | None, vocab: Vocabulary, documents: str, memory: int,
                 workers: int, output: Path) -> Path:
    """The index of ``encoded`` (blocks of (word ids, line lengths, bytes read) of texts
    of ``size`` bytes) at ``output``, written whole or not at all."""
    width = files.width_for(len(vocab))
    budget = shard_tokens(memory, width, workers)
    with atomic_path(output) as tmp:
        tmp.mkdir()
        jobs = _encode_shards(tmp, encoded, size, width, documents, budget)
        entries = _sort_all(jobs, workers)  # the encoding's arrays are gone by now
        vocab.save(tmp / "vocab.txt")
        files.write_header(tmp, width, documents, vocab, entries)
    return output


def _encode_shards(directory: Path, encoded, size: int | None, width: int, documents: str,
                   budget: int) -> list[tuple]:
    """Each shard's tokens written to ``tokenized.i`` as soon as it is whole (a shard
    starts at a document's start; at most ``budget`` tokens unless one document is
    longer); the jobs that sort them."""
    pending: list[tuple[np.ndarray, np.ndarray]] = []
    jobs: list[tuple] = []
    held, continues = 0, False
    with progress_bar(size, "encoding", "B", delay=2.0) as bar:
        for ids, lengths, read in encoded:
            stream, seps = token_stream(ids, lengths, width, documents, continues)
            continues = documents == "paragraphs" and len(lengths) > 0 and lengths[-1] > 0
            for part, part_seps in _cut(stream, seps, budget):
                starts = len(part_seps) > 0 and part_seps[0] == 0
                if held + len(part) > budget and pending and starts:
                    jobs.append(_flush(directory, len(jobs), pending))
                    pending, held = [], 0
                pending.append((part, part_seps))
                held += len(part)
            bar.update(read)
    if pending:
        jobs.append(_flush(directory, len(jobs), pending))
    return jobs


def index_stream(stream, vocab: Vocabulary, output: str | os.PathLike,
                 memory: int = 4 << 30) -> Path:
    """Index encoded text (a :class:`~nnlm.text.stream.Stream`, its lines one document
    each) into the folder ``output``: what an n-gram model over an index is built from."""
    ends = stream.offsets[1:] - 1  # each line's </s>
    keep = np.ones(len(stream.ids), bool)
    keep[ends] = False
    return _write_index([(stream.ids[keep], np.diff(stream.offsets) - 1, 0)], None, vocab,
                        "lines", memory, 1, Path(output))


def _cut(stream: np.ndarray, seps: np.ndarray, budget: int):
    """Pieces of ``stream`` of at most ``budget`` tokens, cut at documents' starts (a
    document longer than a shard is refused)."""
    lo = 0
    while lo < len(stream):
        if len(stream) - lo <= budget:
            hi = len(stream)
        else:
            i = int(np.searchsorted(seps, lo + budget, side="right")) - 1
            hi = int(seps[i]) if i >= 0 and seps[i] > lo else -1
            if hi <= lo:
                raise NnlmError(f"a document of more than {budget:,} tokens does not fit a "
                                "shard within --memory; give more memory or shorter "
                                "documents")
        inside = seps[(seps >= lo) & (seps < hi)] - lo
        yield stream[lo:hi], inside
        lo = hi


def _flush(directory: Path, number: int, parts) -> tuple:
    """Write shard ``number``'s tokens (``parts``: pieces and their separators); the job
    that sorts it."""
    offsets = np.cumsum([0] + [len(p) for p, _ in parts[:-1]])
    seps = np.concatenate([s + o for (_, s), o in zip(parts, offsets)])
    with open(directory / f"tokenized.{number}", "wb") as f:
        for part, _ in parts:
            f.write(memoryview(np.ascontiguousarray(part)).cast("B"))
    return directory, number, seps, parts[0][0].dtype.itemsize


def _write_one(job) -> dict:
    directory, number, seps, width = job
    stream = np.fromfile(directory / f"tokenized.{number}", f"<u{width}")
    return files.write_shard(directory, number, stream, seps, suffix_array(stream),
                             text_written=True)


def _sort_all(jobs: list[tuple], workers: int) -> list[dict]:
    with progress_bar(len(jobs), "sorting suffixes", "shards", delay=2.0) as bar:
        if workers <= 1 or len(jobs) <= 1:
            out = []
            for job in jobs:
                out.append(_write_one(job))
                bar.update(1)
            return out
        # spawned, not forked: a fork of a process with threads (a server's, a test
        # runner's) can inherit a lock held by another thread and hang
        with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
            out = []
            for entry in pool.map(_write_one, jobs):
                out.append(entry)
                bar.update(1)
            return out

"""Modified Kneser-Ney in one process within a memory bound: the cluster's passes
(:mod:`.blocks`) run here one partition at a time, every piece between two passes kept
in a file, so that memory holds one shard's counting or one partition's work and never
the corpus or the model.

The in-memory estimator holds the text as ids (4 bytes a token) and the whole model
while it fits (about 60 bytes an n-gram): 20 GB at a billion tokens, whatever
``--memory`` says. Here:

1. **Vocabulary**: the text's words counted a block at a time (the compiled reader).
2. **Counting**: the text read again in shards of whole lines, each counted in memory
   and cut by last word into the partitions' pieces (:func:`.blocks.shard_pieces`), which
   go to files.
3. **Per partition**, one after another: the shards' pieces merged (pass 2), the context
   sums sent to the contexts' homes (pass 3), answered there (pass 4) and the partition's
   piece of every level interpolated (pass 5), each step's output in files.
4. **Writing**: the model's file made from the pieces in range order
   (:class:`.partitioned.PartitionedSource`), a piece read at a time; the ARPA file too.

The passes are the cluster's, so the model is the one process's to the bit and its file
is the in-memory estimator's byte for byte (the tests compare them). Where lmplz keeps its
sorted n-gram streams on disk (``-T``), this keeps the partitions' pieces, in ``temp``.
"""

from __future__ import annotations

import math
import os
import pickle
import shutil
import tempfile
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...base.errors import NnlmError
from ...base.progress import progress_bar, quietly
from ...base.sysmem import human_size, release_free_memory
from ...base.threads import ordered_map, usable_cores
from ...text import word_blocks
from ...text.corpus import word_counts
from ...text.fileio import compression_of
from ...text.stream import Stream
from ...text.vocab import UNK_ID, Vocabulary
from ..estimate.counts import BYTES_PER_POSITION, chunk_for
from ..estimate.kneser_ney import check_fallback
from ..estimate.workspace import MIN_MEMORY
from ..formats.arpa_write import WordTexts, ngram_lines, write_arpa_sections
from . import blocks
from .partitioned import (
    StreamedKneserNey,
    discounts_of,
    first_ids,
    offsets_of,
    streamed_model_of,
)

# what the process holds besides the work: the interpreter, numpy and the compiled kernels
BASE_BYTES = 256 << 20
# a shard's counting: bytes a token (the ids, the per-position arrays and the tables, 37
# measured on bench/ngram/synthetic.py's text), a fixed part (its tables and pieces grow faster
# than its tokens in small shards) and its chunk's temporaries
SHARD_BYTES_PER_TOKEN, SHARD_FIXED_BYTES = 40, 64 << 20
# bytes an n-gram of one partition's largest step (merging and interpolating: the tables,
# adjusted counts, word rows, context groups and answers)
PARTITION_BYTES_PER_NGRAM = 200
# n-grams a token, planned for: bench/ngram/synthetic.py's text has 1.1 at 10M tokens, 0.6 at
# 50M and 0.2 at 1B (the partitions are cut before the n-grams are counted)
NGRAMS_PER_TOKEN = 1.2
# the in-memory estimator's peak: the interpreter and kernels, and per token the ids and
# the fitted model (measured 0.84 GB at 10M tokens, 1.95 GB at 50M, 19.7 GB at 1B)
IN_MEMORY_BASE, IN_MEMORY_BYTES_PER_TOKEN = 400 << 20, 50


def available() -> bool:
    """Whether this path can run: it reads the text twice with the compiled reader."""
    return word_blocks.table_of() is not None


def tokens_about(path) -> int:
    """About how many tokens a text file holds, from its size: 5 bytes a token, 20 where
    it is compressed (gzip, bzip2 or xz shrink text 3-5 times)."""
    with open(path, "rb") as f:  # the bytes on disk, not the text they hold
        compressed = compression_of(f.read(8)) is not None
    return os.path.getsize(path) // (20 if compressed else 5)


def in_memory_need(tokens: int) -> int:
    """About the in-memory estimator's peak for a text of ``tokens`` tokens, on the high
    side: where it passes ``--memory``, this path runs instead."""
    return IN_MEMORY_BASE + tokens * IN_MEMORY_BYTES_PER_TOKEN


def plan(tokens: int, memory: int, threads: int) -> tuple[int, int, int]:
    """(tokens a shard, partitions, positions a counting chunk) for a text of ``tokens``
    tokens within ``memory`` bytes: what the process holds besides (``BASE_BYTES``) taken
    off, the rest shared by the shards counting at once, or by the partitions at work at
    once, one a thread."""
    share = max(memory - BASE_BYTES, memory // 4) // threads
    chunk = chunk_for(max(MIN_MEMORY, share // 4))
    room = share - chunk * BYTES_PER_POSITION - SHARD_FIXED_BYTES
    shard = max(1 << 20, room // SHARD_BYTES_PER_TOKEN)
    ngrams = tokens * NGRAMS_PER_TOKEN
    partitions = math.ceil(ngrams * PARTITION_BYTES_PER_NGRAM / share)
    return shard, min(256, max(2, partitions)), chunk


class PieceFiles:
    """The pieces between passes, each pickled to its own file in ``folder`` (a pickle
    of numpy arrays writes their buffers as they are). ``take`` reads a piece and
    deletes its file: the disk holds what a later pass still needs, and little more."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.bytes = self.peak = 0
        self.lock = threading.Lock()  # the passes' threads put and take at once

    def _count(self, size: int) -> None:
        with self.lock:
            self.bytes += size
            self.peak = max(self.peak, self.bytes)

    def path(self, name: str) -> Path:
        return self.folder / f"{name}.pkl"

    def put(self, name: str, value) -> None:
        path = self.path(name)
        try:
            with open(path, "wb") as f:
                pickle.dump(value, f, protocol=5)
        except OSError as e:
            path.unlink(missing_ok=True)
            raise NnlmError(f"{self.folder}: cannot write the estimate's temporary files "
                            f"({(e.strerror or str(e)).lower()}); free some space or give "
                            "another folder with --temp") from None
        self._count(path.stat().st_size)

    def get(self, name: str):
        with open(self.path(name), "rb") as f:
            return pickle.load(f)

    def take(self, name: str):
        value = self.get(name)
        self.drop(name)
        return value

    def drop(self, name: str) -> None:
        path = self.path(name)
        self._count(-path.stat().st_size)
        path.unlink()

    def put_array(self, name: str, array: np.ndarray) -> None:
        self.put(name, np.ascontiguousarray(array))


def read_shards(paths: Sequence, vocab: Vocabulary, shard_tokens: int):
    """The text as Streams of about ``shard_tokens`` tokens, cut at line ends (an n-gram
    never crosses a line, so the shards' counts add up to the text's), encoded with
    ``vocab`` (words outside it are ``<unk>``) a block at a time."""
    table = word_blocks.table_of(vocab.words)
    V = len(vocab)
    ids, lengths, held = [], [], 0

    def shard():
        word_ids = np.concatenate(ids)
        np.copyto(word_ids, np.int32(UNK_ID), where=word_ids >= V)
        line_lengths = np.concatenate(lengths)
        return Stream.from_ids(word_ids, line_lengths[line_lengths > 0])

    for path in paths:
        for block_ids, block_lengths in _encoded_blocks(path, table):
            ids.append(block_ids)
            lengths.append(block_lengths)
            held += len(block_ids)
            if held >= shard_tokens:
                yield shard()
                ids, lengths, held = [], [], 0
    if held:
        yield shard()


def _encoded_blocks(path, table):
    """(ids, every line's length) of ``path`` a block at a time (as
    :func:`~nnlm.text.word_blocks.iter_encoded`; its refusals are one line)."""
    try:
        for ids, lengths, _ in word_blocks.iter_encoded(path, table):
            yield ids, lengths
    except word_blocks.Refused:
        raise NnlmError(f"{path}: the compiled reader refused a block; read it without "
                        "--memory, or with NNLM_NO_C=1") from None


def vocabulary_of(paths: Sequence, min_count: int, max_size: int | None
                  ) -> tuple[Vocabulary, int]:
    """The text's vocabulary, as :func:`~nnlm.text.corpus.read_corpus` makes it, and its
    tokens, counted a block at a time."""
    words, counts = word_counts(list(paths))
    vocab = Vocabulary.from_counts(dict(zip(words, counts.tolist())), min_count, max_size)
    return vocab, int(counts.sum())


def estimate_out_of_core(paths: Sequence, order: int, memory: int, temp=None,
                         vocab: Vocabulary | None = None, min_count: int = 1,
                         max_size: int | None = None, discount_fallback=None,
                         save: Callable | None = None, arpa=None,
                         log: Callable[[str], None] = lambda message: None,
                         partitions: int | None = None, shard_tokens: int | None = None,
                         threads: int | None = None, stats: dict | None = None):
    """Modified Kneser-Ney of the text files ``paths`` (one corpus, read in order) within
    about ``memory`` bytes, the pieces in a folder made in ``temp`` (default: the
    system's temporary folder) and removed at the end. The model is handed to ``save``
    as a :class:`StreamedKneserNey` while its pieces are on disk (its file written from
    them); ``arpa``: also an ARPA file, from the pieces. Returns the streamed model
    (usable only inside ``save``). ``threads``: shards counted and partitions worked on
    at once (default: the usable cores, up to 4; the bound is shared among them).
    ``partitions`` and ``shard_tokens`` override the plan (tests); ``stats`` receives the
    plan and the temporary files' peak bytes."""
    fallback = check_fallback(discount_fallback)
    paths = list(paths)
    if vocab is None:
        log(f"vocabulary of {paths[0]}" + (f" and {len(paths) - 1} more" if len(paths) > 1
                                           else ""))
        vocab, tokens = vocabulary_of(paths, min_count, max_size)
    else:
        tokens = sum(tokens_about(p) for p in paths)
    threads = threads or usable_cores()
    planned_shard, planned_parts, chunk = plan(tokens, memory, threads)
    shard_tokens = shard_tokens or planned_shard
    P0 = partitions or planned_parts
    folder = Path(tempfile.mkdtemp(prefix="nnlm-kn-", dir=temp))
    try:
        files = PieceFiles(folder)
        model = _estimate(files, paths, order, vocab, fallback, P0, shard_tokens, chunk,
                          threads, save, arpa, log, -(-tokens // shard_tokens))
        if stats is not None:
            stats.update({"tokens": tokens, "shard_tokens": shard_tokens, "partitions": P0,
                          "threads": threads, "temp_peak_bytes": files.peak})
        return model
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _estimate(files: PieceFiles, paths, order, vocab, fallback, P0, shard_tokens, chunk,
              threads, save, arpa, log, expected_shards):
    V, N = len(vocab), order
    bounds = blocks.choose_bounds(vocab.counts, P0)
    P = len(bounds) - 1
    log(f"counting n-grams in shards of {shard_tokens:,} tokens on {threads} thread(s), {P} "
        f"partitions by last word, pieces in {files.folder}")

    def count(s, stream):
        with quietly():  # this pass's bar, not one a shard
            pieces = blocks.shard_pieces(stream, N, V, bounds, chunk)
        for i, piece in enumerate(pieces):
            files.put(f"count-{s}-{i}", piece)
        del stream, piece, pieces
        release_free_memory()
        bar.update()

    with progress_bar(expected_shards, "counting shards", "shards", delay=2.0) as bar:
        # a shard is read only when a thread is free: memory holds `threads` of them
        S = sum(1 for _ in ordered_map(lambda item: count(*item),
                                       enumerate(read_shards(paths, vocab, shard_tokens)),
                                       threads))
    release_free_memory()
    log(f"{S} shard(s) counted; merging each partition ({human_size(files.bytes)} on disk)")

    def merge(i):
        part = blocks.build_partition([files.take(f"count-{s}-{i}") for s in range(S)], V)
        groups, asked = blocks.context_requests(part, bounds)
        files.put(f"part-{i}", part)
        files.put(f"groups-{i}", groups)
        for h in range(P):
            files.put(f"ask-{i}-{h}", asked[h])
        return (blocks.counts_of_counts(part), part.sizes(), *blocks.unigrams_of(part))

    summaries = each_result(merge, range(P), threads, "merging partitions")
    discounts = discounts_of(sum(s[0] for s in summaries), fallback)
    sizes = np.array([s[1] for s in summaries])
    offsets = offsets_of(sizes)
    words = np.concatenate([s[2] for s in summaries])
    unigram_p, gamma0 = blocks.unigram_model(words, np.concatenate([s[3] for s in summaries]),
                                             discounts[0], V)
    del summaries
    log("context sums at their homes")

    def answer(i):
        gammas, out, has_child = blocks.answer_contexts(
            files.get(f"part-{i}"), [files.take(f"ask-{j}-{i}") for j in range(P)],
            discounts, offsets[i])
        files.put(f"gammas-{i}", gammas)
        files.put(f"child-{i}", has_child)
        for j in range(P):
            files.put(f"answer-{i}-{j}", out[j])
        return (gammas[0], has_child[0]) if N > 1 else (None, None)

    gammas1, child1 = zip(*each_result(answer, range(P), threads, "context sums"))
    log("interpolating")
    each_result(lambda j: _interpolate_partition(files, j, P, N, V, discounts, offsets[j],
                                                 sizes[j], unigram_p, arpa is not None),
                range(P), threads, "interpolating")
    model = _streamed(files, vocab, N, discounts, bounds, sizes, words, unigram_p, gamma0,
                      list(gammas1), list(child1))
    if save is not None:
        log("writing the model from the partitions' pieces")
        save(model)
    if arpa is not None:
        log(f"writing {arpa} from the partitions' pieces")
        _write_arpa(files, Path(arpa), model, P)
    return model


def each_result(fn, items: Sequence, threads: int, desc: str) -> list:
    """``[fn(item) for item in items]`` on ``threads`` threads (each call reads its own
    pieces from disk, so memory holds ``threads`` partitions' work), with a bar."""
    with progress_bar(len(items), desc, "partitions", delay=2.0) as bar:
        def one(item):
            with quietly():
                out = fn(item)
            bar.update()
            return out

        return list(ordered_map(one, items, threads))


def _interpolate_partition(files: PieceFiles, j, P, N, V, discounts, offsets, sizes,
                           unigram_p, keep_arpa: bool) -> None:
    """Pass 5 for partition j: its piece of every level, each array in a file of its own
    (the writer reads one array at a time); with ``keep_arpa``, the float64 values and
    word rows the ARPA file needs too."""
    part = files.take(f"part-{j}")
    levels = blocks.interpolate(part, files.take(f"groups-{j}"), files.take(f"gammas-{j}"),
                                [files.take(f"answer-{i}-{j}") for i in range(P)], discounts,
                                unigram_p[offsets[0]:offsets[0] + sizes[0]], offsets, V,
                                files.take(f"child-{j}") if not keep_arpa else None)
    has_child = files.take(f"child-{j}") if keep_arpa else None
    for k, level in enumerate(levels, start=2):
        files.put_array(f"level-{j}-{k}-keys", level.keys)
        files.put_array(f"level-{j}-{k}-logp", level.logp.astype(np.float32, copy=False))
        if keep_arpa:
            bow = blocks.trie_array(levels, has_child, k, "log_bow", np.zeros(N, np.int64),
                                    V, 0, len(level)) if k < N else np.zeros(0, np.float32)
            files.put_array(f"level-{j}-{k}-log_bow", bow)
            files.put(f"arpa-{j}-{k}", (part.words[k - 1], level.logp,
                                        level.log_bow if k < N else None))
        else:
            files.put_array(f"level-{j}-{k}-log_bow", level.log_bow)


def _streamed(files: PieceFiles, vocab, N, discounts, bounds, sizes, words, unigram_p,
              gamma0, gammas1, child1) -> StreamedKneserNey:
    """The model as its pieces on disk: each array of a partition's level read when the
    writer first asks for it, and kept until it asks for another."""
    V = len(vocab)
    first = first_ids(bounds, offsets_of(sizes))
    held: dict = {}

    def array(j, k, field):
        if (j, k, field) not in held:
            held.clear()
            held[(j, k, field)] = files.get(f"level-{j}-{k}-{field}")
        return held[(j, k, field)]

    def apply(k, name, chunks, fn, *args):
        for j, lo, hi in chunks:
            m, field = (k + 1, "keys") if name == "pointers" else (
                k, {"words": "keys"}.get(name, name))
            levels = [None] * (N - 1)
            levels[m - 2] = blocks.FilePiece(*(array(j, m, f) if f == field else None
                                               for f in ("keys", "logp", "log_bow")))
            piece = blocks.trie_array(levels, None, k, name, first[j], V, lo, hi)
            yield fn(piece, int(first[j, k - 1]) + lo, *args)

    return streamed_model_of(vocab, N, discounts, bounds, sizes, words, unigram_p, gamma0,
                             gammas1, child1, apply)


def _write_arpa(files: PieceFiles, path: Path, model: StreamedKneserNey, P: int) -> None:
    """The ARPA file from the pieces, partition after partition in each order: the
    in-memory estimator's file, byte for byte."""
    N = model.order
    words = WordTexts(model.vocab.words)

    def chunks(k):
        for j in range(P):
            rows, logp, log_bow = files.get(f"arpa-{j}-{k}")
            yield ngram_lines(words, rows, logp, log_bow), len(logp)

    write_arpa_sections(path, model.vocab, model.num_ngrams(), model.unigram_logp,
                        model.unigram_log_bow if N > 1 else None,
                        ((k, chunks(k)) for k in range(2, N + 1)))

"""Vectorized n-gram counting into suffix-keyed tables (no Python loop over tokens).

Sentences are counted the way KenLM counts them: ``<s> w1 ... wL </s>`` with a single
``<s>``, so n-grams near a sentence start are simply shorter (there is no ``<s> <s> w``).
Every k-gram g = (g1, ..., gk) of order k gets an id in its order's table, and is keyed
by its *suffix* (g2, ..., gk) and its first word::

    key_k(g) = id_{k-1}(g2 ... gk) * |V| + g1          (id_0 of the empty suffix is 0)

Tables are sorted by key, so ids are positions and lookups are ``np.searchsorted``.
Scoring a word w after context (..., c2, c1) then walks a chain of lookups, one per
order, each extending the previous n-gram by one word on the left::

    (w) -> (c1 w) -> (c2 c1 w) -> ...

Fitting needs no lookups at all: the id of the k-gram starting at position p follows
from the id of the (k-1)-gram starting at p + 1 by one ``np.unique`` per order.
Memory is the distinct n-grams (16 bytes each) plus 8 bytes a token for two int32
position arrays (on disk instead with a spill folder), each order's runs, and one chunk's
temporaries. The sentence sequence itself is never stored: it is read a block at a time
from the stream's ids (:class:`SentenceSequence`), and the runs are merged in place by a
k-way merge (:mod:`~nnlm.ngram.estimate.run_merge`), not concatenated and sorted again.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from ...base.errors import NnlmError, warn
from ...base.jit_cache import HAVE_NUMBA
from ...base.progress import progress_bar
from ...base.sysmem import human_size, release_free_memory
from ...base.threads import ordered_map, usable_cores
from ...text.stream import Stream
from ...text.vocab import BOS_ID, EOS_ID
from .workspace import MIN_MEMORY, Workspace


@dataclass
class OrderTable:
    """The distinct k-grams of one order, sorted by key.

    keys: int64, ``suffix * |V| + first_word``.
    counts: raw occurrence counts (int32 below 2^31 tokens, else int64).
    prefix: id (int32 or int64) of (g1..g_{k-1}) in order k-1, i.e. the n-gram's context
        (0 for unigrams).
    vocab_size: |V|.
    """

    keys: np.ndarray
    counts: np.ndarray
    prefix: np.ndarray
    vocab_size: int

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def suffix(self) -> np.ndarray:
        """id of (g2..gk) in order k-1 (0 for unigrams, whose keys are word ids < |V|),
        computed on demand."""
        return self.keys // self.vocab_size

    def first_word(self, V: int) -> np.ndarray:
        return self.keys % V


class SentenceSequence:
    """``<s> w1 ... wL </s>`` for every line, concatenated (int32 ids), read a block at a
    time from the stream's ids: stored whole it would repeat the corpus (4 bytes a token,
    0.2 GB at 50 M tokens, a tenth of counting's peak)."""

    def __init__(self, stream: Stream):
        self.ids = stream.ids
        lines = len(stream.offsets) - 1
        self.bos = stream.offsets[:-1] + np.arange(lines)  # where each <s> lands
        self.n = len(stream.ids) + lines

    def __len__(self) -> int:
        return self.n

    def read(self, a: int, b: int) -> np.ndarray:
        """Entries [a, b)."""
        i, j = np.searchsorted(self.bos, [a, b])  # the <s> in [a, b) are bos[i:j]
        words = self.ids[a - i:b - j]
        return np.insert(words, self.bos[i:j] - a - np.arange(j - i), np.int32(BOS_ID))


def unique_inverse(keys: np.ndarray, fast: bool = True) -> tuple[np.ndarray, ...]:
    """``np.unique(keys, return_inverse=True, return_counts=True)`` for non-negative int64
    keys; with ``fast``, by a compiled radix sort (:mod:`~nnlm.ngram.estimate.radix`,
    twice numpy's speed on chunks of a million keys or more), which is worth loading numba
    (0.3 s) only for large corpora."""
    if not fast:
        return np.unique(keys, return_inverse=True, return_counts=True)
    from .radix import radix_unique

    return radix_unique(keys)


RADIX_POSITIONS = 8_000_000  # positions x orders from which loading numba pays off
_said: list[bool] = []


def slow_without_numba() -> None:
    """Say once a process that counting takes numpy's path, where numba's would pay."""
    if not _said:
        _said.append(True)
        warn("numba is not installed: counting takes numpy's path (the same counts; about "
             '1.5x the time on large corpora). pip install "nnlm[fast]" for its kernels')


CHUNK_POSITIONS = 1 << 21  # positions counted at once: ~0.1 GB of temporaries
BYTES_PER_POSITION = 64  # a chunk's temporaries, per position (measured peak, rounded up)


def chunk_for(memory: int | None) -> int:
    """Positions per chunk under a memory limit in bytes (None: no limit)."""
    if memory is None:
        return CHUNK_POSITIONS
    if memory < MIN_MEMORY:
        raise NnlmError(f"memory={human_size(memory)} is too small to make progress: "
                        f"counting needs at least {MIN_MEMORY >> 20}M")
    return int(min(CHUNK_POSITIONS, max(1 << 16, memory // 4 // BYTES_PER_POSITION)))


def count_ngrams(stream: Stream, order: int, vocab_size: int, chunk: int = CHUNK_POSITIONS,
                 spill: str | os.PathLike | None = None, threads: int | None = None
                 ) -> list[OrderTable]:
    """Tables for orders 1..order (index 0 holds unigrams).

    The k-gram starting at position p is (seq[p], the (k-1)-gram starting at p + 1); it
    exists where that (k-1)-gram exists and seq[p] is not ``</s>`` (the k-gram would
    cross a line end). So one int32 array of each position's (k-1)-gram id (-1: none) is
    all the state carried from one order to the next.

    Each order is counted ``chunk`` positions at a time into sorted runs, which are then
    merged (as lmplz does), so the temporaries are bounded by the chunk, not the corpus.
    With ``spill`` (a folder), the per-position arrays and the runs live in files there
    (see :mod:`~nnlm.ngram.estimate.workspace`): memory then holds the tables and one chunk
    a thread. ``threads`` (default: the usable cores) sort that many chunks at once and
    merge the runs in as many key ranges.
    """
    if order < 1:
        raise ValueError("order must be at least 1")
    V = vocab_size
    threads = usable_cores() if threads is None else threads
    with Workspace(spill) as work, \
            progress_bar(None, "counting n-grams", "chunks", delay=2.0) as bar:
        seq = SentenceSequence(stream)
        n = len(seq)
        counts = np.bincount(stream.ids, minlength=V)
        counts[BOS_ID] += len(stream.offsets) - 1
        words = np.flatnonzero(counts)
        tables = [OrderTable(words.astype(np.int64), counts[words],
                             np.zeros(len(words), np.int32), V)]
        rank = np.full(V, -1, np.int32)
        rank[words] = np.arange(len(words), dtype=np.int32)
        spans = [(a, min(a + chunk, n - 1)) for a in range(0, n - 1, chunk)]
        ids = work.positions(n, np.int32, "ids")  # each position's unigram id
        for a in range(0, n, chunk):
            ids.write(a, rank[seq.read(a, min(a + chunk, n))])
        small = np.int32 if n < 2**31 else np.int64  # counts and positions within a chunk
        large = n * (order - 1) >= RADIX_POSITIONS
        fast = HAVE_NUMBA and ("numba" in sys.modules or large)
        if large and not HAVE_NUMBA:
            slow_without_numba()

        def starts(a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """Offsets from a of the k-grams starting in [a, b), their first words, and
            the ids of the (k-1)-grams that follow them."""
            s, nxt = seq.read(a, b), ids.read(a + 1, b + 1)
            p = np.flatnonzero((s != EOS_ID) & (nxt >= 0))
            return p, s[p], nxt[p]

        bar.total = 2 * (order - 1) * len(spans)
        for k in range(2, order + 1):
            bar.set_postfix(order=k)
            # Each chunk's run: its distinct keys (sorted) and their counts, the runs end
            # to end in two arrays sized for the worst case (every position a k-gram of its
            # own: pages never written cost nothing), and each k-gram's index in its run.
            run_keys = work.positions(n, np.int64, f"keys{k}")
            run_seen = work.positions(n, small, f"seen{k}")
            run_starts, runs = [0], []

            def chunk_keys():  # read here: the arrays may be files, read by seeking
                for a, b in spans:
                    _, first, rest = starts(a, b)
                    yield rest.astype(np.int64) * V + first

            for uniq, inverse, seen in ordered_map(lambda keys: unique_inverse(keys, fast),
                                                   chunk_keys(), threads):
                run_keys.write(run_starts[-1], uniq)
                run_seen.write(run_starts[-1], seen.astype(small))
                run_starts.append(run_starts[-1] + len(uniq))
                runs.append(work.put((inverse.astype(np.int32),)))
                del uniq, inverse, seen
                bar.update()
            total = run_starts[-1]
            if len(runs) == 1:
                uniq, n_seen = [run_keys.read(0, total)], [run_seen.read(0, total)]
                table_ids = None  # a run's index is the table's id
            else:  # merge the sorted runs: distinct keys over all chunks, counts summed
                from .run_merge import merge_runs_parts  # numba: only where runs spill

                uniq, n_seen, table_ids = merge_runs_parts(
                    run_keys.view(0, total), run_seen.view(0, total), run_starts, threads)
            run_keys.close()
            run_seen.close()
            # Exact sizes, now that the runs are gone: the views (the merge's parts, one a
            # thread) hold buffers with room for every run entry, and one small enough to
            # come from the heap may sit on pages the process already holds, untouched or
            # not.
            uniq, n_seen = np.concatenate(uniq), np.concatenate(n_seen)
            new_ids = work.positions(n, np.int32 if len(uniq) < 2**31 else np.int64,
                                     f"ids{k}")
            prefix = np.empty(len(uniq), ids.dtype)
            for i, ((a, b), r) in enumerate(zip(spans, runs)):
                p, _, _ = starts(a, b)
                g = work.get(r, 0)
                if table_ids is not None:
                    g = table_ids[run_starts[i]:run_starts[i + 1]][g]
                block = np.full(b - a, -1, new_ids.dtype)
                block[p] = g
                new_ids.write(a, block)
                prefix[g] = ids.read(a, b)[p]  # the context (g1..g_{k-1}) starts there too
                work.drop(r)
                bar.update()
            new_ids.write(n - 1, np.full(1, -1, new_ids.dtype))  # no k-gram starts at the end
            del runs, table_ids
            tables.append(OrderTable(uniq, n_seen, prefix, V))
            ids.close()
            ids = new_ids
            release_free_memory()
    return tables

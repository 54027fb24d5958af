"""Modified Kneser-Ney estimated on a Dask cluster, equal to the single-process model to
the bit.

The n-grams are partitioned by their last word (:mod:`.blocks` says why that cut keeps
almost everything local); Dask schedules the tasks, moves their results between workers,
spills and recomputes what a dead worker held. Each task is numpy and the one-process
estimator's compiled kernels over sorted blocks (:mod:`.kernels`):

1. **Vocabulary**: each worker counts the words of its own shards; the counts are summed
   and give the partitions' word ranges (about equal token mass each).
2. **Counting**: each worker counts its shards' n-grams of every order and cuts them into
   one sorted piece per partition.
3. **Merging** (a task per partition): the shards' pieces merged, counts summed, and the
   adjusted counts; the client sums the counts-of-counts into the discounts (Chen &
   Goodman 1998, eq. 26) and computes the unigrams.
4. **Contexts**: each partition sends integer partial sums for the contexts its n-grams
   use to the context's home partition, which answers with S(h), gamma(h) and h's id.
5. **Interpolation**: each partition's piece of every level, p(h w) = (a - D) / S(h) +
   gamma(h) p(w | h').

The model's file is written from the partitions' pieces (``save``): each section of the
mapped trie made where the pieces lie, 2^21 entries a task, and pulled in the model's
order (:class:`.partitioned.PartitionedSource`), so the client never holds the model and
the file is the one process's, byte for byte. Without ``save`` the client gathers the
pieces an order at a time and lays them end to end (:func:`.partitioned.assemble_model`)
into the arrays :class:`~nnlm.ngram.estimate.kneser_ney.KneserNey` builds. With
``arpa``, the ARPA file is written from the pieces too, formatted where they lie: the
one-process file, byte for byte.
"""

from __future__ import annotations

import resource
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...text.vocab import Vocabulary
from ..estimate.kneser_ney import KneserNey, check_fallback
from ..formats.arpa_write import write_arpa_sections
from . import blocks, kernels
from .partitioned import (
    StreamedKneserNey,
    assemble_model,
    discounts_of,
    first_ids,
    offsets_of,
    streamed_model_of,
)


def shard_vocabulary(client, shards: Sequence, min_count: int = 1,
                     max_size: int | None = None) -> Vocabulary:
    """Pass 1: each worker counts its own shards' words."""
    total: Counter = Counter()
    for words, counts in client.gather(client.map(kernels.shard_words, list(shards),
                                                  pure=False)):
        total.update(dict(zip(words.decode("utf-8").split("\n"), counts.tolist())))
    return Vocabulary.from_counts(total, min_count, max_size)


def estimate_kn(client, shards: Sequence, order: int, vocab: Vocabulary,
                discount_fallback=None, partitions: int | None = None,
                log: Callable[[str], None] = lambda message: None,
                stats: dict | None = None, arpa=None, save=None):
    """Interpolated modified Kneser-Ney of ``order`` from the text ``shards`` (paths each
    worker can read), on the Dask ``client``'s cluster (see the module docstring).

    ``partitions``: how many last-word ranges (default: one a worker). ``stats``: a dict
    that receives, per pass, the seconds to its end, this process's peak memory by then
    and the bytes its tasks hand to others (for bench/ngram/distributed.py; measuring them
    costs a task per result). ``arpa``: also write the model there as an ARPA
    file, streamed from the workers (:func:`stream_arpa`). ``save``: called with the
    model as a :class:`~.partitioned.StreamedKneserNey` (its file written from the
    workers' pieces, never gathered) before the cluster lets the pieces go; without
    it, the model is gathered into a :class:`KneserNey` in this process.
    """
    from distributed import wait

    clock = time.perf_counter()

    def moved(name: str, futures: list) -> None:
        """Record the bytes of the pieces that ``futures`` hand to other tasks."""
        if stats is not None:
            sizes = client.gather([client.submit(kernels.nbytes, f, pure=False)
                                   for f in futures])
            stats.setdefault("shuffles", []).append({"pass": name, "bytes": int(sum(sizes))})

    def passed(name: str) -> None:
        if stats is not None:
            stats.setdefault("pass_end_seconds", {})[name] = round(time.perf_counter() - clock, 3)
            stats.setdefault("client_peak_rss_gb_at_pass_end", {})[name] = round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)

    fallback = check_fallback(discount_fallback)
    V, N = len(vocab), order
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    bounds = blocks.choose_bounds(vocab.counts, partitions or workers)
    P = len(bounds) - 1
    log(f"counting n-grams of {len(shards)} shard(s) on {workers} worker(s), "
        f"{P} partition(s) by last word")
    # The vocabulary is one task whose argument is the words as UTF-8 bytes. Not a list
    # of strings: in a task's arguments Dask takes a string equal to a task's name for
    # that task (Brown's vocabulary holds "words", a name in the graph). Not scattered
    # data either: the memory manager keeps one replica of scattered data, and a worker
    # dying with it lost it for good; a task's result is recomputed from its spec.
    vocabulary = client.submit(kernels.vocabulary_text, "\n".join(vocab.words).encode(),
                               pure=False)
    counted = client.map(kernels.shard_blocks, list(shards), vocabulary=vocabulary,
                         order=N, bounds=bounds, pure=False)
    parts = [client.submit(kernels.build_partition, V,
                           *[client.submit(kernels.piece, c, i, pure=False) for c in counted],
                           pure=False) for i in range(P)]
    moved("count", counted)
    del counted
    summaries = client.gather([client.submit(kernels.partition_summary, part, pure=False)
                               for part in parts])
    passed("count")

    log("discounts, unigrams and context sums")
    discounts = discounts_of(sum(s["counts"] for s in summaries), fallback)
    sizes = np.array([s["sizes"] for s in summaries])
    offsets = offsets_of(sizes)
    words = np.concatenate([s["words"] for s in summaries])
    unigram_p, gamma0 = blocks.unigram_model(np.asarray(words),
                                             np.concatenate([s["a"] for s in summaries]),
                                             discounts[0], V)
    del summaries
    asked = [client.submit(blocks.context_requests, part, bounds, pure=False) for part in parts]
    answered = [client.submit(kernels.answer_contexts, parts[i], discounts, offsets[i],
                              *[client.submit(kernels.piece, asked[j], 1, i, pure=False)
                                for j in range(P)], pure=False) for i in range(P)]
    moved("context", [*asked, *answered])
    passed("adjust")

    log("interpolating")
    has_child = [client.submit(kernels.piece, a, 2, pure=False) for a in answered]
    # a model written from the pieces without an ARPA file needs only the file's form
    # of each piece (16 bytes an n-gram instead of 40): the workers hold less
    compact = save is not None and arpa is None
    levels = [client.submit(
        kernels.interpolate, parts[j], client.submit(kernels.piece, asked[j], 0, pure=False),
        client.submit(kernels.piece, answered[j], 0, pure=False), discounts,
        unigram_p[offsets[j, 0]:offsets[j, 0] + sizes[j, 0]], offsets[j], V,
        has_child[j] if compact else None,
        *[client.submit(kernels.piece, answered[i], 1, j, pure=False) for i in range(P)],
        pure=False) for j in range(P)]
    unigram_gammas = client.gather([client.submit(kernels.piece, a, 0, 0, pure=False)
                                    for a in answered]) if N > 1 else [None] * P
    del asked, answered
    wait(levels)
    passed("interpolate")
    if save is not None:
        if arpa is None:
            del parts  # the levels are made: the partitions' counts can go
        model = streamed_model(client, vocab, N, discounts, bounds, sizes, words,
                               unigram_p, gamma0, unigram_gammas, levels, has_child)
        log("writing the model from the workers' partitions")
        save(model)
        passed("write")
    else:
        log("gathering the model")
        model = assemble_model(vocab, N, fallback, discounts, words, unigram_p, gamma0,
                               unigram_gammas, lambda k: client.gather(
                                   [client.submit(kernels.piece, level, k - 2, pure=False)
                                    for level in levels]))
        passed("gather")
    if arpa is not None:
        log(f"writing {arpa} from the workers' partitions")
        stream_arpa(client, Path(arpa), model, vocabulary, parts, levels)
        passed("arpa")
    return model


def streamed_model(client, vocab: Vocabulary, N: int, discounts, bounds, sizes, words,
                   unigram_p, gamma0, unigram_gammas, levels: list, has_child: list
                   ) -> StreamedKneserNey:
    """The model as the partitions hold it, its file's sections made where the pieces
    lie and fetched a few at a time, in range order (:class:`PartitionedSource`)."""
    V = len(vocab)
    first = first_ids(bounds, offsets_of(sizes))
    ahead = 2 * max(1, len(client.scheduler_info().get("workers", {})))

    def apply(k, name, chunks, fn, *args):
        pending = []
        for j, lo, hi in chunks:
            pending.append(client.submit(kernels.trie_piece, levels[j], has_child[j], k, name,
                                         first[j], V, lo, hi, fn, *args, pure=False))
            if len(pending) > ahead:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()

    children = client.gather([client.submit(kernels.piece, h, 0, pure=False)
                              for h in has_child]) if N > 1 else []
    return streamed_model_of(vocab, N, discounts, bounds, sizes, words, unigram_p, gamma0,
                             unigram_gammas, children, apply)


def stream_arpa(client, path: Path, model: KneserNey, vocabulary, parts: list,
                levels: list) -> None:
    """Write the ARPA file from the partitions' pieces: each piece's lines are formatted
    where it lies (``kernels.arpa_lines``) and come here in partition order, a few in
    flight, so the sections are in the model's order (the one-process file)."""
    N = model.order
    ahead = 2 * max(1, len(client.scheduler_info().get("workers", {})))

    def chunks(k):
        pending = []
        for part, level in zip(parts, levels):
            pending.append(client.submit(kernels.arpa_lines, part, level, vocabulary, k,
                                         k == N, pure=False))
            if len(pending) > ahead:
                yield pending.pop(0).result()
        for future in pending:
            yield future.result()

    write_arpa_sections(path, model.vocab, model.num_ngrams(), model.unigram_logp,
                        model.unigram_log_bow if N > 1 else None,
                        ((k, chunks(k)) for k in range(2, N + 1)))

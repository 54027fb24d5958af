"""Modified Kneser-Ney estimated on a Dask cluster, equal to the single-process model.

The passes follow Heafield, Pouzyrevsky, Clark & Koehn (2013), *Scalable Modified
Kneser-Ney Language Model Estimation*, with each sort replaced by the engine's hash
shuffle (Dask's DataFrame ``merge`` and ``groupby(split_out=P)``: the engine moves the
blocks between workers, spilling to disk as it must):

1. **Vocabulary**: each worker counts the words of its own shards; the counts are summed.
2. **Counting**: each worker counts its shards' n-grams of every order; equal n-grams
   from different shards meet in one partition (placed by all of their words) and are
   summed.
3. **Adjusted counts**: the (k+1)-grams, placed by their suffix, give each k-gram its
   number of distinct left extensions N1+(. g); the raw count at the top order and after
   ``<s>``.
4. **Discounts**: the counts-of-counts n1..n4 of each partition are summed on the
   client, which computes D1, D2, D3+ per order (Chen & Goodman 1998, eq. 26).
5. **Context sums**, placed by context h: S(h) = sum of a(h x) and the discounted mass,
   giving u(h w) = (a - D) / S(h) and the back-off gamma(h).
6. **Interpolation**, order by order, placed by suffix: p(h w) = u(h w) + gamma(h)
   p(suffix), the lower order's p joined on its words.

With ``arpa``, the ARPA file is written next, from the workers' partitions of each order
(formatted where they lie, pulled one at a time: no process holds an order whole).
The client then gathers the orders (the model directory is written by one process) and
builds the same arrays :class:`~nnlm.ngram.estimate.kneser_ney.KneserNey` builds:
every n-gram, probability and back-off equal to the single-process model's (to rounding:
sums over a context are added in another order).
"""

from __future__ import annotations

import operator
import resource
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ...text.vocab import BOS_ID, Vocabulary
from ..estimate.kneser_ney import (
    KneserNey,
    backoff_of,
    check_fallback,
    discount_of,
    discounts_of_counts,
)
from ..formats.arpa_write import write_arpa_sections
from ..store.levels import NgramLevel
from . import kernels
from .kernels import columns


def _meta(k: int, **values) -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype=np.int32) for c in columns(k)})
    for name, dtype in values.items():
        frame[name] = pd.Series(dtype=dtype)
    return frame


def _int32(frame, k: int):
    """The word columns as int32 (a grouping's keys may come back wider)."""
    return frame.astype({c: np.int32 for c in columns(k)})


def _renamed(frame, k: int, first: int):
    """The word columns w{first}.. renamed to w0.."""
    return frame.rename(columns=dict(zip(columns(k, first), columns(k))))


def shard_vocabulary(client, shards: Sequence, min_count: int = 1,
                     max_size: int | None = None) -> Vocabulary:
    """Pass 1: each worker counts its own shards' words."""
    total: Counter = Counter()
    for counts in client.gather(client.map(kernels.shard_words, list(shards), pure=False)):
        total.update(counts)
    return Vocabulary.from_counts(total, min_count, max_size)


def estimate_kn(client, shards: Sequence, order: int, vocab: Vocabulary,
                discount_fallback=None, partitions: int | None = None,
                log: Callable[[str], None] = lambda message: None,
                stats: dict | None = None, arpa=None) -> KneserNey:
    """Interpolated modified Kneser-Ney of ``order`` from the text ``shards`` (paths each
    worker can read), on the Dask ``client``'s cluster (see the module docstring).

    ``stats``: a dict that receives, per pass, the seconds to its end, this process's peak
    memory by then, and the rows and bytes that entered its shuffles (for
    bench/distributed.py; measuring them costs a pass over the data). ``arpa``: also
    write the model there as an ARPA file, streamed from the workers (:func:`stream_arpa`).
    """
    import dask.dataframe as dd

    clock = time.perf_counter()

    def shuffled(name: str, k: int, *frames) -> None:
        if stats is not None:
            for frame in frames:
                rows, size = client.compute([frame.shape[0],
                                             frame.memory_usage(index=False).sum()],
                                            sync=True)
                stats.setdefault("shuffles", []).append(
                    {"pass": name, "order": k, "rows": int(rows), "bytes": int(size)})

    def passed(name: str) -> None:
        if stats is not None:
            stats.setdefault("pass_end_seconds", {})[name] = round(time.perf_counter() - clock, 3)
            stats.setdefault("client_peak_rss_gb_at_pass_end", {})[name] = round(
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)

    fallback = check_fallback(discount_fallback)
    V, N = len(vocab), order
    workers = max(1, len(client.scheduler_info().get("workers", {})))
    P = partitions or max(2, 2 * workers)
    log(f"counting n-grams of {len(shards)} shard(s) on {workers} worker(s), "
        f"{P} partitions")
    # The vocabulary is one task whose argument is the words as UTF-8 bytes. Not a list
    # of strings: in a task's arguments Dask takes a string equal to a task's name for
    # that task (Brown's vocabulary holds "words", a name in the graph). Not scattered
    # data either: the memory manager keeps one replica of scattered data, and a worker
    # dying with it lost it for good; a task's result is recomputed from its spec.
    vocabulary = client.submit(kernels.vocabulary_text, "\n".join(vocab.words).encode(),
                               pure=False)
    counted = client.map(kernels.shard_ngrams, list(shards), vocabulary=vocabulary, order=N,
                         pure=False)
    tables = {}
    for k in range(1, N + 1):
        parts = [client.submit(operator.getitem, f, k) for f in counted]
        frame = dd.from_delayed(parts, meta=_meta(k, c=np.int64), verify_meta=False)
        shuffled("count", k, frame)
        tables[k] = _int32(frame.groupby(columns(k), sort=False)["c"].sum(split_out=P)
                           .reset_index(), k).persist()
    del counted
    passed("count")

    log("adjusted counts and discounts")
    adjusted, n = {}, np.zeros((N, 6), np.int64)
    for k in range(1, N + 1):
        if k == N:
            adjusted[k] = tables[k].map_partitions(kernels.adjusted_counts, k, True,
                                                   meta=_meta(k, a=np.int64))
        else:
            suffixes = _renamed(tables[k + 1][columns(k, 1)], k, 1)
            left = _int32(suffixes.groupby(columns(k), sort=False).size(split_out=P)
                          .rename("n").reset_index(), k)
            shuffled("adjust", k, suffixes, tables[k], left)
            joined = tables[k].merge(left, on=columns(k), how="left", npartitions=P)
            adjusted[k] = joined.map_partitions(kernels.adjusted_counts, k, False,
                                                meta=_meta(k, a=np.int64))
        adjusted[k] = adjusted[k].persist()
        n[k - 1] = adjusted[k].map_partitions(_counts_frame, meta=_COUNTS_META).sum() \
            .compute().to_numpy()
    del tables
    passed("adjust")
    discounts = np.stack([discounts_of_counts(n[k - 1], k, fallback) for k in range(1, N + 1)])

    log("interpolating")
    uni = adjusted[1].compute()
    words = np.sort(uni["w0"].to_numpy().astype(np.int64))
    uni = uni.set_index("w0").loc[words]
    a1 = uni["a"].to_numpy()
    D1 = discount_of(a1, discounts[0])
    S, mass = float(a1.sum()), float(D1.sum())
    gamma0 = float(backoff_of(np.array(S), np.array(mass)))
    p1 = ((a1 - D1) / S if S > 0 else np.zeros(len(a1))) + gamma0 / (V - 1)
    probs = {1: dd.from_pandas(pd.DataFrame({"w0": words.astype(np.int32), "p": p1}),
                               npartitions=min(P, max(1, len(words))))}
    gammas = {}
    for k in range(2, N + 1):
        rows = adjusted[k].map_partitions(kernels.with_discounts, list(discounts[k - 1]),
                                          meta=_meta(k, a=np.int64, D=np.float64))
        ctx = columns(k - 1)
        sums = _int32(rows.groupby(ctx, sort=False).agg({"a": "sum", "D": "sum"}, split_out=P)
                      .rename(columns={"a": "S", "D": "mass"}).reset_index(), k - 1).persist()
        shuffled("context", k, rows, sums)
        gammas[k] = sums.map_partitions(kernels.context_gammas,
                                        meta=_meta(k - 1, bow=np.float64))
        terms = rows.merge(sums, on=ctx, how="left", npartitions=P).map_partitions(
            kernels.interpolation_terms, meta=_meta(k, u=np.float64, gamma=np.float64))
        low = probs[k - 1].rename(columns={**dict(zip(columns(k - 1), columns(k - 1, 1))),
                                           "p": "p_low"})
        shuffled("interpolate", k, terms, low)
        probs[k] = terms.merge(low, on=columns(k - 1, 1), how="left", npartitions=P) \
            .map_partitions(kernels.interpolate, meta=_meta(k, p=np.float64)).persist()
    passed("interpolate")
    uni_p = np.full(V, gamma0 / (V - 1))
    uni_p[words] = p1
    uni_p[BOS_ID] = 0.0
    uni_bow = np.ones(V)
    if N >= 2:
        g = gammas[2].compute()
        uni_bow[g["w0"].to_numpy()] = g["bow"].to_numpy()
    with np.errstate(divide="ignore"):
        unigram_logp, unigram_log_bow = np.log(uni_p), np.log(uni_bow)
    final = {k: (probs[k].merge(gammas[k + 1], on=columns(k), how="left", npartitions=P)
                 if k < N else probs[k]).persist() for k in range(2, N + 1)}
    del probs, gammas
    if arpa is not None:
        log(f"writing {arpa} from the workers' partitions")
        stream_arpa(client, Path(arpa), vocab, vocabulary, final, unigram_logp,
                    unigram_log_bow if N > 1 else None)
        passed("arpa")
    log("gathering the model")
    model = KneserNey(vocab, N, fallback)
    model.discounts = discounts
    model.unigram_logp, model.unigram_log_bow = unigram_logp, unigram_log_bow
    model.levels = []
    table_keys = {1: words}  # each order's sorted keys (KneserNey's: suffix id * V + w0)
    for k in range(2, N + 1):
        frame = final.pop(k).compute()
        w = frame[columns(k)].to_numpy(np.int64)
        suffix_id = _ids(w[:, 1:], table_keys, V)
        keys = suffix_id * V + w[:, 0]
        sort = np.argsort(keys, kind="stable")
        w, keys = w[sort], keys[sort]
        table_keys[k] = keys
        p = frame["p"].to_numpy()[sort]
        if k < N:
            log_bow = np.log(frame["bow"].fillna(1.0).to_numpy()[sort])
        else:
            log_bow = np.broadcast_to(0.0, len(keys))
        if k == 2:
            level_keys, prefix, n_prefixes = w[:, 1] * V + w[:, 0], w[:, 0], V
        else:
            level_keys, prefix = keys, _ids(w[:, :-1], table_keys, V)
            n_prefixes = len(table_keys[k - 1])
        model.levels.append(NgramLevel(level_keys, np.log(p), log_bow, prefix, w[:, -1],
                                       n_prefixes))
    passed("gather")
    return model


def stream_arpa(client, path: Path, vocab: Vocabulary, vocabulary, final: dict,
                unigram_logp: np.ndarray, unigram_log_bow: np.ndarray | None) -> None:
    """Write the ARPA file from the workers' partitions of each order: each partition's
    lines are formatted where it lies (``kernels.arpa_lines``) and come to this process
    one at a time, a few in flight, so no process holds an order whole. Within a section
    the n-grams come in partition order; ARPA readers (KenLM's, nnlm's) take any order."""
    from dask import delayed
    from distributed import as_completed

    N = max(final) if final else 1
    counts = [len(vocab)] + [int(final[k].map_partitions(len).sum().compute())
                             for k in range(2, N + 1)]
    ahead = 2 * max(1, len(client.scheduler_info().get("workers", {})))

    def chunks(k):
        parts = iter(final[k].to_delayed())
        running = as_completed()

        def submit_next():
            part = next(parts, None)
            if part is not None:
                running.add(client.compute(delayed(kernels.arpa_lines)(part, vocabulary, k,
                                                                       k == N)))

        for _ in range(ahead):
            submit_next()
        for future in running:
            text, rows = future.result()
            future.release()
            submit_next()
            yield text, rows

    write_arpa_sections(path, vocab, counts, unigram_logp, unigram_log_bow,
                        ((k, chunks(k)) for k in range(2, N + 1)))


def _ids(w: np.ndarray, table_keys: dict, V: int) -> np.ndarray:
    """The id (position in its order's sorted table) of each row of word ids ``w``, built
    from its last word leftwards, one lookup per order."""
    ids = np.searchsorted(table_keys[1], w[:, -1])
    for m in range(2, w.shape[1] + 1):
        ids = np.searchsorted(table_keys[m], ids * V + w[:, -m])
    return ids.astype(np.int64)


_COUNTS_META = pd.DataFrame({f"n{j}": pd.Series(dtype=np.int64) for j in range(6)})


def _counts_frame(frame: pd.DataFrame) -> pd.DataFrame:
    n = kernels.counts_of_counts(frame)
    return pd.DataFrame({f"n{j}": [int(n[j])] for j in range(6)})


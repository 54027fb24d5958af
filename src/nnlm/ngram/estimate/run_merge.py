"""Merging the sorted runs of chunked n-gram counting, compiled with numba.

:func:`~nnlm.ngram.estimate.counts.count_ngrams` counts each order a chunk of positions at a time;
each chunk leaves a run: its distinct keys, sorted, and how often each occurred. The runs
are then merged, as lmplz merges its sorted blocks, into the order's table: the distinct
keys over all runs, their summed counts, and for every run entry its id in the table.

Concatenating the runs and sorting them (what this replaced) held a second copy of every
run's keys: at 50 M tokens, 47 M 5-gram run entries for 20.7 M distinct 5-grams, 0.38 GB
on top of the runs themselves, and that copy was the whole program's peak. A k-way merge
with a binary heap of the runs' heads reads each run once, in order, and writes only the
table and the ids; no key is stored twice, and nothing is sorted again.

The runs lie end to end in one array, so the kernel takes plain arrays (no typed list,
whose methods numba would compile in every process). It is compiled on first use and
cached beside this file (``cache=True``); it is imported only where there is more than
one run, so a corpus counted in one chunk never loads numba.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from ...base.jit_cache import first_call


@njit(inline="always")
def _sift_down(heap_key, heap_run, size, i):
    """Restore the heap property (smallest key at 0) below slot ``i``."""
    key, run = heap_key[i], heap_run[i]
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        if child + 1 < size and heap_key[child + 1] < heap_key[child]:
            child += 1
        if heap_key[child] >= key:
            break
        heap_key[i], heap_run[i] = heap_key[child], heap_run[child]
        i = child
    heap_key[i], heap_run[i] = key, run


@njit(cache=True, nogil=True)
def _merge(keys, seen, starts, uniq, counts, ids):
    """Merge the sorted runs ``keys[starts[r]:starts[r + 1]]`` (distinct within a run)
    into ``uniq`` (distinct, sorted) with ``counts`` summed from ``seen``; ``ids[i]`` gets
    the table id of ``keys[i]``. Returns the number of distinct keys. ``uniq`` and
    ``counts`` need room for every run entry; only what is written is touched."""
    k = len(starts) - 1
    heap_key = np.empty(k, np.int64)
    heap_run = np.empty(k, np.int64)
    pos = starts[:-1].copy()
    size = 0
    for r in range(k):
        if starts[r] < starts[r + 1]:
            heap_key[size], heap_run[size] = keys[starts[r]], r
            size += 1
    for i in range(size // 2 - 1, -1, -1):
        _sift_down(heap_key, heap_run, size, i)
    d = -1
    while size:
        key, r = heap_key[0], heap_run[0]
        if d < 0 or key != uniq[d]:
            d += 1
            uniq[d] = key
            counts[d] = 0
        p = pos[r]
        counts[d] += seen[p]
        ids[p] = d
        p += 1
        pos[r] = p
        if p < starts[r + 1]:
            heap_key[0] = keys[p]
        else:
            size -= 1
            heap_key[0], heap_run[0] = heap_key[size], heap_run[size]
        _sift_down(heap_key, heap_run, size, 0)
    return d + 1


def merge_runs(keys: np.ndarray, seen: np.ndarray, starts: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys, their summed counts, each entry's id into them) for the sorted runs
    ``keys[starts[r]:starts[r + 1]]`` (int64, distinct within each run) with occurrence
    counts ``seen`` (summed in its dtype); ids are int32 below 2^31 entries."""
    total = int(starts[-1])
    # Room for every entry; the pages past the distinct keys are never written (the
    # caller copies the table to its exact size once the runs are freed).
    uniq = np.empty(total, np.int64)
    counts = np.empty(total, seen.dtype)
    ids = np.empty(total, np.int32 if total < 2**31 else np.int64)
    n = first_call(_merge, keys, seen, np.asarray(starts, np.int64), uniq, counts, ids)
    return uniq[:n], counts[:n], ids

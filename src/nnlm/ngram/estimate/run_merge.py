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
one run, so a corpus counted in one chunk never loads numba. numba is an extra
(``fast``): without it the runs of a key range are concatenated and sorted by
``np.unique`` (the second copy the heap avoids), to the same arrays.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ...base.jit_cache import HAVE_NUMBA, first_call, njit
from ...base.threads import usable_cores


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
def _merge(keys, seen, begins, ends, uniq, counts, ids):
    """Merge the sorted runs ``keys[begins[r]:ends[r]]`` (distinct within a run) into
    ``uniq`` (distinct, sorted) with ``counts`` summed from ``seen``; ``ids[i]`` gets the
    id in ``uniq`` of ``keys[i]``. Returns the number of distinct keys. ``uniq`` and
    ``counts`` need room for every run entry; only what is written is touched."""
    k = len(begins)
    heap_key = np.empty(k, np.int64)
    heap_run = np.empty(k, np.int64)
    pos = begins.copy()
    size = 0
    for r in range(k):
        if begins[r] < ends[r]:
            heap_key[size], heap_run[size] = keys[begins[r]], r
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
        if p < ends[r]:
            heap_key[0] = keys[p]
        else:
            size -= 1
            heap_key[0], heap_run[0] = heap_key[size], heap_run[size]
        _sift_down(heap_key, heap_run, size, 0)
    return d + 1


# entries from which the merge is cut into key ranges merged on threads at once
PARALLEL_ENTRIES = 1 << 22


def merge_runs(keys: np.ndarray, seen: np.ndarray, starts: np.ndarray,
               threads: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(distinct keys, their summed counts, each entry's id into them) for the sorted runs
    ``keys[starts[r]:starts[r + 1]]`` (int64, distinct within each run) with occurrence
    counts ``seen`` (summed in its dtype); ids are int32 below 2^31 entries. On
    ``threads`` threads: :func:`merge_runs_parts`."""
    uniq, counts, ids = merge_runs_parts(keys, seen, starts, threads)
    if len(uniq) == 1:
        return uniq[0], counts[0], ids
    return np.concatenate(uniq), np.concatenate(counts), ids


def merge_runs_parts(keys: np.ndarray, seen: np.ndarray, starts: np.ndarray,
                     threads: int | None = None) -> tuple[list, list, np.ndarray]:
    """:func:`merge_runs` with the distinct keys and counts as consecutive parts (views
    of arrays with room for every run entry, whose pages past the parts are never
    written: the caller copies them out once the runs are freed).

    On ``threads`` threads (default: the usable cores) the key space is cut at quantiles
    of the longest run, every run is cut there by a binary search (a key equal to a cut
    goes right in every run, so no key is split), and the ranges are merged at once; each
    range's ids are then moved up by the distinct keys of the ranges below it."""
    starts = np.asarray(starts, np.int64)
    total = int(starts[-1])
    ids = np.empty(total, np.int32 if total < 2**31 else np.int64)
    uniq = np.empty(total, np.int64)
    counts = np.empty(total, seen.dtype)
    T = usable_cores() if threads is None else threads
    if T <= 1 or total < max(PARALLEL_ENTRIES, T):
        n = _merged(keys, seen, starts[:-1], starts[1:], ids, uniq, counts)
        return [uniq[:n]], [counts[:n]], ids
    longest = int(np.argmax(np.diff(starts)))
    run = keys[starts[longest]:starts[longest + 1]]
    cuts_at = np.unique(run[len(run) * np.arange(1, T) // T])
    cuts = np.empty((len(starts) - 1, len(cuts_at) + 2), np.int64)
    cuts[:, 0], cuts[:, -1] = starts[:-1], starts[1:]
    for r in range(len(starts) - 1):
        cuts[r, 1:-1] = starts[r] + np.searchsorted(keys[starts[r]:starts[r + 1]], cuts_at)
    room = np.concatenate([[0], np.cumsum((cuts[:, 1:] - cuts[:, :-1]).sum(axis=0))])
    parts = range(cuts.shape[1] - 1)
    with ThreadPoolExecutor(len(parts)) as pool:  # each part writes its own room
        found = list(pool.map(lambda t: _merged(
            keys, seen, cuts[:, t], cuts[:, t + 1], ids, uniq[room[t]:room[t + 1]],
            counts[room[t]:room[t + 1]]), parts))
    below = 0
    for t, n in enumerate(found):
        if below:
            for r in range(len(cuts)):
                ids[cuts[r, t]:cuts[r, t + 1]] += below
        below += n
    return ([uniq[room[t]:room[t] + n] for t, n in enumerate(found)],
            [counts[room[t]:room[t] + n] for t, n in enumerate(found)], ids)


def _merged(keys, seen, begins, ends, ids, uniq, counts) -> int:
    """The runs keys[begins[r]:ends[r]] merged into ``uniq`` and ``counts`` (room for
    every entry), their entries' ids written into ``ids``: how many distinct keys."""
    if not HAVE_NUMBA:
        return _merged_by_sorting(keys, seen, begins, ends, ids, uniq, counts)
    return first_call(_merge, keys, seen, np.ascontiguousarray(begins),
                      np.ascontiguousarray(ends), uniq, counts, ids)


def _merged_by_sorting(keys, seen, begins, ends, ids, uniq, counts) -> int:
    """:func:`_merged` by numpy: the runs concatenated, their distinct keys found by
    sorting, counts summed in ``seen``'s dtype."""
    spans = [(int(a), int(b)) for a, b in zip(begins, ends) if b > a]
    if not spans:
        return 0
    found, inverse = np.unique(np.concatenate([keys[a:b] for a, b in spans]),
                               return_inverse=True)
    n = len(found)
    uniq[:n] = found
    counts[:n] = 0
    np.add.at(counts[:n], inverse, np.concatenate([seen[a:b] for a, b in spans]))
    at = 0
    for a, b in spans:
        ids[a:b] = inverse[at:at + b - a]
        at += b - a
    return n

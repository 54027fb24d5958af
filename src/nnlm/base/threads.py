"""Work on a few threads where the kernels release Python's lock (numba's ``nogil``
kernels, numpy's sorts): the cores this process may use, and an ordered map that holds
only as many items at once as it has threads (the items are chunks of a corpus)."""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

MAX_THREADS = 4  # the n-gram passes are memory-bound: more threads stop paying


def usable_cores(limit: int = MAX_THREADS) -> int:
    """The cores this process may run on (its affinity, not the machine's), at most
    ``limit``."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1
    return max(1, min(limit, cores))


def ordered_map(fn: Callable, items: Iterable, threads: int) -> Iterator:
    """``fn(item)`` for each item, in order, on ``threads`` threads, the next item taken
    only when one is yielded (so at most ``threads`` items and results are held); in this
    thread alone where ``threads`` is 1. A failure is raised where its result would be
    yielded."""
    if threads <= 1:
        yield from map(fn, items)
        return
    with ThreadPoolExecutor(threads) as pool:
        pending: deque = deque()
        for item in items:
            pending.append(pool.submit(fn, item))
            del item
            if len(pending) >= threads:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

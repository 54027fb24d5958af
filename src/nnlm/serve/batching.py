"""Dynamic batching: the model calls of concurrent requests merged into one.

A network scores a batch of 1,000 (context, word) pairs in little more time than one
pair, so a server that calls it once per request wastes most of each call. Each served
model has one :class:`Batcher`: requests put their work on its queue and wait; a single
worker takes what is queued (what arrived while the last call ran), and while other
requests are still being answered without having handed in their work, waits up to
``wait`` seconds for them (the wait of dynamic batching, as in Clipper, Crankshaw et al.
2017, and Triton's dynamic batcher; a lone request never waits). It takes at most
``max_rows`` rows, runs the merged call (in the model's own thread for a network; in
the event loop for a count-based model, whose calls are shorter than a thread hop) and
hands each request its rows back.

Two kinds of work are merged, each with its own call:

* ``targets``: log p(word | context) and the n-gram length used, for given pairs;
* ``next``: the whole next-word distribution of each context, reduced per request by a
  function of its own (its top k, or a sample) in the worker's thread, so that no
  (rows, |V|) array crosses back to the event loop.

``wait = 0`` turns merging off: each request's work is one call, in arrival order. One
thread per model (for the server's lifetime) also means a model is never called from
two threads at once (torch's
and numpy's own threads do the parallel work inside each call).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..lm import LanguageModel
from ..scoring import target_scores


@dataclass
class _Job:
    kind: str  # "targets" or "next"
    contexts: np.ndarray
    ids: np.ndarray | None  # the words to score; for ``next``, what the reducer is given
    reduce: Callable | None  # next only: (log-distributions, ids) -> the request's answer
    future: asyncio.Future = field(default=None)

    @property
    def rows(self) -> int:
        return len(self.contexts)


class Batcher:
    """Merges the ``targets`` and ``next`` calls of concurrent requests to one model.

    ``max_rows``: the most (context, word) pairs in one ``targets`` call; ``next`` calls
    hold at most ``max_next_rows`` contexts (each gives |V| numbers).
    """

    def __init__(self, model: LanguageModel, wait: float = 0.002, max_rows: int = 16384,
                 max_next_rows: int = 64, inline: bool | None = None):
        self.model, self.wait = model, wait
        # count-based models answer in about a microsecond a token: a hop to the model's
        # thread and back costs more than the call, so they run in the event loop
        self.inline = not model.neural_parts() if inline is None else inline
        self.max_rows, self.max_next_rows = max_rows, max_next_rows
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._worker: asyncio.Task | None = None
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="nnlm-model")
        self.calls = 0  # model calls made (for tests and the load benchmark)
        self.inflight = 0  # requests being answered (see ``request``)

    # -- the requests' side ------------------------------------------------------------
    async def targets(self, contexts: np.ndarray, ids: np.ndarray
                      ) -> tuple[np.ndarray, np.ndarray]:
        """Natural-log p(ids | contexts) and n-gram lengths (see :func:`target_scores`)."""
        return await self._submit(_Job("targets", contexts, ids, None))

    async def next(self, contexts: np.ndarray, reduce: Callable, ids: np.ndarray | None = None):
        """``reduce(log_distributions, ids)`` of the contexts' next-word distributions,
        computed in the model's thread (``ids``: one per context, for the reducer, or
        None); contexts beyond ``max_next_rows`` go in several calls."""
        step = self.max_next_rows
        parts = [await self._submit(_Job("next", contexts[lo:lo + step],
                                         None if ids is None else ids[lo:lo + step], reduce))
                 for lo in range(0, len(contexts), step)]
        return parts[0] if len(parts) == 1 else _concat(parts)

    async def run(self, fn: Callable, *args):
        """``fn(*args)`` in the model's thread, unmerged (embeddings, neighbours)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def _submit(self, job: _Job):
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # the first request, or a new event loop (tests)
            self._loop, self._queue, self._arrived = loop, asyncio.Queue(), asyncio.Event()
            self._worker = loop.create_task(self._run())
        job.future = loop.create_future()
        await self._queue.put(job)
        self._arrived.set()
        return await job.future

    # -- the worker's side -------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        queue = self._queue
        while True:
            jobs = [await queue.get()]
            self._drain(jobs)
            # other requests are being answered and have not handed in their work yet:
            # give them up to ``wait`` to join this call
            deadline = loop.time() + self.wait
            while self.wait > 0 and self.inflight > len(jobs) and self._room(jobs) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), deadline - loop.time())
                except TimeoutError:
                    break
                self._drain(jobs)
            for group in _groups(jobs, self.wait > 0):
                live = [j for j in group if not j.future.done()]  # timed out: skip
                if not live:
                    continue
                try:
                    answers = self._call(live) if self.inline else \
                        await loop.run_in_executor(self._pool, self._call, live)
                except Exception as e:  # noqa: BLE001 (handed to each request)
                    answers = [e] * len(live)
                for j, a in zip(live, answers):
                    if j.future.done():
                        continue
                    if isinstance(a, Exception):
                        j.future.set_exception(a)
                    else:
                        j.future.set_result(a)

    def _drain(self, jobs: list[_Job]) -> None:
        """Add what is queued to ``jobs``, while there is room (batching) or none taken."""
        while not self._queue.empty() and self.wait > 0 and self._room(jobs) > 0:
            jobs.append(self._queue.get_nowait())

    @contextlib.contextmanager
    def request(self):
        """Counts a request being answered with this model, from its start: the worker
        waits for the ones that have not handed in their work yet."""
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1

    def _room(self, jobs: list[_Job]) -> int:
        limit = self.max_rows if jobs[0].kind == "targets" else self.max_next_rows
        return limit - sum(j.rows for j in jobs if j.kind == jobs[0].kind)

    def _call(self, jobs: list[_Job]) -> list:
        """One model call for jobs of one kind (in the model's thread)."""
        self.calls += 1
        bounds = np.cumsum([0] + [j.rows for j in jobs])
        contexts = np.concatenate([j.contexts for j in jobs]) if len(jobs) > 1 \
            else jobs[0].contexts
        if jobs[0].kind == "targets":
            ids = np.concatenate([j.ids for j in jobs]) if len(jobs) > 1 else jobs[0].ids
            logp, orders = target_scores(self.model, contexts, ids)
            return [(logp[a:b], orders[a:b]) for a, b in zip(bounds, bounds[1:])]
        dist = self.model.next_logprobs(contexts)
        return [j.reduce(dist[a:b], j.ids) for j, a, b in zip(jobs, bounds, bounds[1:])]


def _groups(jobs: list[_Job], merge: bool) -> list[list[_Job]]:
    """Jobs of one kind together (merged), or each alone (no batching)."""
    if not merge:
        return [[j] for j in jobs]
    return [g for g in ([j for j in jobs if j.kind == "targets"],
                        [j for j in jobs if j.kind == "next"]) if g]


def _concat(parts: list):
    """Join the per-call answers of one request split over several ``next`` calls."""
    first = parts[0]
    if isinstance(first, tuple):
        return tuple(np.concatenate([p[i] for p in parts]) for i in range(len(first)))
    return np.concatenate(parts)

"""Training batches: (index, contexts, targets) for a span of a permutation of the
training positions, built a block of batches at a time, whole or split over ranks and
workers; and :class:`SlotPlan`, a feed-forward network's epoch of them (a recurrent
network's is ``segments.SpanPlan``)."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..text.stream import Stream
from .segments import SpanPlan


def shard_range(n: int, parts: int, index: int) -> tuple[int, int]:
    """[lo, hi) of part ``index`` when n items are cut into ``parts`` contiguous parts whose
    sizes differ by at most one, the larger first (numpy's ``array_split``)."""
    q, r = divmod(n, parts)
    lo = index * q + min(index, r)
    return lo, lo + q + (index < r)

BLOCK_BATCHES = 64  # batches whose contexts are gathered in one numpy pass


def batches(train: Stream, order: int, perm: np.ndarray, batch_size: int, first: int,
             last: int, part: tuple[int, int] | None = None,
             stride: tuple[int, int] | None = None, pin: bool = False):
    """Yield (i, contexts, targets) for batches first..last-1 of the permutation, int64
    tensors; contexts are built for BLOCK_BATCHES batches at a time (one pass, not 64).
    ``part`` (rank, ranks): only that rank's contiguous share of each batch. ``stride``
    (worker, workers): only the batches i with (i - first) mod workers = worker. ``pin``:
    in page-locked memory, so that copies to a GPU overlap its work."""
    batches = range(first, last) if stride is None else range(first + stride[0], last,
                                                               stride[1])
    for at_block in range(0, len(batches), BLOCK_BATCHES):
        block = batches[at_block : at_block + BLOCK_BATCHES]
        spans = []
        for i in block:
            a, b = i * batch_size, min((i + 1) * batch_size, len(perm))
            if part is not None:
                a, b = (a + x for x in shard_range(b - a, part[1], part[0]))
            spans.append((a, b))
        pos = np.concatenate([perm[a:b] for a, b in spans])
        contexts = torch.from_numpy(train.contexts(order, pos).astype(np.int64))
        targets = torch.from_numpy(train.ids[pos].astype(np.int64))
        if pin:
            contexts, targets = contexts.pin_memory(), targets.pin_memory()
        at = 0
        for i, (a, b) in zip(block, spans):
            yield i, contexts[at : at + b - a], targets[at : at + b - a]
            at += b - a


class SlotPlan:
    """A feed-forward network's epoch: a permutation of the training slots (drawn from
    ``rng``) cut into ``batch_size`` batches of (n - 1)-word contexts; ``steps`` updates,
    ``words(k)`` examples in the first k."""

    def __init__(self, train: Stream, order: int, batch_size: int, rng: np.random.Generator):
        self.train, self.order, self.batch_size = train, order, batch_size
        self.perm = rng.permutation(len(train))

    @property
    def steps(self) -> int:
        return math.ceil(len(self.train) / self.batch_size)

    def words(self, steps: int) -> int:
        return steps * self.batch_size

    def range(self, first: int, last: int, part: tuple[int, int] | None = None,
              pin: bool = False):
        """Yield (i, contexts, targets) for batches first..last-1 (see :func:`batches`)."""
        return batches(self.train, self.order, self.perm, self.batch_size, first, last, part,
                       pin=pin)


def epoch_plan(train: Stream, net, config, epoch: int):
    """Epoch ``epoch``'s batches, drawn from (seed, epoch) so that a resumed run replays
    them: a permutation of the training slots cut into ``batch_size`` batches, or for a
    recurrent network line pieces grouped by length, ``batch_size`` targets a batch at most
    (:class:`nnlm.neural.segments.SpanPlan`)."""
    rng = np.random.default_rng([config.seed, epoch])
    if net.recurrent:
        return SpanPlan(train, net.config.span, config.batch_size, rng)
    return SlotPlan(train, net.config.context_size + 1, config.batch_size, rng)

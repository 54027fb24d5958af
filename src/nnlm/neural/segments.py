"""A stream cut into the line pieces a recurrent network reads, and batches of them.

Training reads every line in pieces of at most ``span`` targets (each from a zero state:
the first from the line's ``<s>``, a later one from the word before it). Scoring reads
the first n - 1 targets of each line in one pass (their whole context is the line up to
them) and scores the rest, if a line has more, through their windows of n - 1 words.
Pieces are batched by length, so little of a batch is padding.
"""

from __future__ import annotations

import numpy as np
import torch

from ..text.stream import Stream
from ..text.vocab import BOS_ID
from .networks.spans import Spans

SHUFFLE_POOL = 64  # training: batches' worth of pieces sorted by length together


def pieces(stream: Stream, longest: int, first_only: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """(starts, lengths), int64: each line's slots cut into runs of at most ``longest``
    (``first_only``: only each line's first run)."""
    line_start, line_len = stream.offsets[:-1], np.diff(stream.offsets)
    if first_only:
        return line_start.copy(), np.minimum(line_len, longest)
    count = -(-line_len // longest)
    starts = np.repeat(line_start, count) + longest * (
        np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count))
    ends = np.repeat(stream.offsets[1:], count)
    return starts, np.minimum(ends - starts, longest)


def spans(stream: Stream, starts: np.ndarray, lengths: np.ndarray) -> tuple[Spans, np.ndarray]:
    """The :class:`Spans` that read the pieces (starts, lengths), and their targets in
    the order the network returns z (row by row)."""
    T = int(lengths.max()) if len(lengths) else 0
    at = starts[:, None] - 1 + np.arange(T)[None, :]  # slot whose word position j reads
    inside = np.arange(T)[None, :] < lengths[:, None]
    line_starts = np.isin(starts, stream.offsets[:-1])
    inputs = np.where(inside, stream.ids[np.clip(at, 0, len(stream.ids) - 1)], 0)
    inputs[line_starts, 0] = BOS_ID
    targets = stream.ids[(starts[:, None] + np.arange(T)[None, :])[inside]]
    return (Spans(torch.from_numpy(inputs.astype(np.int64)), torch.from_numpy(lengths)),
            targets)


def by_length(lengths: np.ndarray, tokens: int, order: np.ndarray | None = None
              ) -> list[np.ndarray]:
    """Batches of piece indices, taken in ``order`` (shortest first; default: all pieces
    by length), whose padded size (rows x the last, longest row) stays within ``tokens``,
    or one piece where a piece alone is longer."""
    order = np.argsort(lengths, kind="stable") if order is None else order
    batches, lo = [], 0
    while lo < len(order):
        hi = lo + 1
        while hi < len(order) and (hi - lo + 1) * lengths[order[hi]] <= tokens:
            hi += 1
        batches.append(order[lo:hi])
        lo = hi
    return batches


def training_plan(lengths: np.ndarray, tokens: int, rng: np.random.Generator
                  ) -> list[np.ndarray]:
    """One epoch's batches: the pieces in a random order, sorted by length within pools
    of SHUFFLE_POOL batches (so a batch holds pieces of like length), then the batches
    shuffled."""
    perm = rng.permutation(len(lengths))
    mean = int(lengths.mean()) if len(lengths) else 1
    pool = max(1, SHUFFLE_POOL * tokens // max(1, mean))
    batches = []
    for lo in range(0, len(perm), pool):
        part = perm[lo : lo + pool]
        batches += by_length(lengths, tokens, part[np.argsort(lengths[part], kind="stable")])
    return [batches[i] for i in rng.permutation(len(batches))]


class SpanPlan:
    """The batches of a recurrent network's training epoch (the feed-forward networks'
    epoch is a permutation of slots instead): ``steps`` updates, ``words(k)`` targets in
    the first k."""

    def __init__(self, train: Stream, span: int, tokens: int, rng: np.random.Generator):
        self.train = train
        self.starts, self.lengths = pieces(train, span)
        self.batches = training_plan(self.lengths, tokens, rng)
        self.cumulative = np.concatenate([[0], np.cumsum([self.lengths[b].sum()
                                                          for b in self.batches])])

    @property
    def steps(self) -> int:
        return len(self.batches)

    def words(self, steps: int) -> int:
        return int(self.cumulative[min(steps, self.steps)])

    def range(self, first: int, last: int, part: tuple[int, int] | None = None,
              pin: bool = False):
        """Yield (i, Spans, targets) for batches first..last-1 (``part``: a recurrent
        network trains in one process, so there is none)."""
        if part is not None:
            raise ValueError("a recurrent network's batches are not split over ranks")
        for i in range(first, last):
            b = self.batches[i]
            inputs, targets = spans(self.train, self.starts[b], self.lengths[b])
            targets = torch.from_numpy(targets.astype(np.int64))
            yield i, *((inputs.pin_memory(), targets.pin_memory()) if pin else (inputs, targets))

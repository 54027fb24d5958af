"""A corpus as int32 ids plus line offsets, and the (n-1)-word context of every prediction.

Each line of L words occupies L + 1 slots of ``ids``: its words, then ``</s>``. So
``ids[i]`` is exactly the i-th predicted token, and every per-token array a model
returns (log-probabilities, orders used) lines up with ``ids`` one to one::

    lines:    "the cat sat"             "a dog"
    ids:      the  cat  sat  </s>   |   a    dog  </s>
    offsets:  0                     4                   7

The context of slot i, for an n-gram model, is the n-1 slots before it within its line,
oldest first, padded on the left with ``<s>``; ``<s>`` itself is never predicted::

    order 3, slot of "sat":  (the, cat)      slot of "a": (<s>, <s>)

Contexts are computed on demand from ``offsets`` (a searchsorted per batch), so no
per-order padded copy of the corpus is ever held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.errors import NnlmError
from .vocab import BOS, BOS_ID, EOS, EOS_ID, NO_WORD, UNK_ID, Vocabulary, special_error


@dataclass(frozen=True)
class Stream:
    """Predicted-token ids (int32, ``</s>`` closing each line) and line offsets (int64).

    ``offsets`` has one entry per line plus a final one equal to ``len(ids)``.
    """

    ids: np.ndarray
    offsets: np.ndarray

    def __post_init__(self):
        if self.ids.dtype != np.int32 or self.offsets.dtype != np.int64:
            raise TypeError("Stream wants int32 ids and int64 offsets")
        if len(self.offsets) == 0 or self.offsets[0] != 0 or self.offsets[-1] != len(self.ids):
            raise ValueError("offsets must start at 0 and end at len(ids)")

    # -- construction ----------------------------------------------------------------
    @classmethod
    def from_lines(cls, lines: Sequence[Sequence[str]], vocab: Vocabulary) -> Stream:
        """Encode tokenized lines (lists of words); empty lines are skipped (not sentences).

        ``<s>`` or ``</s>`` in a line raises NnlmError: the boundaries are added here."""
        for i, line in enumerate(lines, start=1):
            if BOS in line or EOS in line:
                raise NnlmError(special_error(f"sentence {i}", line))
        lines = [line for line in lines if len(line)]
        words = [w for line in lines for w in line]
        return cls.from_ids(vocab.encode(words), np.array([len(x) for x in lines], np.int64))

    @classmethod
    def from_ids(cls, word_ids: np.ndarray, lengths: np.ndarray) -> Stream:
        """Build from the words' ids (no ``</s>``) and each line's length in words."""
        lengths = np.asarray(lengths, dtype=np.int64)
        ends = np.cumsum(lengths)
        ids = np.insert(np.asarray(word_ids, dtype=np.int32), ends, np.int32(EOS_ID))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        offsets[1:] = ends + np.arange(1, len(lengths) + 1)
        return cls(ids, offsets)

    @classmethod
    def concatenate(cls, streams: Sequence[Stream]) -> Stream:
        ids = np.concatenate([s.ids for s in streams]) if streams else np.zeros(0, np.int32)
        shifts = np.cumsum([0] + [len(s.ids) for s in streams[:-1]])
        offsets = [np.zeros(1, np.int64)] + [s.offsets[1:] + k for s, k in zip(streams, shifts)]
        return cls(ids, np.concatenate(offsets))

    # -- sizes -----------------------------------------------------------------------
    def __len__(self) -> int:
        """Number of predicted tokens (words plus one ``</s>`` per line)."""
        return len(self.ids)

    @property
    def num_lines(self) -> int:
        return len(self.offsets) - 1

    @property
    def num_words(self) -> int:
        return len(self.ids) - self.num_lines

    @property
    def num_unk(self) -> int:
        return int(np.count_nonzero(self.ids == UNK_ID))

    def first_lines(self, tokens: int) -> Stream:
        """The stream of the first lines that hold at least ``tokens`` slots (all of them
        in a shorter stream)."""
        if len(self.offsets) == 1:
            return self
        lines = int(np.searchsorted(self.offsets, tokens, side="left"))
        lines = max(1, min(lines, len(self.offsets) - 1))
        end = self.offsets[lines]
        return Stream(self.ids[:end], self.offsets[: lines + 1])

    def line(self, i: int) -> np.ndarray:
        """Word ids of line i, without its ``</s>``."""
        return self.ids[self.offsets[i] : self.offsets[i + 1] - 1]

    def line_of(self, positions: np.ndarray) -> np.ndarray:
        """The line index of each slot in ``positions``."""
        return np.searchsorted(self.offsets, positions, side="right") - 1

    # -- contexts --------------------------------------------------------------------
    def contexts(self, order: int, positions: np.ndarray | None = None) -> np.ndarray:
        """The (n-1)-word contexts of the slots at ``positions`` (all slots by default).

        Returns int32 of shape (len(positions), order - 1), oldest word first, ``<s>``
        where the context reaches before the start of the line.
        """
        if positions is None:
            positions = np.arange(len(self.ids), dtype=np.int64)
        positions = np.asarray(positions, dtype=np.int64)
        k = order - 1
        if k <= 0:
            return np.zeros((len(positions), 0), dtype=np.int32)
        starts = self.offsets[self.line_of(positions)]
        back = np.arange(k, 0, -1, dtype=np.int64)  # oldest first: k, k-1, ..., 1 back
        src = positions[:, None] - back[None, :]  # (B, k)
        inside = src >= starts[:, None]
        return np.where(inside, self.ids[np.maximum(src, 0)], np.int32(BOS_ID)).astype(np.int32)

    def batches(
        self,
        order: int,
        batch_size: int,
        shuffle: bool = False,
        rng: np.random.Generator | None = None,
    ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield ``(contexts, targets)``: int32 (B, order-1) and int32 (B,).

        With ``shuffle`` the slots are visited in a random permutation from ``rng``
        (every slot once per pass); otherwise in corpus order.
        """
        n = len(self.ids)
        if shuffle:
            rng = rng if rng is not None else np.random.default_rng()
            order_of_slots = rng.permutation(n)
        for lo in range(0, n, batch_size):
            if shuffle:
                pos = order_of_slots[lo : lo + batch_size]
            else:
                pos = np.arange(lo, min(lo + batch_size, n), dtype=np.int64)
            yield self.contexts(order, pos), self.ids[pos]


def seen_lengths(contexts: np.ndarray, order: int) -> np.ndarray:
    """The n-gram length a model that reads its whole context reports for each row (what
    kenlm's ``full_scores`` gives): the words of the line the row holds, the line's
    ``<s>`` included, capped at n - 1, plus one. Not words: ``NO_WORD`` slots and the
    ``<s>`` padding before the line's own ``<s>`` (the last one of a row)."""
    contexts = np.asarray(contexts)
    k = contexts.shape[1]
    if k == 0:
        return np.ones(len(contexts), np.int64)
    bos = contexts == BOS_ID
    last_bos = np.where(bos.any(axis=1), k - 1 - np.argmax(bos[:, ::-1], axis=1), -1)
    after = k - np.maximum(last_bos, 0)  # slots from the line's <s> on (all if none)
    words = np.where(last_bos >= 0, after, (contexts != NO_WORD).sum(axis=1))
    return np.minimum(words, order - 1) + 1

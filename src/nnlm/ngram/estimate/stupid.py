"""Stupid Backoff (Brants, Popat, Xu, Och & Dean 2007, "Large Language Models in Machine
Translation"): relative frequencies, and a fixed penalty alpha for each order backed off:

    S(w | h) = f(h w) / f(h)            if h w was seen
             = alpha * S(w | h')        otherwise (h' drops h's oldest word)
    S(w)     = f(w) / N

It needs only counts (no discounts, no normalization), so it scales to corpora where even
Kneser-Ney's passes are too slow. **Its scores are not probabilities**: they do not sum
to 1 over the next word, so a perplexity of it means nothing. ``nnlm eval`` and ``nnlm
mix`` refuse it; ``nnlm score``, ``rescore``, the kenlm API and the server give its
scores as log10 numbers like any other model's, for ranking hypotheses.

Stored as a back-off model (the same trie, ARPA export included) whose n-grams carry
log f(h w) / f(h) and whose back-off weights are 1; the alpha per order backed off is
added here, also where the context was never seen (ARPA's weights could not say that).
A word never seen in training (``<unk>`` in a closed vocabulary) counts as seen once.
``<s>`` starts each line once: the longest n-gram at the i-th word has min(n, i + 2)
words (``<s>`` and the i words before it).
"""

from __future__ import annotations

import math

import numpy as np

from ...base.errors import NnlmError
from ...text.stream import Stream
from ...text.vocab import BOS_ID, NO_WORD, Vocabulary
from ..backoff import BackoffNgram
from ..store.levels import NgramLevel
from .counts import count_ngrams

ALPHA = 0.4  # Brants et al.'s value


class StupidBackoff(BackoffNgram):
    """Stupid Backoff of ``order`` n with penalty ``alpha`` in (0, 1]."""

    kind = "stupid"
    normalized = False  # scores, not probabilities

    def __init__(self, vocab: Vocabulary, order: int = 5, alpha: float = ALPHA):
        if not (isinstance(order, int) and order >= 1):  # (entry points: the registry's
            raise ValueError(f"order must be at least 1, got {order!r}")  # limit too)
        if not (isinstance(alpha, (int, float)) and 0 < alpha <= 1):
            raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
        self.alpha = float(alpha)
        super().__init__(vocab, np.zeros(len(vocab)), np.zeros(len(vocab)), [])
        self.order = order

    def fit(self, stream: Stream) -> StupidBackoff:
        V = len(self.vocab)
        tables = count_ngrams(stream, self.order, V)
        uni = np.ones(V)  # unseen words count once
        uni[tables[0].keys] = np.maximum(tables[0].counts, 1)
        uni[BOS_ID] = 0.0  # <s> is never predicted
        with np.errstate(divide="ignore"):
            self.unigram_logp = np.log(uni / uni.sum())
        self.unigram_log_bow = np.zeros(V)
        words = tables[0].keys
        self.levels = []
        for k in range(2, self.order + 1):
            table, lower = tables[k - 1], tables[k - 2]
            logp = np.log(table.counts / lower.counts[table.prefix])
            suffix, prefix = table.suffix, table.prefix
            if k == 2:  # order 2 is keyed by word ids, as Kneser-Ney's
                last = words[suffix]
                keys = last * V + table.first_word(V)
                prefix = words[prefix]
                n_prefixes = V
            else:
                last = self.levels[-1].last[suffix]
                keys, n_prefixes = table.keys, len(lower)
            self.levels.append(NgramLevel(keys, logp, np.zeros(len(keys)), prefix, last,
                                          n_prefixes))
        return self

    def target_logprobs_and_orders(self, contexts: np.ndarray, targets: np.ndarray
                                   ) -> tuple[np.ndarray, np.ndarray]:
        """log S(target | context) and the length of the n-gram it came from."""
        contexts = np.asarray(contexts, np.int64)
        logp, length = super().target_logprobs_and_orders(contexts, targets)
        return logp + (self._full(contexts) - length) * math.log(self.alpha), length

    def _full(self, contexts: np.ndarray) -> np.ndarray:
        """The longest n-gram each position could have: its real words, one <s> where the
        line's start is in view, and the word itself."""
        if contexts.shape[1] == 0:
            return np.ones(len(contexts), np.int64)
        words = (contexts != BOS_ID) & (contexts != NO_WORD)
        start = (contexts == BOS_ID).any(axis=1)
        return np.minimum(words.sum(axis=1) + start + 1, self.order)

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """S(. | context) for every word (not a distribution: rows do not sum to 1)."""
        contexts = np.asarray(contexts, np.int64)
        B, V = len(contexts), len(self.vocab)
        rows = np.repeat(contexts, V, axis=0)
        out = self.target_logprobs(rows, np.tile(np.arange(V), B)).reshape(B, V)
        out[:, BOS_ID] = -np.inf
        return out

    def logprobs_and_orders(self, stream: Stream, batch_size: int | None = None
                            ) -> tuple[np.ndarray, np.ndarray]:
        """Running text: the stored n-grams as any back-off model finds them, then alpha
        for each order short of min(n, i + 2) at the i-th word of a line."""
        logp, length = super().logprobs_and_orders(stream, batch_size)
        lengths = np.diff(stream.offsets)
        slot = np.arange(len(stream)) - np.repeat(stream.offsets[:-1], lengths)
        full = np.minimum(slot + 2, self.order)
        return logp + (full - length) * math.log(self.alpha), length

    def state_lengths(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """A decoder's state keeps every word it has (up to n-1): the penalty depends on
        how many words are in view, so states that KenLM would shorten must not be."""
        contexts = np.asarray(contexts, np.int64)
        return np.minimum((contexts != NO_WORD).sum(axis=1) + 1, self.order - 1)

    def config(self) -> dict:
        return {"order": self.order, "alpha": self.alpha}

    def _restore_config(self, config: dict) -> None:
        self.alpha = float(config.get("alpha", ALPHA))
        if not 0 < self.alpha <= 1:

            raise NnlmError(f"config.json: alpha {self.alpha!r} is not in (0, 1]")

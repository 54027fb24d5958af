"""Add-k (Lidstone) smoothed unigram or bigram: the simplest model that speaks the interface.

    p(w | v) = (c(v, w) + k) / (c(v) + k (|V| - 1))

over the |V| - 1 predictable words (everything but ``<s>``). With k = 1 it is Laplace's
add-one. It is a baseline and a test fixture; the real count models (Kneser-Ney,
deleted interpolation, class-based) live beside it.

Example (hand-worked): train "a b" and "a a", k = 1, V = {<unk>, <s>, </s>, a, b}:
c(<s>, a) = 2, c(<s>) = 2, so p(a | <s>) = (2 + 1) / (2 + 4) = 1/2.
"""

from __future__ import annotations

import numpy as np

from ...base.sorted_keys import lookup_counts
from ...lm import LanguageModel
from ...text.stream import Stream
from ...text.vocab import BOS_ID, Vocabulary
from ..store.levels import expand_ranges


class AddK(LanguageModel):
    kind = "addk"

    def __init__(self, vocab: Vocabulary, order: int = 2, k: float = 1.0):
        if order not in (1, 2):
            raise ValueError("add-k supports order 1 (unigram) or 2 (bigram)")
        if not k > 0:
            raise ValueError("k must be positive")
        self.vocab, self.order, self.k = vocab, order, float(k)
        V = len(vocab)
        self.keys = np.zeros(0, np.int64)  # sorted packed (context * V + word)
        self.counts = np.zeros(0, np.int64)
        self.context_totals = np.zeros(V if order == 2 else 1, np.int64)

    def fit(self, stream: Stream) -> AddK:
        V = len(self.vocab)
        prev = stream.contexts(2)[:, 0].astype(np.int64) if self.order == 2 else \
            np.zeros(len(stream), np.int64)
        self.keys, self.counts = np.unique(prev * V + stream.ids, return_counts=True)
        self.context_totals = np.bincount(prev, minlength=len(self.context_totals)).astype(np.int64)
        return self

    def _context_ids(self, contexts: np.ndarray) -> np.ndarray:
        if self.order == 1:
            return np.zeros(len(contexts), np.int64)
        return np.asarray(contexts)[:, -1].astype(np.int64)

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        V = len(self.vocab)
        ctx = self._context_ids(contexts)
        probs = np.full((len(ctx), V), self.k, dtype=np.float64)
        rows, entries = expand_ranges(np.searchsorted(self.keys, ctx * V),
                                      np.searchsorted(self.keys, (ctx + 1) * V))
        probs[rows, self.keys[entries] % V] += self.counts[entries]
        probs[:, BOS_ID] = 0.0
        probs /= (self.context_totals[ctx] + self.k * (V - 1))[:, None]
        with np.errstate(divide="ignore"):
            return np.log(probs)

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        V = len(self.vocab)
        ctx = self._context_ids(contexts)
        counts = lookup_counts(self.keys, self.counts, ctx * V + np.asarray(targets, np.int64))
        with np.errstate(divide="ignore"):
            out = np.log(counts + self.k) - np.log(self.context_totals[ctx] + self.k * (V - 1))
        out[np.asarray(targets) == BOS_ID] = -np.inf
        return out

    # -- persistence (see nnlm.models) ------------------------------------------------
    def config(self) -> dict:
        return {"order": self.order, "k": self.k}

    def arrays(self) -> dict[str, np.ndarray]:
        return {"keys": self.keys, "counts": self.counts, "context_totals": self.context_totals}

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict) -> AddK:
        model = cls(vocab, order=config["order"], k=config["k"])
        model.keys, model.counts = arrays["keys"], arrays["counts"]
        model.context_totals = arrays["context_totals"]
        return model

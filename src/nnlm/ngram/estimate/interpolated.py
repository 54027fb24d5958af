"""Deleted-interpolation (Jelinek-Mercer) n-gram, the paper's "Del. Int." trigram.

Bengio et al. (2003) use it as a baseline and as the partner of their mixtures::

    p(w_t | w_{t-1}, w_{t-2}) = a0(q) / (|V| - 1) + a1(q) p1(w_t) + a2(q) p2(w_t | w_{t-1})
                                + a3(q) p3(w_t | w_{t-1}, w_{t-2})

with relative frequencies p_k from train and weights a(q) that depend on the frequency
bucket of the context, q = ceil(-ln((1 + n(w_{t-1}, w_{t-2})) / T)) with T the number of
training tokens, fitted by EM on held-out (validation) data. Contexts are padded with
``<s>`` as in :mod:`nnlm.text.stream`. Where a context was never seen, p_k falls back to
p_{k-1} for the same word, so every distribution still sums to 1.
"""

from __future__ import annotations

import math

import numpy as np

from ...base.errors import NnlmError
from ...base.sorted_keys import lookup_counts
from ...interpolation import fit_bucket_weights, frequency_bucket
from ...lm import LanguageModel
from ...text.stream import Stream
from ...text.vocab import BOS_ID, Vocabulary
from ..store.levels import expand_ranges


def _pack(contexts: np.ndarray, V: int) -> np.ndarray:
    """Base-V integer of each context row (oldest word most significant)."""
    key = np.zeros(len(contexts), np.int64)
    for j in range(contexts.shape[1]):
        key = key * V + contexts[:, j]
    return key


class DeletedInterpolation(LanguageModel):
    """Jelinek-Mercer interpolation of relative frequencies, weights per context bucket."""

    kind = "interpolated"

    def __init__(self, vocab: Vocabulary, order: int = 3, iterations: int = 20):
        V = len(vocab)
        if order < 1 or V ** order >= 2**62:
            raise ValueError(f"order must be between 1 and {int(math.log(2**62, V))} here")
        self.vocab, self.order, self.iterations = vocab, order, iterations
        self.train_tokens = 0
        self.weights = np.full((1, order + 1), 1.0 / (order + 1))  # (buckets, components)
        self.ngram_keys: list[np.ndarray] = []  # per order k: sorted packed (h, w)
        self.ngram_counts: list[np.ndarray] = []
        self.context_keys: list[np.ndarray] = []  # per order k: sorted packed h
        self.context_counts: list[np.ndarray] = []

    # -- fitting -------------------------------------------------------------------
    def fit(self, train: Stream, valid: Stream | None = None) -> DeletedInterpolation:
        """Count on ``train``; fit the bucket weights by EM on ``valid`` (required)."""
        V = len(self.vocab)
        contexts = train.contexts(self.order).astype(np.int64)
        self.train_tokens = len(train)
        self.ngram_keys, self.ngram_counts, self.context_keys, self.context_counts = [], [], [], []
        for k in range(1, self.order + 1):
            h = _pack(contexts[:, self.order - k :], V)
            keys, counts = np.unique(h * V + train.ids, return_counts=True)
            ckeys, ccounts = np.unique(h, return_counts=True)
            self.ngram_keys.append(keys)
            self.ngram_counts.append(counts)
            self.context_keys.append(ckeys)
            self.context_counts.append(ccounts)
        n_buckets = self.bucket(np.zeros(1, np.int64))[0] + 1
        self.weights = np.full((n_buckets, self.order + 1), 1.0 / (self.order + 1))
        if valid is None:
            raise NnlmError("deleted interpolation fits its weights on held-out data: "
                            "give a validation text (valid_path=VALID)")
        self.fit_weights(valid)
        return self

    def bucket(self, context_counts: np.ndarray) -> np.ndarray:
        """q = ceil(-ln((1 + n(context)) / T)), at least 0."""
        return frequency_bucket(context_counts, self.train_tokens)

    def fit_weights(self, valid: Stream) -> list[float]:
        """EM on ``valid``; returns the per-token log-likelihood after each iteration."""
        comp, q = self._components(valid.contexts(self.order), valid.ids)
        self.weights, history = fit_bucket_weights(self.weights, comp, q, self.iterations)
        return history

    # -- scoring -------------------------------------------------------------------
    def _context_stats(self, contexts: np.ndarray):
        """Per order k: packed context keys and their counts; and the bucket q."""
        V = len(self.vocab)
        contexts = np.asarray(contexts, np.int64)
        hs, ns = [], []
        for k in range(1, self.order + 1):
            h = _pack(contexts[:, self.order - k :], V)
            hs.append(h)
            ns.append(lookup_counts(self.context_keys[k - 1], self.context_counts[k - 1], h))
        return hs, ns, self.bucket(ns[-1]) if self.order > 1 else np.zeros(len(contexts), np.int64)

    def _components(self, contexts: np.ndarray, targets: np.ndarray):
        """(M, order+1) component probabilities of each target, and each bucket."""
        V = len(self.vocab)
        targets = np.asarray(targets, np.int64)
        hs, ns, q = self._context_stats(contexts)
        comp = np.empty((len(targets), self.order + 1))
        comp[:, 0] = 1.0 / (V - 1)
        for k in range(1, self.order + 1):
            c = lookup_counts(self.ngram_keys[k - 1], self.ngram_counts[k - 1],
                              hs[k - 1] * V + targets)
            seen = ns[k - 1] > 0
            p = np.where(seen, c / np.maximum(ns[k - 1], 1), comp[:, k - 1] if k > 1 else 0.0)
            comp[:, k] = p
        comp[targets == BOS_ID] = 0.0
        return comp, q

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        comp, q = self._components(contexts, targets)
        with np.errstate(divide="ignore"):
            return np.log((self.weights[q] * comp).sum(axis=1))

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        V = len(self.vocab)
        B = len(contexts)
        hs, ns, q = self._context_stats(contexts)
        w = self.weights[q]  # (B, K)
        probs = np.broadcast_to(w[:, :1] / (V - 1), (B, V)).copy()
        lower = np.zeros((B, V))
        for k in range(1, self.order + 1):
            keys, counts = self.ngram_keys[k - 1], self.ngram_counts[k - 1]
            rows, e = expand_ranges(np.searchsorted(keys, hs[k - 1] * V),
                                    np.searchsorted(keys, hs[k - 1] * V + V))
            mle = np.zeros((B, V))
            mle[rows, keys[e] % V] = counts[e] / ns[k - 1][rows]
            seen = ns[k - 1] > 0
            current = np.where(seen[:, None], mle, lower) if k > 1 else mle
            probs += w[:, k : k + 1] * current
            lower = current
        probs[:, BOS_ID] = 0.0
        with np.errstate(divide="ignore"):
            return np.log(probs)

    # -- persistence ---------------------------------------------------------------
    def config(self) -> dict:
        return {"order": self.order, "iterations": self.iterations,
                "train_tokens": self.train_tokens}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"weights": self.weights}
        for k in range(1, self.order + 1):
            out[f"ngram_keys_{k}"] = self.ngram_keys[k - 1]
            out[f"ngram_counts_{k}"] = self.ngram_counts[k - 1]
            out[f"context_keys_{k}"] = self.context_keys[k - 1]
            out[f"context_counts_{k}"] = self.context_counts[k - 1]
        return out

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict):
        model = cls(vocab, order=config["order"], iterations=config["iterations"])
        model.train_tokens = config["train_tokens"]
        model.weights = arrays["weights"]
        for k in range(1, model.order + 1):
            model.ngram_keys.append(arrays[f"ngram_keys_{k}"])
            model.ngram_counts.append(arrays[f"ngram_counts_{k}"])
            model.context_keys.append(arrays[f"context_keys_{k}"])
            model.context_counts.append(arrays[f"context_counts_{k}"])
        return model

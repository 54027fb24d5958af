"""Interpolation weights per context-frequency bucket, fitted by EM.

Shared by the deleted-interpolation trigram (weights over its unigram, bigram, trigram
and uniform components) and by mixtures of whole models (weights over the models).
Bengio et al. (2003) bucket a context by its training frequency::

    q = ceil(-ln((1 + n(context)) / T))       T: training tokens

and fit one weight vector per bucket on held-out data.
"""

from __future__ import annotations

import numpy as np


def frequency_bucket(context_counts: np.ndarray, total_tokens: int) -> np.ndarray:
    """q = ceil(-ln((1 + n) / T)), at least 0, for an array of context counts n."""
    q = np.ceil(-np.log((1.0 + np.asarray(context_counts)) / total_tokens) - 1e-12)
    return np.maximum(q, 0).astype(np.int64)


def fit_bucket_weights(weights: np.ndarray, probs: np.ndarray, rows: np.ndarray,
                       iterations: int, shift: np.ndarray | None = None
                       ) -> tuple[np.ndarray, list[float]]:
    """EM for mixture weights, one row per bucket.

    Args:
        weights: (buckets, K) starting weights, rows summing to 1.
        probs: (N, K) each component's probability of each held-out token (possibly
            scaled per token by exp(-shift), to stay in range).
        rows: (N,) the bucket of each token.
        shift: (N,) the log of that per-token scale (0 when unscaled).
    Returns:
        the fitted weights (buckets without tokens take the pooled weights) and the mean
        log-likelihood before each iteration, which never decreases.
    """
    history = []
    extra = 0.0 if shift is None else shift
    for _ in range(iterations):
        mix = weights[rows] * probs
        total = mix.sum(axis=1, keepdims=True)
        history.append(float((np.log(total[:, 0]) + extra).mean()))
        resp = mix / total
        sums = np.zeros_like(weights)
        np.add.at(sums, rows, resp)
        n = np.bincount(rows, minlength=len(weights))[:, None]
        weights = np.where(n > 0, sums / np.maximum(n, 1), resp.mean(axis=0))
    return weights, history


def fit_shifted_weights(weights: np.ndarray, logprobs: np.ndarray, rows: np.ndarray,
                        iterations: int) -> tuple[np.ndarray, list[float]]:
    """:func:`fit_bucket_weights` from log-probabilities ``logprobs`` (N, K): each token's
    probabilities scaled by its best component's (a token no component can give stays
    unscaled), so that exp stays in range."""
    shift = logprobs.max(axis=1)
    shift = np.where(np.isfinite(shift), shift, 0.0)
    return fit_bucket_weights(weights, np.exp(logprobs - shift[:, None]), rows, iterations,
                              shift)


def em_mixture_weights(logprobs: np.ndarray, iterations: int = 30) -> np.ndarray:
    """The weights of K models maximizing the likelihood of held-out tokens (EM), from
    their log-probabilities ``logprobs`` (T, K): one bucket."""
    start = np.full((1, logprobs.shape[1]), 1.0 / logprobs.shape[1])
    weights, _ = fit_shifted_weights(start, logprobs, np.zeros(len(logprobs), np.int64),
                                     iterations)
    return weights[0]

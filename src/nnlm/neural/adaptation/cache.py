"""The neural cache (Grave, Joulin & Usunier 2017): the text just scored votes for the
next word through the network's own hidden vectors.

Position t keeps (z_t, w_t): the output layer's input and the word that came. The next
position t' mixes the network's distribution with the cache's::

    p_cache(w | z_t') = sum_{t' - L <= t < t', w_t = w} exp(theta z_t' . z_t)
                        / sum_{t' - L <= t < t'} exp(theta z_t' . z_t)
    p(w)              = (1 - lambda) p_model(w) + lambda p_cache(w)

Each is a distribution over the vocabulary, so their mixture is one; at the text's first
position the cache is empty and p is p_model. The cache runs over the text in order,
across lines: it is test-time adaptation, reported apart from the static numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

BLOCK = 512  # positions whose cache scores are computed in one product


@dataclass(frozen=True)
class CacheSettings:
    """theta (how sharply similar hidden vectors vote), lambda (the cache's weight), L
    (positions kept)."""

    theta: float
    lam: float
    size: int

    def __post_init__(self):
        if not (self.theta >= 0 and 0 <= self.lam < 1 and self.size >= 1):
            raise ValueError(f"cache theta={self.theta} (>= 0), lambda={self.lam} (in "
                             f"[0, 1)), size={self.size} (>= 1)")

    def to_dict(self) -> dict:
        return {"theta": self.theta, "lambda": self.lam, "size": self.size}


def cache_logprobs(z: torch.Tensor, targets: np.ndarray, theta: float, size: int
                   ) -> np.ndarray:
    """log p_cache(w_t | z_t) for every position t of a text read in order (z (N, k),
    targets (N,)), float64: -inf where no position of the cache saw w_t, NaN where the
    cache is empty (t = 0)."""
    z = z.detach().float()
    tgt = torch.from_numpy(np.asarray(targets, np.int64)).to(z.device)
    n = len(z)
    out = np.full(n, np.nan)
    for lo in range(1, n, BLOCK):
        hi = min(n, lo + BLOCK)
        w0 = max(0, lo - size)
        scores = (theta * (z[lo:hi] @ z[w0 : hi - 1].T)).double()  # (b, w)
        t = torch.arange(lo, hi, device=z.device)[:, None]
        i = torch.arange(w0, hi - 1, device=z.device)[None, :]
        kept = (i < t) & (i >= t - size)
        scores.masked_fill_(~kept, float("-inf"))
        denominator = torch.logsumexp(scores, 1)
        same = tgt[w0 : hi - 1][None, :] == tgt[lo:hi, None]
        numerator = torch.logsumexp(scores.masked_fill(~same, float("-inf")), 1)
        out[lo:hi] = (numerator - denominator).cpu().numpy()
    return out


def with_cache(model_logprobs: np.ndarray, cache: np.ndarray, lam: float) -> np.ndarray:
    """log((1 - lambda) p_model + lambda p_cache), float64; p_model where the cache is
    empty."""
    if lam == 0:
        return model_logprobs.copy()
    empty = np.isnan(cache)
    mixed = np.logaddexp(np.log1p(-lam) + model_logprobs,
                         np.log(lam) + np.where(empty, -np.inf, cache))
    return np.where(empty, model_logprobs, mixed)

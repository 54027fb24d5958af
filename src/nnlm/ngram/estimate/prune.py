"""Pruning a back-off model: by counts (like lmplz ``--prune``) or by relative entropy
(Stolcke 1998, *Entropy-based pruning of backoff language models*; SRILM's ``-prune``).

Both choose n-grams of orders >= 2 to drop; :func:`prune` then drops them and
renormalizes. An n-gram that a kept longer n-gram needs as its context or suffix is
always kept (so the model stays a proper back-off model, and ARPA export needs no
repair). After pruning, each context h gets the back-off weight that makes its
distribution sum to 1 again:

    bow(h) = (1 - sum_{w explicit} p(w | h)) / (1 - sum_{w explicit} p(w | h'))

Stolcke's criterion for one n-gram (h, w), all measured on the unpruned model:

    D = P(h) [ p(w|h) (log p(w|h) - log bow'(h) - log p(w|h'))
               + (log bow(h) - log bow'(h)) (1 - sum_{v explicit} p(v|h)) ]

the increase of the model's entropy (nats per word) if (h, w) alone went, with bow'(h)
the weight h would get without it and P(h) the context's probability by the chain rule.
An n-gram goes when exp(D) - 1, the relative growth of perplexity, is below the
threshold (SRILM's definition of ``-prune``); all are judged on the unpruned model and
removed together.
"""

from __future__ import annotations

import numpy as np

from ...base.errors import NnlmError
from ...text.vocab import BOS_ID
from ..backoff import BackoffNgram, ngram_words
from ..store.levels import NgramLevel


def _closed(model: BackoffNgram, keep: list[np.ndarray]) -> list[np.ndarray]:
    """``keep`` (one mask per level, orders 2..N) plus every context and suffix that a kept
    n-gram needs, from the top order down."""
    keep = [k.copy() for k in keep]
    V = len(model.vocab)
    for k in range(model.order, 2, -1):
        level, kept = model.levels[k - 2], keep[k - 2]
        keep[k - 3][level.prefix[kept]] = True
        keep[k - 3][level.keys[kept] // V] = True
    return keep


def prune(model: BackoffNgram, keep: list[np.ndarray]) -> BackoffNgram:
    """A copy of ``model`` holding the n-grams ``keep`` marks (closed under contexts and
    suffixes), with back-off weights renormalized. Unigrams are never pruned."""
    if len(keep) != len(model.levels):
        raise ValueError("one mask per level of orders 2..N")
    keep = _closed(model, keep)
    V = len(model.vocab)
    out = BackoffNgram.__new__(type(model))
    out.__dict__.update(model.__dict__)
    out.levels = []
    remap = None  # old entry id -> new, for the previous order
    for k, (level, kept) in enumerate(zip(model.levels, keep), start=2):
        idx = np.flatnonzero(kept)
        suffix, prefix = level.keys[idx] // V, level.prefix[idx]
        if k > 2:
            suffix, prefix = remap[suffix], remap[prefix]
        n_prefixes = V if k == 2 else len(out.levels[-1])
        out.levels.append(NgramLevel(suffix * V + level.keys[idx] % V, level.logp[idx],
                                     level.log_bow[idx], prefix, level.last[idx], n_prefixes))
        remap = np.full(len(level), -1, np.int64)
        remap[idx] = np.arange(len(idx))
    renormalize(out)
    return out


def renormalize(model: BackoffNgram) -> None:
    """Set every context's back-off weight so that its distribution sums to 1."""
    V = len(model.vocab)
    for k, level in enumerate(model.levels, start=2):
        if k == 2:
            low, n_ctx = model.unigram_logp[level.last], V
        else:
            low, n_ctx = model.levels[k - 3].logp[level.keys // V], len(model.levels[k - 3])
        s_exp = np.bincount(level.prefix, np.exp(level.logp), minlength=n_ctx)
        s_low = np.bincount(level.prefix, np.exp(low), minlength=n_ctx)
        with np.errstate(divide="ignore", invalid="ignore"):
            bow = np.where(s_exp > 0, np.log1p(-np.minimum(s_exp, 1 - 1e-15))
                           - np.log1p(-np.minimum(s_low, 1 - 1e-15)), 0.0)
        if k == 2:
            model.unigram_log_bow = bow
        else:
            model.levels[k - 3].log_bow = bow
    if model.levels:  # the top order is never a context
        model.levels[-1].log_bow = np.zeros(len(model.levels[-1]))


def context_log_probability(model: BackoffNgram, k: int) -> np.ndarray:
    """log P(h) of every order-k entry h (k >= 1) by the chain rule, a leading ``<s>``
    counted as certain (a sentence start), each factor with only the words before it."""
    V = len(model.vocab)
    if k == 1:
        words = np.arange(V)[:, None]
    else:

        words = ngram_words(model)[k - 2]
    n = words.shape[1]
    total = np.zeros(len(words))
    for i in range(n):
        w = words[:, i]
        if i == 0:
            first = np.where(w == BOS_ID, 0.0, model.unigram_logp[w])
            total += first
            continue
        ctx = np.full((len(words), model.order - 1), -1, np.int64)  # -1: no word
        take = min(i, model.order - 1)
        ctx[:, model.order - 1 - take:] = words[:, i - take:i]
        total += model.target_logprobs(ctx, w)
    return total


def entropy_deltas(model: BackoffNgram) -> list[np.ndarray]:
    """Stolcke's D (nats per word) for every n-gram of orders 2..N (see the module)."""
    V = len(model.vocab)
    out = []
    for k, level in enumerate(model.levels, start=2):
        if k == 2:
            low, log_bow, n_ctx = model.unigram_logp[level.last], model.unigram_log_bow, V
        else:
            lower = model.levels[k - 3]
            low, log_bow, n_ctx = lower.logp[level.keys // V], lower.log_bow, len(lower)
        p, q = np.exp(level.logp), np.exp(low)
        s_exp = np.bincount(level.prefix, p, minlength=n_ctx)[level.prefix]
        s_low = np.bincount(level.prefix, q, minlength=n_ctx)[level.prefix]
        with np.errstate(divide="ignore", invalid="ignore"):
            new_bow = np.log(1 - s_exp + p) - np.log(1 - s_low + q)
            bow = log_bow[level.prefix]
            d = p * (level.logp - new_bow - low) + (bow - new_bow) * (1 - s_exp)
        log_ph = context_log_probability(model, k - 1)[level.prefix]
        out.append(np.exp(log_ph) * np.nan_to_num(d, nan=0.0))
    return out


def prune_entropy(model: BackoffNgram, threshold: float) -> BackoffNgram:
    """Drop every n-gram whose removal alone grows perplexity by less than ``threshold``
    (relative), then renormalize (Stolcke 1998)."""
    if not threshold > 0:
        raise NnlmError(f"entropy threshold {threshold}: must be positive")
    return prune(model, [np.expm1(d) >= threshold for d in entropy_deltas(model)])


def check_thresholds(thresholds, order: int) -> list[int]:
    """lmplz-style count thresholds, one per order: non-negative integers, non-decreasing,
    0 for unigrams (which are never pruned); shorter lists repeat their last value."""
    t = [int(x) for x in thresholds]
    if not t or any(x < 0 for x in t):
        raise NnlmError("prune_counts= needs non-negative count thresholds, one per order")
    if t[0] != 0:
        raise NnlmError("prune_counts= needs a unigram threshold of 0 (unigrams are never pruned)")
    if any(b < a for a, b in zip(t, t[1:])):
        raise NnlmError(f"prune_counts= thresholds must not decrease with the order (got "
                        f"{' '.join(map(str, t))}: a longer n-gram is never more frequent than "
                        "its parts)")
    if len(t) > order:
        raise NnlmError(f"prune_counts= has {len(t)} thresholds for a {order}-gram model")
    return t + [t[-1]] * (order - len(t))

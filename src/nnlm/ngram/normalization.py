"""Whether a back-off model's next-word distributions sum to 1: a property of the model,
checked whatever format it came from (ARPA files, KenLM's binaries, pruning)."""

from __future__ import annotations

import numpy as np

from ..base.errors import NnlmError, warn
from ..text.vocab import BOS_ID, EOS_ID
from .backoff import BackoffNgram, ngram_words

MASS_TOLERANCE = 1e-3  # ARPA's 7 significant digits, summed over a large vocabulary


def check_normalized(model: BackoffNgram, path, skip: dict | None = None,
                     strict: bool = False) -> None:
    """Every next-word distribution of a back-off model should sum to 1. Less gives a
    warning (a deficient model, e.g. pruned without renormalizing: perplexities are upper
    bounds); more gives a warning with the largest sum (KenLM loads such files, and files
    from other tools round their numbers), or with ``strict`` an error (an impossible
    model, whose perplexities would be too good). ``skip``: {order: bool mask} of contexts
    not to check (entries added for a pruned file's missing contexts).

    For a context h stored at order k-1, its explicit k-grams carry P(h w) and the rest
    comes from backing off: sum = sum_w P(h w) + bow(h) (1 - sum_w p(w | h')), where
    p(w | h') is the stored suffix n-gram's probability (ARPA stores every suffix). A
    context with no k-grams sums to bow(h), so its weight must be 1. Contexts ending in
    ``</s>`` are never used and are skipped. One vectorized pass per order.
    """
    V = len(model.vocab)
    mass = float(np.sum(np.exp(np.delete(model.unigram_logp, BOS_ID))))
    found = {True: [], False: []}  # above 1 / below 1: (what, its sum, how many)
    if abs(mass - 1) > MASS_TOLERANCE:
        found[mass > 1].append(("the unigram probabilities", mass, 1))
    for k, level in enumerate(model.levels, start=2):
        if k == 2:
            low, ctx_bow, ctx_last = model.unigram_logp[level.last], model.unigram_log_bow, \
                np.arange(V)
        else:
            lower = model.levels[k - 3]
            low, ctx_bow, ctx_last = lower.logp[level.keys // V], lower.log_bow, lower.last
        n = len(ctx_bow)
        s_exp = np.bincount(level.prefix, np.exp(level.logp), minlength=n)
        s_low = np.bincount(level.prefix, np.exp(low), minlength=n)
        with np.errstate(over="ignore"):
            total = s_exp + np.exp(ctx_bow) * (1.0 - s_low)
        used = ctx_last != EOS_ID
        if skip and k - 1 in skip:  # added contexts, and contexts of k-grams whose suffix
            used &= ~skip[k - 1]  # was added: a pruned file's sums hold only roughly
            if k >= 3:
                used[level.prefix[skip[k - 1][level.keys // V]]] = False
        for above, bad in ((True, used & (total > 1 + MASS_TOLERANCE)),
                           (False, used & (total < 1 - MASS_TOLERANCE))):
            if not np.any(bad):
                continue
            rows = np.flatnonzero(bad)
            i = int(rows[np.argmax(total[rows])] if above else rows[0])
            words = (model.vocab.words[i] if k == 2
                     else " ".join(model.vocab.words[j] for j in ngram_words(model)[k - 3][i]))
            found[above].append((f"the probabilities after '{words}'", float(total[i]), len(rows)))
    if found[True]:
        what, total, _ = max(found[True], key=lambda x: x[1])
        count = sum(c for *_, c in found[True])
        others = f" ({contexts_text(count - 1)} too)" if count > 1 else ""
        if strict:
            raise NnlmError(f"{path}: {what} sum to {total:.6g}, more "
                            "than 1: its n-grams and back-off weights disagree. Not a valid "
                            "language model")
        warn(f"{path}: {what} sum to {total:.6g}, more than 1{others}; "
             "loaded as KenLM loads it, but its perplexities are too good")
    if found[False]:
        what, total, count = found[False][0]
        count = sum(c for *_, c in found[False])
        others = f" and {contexts_text(count - 1)}" if count > 1 else ""
        warn(f"{path}: {what}{others} sum to {total:.6g}, less than 1 "
             "(a deficient model, e.g. pruned without renormalizing): perplexities are upper "
             "bounds")


def contexts_text(n: int) -> str:
    return f"{n:,} other context{'s' if n != 1 else ''}"

"""Interpolated modified Kneser-Ney (Chen & Goodman 1998), as KenLM's ``lmplz`` estimates it.

For an n-gram g of order k, the *adjusted count* a(g) is its raw count at the highest
order or when it starts with ``<s>``, and otherwise the number of distinct words seen
before it, N1+(. g). ``<s>`` as a unigram has a = 0 (it is never predicted). Per order,
three discounts come from the counts-of-counts n1..n4 of the adjusted counts::

    Y = n1 / (n1 + 2 n2),   D_j = j - (j + 1) Y n_{j+1} / n_j   (j = 1, 2, 3+)

and the probability interpolates down to the uniform distribution over the |V| - 1
predictable words::

    p(w | h) = (a(h w) - D(a(h w))) / S(h) + gamma(h) p(w | h')
    gamma(h) = (D_1 N_1(h .) + D_2 N_2(h .) + D_3 N_3+(h .)) / S(h),   S(h) = sum_x a(h x)

where N_j(h .) counts the words x with a(h x) = j (3 or more for j = 3+). The result
is stored in back-off form (:class:`BackoffNgram`): P(h w) is the interpolated
probability and bow(h) = gamma(h), which is exact and what ARPA files hold.
"""

from __future__ import annotations

import numpy as np

from ..errors import NnlmError
from ..stream import Stream
from ..vocab import BOS_ID, Vocabulary
from .backoff import BackoffNgram, NgramLevel
from .counts import OrderTable, count_ngrams

FALLBACK_DISCOUNTS = (0.5, 1.0, 1.5)  # KenLM's --discount_fallback defaults


class DiscountError(NnlmError):
    """Counts-of-counts that leave modified-KN discounts undefined (tiny or artificial data)."""


def adjusted_counts(tables: list[OrderTable], V: int) -> list[np.ndarray]:
    """a(g) for every stored n-gram of every order (see the module docstring)."""
    out = []
    N = len(tables)
    for k, table in enumerate(tables, start=1):
        if k == N:
            a = table.counts.copy()
        else:
            a = np.bincount(tables[k].suffix, minlength=len(table)).astype(np.int64)
            starts_bos = table.first_word(V) == BOS_ID
            a[starts_bos] = table.counts[starts_bos]
        if k == 1:
            a[table.keys == BOS_ID] = 0
        out.append(a)
    return out


def check_fallback(fallback):
    """Fallback discounts (D1, D2, D3+) must satisfy 0 < Dk < k: D = 0 would leave no mass
    for unseen words (probability 0, infinite perplexity), Dk >= k a negative count."""
    if fallback is None:
        return None
    if fallback is True:
        fallback = FALLBACK_DISCOUNTS
    d = np.asarray(fallback, dtype=np.float64)
    if d.shape != (3,) or not np.all(np.isfinite(d)) or np.any(d <= 0) or \
            np.any(d >= np.array([1, 2, 3])):
        raise NnlmError(f"discount fallback {list(np.atleast_1d(d))}: need three discounts "
                        "D1 D2 D3+ with 0 < D1 < 1, 0 < D2 < 2, 0 < D3+ < 3")
    return tuple(float(x) for x in d)


def discounts_from(a: np.ndarray, order: int, fallback=None) -> np.ndarray:
    """(D_1, D_2, D_3+) for one order from its adjusted counts (Chen & Goodman eq. 26)."""
    n = np.bincount(np.minimum(a[a > 0], 5), minlength=6)[:5]  # n[1..4]
    problem = None
    if np.any(n[1:4] == 0):
        j = int(np.flatnonzero(n[1:4] == 0)[0]) + 1
        problem = f"no {order}-grams with adjusted count {j}"
    else:
        y = n[1] / (n[1] + 2.0 * n[2])
        d = np.array([j - (j + 1) * y * n[j + 1] / n[j] for j in (1, 2, 3)])
        if np.any(d < 0) or np.any(d > np.array([1, 2, 3])):
            problem = f"{order}-gram discounts out of range: {np.round(d, 4).tolist()}"
    if problem is None:
        return d
    if fallback is None:
        raise DiscountError(
            f"cannot estimate modified Kneser-Ney discounts: {problem}; is this small or "
            "artificial data? Use --discount-fallback (KenLM's defaults 0.5 1 1.5) to proceed"
        )
    return np.asarray(fallback, dtype=np.float64)


def _discount(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """D(a) elementwise: 0 for a = 0, D_1, D_2, D_3+."""
    return np.concatenate([[0.0], d])[np.minimum(a, 3)]


class KneserNey(BackoffNgram):
    """Interpolated modified Kneser-Ney n-gram model, orders 1 to 5 (and beyond).

    Example:
        >>> from nnlm import Vocabulary, Stream
        >>> lines = [s.split() for s in ["a b c", "a c b", "b c a", "c a b a", "a a b"]]
        >>> vocab = Vocabulary.from_counts({w: 1 for w in "abc"})
        >>> model = KneserNey(vocab, order=3, discount_fallback=True)
        >>> model = model.fit(Stream.from_lines(lines, vocab))
        >>> bool(abs(np.exp(model.next_logprobs(np.array([[1, 3]]))).sum() - 1) < 1e-12)
        True
    """

    kind = "kn"

    def __init__(self, vocab: Vocabulary, order: int = 5, discount_fallback=None):
        if order < 1:
            raise ValueError("order must be at least 1")
        self.discount_fallback = check_fallback(discount_fallback)
        self.discounts = np.zeros((order, 3))
        super().__init__(vocab, np.full(len(vocab), -np.log(len(vocab) - 1)),
                         np.zeros(len(vocab)), [])
        self.order = order

    def fit(self, stream: Stream, prune_counts=None) -> KneserNey:
        """Estimate from ``stream``; ``prune_counts``: per-order thresholds (lmplz's
        ``--prune``): n-grams of order >= 2 seen that many times or fewer are dropped
        after estimation and the back-off weights renormalized (see ``prune.py``)."""
        from .prune import check_thresholds, prune

        if prune_counts is not None:
            prune_counts = check_thresholds(prune_counts, self.order)
        V = len(self.vocab)
        N = self.order
        tables = count_ngrams(stream, N, V)
        adjusted = adjusted_counts(tables, V)
        self.discounts = np.stack(
            [discounts_from(a, k, self.discount_fallback) for k, a in enumerate(adjusted, 1)]
        )
        # interpolated probabilities, order by order, and gamma of each context
        prob_lower = np.full(1, 1.0 / (V - 1))  # order 0: uniform over predictable words
        gammas = []  # gammas[k-1]: gamma of each order-(k-1) entry as a context of order k
        probs = []
        for k, (table, a) in enumerate(zip(tables, adjusted), start=1):
            n_ctx = 1 if k == 1 else len(tables[k - 2])
            S = np.bincount(table.prefix, weights=a, minlength=n_ctx)
            D = _discount(a, self.discounts[k - 1])
            mass = np.bincount(table.prefix, weights=D, minlength=n_ctx)
            with np.errstate(invalid="ignore", divide="ignore"):
                gamma = np.where(S > 0, mass / S, 1.0)
                pdisc = np.where(S[table.prefix] > 0, (a - D) / S[table.prefix], 0.0)
            p = pdisc + gamma[table.prefix] * prob_lower[table.suffix]
            gammas.append(gamma)
            probs.append(p)
            prob_lower = p
        # unigrams, dense over the vocabulary: unseen words get gamma_0 / (|V| - 1)
        words = tables[0].keys
        uni = np.full(V, gammas[0][0] / (V - 1))
        uni[words] = probs[0]
        uni[BOS_ID] = 0.0
        uni_bow = np.ones(V)
        if N > 1:
            uni_bow[words] = gammas[1]
        with np.errstate(divide="ignore"):
            self.unigram_logp = np.log(uni)
        self.unigram_log_bow = np.log(uni_bow)
        # higher orders: re-key order 2 by word ids (monotone in the unigram table order)
        self.levels = []
        last = words  # predicted word of each entry of the previous order
        for k in range(2, N + 1):
            table = tables[k - 1]
            suffix, prefix = table.suffix, table.prefix
            if k == 2:
                suffix, prefix = words[suffix], words[prefix]
            keys = suffix * V + table.first_word(V)
            bow = gammas[k] if k < N else np.ones(len(table))
            last_k = words[table.suffix] if k == 2 else last[table.suffix]
            n_prefixes = V if k == 2 else len(tables[k - 2])
            self.levels.append(NgramLevel(keys, np.log(probs[k - 1]), np.log(bow), prefix,
                                          last_k, n_prefixes))
            last = last_k
        if prune_counts is not None and any(prune_counts):
            t = prune_counts
            pruned = prune(self, [tables[k - 1].counts > t[k - 1] for k in range(2, N + 1)])
            self.levels, self.unigram_log_bow = pruned.levels, pruned.unigram_log_bow
        return self

    def config(self) -> dict:
        return {"order": self.order, "discounts": self.discounts.tolist()}

    def _restore_config(self, config: dict) -> None:
        self.discounts = np.asarray(config.get("discounts", []))
        self.discount_fallback = None

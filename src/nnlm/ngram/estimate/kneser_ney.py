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

import tempfile

import numpy as np

from ...base.errors import NnlmError
from ...text.stream import Stream
from ...text.vocab import BOS_ID, Vocabulary
from ..backoff import BackoffNgram
from ..store.levels import NgramLevel
from .counts import OrderTable, chunk_for, count_ngrams

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
    return discounts_of_counts(np.bincount(np.minimum(a[a > 0], 5), minlength=6), order,
                               fallback)


def discounts_of_counts(n: np.ndarray, order: int, fallback=None) -> np.ndarray:
    """(D_1, D_2, D_3+) for one order from its counts-of-counts ``n`` (n[j]: how many
    n-grams have adjusted count j, j = 1..4)."""
    n = np.asarray(n)[:5]
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
            "artificial data? Use discount_fallback=True (KenLM's defaults 0.5 1 1.5) to proceed"
        )
    return np.asarray(fallback, dtype=np.float64)


def discount_of(a: np.ndarray, d: np.ndarray) -> np.ndarray:
    """D(a) elementwise: 0 for a = 0, D_1, D_2, D_3+."""
    return np.concatenate([[0.0], d])[np.minimum(a, 3)]


def context_classes(prefix: np.ndarray, a: np.ndarray, n_ctx: int
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """N_1(h .), N_2(h .), N_3+(h .) for every context id h < ``n_ctx``: how many of the
    n-grams with context ``prefix`` have adjusted count 1, 2, 3 or more."""
    cls = np.minimum(a, 3)
    return tuple(np.bincount(prefix[cls == j], minlength=n_ctx) for j in (1, 2, 3))


def discounted_mass(n1: np.ndarray, n2: np.ndarray, n3: np.ndarray, d) -> np.ndarray:
    """D_1 N_1(h .) + D_2 N_2(h .) + D_3+ N_3+(h .): the mass gamma(h) S(h) that
    discounting frees in context h. From the integer counts, in this order, so the bits are
    the same however the n-grams were split (the cluster sums counts from its partitions;
    a sum of the n-grams' D in their order would depend on where each lies)."""
    mass = d[0] * np.asarray(n1, np.float64)
    mass += d[1] * np.asarray(n2, np.float64)
    mass += d[2] * np.asarray(n3, np.float64)
    return mass


def backoff_of(S: np.ndarray, mass: np.ndarray) -> np.ndarray:
    """gamma(h) = mass(h) / S(h), the discounted mass over the context's total; 1 for a
    context whose words all have adjusted count 0 (S = 0)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(S > 0, mass / S, 1.0)


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

    def fit(self, stream: Stream, prune_counts=None, memory: int | None = None,
            temp=None, keep_counts: bool = False) -> KneserNey:
        """Estimate from ``stream``; ``prune_counts``: per-order thresholds (lmplz's
        ``--prune``): n-grams of order >= 2 seen that many times or fewer are dropped
        after estimation and the back-off weights renormalized (see ``prune.py``).
        ``memory`` (bytes, like lmplz's ``-S``) bounds counting's intermediates, which
        then spill to files in ``temp`` (default: the system's temporary folder).
        ``keep_counts``: keep what the values come from (``self.value_inputs``: each
        n-gram's a, each context's S and gamma, the unigrams' p in float64), so that the
        trie stores them instead of float32 values (:mod:`..store.value_codes`)."""
        from .prune import check_thresholds, prune  # (its counting loads numba)

        if prune_counts is not None:
            prune_counts = check_thresholds(prune_counts, self.order)
        V = len(self.vocab)
        N = self.order
        if memory is not None:
            tables = count_ngrams(stream, N, V, chunk_for(memory),
                                  spill=temp if temp is not None else tempfile.gettempdir())
        else:
            tables = count_ngrams(stream, N, V)
        adjusted = adjusted_counts(tables, V)
        self.discounts = np.stack(
            [discounts_from(a, k, self.discount_fallback) for k, a in enumerate(adjusted, 1)]
        )
        keep = None
        kept: dict | None = {"a": [], "S": [], "gamma": []} if keep_counts else None
        if prune_counts is not None and any(prune_counts):
            keep = [tables[k - 1].counts > prune_counts[k - 1] for k in range(2, N + 1)]
        # Interpolated probabilities, order by order. Step k gives P of the k-grams and
        # gamma of the (k-1)-grams as contexts, which completes order k - 1: it is stored
        # then and its temporaries dropped, so at most two orders' arrays are alive.
        prob_lower = np.full(1, 1.0 / (V - 1))  # order 0: uniform over predictable words
        words = tables[0].keys
        self.levels = []
        last = words  # predicted word of each entry of the previous order
        for k in range(1, N + 2):
            if k <= N:
                table, a = tables[k - 1], adjusted[k - 1]
                n_ctx = 1 if k == 1 else len(tables[k - 2])
                prefix = table.prefix
                S = np.bincount(prefix, weights=a, minlength=n_ctx)
                mass = discounted_mass(*context_classes(prefix, a, n_ctx),
                                       self.discounts[k - 1])
                D = discount_of(a, self.discounts[k - 1])
                gamma = backoff_of(S, mass)
                if kept is not None:
                    if k >= 2:  # order k-1 as contexts: S(h), gamma(h)
                        kept["S"].append(S)
                        kept["gamma"].append(gamma)
                        kept["a"].append(a.astype(np.uint32) if len(a) and a.max() < 1 << 32
                                         else a.copy())
                with np.errstate(invalid="ignore", divide="ignore"):
                    p = np.subtract(a, D, out=D)  # in place: these arrays are the big ones
                    del D
                    S_h = S[prefix]
                    p /= S_h
                    p[S_h == 0] = 0.0
                del S, S_h, mass, a
                adjusted[k - 1] = None
                p += gamma[prefix] * prob_lower[table.suffix]
            else:
                # the top order backs off nowhere: bow 1, a read-only view of one number
                gamma = np.broadcast_to(1.0, len(tables[N - 1]))
            if k == 1:  # unseen words get gamma_0 / (|V| - 1)
                uni = np.full(V, gamma[0] / (V - 1))
            elif k == 2:  # unigrams, dense over the vocabulary
                uni[words] = prob_lower
                uni[BOS_ID] = 0.0
                uni_bow = np.ones(V)
                uni_bow[words] = gamma
                with np.errstate(divide="ignore"):
                    self.unigram_logp = np.log(uni)
                self.unigram_log_bow = np.log(uni_bow)
                if kept is not None and kept["S"]:  # the unigrams as contexts, by word id
                    S_1, gamma_1 = np.zeros(V), np.ones(V)
                    S_1[words], gamma_1[words] = kept["S"][0], kept["gamma"][0]
                    kept["S"][0], kept["gamma"][0], kept["uni_p"] = S_1, gamma_1, uni.copy()
            else:  # order k - 1; order 2 is re-keyed by word ids (monotone in table order)
                j = k - 1
                done = tables[j - 1]
                suffix, prefix = done.suffix, done.prefix
                last_j = last[suffix]
                if j == 2:
                    suffix, prefix = words[suffix], words[prefix]
                keys = suffix * V + done.first_word(V) if j == 2 else done.keys
                del suffix
                log_bow = np.log(gamma) if k <= N else np.broadcast_to(0.0, len(gamma))
                self.levels.append(NgramLevel(keys, np.log(prob_lower), log_bow,
                                              prefix, last_j, V if j == 2 else len(tables[j - 2])))
                last = last_j
                if j > 2:
                    tables[j - 2] = None  # order j - 1 is no longer needed as context
            if k <= N:
                prob_lower = p
        del tables
        self.value_inputs = kept
        if keep is not None:
            self.value_inputs = None  # pruning renormalizes: the counts no longer give them
            pruned = prune(self, keep)
            self.levels, self.unigram_log_bow = pruned.levels, pruned.unigram_log_bow
        return self

    def config(self) -> dict:
        return {"order": self.order, "discounts": self.discounts.tolist()}

    def _restore_config(self, config: dict) -> None:
        self.discounts = np.asarray(config.get("discounts", []))
        self.discount_fallback = None

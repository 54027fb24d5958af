"""nltk.lm's models, each score computed for a whole batch as NLTK computes one.

- :class:`MLE`: count(h w) / count(h).
- :class:`Lidstone`, :class:`Laplace`: (count(h w) + gamma) / (count(h) + |V| gamma).
- :class:`StupidBackoff` (Brants et al. 2007): count(h w) / count(h) where seen, else
  alpha times the score after h's shorter context; not a distribution.
- the interpolated models (Chen & Goodman 1999): p(w | h) = alpha(w, h) + gamma(h)
  p(w | h'), h' the context without its oldest word, down to a unigram score; a context
  never seen gives alpha 0 and gamma 1:

  - :class:`WittenBellInterpolated`: gamma = N1+(h) / (N1+(h) + count(h)),
    alpha = (1 - gamma) count(h w) / count(h); unigrams count(w) / N;
  - :class:`AbsoluteDiscountingInterpolated` (discount D = 0.75):
    alpha = max(count(h w) - D, 0) / count(h), gamma = D N1+(h) / count(h);
  - :class:`KneserNeyInterpolated` (D = 0.1, NLTK's default): as absolute discounting
    at the highest order; below it, counts are continuation counts N1+(. h w) over
    their sum for h (Kneser & Ney 1995); unigrams N1+(. w) / N1+(. .).

N1+(h) is the number of distinct words seen after h. The arithmetic follows NLTK's
expressions operation by operation (numpy's float64 operations are IEEE's, as Python's),
so the numbers are NLTK's to the last bit.
"""

from __future__ import annotations

import numpy as np

from .api import LanguageModel, Query, _over


class MLE(LanguageModel):
    """Maximum-likelihood n-gram scores."""

    nothing_after_unseen = True

    def sums_to_one_after(self, context: tuple) -> bool:
        """1 after a context seen, 0 after one never seen."""
        return self.counts._tables.context_total(context) > 0

    def _group_scores(self, q: Query) -> np.ndarray:
        if q.m == 0:
            return q.unigram_freq()
        return _over(q.stat(q.m + 1, "count", q.ngram_ids(q.m)).astype(np.float64),
                     q.stat(q.m, "context_total", q.context_ids(q.m)).astype(np.float64))


class Lidstone(LanguageModel):
    """Scores with ``gamma`` added to every count."""

    def __init__(self, gamma, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gamma = gamma

    def _group_scores(self, q: Query) -> np.ndarray:
        if q.m == 0:
            count, total = q.stat(1, "count", q.ngram_ids(0)), np.int64(q.unigram_total())
        else:
            count = q.stat(q.m + 1, "count", q.ngram_ids(q.m))
            total = q.stat(q.m, "context_total", q.context_ids(q.m))
        gamma = self.gamma
        denominator = total + len(self.vocab) * gamma
        if np.any(denominator == 0):  # no vocabulary and no counts: NLTK's exception
            raise ZeroDivisionError("Lidstone: the vocabulary is empty and nothing was "
                                    "counted; fit the model first")
        return (count + gamma) / denominator


class Laplace(Lidstone):
    """Add-one smoothing: Lidstone with gamma = 1."""

    def __init__(self, *args, **kwargs):
        super().__init__(1, *args, **kwargs)


class StupidBackoff(LanguageModel):
    """Stupid Backoff scores, ``alpha`` per order backed off (not a distribution)."""

    truncates = True

    def sums_to_one_after(self, context: tuple) -> bool:
        return False  # a score, not a distribution

    def __init__(self, alpha=0.4, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.alpha = alpha

    def _group_scores(self, q: Query) -> np.ndarray:
        p = q.unigram_freq()
        for j in range(1, q.m + 1):
            count = q.stat(j + 1, "count", q.ngram_ids(j))
            total = q.stat(j, "context_total", q.context_ids(j))
            p = np.where(count > 0, count / np.where(total > 0, total, 1), self.alpha * p)
        return p


class InterpolatedLanguageModel(LanguageModel):
    """alpha(w, h) + gamma(h) p(w | h'), from the unigram score up; a subclass gives
    ``alpha_gamma`` (and ``unigram_scores`` where they are not frequencies)."""

    truncates = True

    def _group_scores(self, q: Query) -> np.ndarray:
        p = self.unigram_scores(q)
        for j in range(1, q.m + 1):
            context = q.context_ids(j)
            seen = q.stat(j, "context_total", context) > 0
            alpha, gamma = self.alpha_gamma(q, j, context)
            p = np.where(seen, alpha + gamma * p, p)  # unseen: 0 + 1 * p is p
        return p

    def unigram_scores(self, q: Query) -> np.ndarray:
        """The words' frequencies (Witten-Bell's and absolute discounting's)."""
        return q.unigram_freq()

    def alpha_gamma(self, q: Query, j: int, context: np.ndarray):
        raise NotImplementedError


class WittenBellInterpolated(InterpolatedLanguageModel):
    """Interpolated Witten-Bell smoothing."""

    def alpha_gamma(self, q: Query, j: int, context: np.ndarray):
        total, types, count = q.after_context(j, context)
        alpha = _over(count.astype(np.float64), total.astype(np.float64))
        gamma = _over(types.astype(np.float64), (types + total).astype(np.float64))
        return (1.0 - gamma) * alpha, gamma


class AbsoluteDiscountingInterpolated(InterpolatedLanguageModel):
    """Interpolated absolute discounting, ``discount`` D."""

    def __init__(self, order, discount=0.75, **kwargs):
        super().__init__(order, **kwargs)
        self.discount = discount

    def alpha_gamma(self, q: Query, j: int, context: np.ndarray):
        total, types, count = q.after_context(j, context)
        d = self.discount
        alpha = _over(np.maximum(count - d, 0), total.astype(np.float64))
        gamma = _over(d * types, total.astype(np.float64))
        return alpha, gamma


class KneserNeyInterpolated(InterpolatedLanguageModel):
    """Interpolated Kneser-Ney smoothing, ``discount`` D in [0, 1]."""

    def __init__(self, order, discount=0.1, **kwargs):
        if not (0 <= discount <= 1):
            raise ValueError("Discount must be between 0 and 1 for probabilities to sum "
                             "to unity.")
        super().__init__(order, **kwargs)
        self.discount = discount

    def sums_to_one_after(self, context: tuple) -> bool:
        """Not after a context ending in <s>: its gamma counts <s> among the words seen
        after it, which no continuation count can give mass back to."""
        context = context[-(self.order - 1):] if self.order > 1 else ()
        return not context or context[-1] != self.vocab.lookup("<s>")

    def unigram_scores(self, q: Query) -> np.ndarray:
        level = q.levels.get(1)
        total = level.total("continuations") if level is not None else 0
        if total == 0:  # no bigrams (NLTK: ZeroDivisionError): uniform over the vocabulary
            return np.full(len(q.word), 1.0 / len(self.vocab))
        return q.stat(1, "continuations", q.ngram_ids(0)) / total

    def alpha_gamma(self, q: Query, j: int, context: np.ndarray):
        types = q.stat(j, "context_types", context)
        ngram = q.ngram_ids(j)
        if j + 1 == self.order:  # the highest order: counts
            count = q.stat(j + 1, "count", ngram)
            total = q.stat(j, "context_total", context)
        else:  # below it: continuation counts
            count = q.stat(j + 1, "continuations", ngram)
            total = q.stat(j, "continuation_total", context)
        d = self.discount
        alpha = _over(np.maximum(count - d, 0.0), total.astype(np.float64))
        gamma = _over(d * types, total.astype(np.float64))
        # a total of 0 (NLTK: ZeroDivisionError): the context counts as never seen
        return alpha, np.where(total == 0, 1.0, gamma)

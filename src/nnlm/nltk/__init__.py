"""NLTK's ``nltk.lm`` API over nnlm's count tables: ``import nnlm.nltk as lm`` where a
course wrote ``from nltk import lm``.

    from nnlm.nltk import KneserNeyInterpolated
    from nnlm.nltk.preprocessing import padded_everygram_pipeline

    train, vocab = padded_everygram_pipeline(3, sentences)
    lm = KneserNeyInterpolated(3)
    lm.fit(train, vocab)
    lm.perplexity(test_ngrams)

The names, arguments, defaults, return types and exceptions are nltk.lm's, and so are
the numbers, computed the same way operation by operation; where NLTK raises
ZeroDivisionError on a text its documentation allows, nnlm backs off instead
(docs/guide/nltk.md lists every difference). Counting fills sorted arrays and every
statistic a smoothing needs is computed once, so that fitting and scoring a corpus take
array passes (NLTK's Kneser-Ney rescans every context of the order above per word).
"""

from .api import LanguageModel
from .bridge import NltkModel, load
from .counter import ConditionalFreqDist, FreqDist, NgramCounter
from .models import (
    MLE,
    AbsoluteDiscountingInterpolated,
    InterpolatedLanguageModel,
    KneserNeyInterpolated,
    Laplace,
    Lidstone,
    StupidBackoff,
    WittenBellInterpolated,
)
from .vocabulary import Vocabulary

__all__ = [
    "MLE", "AbsoluteDiscountingInterpolated", "ConditionalFreqDist", "FreqDist",
    "InterpolatedLanguageModel", "KneserNeyInterpolated", "LanguageModel", "Laplace",
    "Lidstone", "NgramCounter",
    "NltkModel", "load", "StupidBackoff", "Vocabulary", "WittenBellInterpolated",
]

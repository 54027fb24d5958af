"""nltk.lm's LanguageModel: fit, score, logscore, entropy, perplexity and generate, with
NLTK's semantics, over count tables that answer a whole text in a few array passes.

What differs from NLTK, each where NLTK raises or loops (docs/guide/nltk.md lists them):

- a context whose smoothing denominator is 0 where NLTK divides by it (Kneser-Ney's
  continuation total of a context no longer n-gram extends, or no bigrams at all for its
  unigrams) is backed off as a context never seen (Kneser-Ney's unigrams: uniform over
  the vocabulary) instead of a ZeroDivisionError;
- scoring never inserts empty contexts into ``counts`` (NLTK's defaultdict does).

Every score is computed with the same floating-point operations in the same order as
NLTK's, so the numbers are NLTK's to the last bit where NLTK gives one; entropy sums
with ``math.fsum`` as NLTK does.
"""

from __future__ import annotations

import math
import random
import warnings
from array import array
from bisect import bisect
from itertools import accumulate, islice

import numpy as np

from ..models import save_model
from .bridge import NltkModel
from .counter import NgramCounter
from .kinds import register
from .preprocessing import PaddedEverygrams, pad_both_ends
from .tables import Level, NgramTables, take
from .util import log_base2
from .vocabulary import Vocabulary

SCORED_AT_ONCE = 1 << 12  # n-grams entropy looks up and scores at once
SAMPLING_CONTEXTS = 4096  # contexts whose sampling tables generate keeps


def _random_generator(seed_or_generator):
    if isinstance(seed_or_generator, random.Random):
        return seed_or_generator
    return random.Random(seed_or_generator)


class LanguageModel:
    """ABC for language models: a subclass gives ``_group_scores`` (and NLTK's name
    ``unmasked_score`` comes with it)."""

    # contexts longer than order - 1 are cut to it (interpolated models and Stupid
    # Backoff); MLE and Lidstone read counts of the context's own length, as NLTK's
    truncates = False
    # a context never seen gives every word 0 (MLE); nnlm's view shortens it instead
    nothing_after_unseen = False

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register(cls)

    def __init__(self, order, vocabulary=None, counter=None):
        self.order = order
        if vocabulary and not isinstance(vocabulary, Vocabulary):
            warnings.warn(f"The `vocabulary` argument passed to {self.__class__.__name__!r} "
                          "must be an instance of `nltk.lm.Vocabulary`.", stacklevel=3)
        self.vocab = Vocabulary() if vocabulary is None else vocabulary
        self.counts = NgramCounter() if counter is None else counter

    # -- training --------------------------------------------------------------------------
    def fit(self, text, vocabulary_text=None):
        """Trains the model on a text: sentences, each a sequence of n-grams (tuples of
        words), as ``padded_everygram_pipeline`` gives them."""
        if not self.vocab:
            if vocabulary_text is None:
                raise ValueError("Cannot fit without a vocabulary or text to create it from.")
            self.vocab.update(vocabulary_text)
        sentences = text.take_sentences() if isinstance(text, PaddedEverygrams) else None
        if sentences is None:
            self.counts.update(self.vocab.lookup(sent) for sent in text)
        else:
            self._count_padded(sentences, text.order)

    def _count_padded(self, sentences, order: int) -> None:
        """Every padded sentence's everygrams up to ``order``, counted in bulk: what
        NLTK's tuples would count, without making them."""
        tables, vocab = self.counts._tables, self.vocab
        tables.reserve(len(tables.words) + len(vocab) + 1)  # every word a key will hold
        # a word with an id is its own lookup (a vocabulary word, or <UNK>), unless a
        # counter given to the model counted words outside the vocabulary
        ids = tables.ids if all(vocab.lookup(w) == w for w in tables.ids) else {}
        others: dict[str, int] = {}  # the other words met: their lookup's id
        flat, lengths = array("i"), array("q")
        limit = tables.batch_tokens()
        for sent in sentences:
            start = len(flat)
            for w in pad_both_ends(sent, n=order):
                wid = ids.get(w)
                if wid is None:
                    wid = others.get(w)
                    if wid is None:
                        looked_up = vocab.lookup(w)
                        wid = tables.word_id(looked_up)
                        if looked_up != w or ids is not tables.ids:
                            others[w] = wid
                flat.append(wid)
            lengths.append(len(flat) - start)
            if len(flat) >= limit:
                tables.add_windows(np.frombuffer(flat, np.int32),
                                   np.frombuffer(lengths, np.int64), order)
                flat, lengths = array("i"), array("q")
                limit = tables.batch_tokens()
        tables.add_windows(np.frombuffer(flat, np.int32), np.frombuffer(lengths, np.int64),
                           order)

    # -- scoring ---------------------------------------------------------------------------
    def score(self, word, context=None):
        """The score of ``word`` after ``context``, out-of-vocabulary words masked."""
        return self.unmasked_score(self.vocab.lookup(word),
                                   self.vocab.lookup(context) if context else None)

    def unmasked_score(self, word, context=None):
        """The score of ``word`` after ``context``, neither looked up in the vocabulary."""
        return float(self._scores([word], [tuple(context) if context else ()])[0])

    def logscore(self, word, context=None):
        """log2 of :meth:`score`."""
        return log_base2(self.score(word, context))

    def context_counts(self, context):
        """The FreqDist of the words after ``context`` (the unigrams for none)."""
        return self.counts[len(context) + 1][context] if context else self.counts.unigrams

    def entropy(self, text_ngrams):
        """Cross-entropy of the model on ``text_ngrams`` (each n-gram's last word scored
        after the words before it), in bits a word."""
        counted = [0]

        def logscores():  # a chunk at a time, into one fsum: NLTK's sum, bounded memory
            ngrams = iter(text_ngrams)
            while chunk := list(islice(ngrams, SCORED_AT_ONCE)):
                counted[0] += len(chunk)
                lookup = self.vocab.lookup
                scores = self._scores(list(lookup([g[-1] for g in chunk])),
                                      [lookup(g[:-1]) if g[:-1] else () for g in chunk])
                yield from map(log_base2, scores.tolist())

        total = math.fsum(logscores())
        if not counted[0]:
            raise ZeroDivisionError("float division by zero")  # NLTK's, for no n-grams
        return -1 * (total / counted[0])

    def perplexity(self, text_ngrams):
        """2 ** :meth:`entropy`."""
        return pow(2.0, self.entropy(text_ngrams))

    def _scores(self, words: list, contexts: list[tuple]) -> np.ndarray:
        """The unmasked scores of ``words[i]`` after ``contexts[i]``, in one batch per
        context length."""
        ids = self.counts._tables.ids
        out = np.empty(len(words), np.float64)
        by_length: dict[int, list[int]] = {}
        for i, c in enumerate(contexts):
            by_length.setdefault(len(c), []).append(i)
        for m, rows in by_length.items():
            w = np.array([ids.get(words[i], -1) for i in rows], np.int64)
            ctx = np.fromiter((ids.get(x, -1) for i in rows for x in contexts[i]), np.int64,
                              len(rows) * m).reshape(len(rows), m)
            out[rows] = self._id_scores(w, ctx)
        return out

    def _id_scores(self, word: np.ndarray, context: np.ndarray) -> np.ndarray:
        """:meth:`_scores` of words and contexts (B, m) given as the count tables' ids
        (-1: never counted), the contexts cut to what the model reads."""
        if self.truncates:
            context = context[:, max(context.shape[1] - (self.order - 1), 0):] \
                if self.order > 1 else context[:, :0]
        tables = self.counts._tables
        return self._group_scores(Query(tables, tables.levels(), word, context))

    def _group_scores(self, q: Query) -> np.ndarray:
        raise NotImplementedError

    # -- nnlm's side ------------------------------------------------------------------------
    def to_nnlm(self):
        """This model under nnlm's own API (an :class:`nnlm.nltk.bridge.NltkModel`):
        evaluation, mixtures, decoders and serving take it. ``<s>`` is context only there,
        so each distribution is this one's without ``<s>``, renormalized."""
        return NltkModel(self)

    def save(self, path):
        """Write the model (counts, vocabulary, settings) as an nnlm model directory at
        ``path``, atomically: :func:`nnlm.nltk.load` reads it back as it is, and nnlm's own
        loaders (``nnlm.load``, ``nnlm serve``) as :meth:`to_nnlm`'s model."""
        return save_model(self.to_nnlm(), path)

    def sums_to_one_after(self, context: tuple) -> bool:
        """Whether the scores after ``context`` (looked up) sum to 1 over the vocabulary
        (docs/guide/nltk.md lists where NLTK's do not; the tests check the rest)."""
        return True

    # -- generation ------------------------------------------------------------------------
    def generate(self, num_words=1, text_seed=None, random_seed=None):
        """``num_words`` words sampled from the model after ``text_seed`` (one word, a str,
        for num_words=1), with NLTK's sampling: the same ``random_seed`` gives NLTK's
        words."""
        text_seed = [] if text_seed is None else list(text_seed)
        random_generator = _random_generator(random_seed)
        if num_words == 1:
            context = (text_seed[-self.order + 1:] if len(text_seed) >= self.order
                       else text_seed)
            samples, cum_weights, total = self._sampling(self.vocab.lookup(context))
            while context and not samples:
                context = context[1:] if len(context) > 1 else []
                samples, cum_weights, total = self._sampling(self.vocab.lookup(context))
            if not samples:
                raise ValueError("Can't choose from empty population")
            return samples[bisect(cum_weights, total * random_generator.random())]
        generated = []
        for _ in range(num_words):
            generated.append(self.generate(num_words=1, text_seed=text_seed + generated,
                                           random_seed=random_generator))
        return generated

    def _sampling(self, context: tuple) -> tuple[list, list, float]:
        """(the words seen after ``context``, sorted; their scores' running sums; the sum
        by math.fsum): what NLTK's ``_weighted_choice`` bisects, computed once a context and
        kept (a sentence's steps meet the same contexts again)."""
        key = (context, self.counts._tables.version, len(self.vocab))
        cache = self.__dict__.setdefault("_sampling_cache", {})
        table = cache.get(key)
        if table is None:
            samples = sorted(self.context_counts(context))
            masked = context if context else ()
            weights = self._scores(self.vocab.lookup_words(samples),
                                   [masked] * len(samples)).tolist() if samples else []
            table = (samples, list(accumulate(weights)), math.fsum(weights))
            if len(cache) >= SAMPLING_CONTEXTS:
                cache.clear()
            cache[key] = table
        return table


class Query:
    """A batch of (word, context) pairs with one context length m, as ids, and the
    lookups the models make: the context's last j words, and those words with the
    scored word after them."""

    def __init__(self, tables: NgramTables, levels: dict[int, Level], word: np.ndarray,
                 context: np.ndarray):
        self.tables, self.levels, self.word, self.context = tables, levels, word, context
        self.m = context.shape[1]

    def context_ids(self, j: int) -> np.ndarray:
        """Ids of each context's last j words (-1: never seen)."""
        return self.tables.find(self.levels, self.context[:, self.m - j:])

    def ngram_ids(self, j: int) -> np.ndarray:
        """Ids of each context's last j words followed by the word."""
        rows = np.concatenate([self.context[:, self.m - j:], self.word[:, None]], axis=1)
        return self.tables.find(self.levels, rows)

    def stat(self, length: int, name: str, ids: np.ndarray) -> np.ndarray:
        """A statistic of the rows ``ids`` of the level of ``length`` (0 where absent)."""
        level = self.levels.get(length)
        if level is None:
            return np.zeros(len(ids), np.int64)
        return take(level.stat(name), ids)

    def unigram_total(self) -> int:
        level = self.levels.get(1)
        return level.total("count") if level is not None else 0

    def unigram_freq(self) -> np.ndarray:
        """Each word's count over all words' (NLTK's ``counts.unigrams.freq``)."""
        return _over(self.stat(1, "count", self.ngram_ids(0)).astype(np.float64),
                     np.float64(self.unigram_total()))

    def after_context(self, j: int, context: np.ndarray):
        """(count(h), N1+(h), count(h w)) for h the last j words, ``context`` its ids."""
        return (self.stat(j, "context_total", context), self.stat(j, "context_types", context),
                self.stat(j + 1, "count", self.ngram_ids(j)))


def _over(numerator: np.ndarray, denominator) -> np.ndarray:
    """numerator / denominator, 0 where the denominator is 0 (FreqDist.freq's)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator == 0, 0.0, numerator / np.where(denominator == 0, 1,
                                                                  denominator))

"""nltk.lm's NgramCounter over nnlm.nltk's count tables: the same indexing, built into
dictionaries only where asked.

``counts['a']`` is a word's count; ``counts[['a']]`` or ``counts[('a',)]`` the
frequencies of the words after the context; ``counts[2]`` the bigrams as a
ConditionalFreqDist (context -> FreqDist); ``counts.unigrams``, ``counts.N()``,
``len(counts)`` (the orders counted), ``update(ngram_text)``. FreqDist and
ConditionalFreqDist are NLTK's names for a Counter with ``N()`` and ``freq()`` and a
mapping of them: the classes here are those, without NLTK.

One difference: NLTK's ``counts[k][context]`` inserts an empty FreqDist for a context
never seen (a defaultdict's side effect, which scoring an unseen context also has); here
nothing is inserted, so ``len(counts[k])`` stays the number of contexts counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from .tables import NgramTables


class FreqDist(Counter):
    """A frequency distribution: a Counter with NLTK's ``N``, ``freq`` and ``B``."""

    def N(self) -> int:  # noqa: N802 (NLTK's name)
        """The total count."""
        return sum(self.values())

    def B(self) -> int:  # noqa: N802
        """How many distinct samples."""
        return len(self)

    def freq(self, sample) -> float:
        """sample's count over the total (0 for an empty distribution)."""
        n = self.N()
        return 0 if n == 0 else self[sample] / n

    def __repr__(self) -> str:
        return f"FreqDist({dict(self.most_common())})"


class ConditionalFreqDist(Mapping):
    """Contexts (tuples) -> the FreqDist of the words after each, for one order k >= 2,
    read from the count tables: one context's on asking for it (a range of the sorted
    level), all of them only where iterated."""

    def __init__(self, tables: NgramTables, order: int):
        self._tables, self._order = tables, order
        self._contexts: list | None = None

    def __getitem__(self, context) -> FreqDist:
        tables, k = self._tables, self._order
        levels = tables.levels()
        context = tuple(context)
        if k not in levels or len(context) != k - 1:
            return FreqDist()
        ids = [tables.ids.get(w, -1) for w in context]
        if min(ids, default=0) < 0:
            return FreqDist()
        level = levels[k]
        lo, hi = level.codec.prefix_range(level.keys, np.array(ids, np.int64))
        counts = level.count[lo:hi]
        seen = counts > 0
        last = level.codec.unpack(level.keys[lo:hi][seen])[:, -1]
        words = tables.words
        return FreqDist(dict(zip((words[w] for w in last.tolist()), counts[seen].tolist())))

    def _all_contexts(self) -> list:
        if self._contexts is None:
            rows, _ = self._tables.counted(self._order)
            words = self._tables.words
            seen = dict.fromkeys(tuple(words[i] for i in row) for row in
                                 rows[:, :-1].tolist())
            self._contexts = list(seen)
        return self._contexts

    def __iter__(self):
        return iter(self._all_contexts())

    def __len__(self) -> int:
        return len(self._all_contexts())

    def __contains__(self, context) -> bool:
        return bool(self[context])

    def conditions(self) -> list:
        return list(self._all_contexts())

    def N(self) -> int:  # noqa: N802
        return self._tables.total(self._order)

    def __repr__(self) -> str:
        return f"<ConditionalFreqDist with {len(self)} conditions>"


class NgramCounter:
    """nltk.lm.NgramCounter's API over :class:`~nnlm.nltk.tables.NgramTables`."""

    def __init__(self, ngram_text=None, tables: NgramTables | None = None):
        self._tables = tables if tables is not None else NgramTables()
        self._views: dict = {}
        if ngram_text:
            self.update(ngram_text)

    def update(self, ngram_text) -> None:
        """Count ``ngram_text``: sentences, each a sequence of n-grams (tuples)."""
        tables = self._tables
        for sent in ngram_text:
            for ngram in sent:
                if not isinstance(ngram, tuple):
                    raise TypeError(f"Ngram <{ngram}> isn't a tuple, but {type(ngram)}")
                tables.add(ngram)

    @property
    def unigrams(self) -> FreqDist:
        """The words' counts."""
        return self._order(1)

    def _order(self, k: int):
        key = (k, self._tables.version)
        view = self._views.get(key)
        if view is None:
            self._views = {key: v for key, v in self._views.items()
                           if key[1] == self._tables.version}
            view = self._views[key] = self._make_order(k)
        return view

    def _make_order(self, k: int):
        if k == 1:
            rows, counts = self._tables.counted(1)
            words = self._tables.words
            return FreqDist({words[r]: c for r, c in zip(rows[:, 0].tolist(),
                                                           np.asarray(counts).tolist())})
        return ConditionalFreqDist(self._tables, k)

    def __getitem__(self, item):
        if isinstance(item, int):
            return self._order(item)
        if isinstance(item, str):
            return self._order(1)[item]
        if isinstance(item, Sequence):
            return self._order(len(item) + 1)[tuple(item)]
        return None

    def N(self) -> int:  # noqa: N802
        """Every count of every order, summed (NLTK's: orders overlap)."""
        tables = self._tables
        return sum(tables.total(k) for k in tables.orders())

    def __len__(self) -> int:
        return max(len(self._tables.orders()), 1)

    def __contains__(self, item) -> bool:
        return item in self._tables.orders() or item == 1

    def __str__(self) -> str:
        return f"<NgramCounter with {len(self)} ngram orders and {self.N()} ngrams>"

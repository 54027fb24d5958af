"""nltk.lm's Vocabulary: word counts, a cutoff below which a word is unknown, and the
label unknown words are looked up as.

Its semantics are NLTK's, edge cases included: ``len`` counts the words at or above the
cutoff plus the unknown label (which is always "in" the vocabulary); ``lookup`` takes a
word (str) or any iterable of them (a tuple back), and anything else is a TypeError;
``update`` takes what ``collections.Counter.update`` takes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from itertools import chain


class Vocabulary:
    """Stores language model vocabulary (see the module docstring)."""

    def __init__(self, counts=None, unk_cutoff=1, unk_label="<UNK>"):
        self.unk_label = unk_label
        if unk_cutoff < 1:
            raise ValueError(f"Cutoff value cannot be less than 1. Got: {unk_cutoff}")
        self._cutoff = unk_cutoff
        self.counts = Counter()
        self.update(counts if counts is not None else "")

    @property
    def cutoff(self):
        """Items with a count below it are not in the vocabulary."""
        return self._cutoff

    def update(self, *counter_args, **counter_kwargs):
        """Update the counts (``collections.Counter.update``'s arguments)."""
        self.counts.update(*counter_args, **counter_kwargs)
        self._len = sum(1 for _ in self)

    def lookup(self, words):
        """A word (str), or a tuple of them for an iterable: each as it is if it is in the
        vocabulary, else the unknown label."""
        if isinstance(words, str):
            return words if words in self else self.unk_label
        if isinstance(words, Iterable):
            return tuple(self.lookup(w) for w in words)
        raise TypeError(f"Unsupported type for looking up in vocabulary: {type(words)}")

    def lookup_words(self, words: list) -> list:
        """``lookup`` of each of ``words`` (strings), as a list, in one pass."""
        counts, cutoff, unk = self.counts, self._cutoff, self.unk_label
        if not all(isinstance(w, str) for w in words):
            return [self.lookup(w) for w in words]
        return [w if w == unk or counts.get(w, 0) >= cutoff else unk for w in words]

    def __getitem__(self, item):
        return self._cutoff if item == self.unk_label else self.counts[item]

    def __contains__(self, item):
        """Only items counted at least ``cutoff`` times (and the unknown label)."""
        return self[item] >= self.cutoff

    def __iter__(self):
        return chain((item for item in self.counts if item in self),
                     [self.unk_label] if self.counts else [])

    def __len__(self):
        return self._len

    def __eq__(self, other):
        return (self.unk_label == other.unk_label and self.cutoff == other.cutoff
                and self.counts == other.counts)

    def __str__(self):
        return (f"<{self.__class__.__name__} with cutoff={self.cutoff} "
                f"unk_label='{self.unk_label}' and {len(self)} items>")

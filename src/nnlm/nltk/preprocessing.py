"""nltk.lm.preprocessing without NLTK: padding, everygrams and the default pipeline.

The same names, arguments, defaults and outputs as NLTK's (``nltk.lm.preprocessing`` and
the ``nltk.util`` functions it uses): ``pad_both_ends(sentence, n)`` puts n - 1 ``<s>``
before a sentence and n - 1 ``</s>`` after it; ``everygrams(sequence, min_len=1,
max_len=-1)`` yields every contiguous n-gram, shortest first at each start;
``padded_everygram_pipeline(order, text)`` gives the training n-grams and the flat
vocabulary text, as two lazy iterators.

``padded_everygram_pipeline`` returns iterators that also remember their sentences, so
that :meth:`nnlm.nltk.LanguageModel.fit` counts them with numpy instead of tuple by
tuple; iterated, they yield exactly what NLTK's yield.

One addition, for texts larger than memory: :class:`TextFile`, a file's sentences read
again at each iteration (the pipeline reads its text twice).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from itertools import chain

flatten = chain.from_iterable


def pad_sequence(sequence, n, pad_left=False, pad_right=False, left_pad_symbol=None,
                 right_pad_symbol=None):
    """``sequence`` with n - 1 ``left_pad_symbol`` before it and n - 1
    ``right_pad_symbol`` after it, as asked (nltk.util.pad_sequence)."""
    sequence = iter(sequence)
    if pad_left:
        sequence = chain((left_pad_symbol,) * (n - 1), sequence)
    if pad_right:
        sequence = chain(sequence, (right_pad_symbol,) * (n - 1))
    return sequence


def pad_both_ends(sequence, n, left_pad_symbol="<s>", right_pad_symbol="</s>"):
    """Pads both ends of a sentence to length specified by ngram order: n - 1 ``<s>``
    before it, n - 1 ``</s>`` after it."""
    return pad_sequence(sequence, n, pad_left=True, pad_right=True,
                        left_pad_symbol=left_pad_symbol, right_pad_symbol=right_pad_symbol)


def ngrams(sequence, n, **kwargs):
    """The n-grams of ``sequence`` as tuples (nltk.util.ngrams; ``kwargs`` pad it)."""
    if kwargs:
        sequence = pad_sequence(sequence, n, **kwargs)
    items = list(sequence)
    return (tuple(items[i:i + n]) for i in range(len(items) - n + 1))


def everygrams(sequence, min_len=1, max_len=-1, pad_left=False, pad_right=False,
               **kwargs) -> Iterator[tuple]:
    """Every n-gram of ``sequence`` with min_len <= n <= max_len (-1: its length), in
    NLTK's order: for each start, the lengths from min_len up."""
    if pad_left or pad_right:
        sequence = pad_sequence(sequence, max_len, pad_left=pad_left, pad_right=pad_right,
                                **kwargs)
    items = list(sequence)
    if max_len == -1:
        max_len = len(items)
    for i in range(len(items)):
        for n in range(min_len, max_len + 1):
            if i + n > len(items):
                break
            yield tuple(items[i:i + n])


def padded_everygrams(order, sentence):
    """Helper with some useful defaults: pad_both_ends, then everygrams up to
    ``order``."""
    return everygrams(list(pad_both_ends(sentence, n=order)), max_len=order)


class PaddedEverygrams:
    """The training half of :func:`padded_everygram_pipeline`: an iterator over each
    sentence's padded everygrams (NLTK's generator's items) that also keeps the
    sentences and the order, so that fit may count them in bulk. Like NLTK's generator
    it is spent once read, whichever way."""

    def __init__(self, order: int, text: Iterable):
        self.order, self.text = order, text
        self._items: Iterator | None = None
        self._spent = False

    def take_sentences(self) -> Iterable | None:
        """The sentences, if nothing was read yet (the iterator is then spent)."""
        if self._spent or self._items is not None:
            return None
        self._spent = True
        return self.text

    def __iter__(self):
        return self

    def __next__(self):
        if self._items is None:
            self._items = iter(() if self._spent else
                               (padded_everygrams(self.order, sent) for sent in self.text))
            self._spent = True
        return next(self._items)


def padded_everygram_pipeline(order, text):
    """Default preprocessing for a sequence of sentences: (the padded everygrams of each
    sentence, the padded words of all sentences one after another). ``text`` is read
    twice, as NLTK's is: give a list, not an iterator."""
    return (PaddedEverygrams(order, text),
            flatten(pad_both_ends(sent, n=order) for sent in text))


class TextFile:
    """The sentences of a UTF-8 text file, one a line, each split on whitespace (blank
    lines skipped), read from the file again at each iteration: a text that is no list
    in memory, which ``padded_everygram_pipeline`` can still read twice.

        text, vocab = padded_everygram_pipeline(3, TextFile("corpus.txt"))
        model.fit(text, vocab)   # memory: the model's counts, not the text
    """

    def __init__(self, path: str | os.PathLike, lowercase: bool = False):
        self.path, self.lowercase = os.fspath(path), lowercase
        with open(self.path, encoding="utf-8"):  # a missing file: said now, not at fit
            pass

    def __iter__(self) -> Iterator[list[str]]:
        with open(self.path, encoding="utf-8") as f:
            for line in f:
                words = (line.lower() if self.lowercase else line).split()
                if words:
                    yield words

    def __repr__(self) -> str:
        return f"TextFile({self.path!r})"

"""Hotwords: words (or phrases, split into their words) a decoder favours, with
pyctcdecode's semantics.

A text earns ``weight`` for each hotword word it holds as a whole word. pyctcdecode
counts the matches of one regular expression of every hotword word (longest first,
each between whitespace); since each word must fill a whole whitespace-delimited token,
that count is the number of the text's tokens in the set of hotword words, which is
what is counted here: a set lookup a token, whatever the number of hotwords. A partial
word that starts some hotword word earns ``weight * len(partial) / len(w)``, w the first
hotword word below the partial word in a trie of them inserted shortest first
(pyctcdecode's ``CharTrie`` walked depth first, children in insertion order, stopping at
the first complete word on each path). A partial word that starts no hotword earns
nothing here, and the language model's partial-word score applies instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_HOTWORD_WEIGHT = 10.0
_END = ""  # the key under which a trie node marks a complete word (no character is "")


class _Trie:
    """Words as nested dicts of characters, children in insertion order."""

    def __init__(self, words: Iterable[str] = ()):
        self.root: dict = {}
        for word in words:
            node = self.root
            for char in word:
                node = node.setdefault(char, {})
            node[_END] = True

    def node(self, prefix: str) -> dict | None:
        node = self.root
        for char in prefix:
            node = node.get(char)
            if node is None:
                return None
        return node

    def has_node(self, prefix: str) -> bool:
        """Whether some word starts with ``prefix`` (the empty prefix: any word)."""
        node = self.node(prefix)
        return node is not None and bool(node)

    def first_word(self, prefix: str) -> str:
        """The first complete word below ``prefix``, depth first in insertion order."""
        stack = [(prefix, self.node(prefix))]
        while stack:
            word, node = stack.pop()
            if _END in node:
                return word
            stack.extend((word + c, child) for c, child in reversed(node.items()) if c)
        raise KeyError(prefix)


class HotwordScorer:
    """Scores texts and partial words for a list of hotwords (module docstring)."""

    def __init__(self, match_ptn: re.Pattern | None, char_trie: _Trie,
                 weight: float = DEFAULT_HOTWORD_WEIGHT, unigrams=None) -> None:
        """``match_ptn``: pyctcdecode's pattern (None: made from ``unigrams`` when asked
        for); ``unigrams``: the hotword words, counted by set lookups."""
        self._pattern = match_ptn
        self._char_trie = char_trie
        self._weight = weight
        self._unigrams = None if unigrams is None else frozenset(unigrams)
        self._first_lengths: dict[str, int] = {}
        self.trie_words: list[str] | None = None  # set where the trie is built from them

    @property
    def _match_ptn(self) -> re.Pattern:
        """pyctcdecode's pattern of the hotword words (made on first use)."""
        if self._pattern is None:
            self._pattern = _pattern(self._unigrams or ())
        return self._pattern

    def __getstate__(self) -> dict:
        """The scorer without the compiled search's trie of it (made again on first use
        where the scorer is received)."""
        state = dict(self.__dict__)
        state.pop("_compiled_trie", None)
        return state

    def __contains__(self, item: str) -> bool:
        return self._char_trie.has_node(item)

    def score(self, text: str) -> float:
        """``weight`` times the hotword words ``text`` holds."""
        if self._unigrams is None:
            return self._weight * len(self._match_ptn.findall(text))
        if not self._unigrams:
            return 0.0
        hot = self._unigrams
        return self._weight * sum(1 for token in text.split() if token in hot)

    def score_partial_token(self, token: str) -> float:
        """The score of a word being spelled that starts a hotword word."""
        if token not in self:
            return 0.0
        shortest = self._first_lengths.get(token)
        if shortest is None:
            shortest = self._first_lengths[token] = len(self._char_trie.first_word(token))
        return self._weight * len(token) / shortest

    @classmethod
    def build_scorer(cls, hotwords: Iterable[str] | None = None,
                     weight: float = DEFAULT_HOTWORD_WEIGHT) -> HotwordScorer:
        """The scorer of ``hotwords`` (blank ones ignored) at ``weight``."""
        if isinstance(hotwords, str):
            raise ValueError("hotwords must be a list of strings, not one string")
        hotwords = [s.strip() for s in (hotwords or []) if len(s.strip()) > 0]
        unigrams = [unigram for ngram in hotwords for unigram in ngram.split()]
        words = sorted(unigrams, key=len)
        scorer = cls(None, _Trie(words), weight, unigrams)
        scorer.trie_words = words  # the trie's words in insertion order (the C search's)
        return scorer


def _pattern(unigrams) -> re.Pattern:
    """pyctcdecode's expression: every hotword word between whitespace, longest first."""
    if not unigrams:
        return re.compile(r"^\b$")
    return re.compile("|".join(rf"(?<!\S){re.escape(s)}(?!\S)"
                               for s in sorted(unigrams, key=len, reverse=True)))

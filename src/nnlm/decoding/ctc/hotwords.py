"""Hotwords: words (or phrases, split into their words) a decoder favours, with
pyctcdecode's semantics.

A text earns ``weight`` for each hotword word it holds as a whole word (matched longest
first, never overlapping); a partial word that starts some hotword word earns
``weight * len(partial) / len(w)``, w the first hotword word below the partial word in a
trie of them inserted shortest first (pyctcdecode's ``CharTrie`` walked depth first,
children in insertion order, stopping at the first complete word on each path). A
partial word that starts no hotword earns nothing here, and the language model's
partial-word score applies instead.
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

    def __init__(self, match_ptn: re.Pattern, char_trie: _Trie,
                 weight: float = DEFAULT_HOTWORD_WEIGHT) -> None:
        self._match_ptn = match_ptn
        self._char_trie = char_trie
        self._weight = weight
        self._first_lengths: dict[str, int] = {}

    def __contains__(self, item: str) -> bool:
        return self._char_trie.has_node(item)

    def score(self, text: str) -> float:
        """``weight`` times the hotword words ``text`` holds."""
        return self._weight * len(self._match_ptn.findall(text))

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
        if hotwords:
            unigrams = [unigram for ngram in hotwords for unigram in ngram.split()]
            match_ptn = re.compile("|".join(rf"(?<!\S){re.escape(s)}(?!\S)"
                                            for s in sorted(unigrams, key=len, reverse=True)))
            char_trie = _Trie(sorted(unigrams, key=len))
        else:
            match_ptn = re.compile(r"^\b$")
            char_trie = _Trie()
        return cls(match_ptn, char_trie, weight)

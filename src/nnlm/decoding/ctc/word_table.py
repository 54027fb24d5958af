"""The words and labels of a CTC search as integer tables on a device, so that a batched
search spells, looks up and scores words with tensor operations only.

A string s = s_1 .. s_m is the 64-bit polynomial hash

    h(s) = sum_i (ord(s_i) + 1) * M^(m - i)   (mod 2^64, M = FNV's 64-bit prime)

so that h(s t) = h(s) * M^|t| + h(t): a partial word extended by a label's characters is
one multiply and one add (``pow``, ``piece``), however long the label. The model's words
are sorted by hash (``keys``) with their ids (a partial word finished is one
``searchsorted``); so are the prefixes of the listed words (``unigrams``), with the best
log10 p(w) (no context) of the words each starts, for pyctcdecode's partial-word score and
flashlight's smeared lexicon. Two strings that share a hash would be one word: the table
refuses a vocabulary where two of its words do.

Labels (pyctcdecode's normalized alphabet, :mod:`.alphabet`): the blank ``""``; in a
character alphabet the separator ``" "``; in a BPE one a label starting with ``▁``
starts a word and one ending with ``▁`` (``▁⁇▁``) makes the next start one.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np
import torch

from ...base.errors import NnlmError
from ..dense import sorted_lookup
from .alphabet import BPE_TOKEN

HASH_MUL = np.uint64(0x100000001B3)


def _codes(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each string's characters as ord + 1, zero-padded to the longest: [S, m], lengths."""
    lengths = np.fromiter((len(s) for s in strings), np.int64, len(strings))
    width = int(lengths.max()) if len(strings) else 0
    codes = np.zeros((len(strings), width), np.uint64)
    for i, s in enumerate(strings):
        if s:
            codes[i, :len(s)] = np.frombuffer(s.encode("utf-32-le"), np.uint32) + 1
    return codes, lengths


def prefix_hashes(strings: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """[S, m] hashes of every string's prefixes of 1..m characters (uint64, wrapping), and
    the lengths: ``out[i, j]`` is h(strings[i][:j + 1]) for j < len(strings[i])."""
    codes, lengths = _codes(strings)
    out = np.zeros(codes.shape, np.uint64)
    h = np.zeros(len(strings), np.uint64)
    with np.errstate(over="ignore"):
        for j in range(codes.shape[1]):
            h = np.where(j < lengths, h * HASH_MUL + codes[:, j], h)
            out[:, j] = h
    return out, lengths


def string_hashes(strings: Sequence[str]) -> np.ndarray:
    """h(s) of each string as int64 (0 for the empty string)."""
    out, lengths = prefix_hashes(strings)
    if out.shape[1] == 0:
        return np.zeros(len(strings), np.int64)
    last = out[np.arange(len(strings)), np.maximum(lengths - 1, 0)]
    return np.where(lengths > 0, last, 0).view(np.int64)


def _unique_or_refuse(keys: np.ndarray, what: str) -> None:
    if len(keys) > 1 and bool(np.any(keys[1:] == keys[:-1])):
        raise NnlmError(f"two {what} share a 64-bit hash; the batched CTC search cannot "
                        "tell them apart (use the compiled decoder)")


class WordTable:
    """The model's words, the listed words' prefixes and the labels as tensors on
    ``device`` (module docstring). ``unigram_log10[i]``: log10 p(words[i]) with no
    context, for the prefixes' best score; ``unigrams`` None: no list (pyctcdecode then
    scores every partial word as unknown)."""

    def __init__(self, words: Sequence[str], unigram_log10: np.ndarray,
                 unigrams: Collection[str] | None, labels: Sequence[str], is_bpe: bool,
                 device: torch.device):
        self.device = device
        hashes = string_hashes(words)
        order = np.argsort(hashes, kind="stable")
        _unique_or_refuse(hashes[order], "of the model's words")
        listed = np.ones(len(words), bool) if unigrams is None else \
            np.fromiter((w in unigrams for w in words), bool, len(words))
        put = self._put
        self.keys, self.ids, self.listed = put(hashes[order]), put(order), put(listed[order])
        self.has_prefixes = unigrams is not None
        known = [i for i, w in enumerate(words) if w and listed[i]]
        pre, lengths = prefix_hashes([words[i] for i in known])
        mask = np.arange(pre.shape[1])[None, :] < lengths[:, None]
        flat = pre[mask].view(np.int64)
        best = np.broadcast_to(unigram_log10[known][:, None], pre.shape)[mask]
        order = np.lexsort((-best, flat))  # by hash, the best score first
        flat, best = flat[order], best[order]
        first = np.ones(len(flat), bool)
        first[1:] = flat[1:] != flat[:-1]
        self.prefix_keys, self.prefix_values = put(flat[first]), put(best[first], torch.float64)
        self._labels(labels, is_bpe)

    def _put(self, x, dtype=None) -> torch.Tensor:
        t = torch.as_tensor(np.ascontiguousarray(x))
        return t.to(self.device, dtype or (torch.int64 if t.dtype != torch.bool else None))

    def _labels(self, labels: Sequence[str], is_bpe: bool) -> None:
        """Per label: blank, separator, starts a word, ends one, its characters' hash, M to
        their number, their number; and the text it adds to a decoded string."""
        separators = [(not is_bpe) and label == " " for label in labels]
        clean, starts, ends, texts = [], [], [], []
        for label, separator in zip(labels, separators):
            s = label
            starts.append(is_bpe and s.startswith(BPE_TOKEN))
            s = s[1:] if starts[-1] else s
            ends.append(is_bpe and label.endswith(BPE_TOKEN))
            s = s[:-1] if ends[-1] and s.endswith(BPE_TOKEN) else s
            clean.append("" if separator else s)
            texts.append(" " * starts[-1] + (" " if separator else s) + " " * ends[-1])
        hashes = string_hashes(clean)
        lengths = np.fromiter(map(len, clean), np.int64, len(clean))
        with np.errstate(over="ignore"):
            pows = np.array([HASH_MUL ** np.uint64(n) for n in lengths], np.uint64)
        self.blank = labels.index("")
        self.separator = self._put(separators)
        self.starts, self.ends = self._put(starts), self._put(ends)
        self.piece, self.pow = self._put(hashes), self._put(pows.view(np.int64))
        self.piece_len = self._put(lengths)
        self.texts = texts
        self._kinds = list(zip(separators, starts, ends, lengths.tolist()))

    def word_ids(self, hashes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The model's id of each hashed word (-1: not a model word) and whether it is a
        listed word (in the model and in ``unigrams``)."""
        found, at = sorted_lookup(self.keys, hashes)
        ids = torch.where(found, self.ids[at], torch.full_like(at, -1))
        return ids, found & self.listed[at]

    def prefix_best(self, hashes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Whether each hashed string starts a listed word, and the best log10 p(w) of
        the words it starts (-inf where none)."""
        found, at = sorted_lookup(self.prefix_keys, hashes)
        if len(self.prefix_values) == 0:
            return found, torch.full(hashes.shape, -np.inf, dtype=torch.float64,
                                     device=self.device)
        best = torch.where(found, self.prefix_values[at],
                           torch.full_like(self.prefix_values[at], -np.inf))
        return found, best

    def text(self, labels: Sequence[int]) -> str:
        """The words a label sequence spells, single-spaced."""
        return " ".join("".join(self.texts[c] for c in labels).split())

    def word_frames(self, events: Sequence[int]) -> list[tuple[int, int]]:
        """Each word's (first frame, last frame + 1) along a beam's frames, pyctcdecode's
        way: ``events[t]`` the label read at frame t (-1 a blank, -2 the last label
        again, which stretches the word being spelled)."""
        frames, span, spelled, brk = [], (-1, -1), 0, False
        for t, c in enumerate(events):
            if c == -1:
                continue
            if c == -2:
                span = (span[0], t + 1)
                continue
            separator, starts, ends, length = self._kinds[c]
            if starts or brk:  # a subword that starts a word
                if spelled:
                    frames.append(span)
                span, spelled = (t, t + 1), length
            elif separator:
                if spelled:
                    frames.append(span)
                span, spelled = (-1, -1), 0
            else:
                span, spelled = (t if span[0] < 0 else span[0], t + 1), spelled + length
            brk = ends
        if spelled:
            frames.append(span)
        return frames


class HotwordTable:
    """A :class:`~.hotwords.HotwordScorer`'s words as hashes on ``device``: a finished
    word earns ``weight`` where it is a hotword word; a partial word that starts one
    scores the scorer's ``score_partial_token`` (weight x its length / the first hotword
    word's below it), in place of the language model's partial-word score."""

    def __init__(self, scorer, weight: float, device: torch.device):
        words = list(scorer.trie_words or [])
        self.weight = float(weight)
        self.words = torch.as_tensor(np.unique(string_hashes(sorted(set(words))))).to(device)
        prefixes = sorted({w[:i] for w in words for i in range(1, len(w) + 1)})
        keys = string_hashes(prefixes)
        order = np.argsort(keys, kind="stable")
        _unique_or_refuse(keys[order], "hotword prefixes")
        self.prefix_keys = torch.as_tensor(keys[order]).to(device)
        self.prefix_scores = torch.as_tensor(np.array(
            [scorer.score_partial_token(prefixes[i]) for i in order], np.float64)).to(device)

    def word_bonus(self, hashes: torch.Tensor) -> torch.Tensor:
        """``weight`` where the hashed word is a hotword word, else 0."""
        found, _ = sorted_lookup(self.words, hashes)
        return found.to(torch.float64) * self.weight

    def partial(self, hashes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Whether each hashed partial word starts a hotword word, and its score."""
        found, at = sorted_lookup(self.prefix_keys, hashes)
        if len(self.prefix_scores) == 0:
            return found, torch.zeros(hashes.shape, dtype=torch.float64, device=hashes.device)
        return found, torch.where(found, self.prefix_scores[at],
                                  torch.zeros_like(self.prefix_scores[at]))

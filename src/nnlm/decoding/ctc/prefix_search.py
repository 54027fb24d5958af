"""CTC beam search over character or subword labels with a word-level language model,
step for step as pyctcdecode searches (the reference of any faster search here).

A beam is a text of finished words, a word just finished and not yet scored by the LM
(``next_word``), the word being spelled (``partial_word``), the last label read
(``last_char``; ``""`` for the blank), the frames each word spans, and the acoustic
score: the log-probability of the labels read, CTC's sum over the alignments merged
into the beam. At each frame (logits as log-probabilities, clipped at 1e-15) every beam
meets every label at least ``token_min_logp`` (and the frame's best): a blank or a
repeat of ``last_char`` leaves the words as they are; a separator (``" "``, or a subword
starting with ``▁``) finishes the partial word; any other label extends it. Beams with
the same words, partial word and last label merge (log-sum-exp of their scores, in the
order they were made). Each beam then ranks by

    acoustic + sum of its words' fused scores + the partial word's score

(:mod:`.fusion`; a partial word that starts a hotword scores by :mod:`.hotwords`
instead, and every finished hotword adds its weight); beams more than
``beam_prune_logp`` below the best are dropped and the ``beam_width`` best kept (ties in
the order they were made). ``prune_history`` then keeps, of beams that agree on their
last n - 1 words, partial word and last label, the best only. At the end the partial
word is finished and every beam's last word is scored with ``</s>``.

The order things happen in decides ties and the last bits of merged scores, so it is
pyctcdecode's throughout: the labels of a frame are visited in the order of Python's
set of their indices, and a subword ending in ``▁`` makes the next subword start a word
whichever beam meets it next (pyctcdecode's ``force_next_break``).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import compiled
from .alphabet import BPE_TOKEN
from .fusion import AbstractLanguageModel
from .hotwords import HotwordScorer

DEFAULT_BEAM_WIDTH = 100
DEFAULT_PRUNE_LOGP = -10.0
DEFAULT_PRUNE_BEAMS = False
DEFAULT_MIN_TOKEN_LOGP = -5.0
MIN_TOKEN_CLIP_P = 1e-15  # probabilities are clipped here before their log
NULL_FRAMES = (-1, -1)  # a word with no frames yet

Frames = tuple[int, int]


class Beam(NamedTuple):
    """A hypothesis between frames (module docstring)."""

    text: str
    next_word: str
    partial_word: str
    last_char: str | None
    text_frames: list[Frames]
    partial_frames: Frames
    logit_score: float


class LMBeam(NamedTuple):
    """A beam with its words scored: ``lm_score`` is the acoustic score plus the fused
    language-model and hotword scores."""

    text: str
    next_word: str
    partial_word: str
    last_char: str | None
    text_frames: list[Frames]
    partial_frames: Frames
    logit_score: float
    lm_score: float


class OutputBeam(NamedTuple):
    """A decoded hypothesis: its text, the LM state after it, each word with its
    (start, end) frames, the acoustic score and the combined one."""

    text: str
    last_lm_state: object  # the LM's state after the text (a kenlm State), or None
    text_frames: list[tuple[str, Frames]]
    logit_score: float
    lm_score: float

    def get_mp_safe_beam(self) -> OutputBeamMPSafe:
        """The beam without its LM state, which another process could not receive."""
        return OutputBeamMPSafe(self.text, self.text_frames, self.logit_score, self.lm_score)


class OutputBeamMPSafe(NamedTuple):
    """An output beam without its LM state (pyctcdecode 0.5's four fields)."""

    text: str
    text_frames: list[tuple[str, Frames]]
    logit_score: float
    lm_score: float


EMPTY_START_BEAM = Beam("", "", "", None, [], NULL_FRAMES, 0.0)
# (text, is_eos) -> (LM score with hotwords, raw LM score, the state after the text)
LMScoreCache = dict


def looks_like_probabilities(logits: np.ndarray) -> bool:
    """pyctcdecode's test: the mean row sum, in the array's dtype, within 1e-9 of 1
    (``math.isclose``). float32 softmax outputs often miss it by an ulp and are then
    taken for logits, by pyctcdecode and so by nnlm."""
    return len(logits) > 0 and math.isclose(logits.sum(axis=1).mean(), 1)


def log_probs(logits: np.ndarray) -> np.ndarray:
    """Logits as clipped log-probabilities: the log of a matrix whose rows look like
    probabilities (:func:`looks_like_probabilities`), a log-softmax otherwise, in its
    dtype. No frames (an empty utterance) stay none: it decodes to "", as pyctcdecode's
    does."""
    if len(logits) == 0:
        return np.zeros(logits.shape, np.float64)
    if looks_like_probabilities(logits):
        return np.log(np.clip(logits, MIN_TOKEN_CLIP_P, 1))
    x_max = np.amax(logits, axis=1, keepdims=True)
    x_max[~np.isfinite(x_max)] = 0
    shifted = logits - x_max
    with np.errstate(divide="ignore"):
        out = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    return np.clip(out, np.log(MIN_TOKEN_CLIP_P), 0)


def sum_log_scores(s1: float, s2: float) -> float:
    """log(e^s1 + e^s2), larger first (pyctcdecode's arithmetic, to the bit)."""
    if s1 >= s2:
        return s1 + math.log(1 + math.exp(s2 - s1))
    return s2 + math.log(1 + math.exp(s1 - s2))


def merge_tokens(token_1: str, token_2: str) -> str:
    """Two texts joined by one space (either may be empty)."""
    if not token_2:
        return token_1
    if not token_1:
        return token_2
    return token_1 + " " + token_2


def merge_beams(beams: list[Beam], log_add: bool = True) -> list[Beam]:
    """Beams with the same words, partial word and last label as one: in the first's
    place, with the last one's fields and the log-sum of the scores (pyctcdecode's: CTC's
    sum over the alignments merged), or with ``log_add`` False the larger score (the best
    alignment's, as flashlight's decoders with ``log_add=False``)."""
    merged: dict[tuple, Beam] = {}
    for beam in beams:  # by index: pyctcdecode 0.5's beams are plain tuples
        key = (merge_tokens(beam[0], beam[1]), beam[2], beam[3])
        seen = merged.get(key)
        merged[key] = beam if seen is None else \
            (*beam[:6], sum_log_scores(seen[6], beam[6]) if log_add else max(seen[6], beam[6]))
    return list(merged.values())


def sort_and_trim(beams: list[LMBeam], beam_width: int) -> list[LMBeam]:
    """The ``beam_width`` best by ``lm_score``, ties in their order."""
    return sorted(beams, key=lambda b: b[-1], reverse=True)[:beam_width]


def prune_history(beams: list[LMBeam], lm_order: int) -> list[Beam]:
    """Of beams that agree on their last n - 1 words (at least one), partial word and
    last label, the first (the best) only."""
    keep = max(1, lm_order - 1)
    seen: set = set()
    out = []
    for b in beams:
        key = (tuple(b[0].split()[-keep:]), b[2], b[3])
        if key not in seen:
            seen.add(key)
            out.append(b[:7])
    return out


class PrefixSearch:
    """The search over one alphabet with one language model (or none)."""

    def __init__(self, labels: list[str], is_bpe: bool,
                 language_model: AbstractLanguageModel | None, use_compiled: bool = True,
                 log_add: bool = True):
        """``use_compiled``: :meth:`decode` runs the compiled search where it applies
        (:mod:`.compiled`: the same beams); False keeps to this module's. ``log_add``:
        merged beams sum their scores (pyctcdecode's); False keeps the larger one
        (:func:`merge_beams`)."""
        self.labels, self.is_bpe, self.language_model = list(labels), is_bpe, language_model
        self.use_compiled, self.log_add = use_compiled, log_add

    def start(self, lm_start_state=None
              ) -> tuple[list[Beam], LMScoreCache, dict[str, float]]:
        """The first beam and empty caches (the LM's start state, or ``lm_start_state``)."""
        lm = self.language_model
        cache: LMScoreCache = {}
        if lm is not None:
            state = lm.get_start_state() if lm_start_state is None else lm_start_state
            cache[("", False)] = (0.0, 0.0, state)
        return [EMPTY_START_BEAM], cache, {}

    # -- scoring ---------------------------------------------------------------------------
    # Inside the search a beam is a plain tuple in Beam's (LMBeam's) field order: tuples
    # cost a third of named ones to make, and a frame makes beams x labels of them.
    def lm_beams(self, beams: list[tuple], hotwords: HotwordScorer, cache: LMScoreCache,
                 partial_cache: dict[str, float], is_eos: bool = False) -> list[tuple]:
        """Each beam with its next word scored (and ``</s>`` at the end): LMBeam tuples."""
        lm = self.language_model
        out = []
        if lm is None:
            for text, nxt, part, last, frames, pframes, logit in beams:
                text = merge_tokens(text, nxt)
                score = logit + hotwords.score(text) + hotwords.score_partial_token(part)
                out.append((text, "", part, last, frames, pframes, logit, score))
            return out
        for before_text, nxt, part, last, frames, pframes, logit in beams:
            text = merge_tokens(before_text, nxt)
            key = (text, is_eos)
            cached = cache.get(key)
            if cached is None:
                _, before, state = cache[(before_text, False)]
                score, end_state = lm.score(state, nxt, is_last_word=is_eos)
                raw = before + score
                cached = cache[key] = (raw + hotwords.score(text), raw, end_state)
            lm_score = cached[0]
            if part:
                partial = partial_cache.get(part)
                if partial is None:
                    partial = partial_cache[part] = hotwords.score_partial_token(part) \
                        if part in hotwords else lm.score_partial_token(part)
                lm_score += partial
            out.append((text, "", part, last, frames, pframes, logit, logit + lm_score))
        return out

    # -- the frames ------------------------------------------------------------------------
    def extend(self, beams: list[tuple], column: np.ndarray, frame: int,
               token_min_logp: float, force_break: list[bool]) -> list[tuple]:
        """Every beam extended by every label of one frame worth reading."""
        labels, is_bpe = self.labels, self.is_bpe
        best = column.argmax()
        values = column.tolist()
        out = []
        append = out.append
        for idx in set(np.where(column >= token_min_logp)[0]) | {best}:
            p, char = values[idx], labels[idx]
            for text, nxt, part, last, frames, pframes, logit in beams:
                if char == "" or last == char:  # blank or repeat: words unchanged
                    append((text, nxt, part, char, frames,
                            pframes if char == "" else (pframes[0], frame + 1), logit + p))
                elif is_bpe and (char[:1] == BPE_TOKEN or force_break[0]):
                    force_break[0] = False
                    clean = char[1:] if char[:1] == BPE_TOKEN else char
                    if char[-1:] == BPE_TOKEN:  # like ▁⁇▁: the next subword starts a word
                        clean = clean[:-1]
                        force_break[0] = True
                    append((text, part, clean, char, frames + [pframes] if part else frames,
                            (frame, frame + 1), logit + p))
                elif not is_bpe and char == " ":
                    append((text, part, "", char, frames + [pframes] if part else frames,
                            NULL_FRAMES, logit + p))
                else:
                    append((text, nxt, part + char, char, frames,
                            (frame if pframes[0] < 0 else pframes[0], frame + 1), logit + p))
        return out

    def partial_decode(self, logits: np.ndarray, beams: list[tuple], beam_width: int,
                       beam_prune_logp: float, token_min_logp: float, prune: bool,
                       hotwords: HotwordScorer, cache: LMScoreCache,
                       partial_cache: dict[str, float], processed_frames: int = 0
                       ) -> list[tuple]:
        """The beams (tuples) after the frames of ``logits`` (log-probabilities)."""
        lm = self.language_model
        force_break = [False]
        for frame, column in enumerate(np.asarray(logits, np.float64), start=processed_frames):
            new = merge_beams(self.extend(beams, column, frame, token_min_logp, force_break),
                              self.log_add)
            scored = self.lm_beams(new, hotwords, cache, partial_cache)
            floor = max(b[7] for b in scored) + beam_prune_logp
            trimmed = sort_and_trim([b for b in scored if b[7] >= floor], beam_width)
            if prune:
                beams = prune_history(trimmed, 1 if lm is None else lm.order)
            else:
                beams = [b[:7] for b in trimmed]
        return beams

    def finalize(self, beams: list[tuple], beam_width: int, beam_prune_logp: float,
                 hotwords: HotwordScorer, cache: LMScoreCache,
                 partial_cache: dict[str, float], force_next_word: bool = False,
                 is_end: bool = False) -> list[tuple]:
        """The beams scored and ranked (LMBeam tuples), their partial words finished where
        asked, and ``</s>`` scored at the end."""
        if force_next_word or is_end:
            beams = merge_beams([(text, part, "", None, frames + [pframes] if part else frames,
                                  NULL_FRAMES, logit)
                                 for text, _, part, _, frames, pframes, logit in beams],
                                self.log_add)
        scored = self.lm_beams(list(beams), hotwords, cache, partial_cache, is_eos=is_end)
        floor = max(b[7] for b in scored) + beam_prune_logp
        return sort_and_trim([b for b in scored if b[7] >= floor], beam_width)

    def decode(self, logits: np.ndarray, beam_width: int, beam_prune_logp: float,
               token_min_logp: float, prune: bool, hotwords: HotwordScorer,
               lm_start_state=None) -> list[OutputBeam]:
        """The output beams of one utterance (``logits``: log-probabilities)."""
        if self.use_compiled:
            out = compiled.decode(self, logits, beam_width, beam_prune_logp, token_min_logp,
                                  prune, hotwords, lm_start_state)
            if out is not None:
                return [OutputBeam(*b) for b in out]
        beams, cache, partial_cache = self.start(lm_start_state)
        beams = self.partial_decode(logits, beams, beam_width, beam_prune_logp,
                                    token_min_logp, prune, hotwords, cache, partial_cache)
        final = self.finalize(beams, beam_width, beam_prune_logp, hotwords, cache,
                              partial_cache, force_next_word=True, is_end=True)
        return [OutputBeam(" ".join(text.split()),
                           cache[(text, True)][-1] if (text, True) in cache else None,
                           list(zip(text.split(), frames)), logit, lm_score)
                for text, _, _, _, frames, _, logit, lm_score in final]


def as_beams(beams) -> list[tuple]:
    """Beams given by a caller (Beams, or pyctcdecode 0.5's plain tuples) as the
    search's plain tuples."""
    return [tuple(b[:7]) for b in beams]

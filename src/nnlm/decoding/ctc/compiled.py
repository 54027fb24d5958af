"""The compiled search (``_prefix_search.c``) behind :meth:`PrefixSearch.decode`, where it
gives the reference's beams: the same texts, frames and scores to the bit.

It runs where nnlm's C parts are built and

- no label holds whitespace but the word separator ``" "`` (words are then whitespace
  free, so a text is its list of words, as the C side keeps it);
- the hotwords, if any, were made by :meth:`HotwordScorer.build_scorer` (the C side
  builds the same trie from the same words);
- the language model, if any, is anything with pyctcdecode's face: :class:`LanguageModel`
  over :mod:`nnlm.kenlm`'s compiled back-off queries is scored in C with no Python call
  between words (its word list as a C trie); any other model is called once per new text
  (``score``) and once per new partial word (``score_partial_token``) where it is not
  :class:`LanguageModel`.

Otherwise :func:`decode` answers None and the Python search runs. The labels of a frame
are visited in the order of Python's set of their indices: the C side reproduces
CPython's set table, checked here against the running interpreter once a process; where
they disagree, the orders are computed here in Python and sent.
"""

from __future__ import annotations

import math
import random
import weakref

import numpy as np

from ...base.compiled import extension
from . import fusion
from .fusion import LOG_BASE_CHANGE_FACTOR, KenlmState, LanguageModel

_c = extension("nnlm.decoding.ctc._prefix_search")
_query_module = extension("nnlm.decoding._kenlm_query")
# lm -> (its word set, lexicon or not, Trie)
_word_tries: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_set_order_checked: list[bool] = []


def available() -> bool:
    """Whether the compiled search was built (and not switched off)."""
    return _c is not None


def set_order_matches(cases: int = 300, seed: int = 0) -> bool:
    """Whether the C side's order of ``set(indices) | {best}`` is this Python's, over
    ``cases`` random frames of 2 to 5,000 labels."""
    rng = random.Random(seed)
    for _ in range(cases):
        V = rng.choice((2, 5, 8, 29, 32, 64, 100, 1000, 5000))
        p = rng.random()
        column = np.array([rng.random() for _ in range(V)])
        indices = np.where(column < p)[0]
        best = column.argmin()
        if [int(i) for i in set(indices) | {best}] != _c.set_order(indices.tolist(),
                                                                   int(best)):
            return False
    return True


def _orders(logp: np.ndarray, token_min_logp: float):
    """None where the C side orders the labels as this Python does; else each frame's."""
    if not _set_order_checked:
        _set_order_checked.append(set_order_matches())
    if _set_order_checked[0]:
        return None
    return [[int(i) for i in set(np.where(column >= token_min_logp)[0]) | {column.argmax()}]
            for column in logp]


def _labels_fit(labels: list[str], is_bpe: bool) -> bool:
    return all((not is_bpe and label == " ") or not any(c.isspace() for c in label)
               for label in labels)


def _word_trie(lm: LanguageModel):
    """The C trie of the LM's word list (None: no list, every partial word unknown)."""
    if lm._prefixes is None:
        return None
    lexicon = math.isinf(lm.unk_score_offset)  # the trie holds the words' look-ahead
    cached = _word_tries.get(lm)
    if cached is None or cached[0] is not lm._unigram_set or cached[1] != lexicon:
        words = sorted(lm._unigram_set)
        trie = _c.Trie(words, lm.look_ahead()[1]) if lexicon else _c.Trie(words)
        cached = _word_tries[lm] = (lm._unigram_set, lexicon, trie)
    return cached[2]


def _query(lm: LanguageModel, start):
    """nnlm.kenlm's compiled queries under ``lm`` where the C side can score with them."""
    model = lm._kenlm_model
    query = getattr(model, "_fast", None)
    if _query_module is None or query is None or not isinstance(query, _query_module.Query):
        return None
    if getattr(model, "BaseScore", None) != query.BaseScore:
        return None
    return query if isinstance(start, _query_module.State) else None


def _lm_spec(lm, start) -> tuple | None:
    """What the C side needs of the language model (see ``_prefix_search.decode``)."""
    if isinstance(start, KenlmState):
        start = start.state
    own = isinstance(lm, LanguageModel)
    builtin_partial = own and \
        type(lm).score_partial_token is LanguageModel.score_partial_token
    trie = _word_trie(lm) if builtin_partial else None
    partial_fn = None if builtin_partial else lm.score_partial_token
    if own:
        weights = (lm.unk_score_offset, lm.alpha, lm.beta, LOG_BASE_CHANGE_FACTOR,
                   lm.score_boundary, len(lm._unigram_set) > 0)
    else:
        weights = (0.0, 0.0, 0.0, 0.0, False, False)
    builtin_score = own and type(lm).score is LanguageModel.score and \
        type(lm)._get_raw_end_score is LanguageModel._get_raw_end_score
    query = _query(lm, start) if builtin_score else None
    if query is not None:
        return ("query", query, start, trie, *weights, partial_fn, None,
                fusion.PYCTCDECODE_EXACT)
    live = getattr(lm._kenlm_model, "live", None) if own else None  # a network's WholeLine
    # the utterance's end scored at once, where that is score()'s calls reordered
    last = lm.score_last_words if builtin_score else None
    return ("python", lm, start, trie, *weights, partial_fn, live, False, last)


def _hot_spec(hotwords) -> tuple | None:
    words = getattr(hotwords, "trie_words", None)
    if words is None:
        return None
    trie = getattr(hotwords, "_compiled_trie", None)
    if trie is None and words:
        trie = hotwords._compiled_trie = _c.Trie(list(words))
    return (trie, hotwords._weight, bool(hotwords._unigrams))


def decode(search, logp: np.ndarray, beam_width: int, beam_prune_logp: float,
           token_min_logp: float, prune: bool, hotwords, lm_start_state=None):
    """The reference's output beams of one utterance, as (text, state, word frames,
    acoustic score, combined score) tuples; None where the compiled search does not
    apply (module docstring)."""
    if _c is None or not _labels_fit(search.labels, search.is_bpe):
        return None
    hot = _hot_spec(hotwords)
    if hot is None:
        return None
    lm = search.language_model
    spec = None
    if lm is not None:
        start = lm.get_start_state() if lm_start_state is None else lm_start_state
        spec = _lm_spec(lm, start)
    keep = 0 if not prune else max(1, (1 if lm is None else lm.order) - 1)
    logp = np.ascontiguousarray(logp, np.float64)
    beams = _c.decode(logp, list(search.labels), search.is_bpe, beam_width,
                      float(beam_prune_logp), float(token_min_logp), keep, spec, hot,
                      _orders(logp, token_min_logp), search.log_add)
    return [(" ".join(words), state, list(zip(words, frames)), logit, score)
            for words, frames, logit, score, state in beams]


# -- streaming ------------------------------------------------------------------------
START = ("", "", "", None, [], (-1, -1), 0.0)  # get_starting_state()'s beam
STREAMS_KEPT = 64  # streams carried at once (the oldest is dropped past it)
_streams: dict[int, tuple[dict, _Stream]] = {}  # id(the stream's LM cache) -> stream


class _Stream:
    """A compiled search carried over one streamed utterance: continued only where the
    caller hands back what it returned last, with the same hotwords."""

    def __init__(self, session, search, hotwords):
        self.session, self.search, self.hotwords = session, search, hotwords
        self.beams: list[tuple] = [START]
        self.frames = 0

    def continues(self, search, beams, frames: int, hotwords) -> bool:
        return (frames == self.frames and hotwords is self.hotwords and
                search.labels == self.search.labels and
                search.language_model is self.search.language_model and
                search.log_add == self.search.log_add and
                [tuple(b[:7]) for b in beams] == self.beams)

    def hand_over(self, cache: dict) -> None:
        """The per-text cache of the current beams into ``cache`` (the reference then
        goes on from them)."""
        for text, with_hot, raw, state in self.session.cache():
            cache[(text, False)] = (with_hot, raw, state)


def _starts(beams, cache: dict, partial_cache: dict, frames: int) -> bool:
    return frames == 0 and [tuple(b[:7]) for b in beams] == [START] and \
        set(cache) <= {("", False)} and not partial_cache


def partial_decode(search, logp: np.ndarray, cache: dict, partial_cache: dict, beams,
                   frames: int, beam_width: int, beam_prune_logp: float,
                   token_min_logp: float, prune: bool, hotwords, force_next_word: bool,
                   is_end: bool):
    """pyctcdecode's ``partial_decode_beams`` on a compiled search carried from chunk to
    chunk (the LMBeam tuples), or None where the reference must run: the compiled search
    does not apply, or the caller did not hand back what this returned last (the
    search's cache is then written into ``cache`` first)."""
    if _c is None or not _labels_fit(search.labels, search.is_bpe):
        return None
    entry = _streams.pop(id(cache), None)
    stream = None
    if entry is not None and entry[0] is cache and \
            entry[1].continues(search, beams, frames, hotwords):
        stream = entry[1]
    elif entry is not None and entry[0] is cache:
        entry[1].hand_over(cache)
        return None
    elif _starts(beams, cache, partial_cache, frames):
        hot = _hot_spec(hotwords)
        lm = search.language_model
        start = cache.get(("", False), (0.0, 0.0, None))[2]
        if hot is None or (lm is not None and start is None):
            return None
        spec = None if lm is None else _lm_spec(lm, start)
        stream = _Stream(_c.Session(list(search.labels), search.is_bpe, spec, hot,
                                    search.log_add), search, hotwords)
    else:
        return None
    keep = 0 if not prune else max(1, (1 if search.language_model is None
                                       else search.language_model.order) - 1)
    logp = np.ascontiguousarray(logp, np.float64)
    stream.session.advance(logp, beam_width, float(beam_prune_logp), float(token_min_logp),
                           keep, _orders(logp, token_min_logp), frames)
    out = stream.session.finalize(beam_width, float(beam_prune_logp), force_next_word,
                                  is_end)
    stream.beams, stream.frames = [b[:7] for b in out], frames + len(logp)
    if not is_end:
        while len(_streams) >= STREAMS_KEPT:
            _streams.pop(next(iter(_streams)))
        _streams[id(cache)] = (cache, stream)
    return out

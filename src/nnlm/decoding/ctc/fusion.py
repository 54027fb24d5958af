"""The language model inside the CTC search, a word at a time, as pyctcdecode fuses one.

A word w completed after LM state s scores

    alpha * ln 10 * (log10 p(w | s) + unk) + beta,

``unk`` = ``unk_score_offset`` where w is outside the word list (or the model), and, for
the utterance's last word, ``log10 p(</s> | s w)`` added inside the bracket when
``score_boundary`` (the first word then starts after ``<s>``; otherwise after KenLM's
null context). A word still being spelled scores ``unk_score_offset`` (no alpha) unless
it starts a word of the list, scaled by ``len / 6`` past 6 characters (pyctcdecode's
``AVG_TOKEN_LEN``). The word list (``unigrams``) is kept to the words the model knows.

An utterance whose last label is the word separator ends with no word being spelled: it
scores ``alpha * ln 10 * log10 p(</s> | s)`` after its last word. pyctcdecode 0.5 scores
an empty word there as unknown, log10 p(<unk> | s) + ``unk_score_offset`` (minus
infinity with a lexicon), so the right texts lose to those that end in a made-up word
(16.4% against 12.1% WER on the decoders bench). ``NNLM_PYCTCDECODE_EXACT=1`` in the
environment keeps pyctcdecode's scoring there too, for its beams to the bit.

The model is anything with the kenlm module's face (``BaseScore``, ``BeginSentenceWrite``,
``NullContextWrite``, ``in``, ``order``): :mod:`nnlm.kenlm`'s ``Model`` over any nnlm
model or KenLM file, the kenlm module's own, or
:class:`~nnlm.decoding.whole_line.WholeLine` for a network that reads the whole line.
"""

from __future__ import annotations

import importlib
import logging
import math
import numbers
import os
from bisect import bisect_left
from collections.abc import Collection

from ...base.checks import ArgumentValueError

logger = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.5
DEFAULT_BETA = 1.5
DEFAULT_UNK_LOGP_OFFSET = -10.0
DEFAULT_SCORE_LM_BOUNDARY = True
AVG_TOKEN_LEN = 6  # characters a word is expected to have (partial words past it scale)
LOG_BASE_CHANGE_FACTOR = 1.0 / math.log10(math.e)  # log10 -> ln
# pyctcdecode's scoring of an empty last word, kept for its beams to the bit (docstring)
PYCTCDECODE_EXACT = os.environ.get("NNLM_PYCTCDECODE_EXACT") == "1"


def weight(value, name: str) -> float:
    """A weight of the fused score as a float: any real number but NaN (infinities have
    a meaning: an unknown-word offset of -inf forbids unknown words)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentValueError(f"{name}={value!r}: a number, not {type(value).__name__}")
    if math.isnan(value):
        raise ArgumentValueError(f"{name}=nan: a number (NaN would make every score NaN)")
    return float(value)


class AbstractLMState:
    """A language-model state inside the search."""

    def get_mp_safe_state(self) -> AbstractLMState | None:
        """A copy another process can receive (None: states stay in their process)."""
        return None


class KenlmState(AbstractLMState):
    """A kenlm-style state wrapped (pyctcdecode's development branch wraps its states;
    its release, 0.5, hands the kenlm State itself around, as this module does: both are
    taken wherever a state is)."""

    def __init__(self, state) -> None:
        self._state = state

    @property
    def state(self):
        return self._state


class AbstractLanguageModel:
    """What the search asks of a language model (pyctcdecode's interface)."""

    @property
    def order(self) -> int:
        raise NotImplementedError

    def get_start_state(self) -> AbstractLMState:
        raise NotImplementedError

    def score_partial_token(self, partial_token: str) -> float:
        raise NotImplementedError

    def score(self, prev_state: AbstractLMState, word: str, is_last_word: bool = False
              ) -> tuple[float, AbstractLMState]:
        raise NotImplementedError

    def save_to_dir(self, filepath: str) -> None:
        raise NotImplementedError

    @classmethod
    def load_from_dir(cls, filepath: str) -> AbstractLanguageModel:
        raise NotImplementedError

    def reset_params(self, **params) -> None:
        """New values of the simple settings, in place."""


def state_class(model):
    """The state type of a kenlm-faced model: its module's ``State`` (nnlm.kenlm's or the
    kenlm module's), or the model's own ``State`` (WholeLine's)."""
    own = getattr(type(model), "State", None)
    if own is not None:
        return own
    return importlib.import_module(type(model).__module__).State


class PrefixSet:
    """Sorted words: whether a string starts one of them, by one bisection."""

    def __init__(self, words: Collection[str]):
        self.words = sorted(words)

    def __bool__(self) -> bool:
        return bool(self.words)

    def starts_some(self, prefix: str) -> bool:
        at = bisect_left(self.words, prefix)
        return at < len(self.words) and self.words[at].startswith(prefix)


def prepare_unigram_set(unigrams: Collection[str], model) -> set[str]:
    """The words of ``unigrams`` that ``model`` knows (warnings as pyctcdecode's)."""
    if len(unigrams) < 1000:
        logger.warning("Only %s unigrams passed as vocabulary. Is this small or artificial "
                       "data?", len(unigrams))
    known = {t for t in set(unigrams) if t in model}
    kept = 1.0 if len(unigrams) == 0 else len(known) / len(unigrams)
    if kept < 0.1:
        logger.warning("Only %s%% of unigrams in vocabulary found in kenlm model-- this might "
                       "mean that your vocabulary and language model are incompatible. Is "
                       "this intentional?", round(kept * 100, 1))
    return known


class LanguageModel(AbstractLanguageModel):
    """pyctcdecode's ``LanguageModel`` over a kenlm-faced model (module docstring)."""

    JSON_ATTRS = ("alpha", "beta", "unk_score_offset", "score_boundary")
    _ATTRS_SERIALIZED_FILENAME = "attrs.json"
    _UNIGRAMS_SERIALIZED_FILENAME = "unigrams.txt"

    def __init__(self, kenlm_model, unigrams: Collection[str] | None = None,
                 alpha: float = DEFAULT_ALPHA, beta: float = DEFAULT_BETA,
                 unk_score_offset: float = DEFAULT_UNK_LOGP_OFFSET,
                 score_boundary: bool = DEFAULT_SCORE_LM_BOUNDARY) -> None:
        self._kenlm_model = kenlm_model
        self._new_state = state_class(kenlm_model)
        if unigrams is None:
            logger.warning("No known unigrams provided, decoding results might be a lot worse.")
            self._unigram_set: set[str] = set()
            self._prefixes: PrefixSet | None = None
        else:
            self._unigram_set = prepare_unigram_set(unigrams, kenlm_model)
            self._prefixes = PrefixSet(self._unigram_set)
        self.alpha = weight(alpha, "alpha")
        self.beta = weight(beta, "beta")
        self.unk_score_offset = weight(unk_score_offset, "unk_score_offset")
        self.score_boundary = bool(score_boundary)

    def reset_params(self, **params) -> None:
        """New ``alpha``, ``beta``, ``unk_score_offset`` (floats) or ``score_boundary`` (a
        bool); a value of another type is a ValueError, as pyctcdecode's."""
        for name in ("alpha", "beta", "unk_score_offset"):
            value = params.get(name)
            if value is not None:
                if not isinstance(value, float):
                    raise ValueError(f"{name} must be a float. Got {type(value)}.")
                setattr(self, name, weight(value, name))
        boundary = params.get("score_boundary")
        if boundary is not None:
            if not isinstance(boundary, bool):
                raise ValueError(f"score_boundary must be a bool. Got {type(boundary)}.")
            self.score_boundary = boundary

    @property
    def order(self) -> int:
        return int(self._kenlm_model.order)

    @property
    def unigrams(self) -> set[str]:
        """The word list, kept to the words the model knows."""
        return set(self._unigram_set)

    def get_start_state(self):
        """A new state: after ``<s>`` (``score_boundary``), else KenLM's null context; a
        new utterance for a model that keeps rows per history (WholeLine forgets them)."""
        new_utterance = getattr(self._kenlm_model, "new_utterance", None)
        if new_utterance is not None:
            new_utterance()
        state = self._new_state()
        if self.score_boundary:
            self._kenlm_model.BeginSentenceWrite(state)
        else:
            self._kenlm_model.NullContextWrite(state)
        return state

    def _get_raw_end_score(self, start_state) -> float:
        if not self.score_boundary:
            return 0.0
        return float(self._kenlm_model.BaseScore(start_state, "</s>", self._new_state()))

    def score_partial_token(self, partial_token: str) -> float:
        """``unk_score_offset`` for a word being spelled that starts no known word; with
        an offset of -inf (a lexicon), alpha times the best LM score of the listed words
        a known one starts (:meth:`look_ahead`)."""
        is_oov = 1.0 if self._prefixes is None else \
            float(not self._prefixes.starts_some(partial_token))
        if not is_oov and math.isinf(self.unk_score_offset):
            # a lexicon: the prefix scores the best LM score of the listed words it
            # starts (flashlight's smeared trie), not pyctcdecode's -inf * 0 = NaN
            return self.alpha * LOG_BASE_CHANGE_FACTOR * self.look_ahead()[0][partial_token]
        unk_score = self.unk_score_offset * is_oov
        if len(partial_token) > AVG_TOKEN_LEN:
            unk_score = unk_score * len(partial_token) / AVG_TOKEN_LEN
        return unk_score

    def look_ahead(self) -> tuple[dict[str, float], list[float]]:
        """For a lexicon (``unk_score_offset`` -inf): each prefix of the listed words to
        the highest log10 p(w) (no context) of the words it starts, as flashlight smears
        its lexicon's trie (MAX), and each listed word's own, in sorted order."""
        cached = self.__dict__.get("_look_ahead")
        if cached is None or cached[0] is not self._unigram_set:
            model, null, out = self._kenlm_model, self._new_state(), self._new_state()
            model.NullContextWrite(null)
            words = sorted(self._unigram_set)
            values = [float(model.BaseScore(null, w, out)) for w in words]
            best: dict[str, float] = {}
            for w, v in zip(words, values):
                for i in range(len(w) + 1):
                    if best.get(w[:i], -math.inf) < v:
                        best[w[:i]] = v
            cached = self._look_ahead = (self._unigram_set, best, values)
        return cached[1], cached[2]

    def score(self, prev_state, word: str, is_last_word: bool = False) -> tuple[float, object]:
        """The fused score of ``word`` after ``prev_state`` and the state after it."""
        if isinstance(prev_state, KenlmState):
            prev_state = prev_state.state
        if not word and is_last_word and not PYCTCDECODE_EXACT:  # ended on a separator:
            end = self._get_raw_end_score(prev_state)  # </s> after the last word, no more
            return self.alpha * end * LOG_BASE_CHANGE_FACTOR, prev_state
        lm_score, end_state = self._raw_word(prev_state, word)
        if is_last_word:
            lm_score = lm_score + self._get_raw_end_score(end_state)
        return self.alpha * lm_score * LOG_BASE_CHANGE_FACTOR + self.beta, end_state

    def _raw_word(self, prev_state, word: str) -> tuple[float, object]:
        """log10 p(word | prev_state), with the unknown-word offset where it applies,
        and the state after the word."""
        end_state = self._new_state()
        lm_score = self._kenlm_model.BaseScore(prev_state, word, end_state)
        if (len(self._unigram_set) > 0 and word not in self._unigram_set) \
                or word not in self._kenlm_model:
            lm_score += self.unk_score_offset
        return lm_score, end_state

    def score_last_words(self, pairs) -> list[tuple[float, object]]:
        """``score(state, word, is_last_word=True)`` for each (state, word) of the beams
        that end an utterance, with every word scored before any ``</s>``: the same
        calls in another order, so the same numbers. A network whose rows are computed
        in batched passes (:class:`~nnlm.decoding.whole_line.WholeLine`) then computes
        every row the ``</s>`` read in one pass, where one beam after another took a
        pass each (12 of a Brown sentence's 28 passes with an ``awd`` network)."""
        def word_first(state, word):  # an empty last word: score()'s own case
            if not word and not PYCTCDECODE_EXACT:
                return None
            return self._raw_word(state.state if isinstance(state, KenlmState) else state,
                                  word)

        firsts = [word_first(state, word) for state, word in pairs]
        out = []
        for (state, word), first in zip(pairs, firsts):
            if first is None:
                out.append(self.score(state, word, is_last_word=True))
                continue
            lm_score, end_state = first
            lm_score = lm_score + self._get_raw_end_score(end_state)
            out.append((self.alpha * lm_score * LOG_BASE_CHANGE_FACTOR + self.beta,
                        end_state))
        return out

    @property
    def serializable_attrs(self) -> dict:
        return {attr: getattr(self, attr) for attr in self.JSON_ATTRS}

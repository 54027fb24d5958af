"""What both decoder APIs stand on: one set of checks, one lookup, one scorer.

nnlm has two faces for a decoder: :class:`nnlm.Decoder` (:mod:`nnlm.decoding`, nnlm's
conventions: float64 log10, a state of the last n-1 word ids that starts at ``<s>``)
and :mod:`nnlm.kenlm` (the kenlm module's exact behaviour: float32, minimized states,
the null context). Both present a :class:`DecoderCore` over the loaded model, so that
what a decoder may hand them is checked once, here, the same way:

* a sentence is ``str`` or UTF-8 ``bytes`` (anything else is a TypeError), split on
  ASCII whitespace only, as KenLM splits (``python/kenlm.pyx`` splits the UTF-8 bytes):
  a no-break space or a line separator is part of a word; a lone surrogate cannot be
  UTF-8 and is a UnicodeEncodeError, as kenlm's;
* a word is ``str`` (or, where the API takes ids, an int in ``0 .. |V|-1``, never a
  bool); ``<s>`` is context only and is never scored;
* a state is the API's own State type, and one written by another model is refused: its
  words are that model's ids.

Errors raised here are :class:`DecoderTypeError` and :class:`DecoderValueError`: an
:class:`nnlm.NnlmError` for nnlm's API, and the TypeError or ValueError a kenlm client
catches for the drop-in.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..base.checks import ArgumentTypeError, ArgumentValueError
from ..lm import LOG10_E
from ..text.specials import BOS, BOS_ID, EOS, KENLM_BOS_LOG10, NO_WORD, UNK_ID
from ..text.stream import seen_lengths

_serials = itertools.count(1)  # each core's own: a State remembers which one wrote it


class DecoderTypeError(ArgumentTypeError):
    """A decoder call given a value of the wrong type (one line)."""


class DecoderValueError(ArgumentValueError):
    """A decoder call given a value it cannot score (one line)."""


def new_serial() -> int:
    """A number no other model of this process has: what a State's owner is."""
    return next(_serials)


def sentence_words(sentence) -> list[str]:
    """The words of ``sentence`` as kenlm splits them: its UTF-8 bytes split on ASCII
    whitespace (space, \\t, \\n, \\r, \\v, \\f), each decoded back (bytes that are not
    UTF-8 make a word no vocabulary holds: unknown).

    >>> sentence_words("the\\u00a0cat is")
    ['the\\xa0cat', 'is']
    >>> sentence_words(b"the cat")
    ['the', 'cat']
    """
    if isinstance(sentence, str):
        data = sentence.encode("utf-8")  # a lone surrogate: UnicodeEncodeError, as kenlm
    elif isinstance(sentence, bytes):
        data = sentence
    else:
        raise DecoderTypeError(f"Cannot convert {type(sentence)} to string: a sentence is "
                               "str or UTF-8 bytes")
    return [w.decode("utf-8", "surrogateescape") for w in data.split()]


class DecoderCore:
    """A loaded model seen by a decoder: its word ids, its states' checks, its scores.

    ``order`` is n; a context holds k = n - 1 ids, ``NO_WORD`` where a back-off model's
    null context has none. ``backoff`` models keep minimized states (KenLM's right
    state, :meth:`kept`); networks keep the last k words."""

    def __init__(self, lm, serial: int | None = None):
        self.lm = lm
        self.serial = new_serial() if serial is None else serial
        self.order = lm.order
        self.k = self.order - 1
        self.index = lm.vocab.index
        self.size = len(lm.vocab)
        self.backoff = hasattr(lm, "state_lengths")
        self.null_context = bool(getattr(lm, "null_context", False))

    # -- the checks ----------------------------------------------------------------------
    def word_id(self, word, ids: bool = False, bos: bool = False) -> int:
        """The id of ``word`` (``<unk>``'s if unknown); with ``ids``, an int is taken as
        an id, which must be one of the vocabulary's. ``<s>`` is refused unless ``bos``
        (the kenlm module scores it as a word: :meth:`scores`' ``kenlm_bos``)."""
        if isinstance(word, str):
            wid = self.index.get(word, UNK_ID)
        elif ids and isinstance(word, (int, np.integer)) and not isinstance(word, bool):
            wid = int(word)
            if not 0 <= wid < self.size:
                raise DecoderValueError(f"word id {wid} is not in the vocabulary "
                                        f"(0 .. {self.size - 1})")
        else:
            want = "str or a word id" if ids else "str"
            raise DecoderTypeError(f"Argument 'word' has incorrect type (expected {want}, "
                                   f"got {type(word).__name__})")
        if wid == BOS_ID and not bos:
            raise DecoderValueError(f"{BOS} is context only and is never scored; use "
                                    "BeginSentenceWrite")
        return wid

    def sentence_ids(self, sentence, eos_inside: bool = True, bos: bool = False) -> list[int]:
        """The ids of a sentence's words (:func:`sentence_words`). ``<s>`` is refused
        unless ``bos``, ``</s>`` unless ``eos_inside`` (kenlm scores both as words)."""
        words = sentence_words(sentence)
        ids = [self.index.get(w, UNK_ID) for w in words]
        if (BOS_ID in ids and not bos) or (not eos_inside and EOS in words):
            special = BOS if BOS_ID in ids else EOS
            raise DecoderValueError(f"{special} may not appear in a sentence: bos=True "
                                    f"conditions on {BOS} and eos=True predicts {EOS}")
        return ids

    def own(self, state, state_type, write: bool = False, name: str = "state"):
        """``state``, checked: of ``state_type``, and (unless it is being written) fresh
        or written by this model. Writing marks it as this model's."""
        if not isinstance(state, state_type):
            raise DecoderTypeError(f"Argument '{name}' has incorrect type (expected "
                                   f"State, got {type(state).__name__})")
        if write:
            state._owner = self.serial
        elif state._owner not in (0, self.serial):
            raise DecoderValueError("this State was written by another model; states are "
                                    "the model's own word ids and cannot be shared")
        return state

    def check_contexts(self, contexts: np.ndarray) -> None:
        """Every context id is one of the vocabulary's (a State made by hand may hold
        anything), and a model with no null context cannot score after one."""
        if not contexts.size:
            return
        if not self.null_context and np.any(contexts == NO_WORD):
            raise DecoderValueError(f"a {self.lm.kind} model has no null context (only "
                                    "back-off n-gram models do); begin with "
                                    "BeginSentenceWrite")
        low, high = int(contexts.min()), int(contexts.max())
        if high >= self.size or low < NO_WORD:
            bad = high if high >= self.size else low
            raise DecoderValueError(f"a state holds word id {bad}, which is not in the "
                                    f"vocabulary (0 .. {self.size - 1}); states are written "
                                    "by the model (BeginSentenceWrite, BaseScore, advance)")

    # -- contexts and scores -------------------------------------------------------------
    def context(self, words: tuple[int, ...], pad: int) -> list[int]:
        """The k ids before the next word: ``words``' last k, ``pad`` before them."""
        k = self.k
        return list(((pad,) * k + tuple(words))[len(words):]) if k else []

    def scores(self, contexts: np.ndarray, targets: np.ndarray, kenlm_bos: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
        """float64 log10 p and the n-gram length of each (context row, target): the
        back-off model's longest stored match, or for any other model the words of the
        line it saw, plus one. ``kenlm_bos``: a target ``<s>`` scores as KenLM scores it,
        its unigram's -99 plus the context's back-offs (a network's: -99)."""
        contexts = np.asarray(contexts, np.int64).reshape(len(targets), self.k)
        targets = np.asarray(targets, np.int64)
        self.check_contexts(contexts)
        lm = self.lm
        if hasattr(lm, "target_logprobs_and_orders"):
            logp, length = lm.target_logprobs_and_orders(contexts, targets)
        else:
            logp = lm.target_logprobs(contexts, targets)
            length = seen_lengths(contexts, self.order)
        log10 = np.asarray(logp, np.float64) * LOG10_E
        length = np.asarray(length, np.int64)
        if kenlm_bos and np.any(targets == BOS_ID):  # KenLM: <s>'s stored -99, backed off
            rows = np.flatnonzero(targets == BOS_ID)
            log10[rows] = KENLM_BOS_LOG10 + (lm.backoff_sums(contexts[rows]) * LOG10_E
                                             if hasattr(lm, "backoff_sums") else 0.0)
            length[rows] = 1
        return log10, length

    def kept(self, histories: list[tuple[int, ...]], contexts: np.ndarray,
             targets: np.ndarray) -> list[tuple[int, ...]]:
        """The minimized state after each target, ``histories[i]`` being the words its
        state held (back-off models: the last words whose n-grams can still extend,
        KenLM's right state; Heafield 2011, section 4.1)."""
        keep = self.lm.state_lengths(contexts, targets)
        out = []
        for row, (wid, n) in enumerate(zip(np.asarray(targets).tolist(), keep.tolist())):
            history = tuple(histories[row]) + (wid,)
            out.append(history[len(history) - n:] if n else ())
        return out

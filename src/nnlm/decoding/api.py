"""Scoring inside a decoder, nnlm's own face: KenLM's method names over any nnlm model,
and a batched call.

``nnlm.Decoder`` speaks nnlm's conventions (float64 log10 scores, a state of the last n-1
word ids that starts at ``<s>``); a kenlm client wants :mod:`nnlm.kenlm` instead, which
copies the kenlm module exactly (float32, minimized states, the null context)::

    model = nnlm.Decoder("runs/kn5")          # any model: ARPA, n-gram, neural, mixture
    model.score("the jury said", bos=True, eos=True)      # log10, </s> included
    list(model.full_scores("the jury said"))  # (log10 p, n-gram length, oov) per word
    state, out = nnlm.DecoderState(), nnlm.DecoderState()
    model.BeginSentenceWrite(state)
    model.BaseScore(state, "the", out)        # log10 p(the | <s>); out is the new state

``nnlm.Model`` and ``nnlm.State``, this face's names until it was told apart from
kenlm's, still work for one release, with a DeprecationWarning.

Conventions are KenLM's: log10 probabilities; ``bos`` conditions the first word on
``<s>``, ``eos`` adds ``</s>``; ``ngram length`` is the longest stored n-gram used
(back-off models) or the length of the context the model saw plus one (others); an
out-of-vocabulary word is scored as ``<unk>`` and flagged.

A :class:`DecoderState` is the last n-1 words (ids), small and hashable: two hypotheses
with equal states get equal scores for every continuation, so a decoder may recombine
them. A fresh ``DecoderState()`` is the start of a sentence on every model
(``BeginSentenceWrite`` says so explicitly; ``NullContextWrite`` is the null context,
back-off models only). A state written by one model is refused by another (its words are
that model's ids).

What a call may be given is checked by :mod:`nnlm.decoding.core`, which :mod:`nnlm.kenlm`
shares: sentences are str or UTF-8 bytes split on ASCII whitespace only, words are str
(or, in :meth:`Decoder.advance`, ids of the vocabulary), and anything else is one line,
an :class:`nnlm.NnlmError` (a TypeError or ValueError too).
:meth:`Decoder.advance` scores many hypotheses at once, one batched call into the model,
which is what makes beam search over a neural model fast.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from ..base.checks import integer
from ..base.errors import NnlmError, a
from ..base.sysmem import check_allocation
from ..lm import LOG10_E, LanguageModel
from ..models import load_model
from ..text.vocab import BOS_ID, EOS_ID, NO_WORD, UNK_ID
from .core import DecoderCore, DecoderTypeError, DecoderValueError, sentence_words


class DecoderState:
    """The context a model has seen: the last n-1 word ids (``NO_WORD`` where none; a
    fresh DecoderState is the start of a sentence).

    Hashable and comparable, so a decoder can recombine hypotheses on it."""

    __slots__ = ("words", "_owner")

    def __init__(self, words: tuple[int, ...] = ()):
        # ids, checked against a model's vocabulary where scored (check_contexts)
        self.words = tuple(integer(w, "DecoderState words") for w in words)
        self._owner = 0  # the model that wrote it (0: fresh)

    @classmethod
    def _written(cls, words: tuple[int, ...], owner: int) -> DecoderState:
        """A DecoderState a model wrote (its words are its ids): no checks to pay."""
        state = cls.__new__(cls)
        state.words, state._owner = words, owner
        return state

    def __eq__(self, other) -> bool:
        return isinstance(other, DecoderState) and self.words == other.words

    def __hash__(self) -> int:
        return hash(self.words)

    def __repr__(self) -> str:
        return f"DecoderState({self.words})"


@dataclass(frozen=True)
class NextWords:
    """What :meth:`Decoder.advance` returns without words: every next word's score after
    each of B states (NGPU-LM's ``advance(states) -> scores[B, V]``)."""

    log10: np.ndarray  # float64 (B, |V|): log10 p(w | states[b]); -inf for <s>
    contexts: np.ndarray  # int64 (B, n-1): the states' words
    serial: int  # the model that wrote them

    def state(self, row: int, word: int) -> DecoderState:
        """The state after word id ``word`` follows ``states[row]``: built only for the
        pairs a decoder keeps (B x |V| of them would be millions of objects)."""
        rows, size = self.log10.shape
        row = integer(row, "row", 0, rows - 1)
        word = integer(word, "word", 0, size - 1)
        if word == BOS_ID:
            raise DecoderValueError("word: <s> is context only and never follows a state")
        words = tuple(self.contexts[row, 1:].tolist()) + (word,)
        return DecoderState._written(words[-self.contexts.shape[1]:] if self.contexts.shape[1]
                              else (), self.serial)


@dataclass(frozen=True)
class Advance:
    """What :meth:`Decoder.advance` returns for a batch of hypotheses."""

    log10: np.ndarray  # float64 (B,): log10 p(word | state)
    ngram_length: np.ndarray  # int64 (B,)
    oov: np.ndarray  # bool (B,)
    states: list[DecoderState]  # the states after each word


class Decoder:
    """KenLM's ``Decoder`` over any nnlm model (a path, or a loaded LanguageModel).
    ``verify`` (the default, as the commands): a mapped file's sections are checked
    against their checksums at opening (:func:`nnlm.load_model`)."""

    def __init__(self, path_or_model, config=None, verify: bool = True):
        if isinstance(path_or_model, LanguageModel):
            self.lm = path_or_model
            self.path = None
        elif isinstance(path_or_model, (str, os.PathLike)):
            self.path = os.fspath(path_or_model)
            self.lm = load_model(path_or_model, verify=verify)
        else:
            raise DecoderTypeError(f"nnlm.Decoder takes a path or a loaded LanguageModel, not "
                                   f"{type(path_or_model).__name__}")
        self.core = DecoderCore(self.lm)
        self.order = self.lm.order
        self.vocab = self.lm.vocab

    def __contains__(self, word: str) -> bool:
        if not isinstance(word, str):
            raise DecoderTypeError(f"a word is a str, not {type(word).__name__}")
        return word in self.vocab

    def __repr__(self) -> str:
        return f"<nnlm.Decoder {self.path or self.lm.kind}, order {self.order}>"

    # -- states --------------------------------------------------------------------------
    def BeginSentenceWrite(self, state: DecoderState) -> None:  # noqa: N802 (KenLM's name)
        """Set ``state`` to the start of a sentence: the context is ``<s>``."""
        self.core.own(state, DecoderState, write=True).words = (BOS_ID,) * (self.order - 1)

    def NullContextWrite(self, state: DecoderState) -> None:  # noqa: N802
        """Set ``state`` to no context at all (back-off models only: the unigram level)."""
        if not self.core.null_context:
            raise NnlmError(f"{a(self.lm.kind)} model has no null context (only back-off "
                            "n-gram models do); begin sentences with BeginSentenceWrite")
        self.core.own(state, DecoderState, write=True).words = (NO_WORD,) * (self.order - 1)

    def BaseScore(self, in_state: DecoderState, word: str, out_state: DecoderState) -> float:  # noqa: N802
        """log10 p(word | in_state); ``out_state`` becomes the state after ``word``."""
        self.core.own(out_state, DecoderState, name="out_state")
        result = self.advance([in_state], [self.core.word_id(word)])  # a str, as KenLM's
        self.core.own(out_state, DecoderState, write=True).words = result.states[0].words
        return float(result.log10[0])

    # -- batched -------------------------------------------------------------------------
    def advance(self, states: Sequence[DecoderState],
                words: Sequence[str | int] | None = None) -> Advance | NextWords:
        """Score ``words[i]`` after ``states[i]`` for every hypothesis i in one call; a
        word is a str or an id of the vocabulary. Without ``words``: the score of every
        word of the vocabulary after each state (:class:`NextWords`, a [B, |V|] array),
        one batched call into the model (a back-off model's dense rows, a network's
        forward pass); :mod:`nnlm.decoding.dense` does the same with torch tensors on
        the CPU or a GPU."""
        core, k = self.core, self.order - 1
        if words is not None and len(states) != len(words):
            raise DecoderValueError(f"advance: {len(states)} states but {len(words)} words")
        if isinstance(states, (str, bytes, DecoderState)) or not isinstance(states, Sequence):
            raise DecoderTypeError("advance: states is a list of DecoderState")
        contexts = np.empty((len(states), k), np.int64)
        for i, s in enumerate(states):
            w = core.own(s, DecoderState, name="states[i]").words
            if len(w) != k:
                w = ((BOS_ID,) * k + tuple(w))[-k:] if k else ()
            contexts[i] = w
        if words is None:
            core.check_contexts(contexts)
            check_allocation(len(states) * len(self.vocab) * 8 * 3,
                             f"advance over {len(states):,} states x {len(self.vocab):,} words",
                             "advance fewer states at a time")
            log10 = np.asarray(self.lm.next_logprobs(contexts), np.float64) * LOG10_E
            return NextWords(log10, contexts, core.serial)
        ids = np.array([core.word_id(w, ids=True) for w in words], np.int64)
        log10, length = core.scores(contexts, ids)
        nxt = np.concatenate([contexts[:, 1:], ids[:, None]], axis=1) if k else contexts
        out = [DecoderState._written(tuple(row), core.serial) for row in nxt.tolist()]
        return Advance(log10, length, ids == UNK_ID, out)

    # -- whole sentences -----------------------------------------------------------------
    def full_scores(self, sentence: str | bytes, bos: bool = True,
                    eos: bool = True) -> Iterator[tuple[float, int, bool]]:
        """(log10 p, n-gram length, oov) for each word (and ``</s>`` if ``eos``)."""
        ids = self.core.sentence_ids(sentence, eos_inside=False)
        targets = [*ids, EOS_ID] if eos else ids
        if not targets:
            return iter(())
        k = self.order - 1
        history = [BOS_ID if bos else NO_WORD] * k + targets
        contexts = np.array([history[i:i + k] for i in range(len(targets))],
                            np.int64).reshape(len(targets), k)
        ids = np.array(targets, np.int64)
        log10, length = self.core.scores(contexts, ids)
        return iter([(float(p), int(n), bool(o))
                     for p, n, o in zip(log10, length, ids == UNK_ID)])

    def score(self, sentence: str | bytes, bos: bool = True, eos: bool = True) -> float:
        """log10 probability of ``sentence`` (KenLM's ``score``)."""
        return float(sum(p for p, _, _ in self.full_scores(sentence, bos, eos)))

    def perplexity(self, sentence: str | bytes) -> float:
        """10^(-score / (words + 1)), ``</s>`` counted (KenLM's ``perplexity``)."""
        return 10.0 ** (-self.score(sentence) / (len(sentence_words(sentence)) + 1))


# the names this face had before it was told apart from nnlm.kenlm's Model and State
RENAMED = {"Model": "Decoder", "State": "DecoderState"}


def renamed(name: str, stacklevel: int = 3):
    """The class once named ``name``, with a DeprecationWarning that names it now (the old
    names go in nnlm 0.14)."""
    new = RENAMED[name]
    warnings.warn(f"nnlm.{name} is now nnlm.{new} (nnlm's own decoder face; kenlm's is "
                  f"nnlm.kenlm.{name}); the name {name} goes in nnlm 0.14",
                  DeprecationWarning, stacklevel=stacklevel)
    return globals()[new]


def __getattr__(name):
    if name in RENAMED:
        return renamed(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Scoring inside a decoder: a KenLM-like API over any nnlm model, and a batched one.

``nnlm.Model`` speaks nnlm's conventions (float64 log10 scores, a state of the last n-1
word ids that starts at ``<s>``); a kenlm client wants :mod:`nnlm.kenlm` instead, which
copies the kenlm module exactly (float32, minimized states, the null context)::

    model = nnlm.Model("runs/kn5")            # any model: ARPA, n-gram, neural, mixture
    model.score("the jury said", bos=True, eos=True)      # log10, </s> included
    list(model.full_scores("the jury said"))  # (log10 p, n-gram length, oov) per word
    state, out = nnlm.State(), nnlm.State()
    model.BeginSentenceWrite(state)
    model.BaseScore(state, "the", out)        # log10 p(the | <s>); out is the new state

Conventions are KenLM's: log10 probabilities; ``bos`` conditions the first word on
``<s>``, ``eos`` adds ``</s>``; ``ngram length`` is the longest stored n-gram used
(back-off models) or the length of the context the model saw plus one (others); an
out-of-vocabulary word is scored as ``<unk>`` and flagged.

A :class:`State` is the last n-1 words (ids), small and hashable: two hypotheses with
equal states get equal scores for every continuation, so a decoder may recombine them.
:meth:`Model.advance` scores many hypotheses at once, one batched call into the model,
which is what makes beam search over a neural model fast.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .errors import NnlmError, a
from .lm import LOG10_E, LanguageModel
from .stream import seen_lengths
from .vocab import BOS, BOS_ID, EOS, NO_WORD, UNK_ID, special_error


class State:
    """The context a model has seen: the last n-1 word ids (``NO_WORD`` where none).

    Hashable and comparable, so a decoder can recombine hypotheses on it."""

    __slots__ = ("words",)

    def __init__(self, words: tuple[int, ...] = ()):
        self.words = tuple(words)

    def __eq__(self, other) -> bool:
        return isinstance(other, State) and self.words == other.words

    def __hash__(self) -> int:
        return hash(self.words)

    def __repr__(self) -> str:
        return f"State({self.words})"


@dataclass(frozen=True)
class Advance:
    """What :meth:`Model.advance` returns for a batch of hypotheses."""

    log10: np.ndarray  # float64 (B,): log10 p(word | state)
    ngram_length: np.ndarray  # int64 (B,)
    oov: np.ndarray  # bool (B,)
    states: list[State]  # the states after each word


class Model:
    """KenLM's ``Model`` over any nnlm model (a path, or a loaded LanguageModel)."""

    def __init__(self, path_or_model, config=None):
        if isinstance(path_or_model, LanguageModel):
            self.lm = path_or_model
            self.path = None
        else:
            from .models import load_model

            self.path = str(path_or_model)
            self.lm = load_model(path_or_model)
        self.order = self.lm.order
        self.vocab = self.lm.vocab

    def __contains__(self, word: str) -> bool:
        return word in self.vocab

    def __repr__(self) -> str:
        return f"<nnlm.Model {self.path or self.lm.kind}, order {self.order}>"

    # -- states --------------------------------------------------------------------------
    def BeginSentenceWrite(self, state: State) -> None:  # noqa: N802 (KenLM's name)
        """Set ``state`` to the start of a sentence: the context is ``<s>``."""
        state.words = (BOS_ID,) * (self.order - 1)

    def NullContextWrite(self, state: State) -> None:  # noqa: N802
        """Set ``state`` to no context at all (back-off models only: the unigram level)."""
        if not getattr(self.lm, "null_context", False):
            raise NnlmError(f"{a(self.lm.kind)} model has no null context (only back-off "
                            "n-gram models do); begin sentences with BeginSentenceWrite")
        state.words = (NO_WORD,) * (self.order - 1)

    def BaseScore(self, in_state: State, word: str, out_state: State) -> float:  # noqa: N802
        """log10 p(word | in_state); ``out_state`` becomes the state after ``word``."""
        result = self.advance([in_state], [word])
        out_state.words = result.states[0].words
        return float(result.log10[0])

    # -- batched -------------------------------------------------------------------------
    def advance(self, states: Sequence[State], words: Sequence[str | int]) -> Advance:
        """Score ``words[i]`` after ``states[i]`` for every hypothesis i in one call."""
        if len(states) != len(words):
            raise NnlmError(f"advance: {len(states)} states but {len(words)} words")
        k = self.order - 1
        contexts = np.empty((len(states), k), np.int64)
        for i, s in enumerate(states):
            w = s.words
            if len(w) != k:
                w = ((BOS_ID,) * k + tuple(w))[-k:] if k else ()
            contexts[i] = w
        ids = np.array([w if isinstance(w, (int, np.integer)) else self.vocab.index.get(w, UNK_ID)
                        for w in words], np.int64)
        if np.any(ids == BOS_ID):
            raise NnlmError("<s> is context only and is never scored; use BeginSentenceWrite")
        oov = ids == UNK_ID
        if np.any(contexts == NO_WORD) and not getattr(self.lm, "null_context", False):
            raise NnlmError(f"{a(self.lm.kind)} model has no null context")
        log10, length = self._scores(contexts, ids)
        nxt = np.concatenate([contexts[:, 1:], ids[:, None]], axis=1) if k else contexts
        return Advance(log10, np.asarray(length, np.int64), oov,
                       [State(tuple(row)) for row in nxt.tolist()])

    def _scores(self, contexts: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """log10 p and n-gram length of each (context, word): the back-off model's longest
        match, or for other models the words of the line they have seen, plus one."""
        if hasattr(self.lm, "target_logprobs_and_orders"):
            logp, length = self.lm.target_logprobs_and_orders(contexts, ids)
        else:
            logp = self.lm.target_logprobs(contexts, ids)
            length = seen_lengths(contexts, self.order)
        return logp * LOG10_E, length

    # -- whole sentences -----------------------------------------------------------------
    def full_scores(self, sentence: str, bos: bool = True,
                    eos: bool = True) -> Iterator[tuple[float, int, bool]]:
        """(log10 p, n-gram length, oov) for each word (and ``</s>`` if ``eos``)."""
        words = sentence.split()
        if BOS in words or EOS in words:
            raise NnlmError(special_error("the sentence", words))
        targets = [*words, EOS] if eos else words
        if not targets:
            return iter(())
        state = State()
        (self.BeginSentenceWrite if bos else self.NullContextWrite)(state)
        k = self.order - 1
        history = list(state.words)
        contexts = np.empty((len(targets), k), np.int64)
        ids = np.array([self.vocab.index.get(w, UNK_ID) for w in targets], np.int64)
        for i, w in enumerate(ids):  # the contexts of every position, then one batched call
            contexts[i] = history[len(history) - k:] if k else ()
            history.append(int(w))
        log10, length = self._scores(contexts, ids)
        return iter([(float(p), int(n), bool(o))
                     for p, n, o in zip(log10, length, ids == UNK_ID)])

    def score(self, sentence: str, bos: bool = True, eos: bool = True) -> float:
        """log10 probability of ``sentence`` (KenLM's ``score``)."""
        return float(sum(p for p, _, _ in self.full_scores(sentence, bos, eos)))

    def perplexity(self, sentence: str) -> float:
        """10^(-score / (words + 1)), ``</s>`` counted (KenLM's ``perplexity``)."""
        return 10.0 ** (-self.score(sentence) / (len(sentence.split()) + 1))

"""Scoring for decoders that call the kenlm API, over a model whose context is the whole
line (``lstm``, ``awd``, ``deep``, ``infgram``): the kenlm API's states hold at most a few
words, so :mod:`nnlm.kenlm` refuses these models. :class:`WholeLine` answers the calls
such decoders make (``BaseScore``, ``BeginSentenceWrite``, ``in``, ``order``) with a
state of every word since ``<s>``, and computes each history's next-word row once (an
LSTM's is a step from its prefix's cached state), read for every word scored after it.
The histories ``BaseScore`` writes are queued, and the first row missing is computed
with every queued one in one batched pass: a decoder reads the network's weights once
for all the histories a step wrote instead of once a history (a CTC search over Brown
sentences with an ``awd`` network: 37 passes a sentence instead of 91). pyctcdecode's
class over nnlm models (:mod:`nnlm.decoding.pyctcdecode_lm`) and nnlm's own decoder
(:mod:`nnlm.pyctcdecode`) use it for these models.
"""

from __future__ import annotations

import numpy as np

from ..base.errors import NnlmError
from ..base.sysmem import release_free_memory
from ..lm import LOG10_E
from ..text.specials import BOS_ID, UNK_ID
from . import kenlm
from .core import DecoderTypeError, DecoderValueError

ROWS_KEPT = 4096  # WholeLine's rows (|V| float32 each) before the cache starts again
PENDING_ROWS = 256  # histories written and queued for the next batched pass, at most
LIVE_FRAMES = 2  # a queued history is computed ahead if a kept beam held it this recently


def reads_whole_line(lm) -> bool:
    """Whether ``lm``'s context is longer than the kenlm API's States hold."""
    return lm.order > kenlm.MAX_ORDER


class History:
    """A :class:`WholeLine` state: the ids of every word since ``<s>``."""

    __slots__ = ("words",)

    def __init__(self, words: tuple[int, ...] = ()):
        self.words = words

    def __eq__(self, other) -> bool:  # as kenlm's States: equal where their words are
        return isinstance(other, History) and self.words == other.words

    def __hash__(self) -> int:
        return hash(self.words)


class WholeLine:
    """The part of the kenlm API pyctcdecode calls (``BaseScore``, ``BeginSentenceWrite``,
    ``in``, ``order``) for a model whose context is the whole line: log10 scores read
    from each history's next-word row, computed once. A null context does not exist for
    these models (``NullContextWrite`` refuses, so ``score_boundary=False`` does too)."""

    State = History

    def __init__(self, lm):
        self.lm, self.vocab, self.order = lm, lm.vocab, lm.order
        self.k = lm.order - 1
        self.recurrent = bool(getattr(lm, "recurrent", False))
        self.rows: dict[tuple[int, ...], np.ndarray] = {}
        self.frame = 0
        # written, not computed (ordered): the last frame a kept beam held each (``live``)
        self.pending: dict[tuple[int, ...], int] = {}

    def _check_history(self, words) -> None:
        """A history this class wrote holds ids of the vocabulary; one made by hand may
        hold anything."""
        if not isinstance(words, tuple) or not all(
                isinstance(w, int) and not isinstance(w, bool) and 0 <= w < len(self.vocab)
                for w in words):
            raise DecoderValueError("a State whose words are not ids of the model's "
                                    "vocabulary; states are written by BeginSentenceWrite "
                                    "and BaseScore")

    def new_utterance(self) -> None:
        """Forget the last utterance's rows, and hand the freed memory back: torch's
        threads allocate from malloc arenas of their own, which keep freed pages (an
        LSTM through pyctcdecode grew by 27 MB an utterance without this: a 1.2 GB peak
        after 30 Brown sentences, 0.5 GB with it)."""
        self.rows.clear()
        self.pending.clear()
        release_free_memory()

    def __contains__(self, word: str) -> bool:
        return word in self.vocab

    def BeginSentenceWrite(self, state: History) -> None:  # noqa: N802 (KenLM's name)
        state.words = ()

    def NullContextWrite(self, state: History) -> None:  # noqa: N802
        raise NnlmError(f"{self.lm.kind} model has no null context (only back-off n-gram "
                        "models do); keep pyctcdecode's score_boundary=True")

    def BaseScore(self, state: History, word: str, out: History) -> float:  # noqa: N802
        if not isinstance(word, str):
            raise DecoderTypeError(f"Argument 'word' has incorrect type (expected str, got "
                                   f"{type(word).__name__})")
        for name, s in (("state", state), ("out", out)):
            if not isinstance(s, History):
                raise DecoderTypeError(f"Argument '{name}' has incorrect type (expected "
                                       f"State, got {type(s).__name__})")
        row = self.rows.get(state.words)
        if row is None:
            self._check_history(state.words)
            row = self._compute(state.words)
        wid = self.vocab.index.get(word, UNK_ID)
        out.words = after = state.words + (wid,)
        if after not in self.rows and len(self.pending) < PENDING_ROWS:
            self.pending[after] = self.frame
        return float(row[wid])

    def live(self, states) -> None:
        """The states of the beams a search keeps after a frame (nnlm's compiled CTC
        search tells them). A batched pass then computes ahead only the queued histories
        that a kept beam held in the last ``LIVE_FRAMES`` frames: a CTC search over Brown
        with an ``awd`` network read 17% of the rows it computed from all those queued;
        with this it computes 9.4 rows a pass instead of about 22, in as many passes. Without
        it (the Python search, or pyctcdecode itself) every queued history is computed."""
        self.frame += 1
        for s in states:
            if isinstance(s, History) and s.words in self.pending:
                self.pending[s.words] = self.frame

    def _compute(self, words: tuple[int, ...]) -> np.ndarray:
        """The row of ``words``, computed in one pass with the queued histories'."""
        todo = [words] + [h for h, seen in self.pending.items() if h != words
                          and h not in self.rows and self.frame - seen <= LIVE_FRAMES]
        self.pending.clear()
        if len(self.rows) + len(todo) > ROWS_KEPT:
            self.rows.clear()
        # a recurrent network reads from the last <s>: its rows need only the longest
        # history and an <s> before it, not the model's k columns (1,024 for awd)
        width = min(self.k, 1 + max(map(len, todo))) if self.recurrent else self.k
        contexts = np.array([((BOS_ID,) * width + h)[-width:] for h in todo], np.int64)
        ln = np.asarray(self.lm.next_logprobs(contexts))
        rows = np.multiply(ln, LOG10_E, out=np.empty(ln.shape, np.float32), casting="same_kind")
        for h, r in zip(todo, rows):
            self.rows[h] = r
        return self.rows[words]

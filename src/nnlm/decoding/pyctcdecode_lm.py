"""Any nnlm model as pyctcdecode's language model, without the kenlm module::

    from pyctcdecode import BeamSearchDecoderCTC, Alphabet
    from nnlm.decoding.pyctcdecode_lm import PyctcdecodeLM

    lm = PyctcdecodeLM("runs/mlp1", alpha=0.5, beta=1.0)    # any nnlm model
    decoder = BeamSearchDecoderCTC(Alphabet.build_alphabet(labels), language_model=lm)
    text = decoder.decode(logits)

A subclass of pyctcdecode's own ``LanguageModel`` (its unigram trie, partial-word and
unknown-word scores, ``alpha`` and ``beta``, ``reset_params``) whose states are
:mod:`nnlm.kenlm`'s: a back-off model answers through the compiled per-call path, a
network through nnlm.kenlm's cache, where the States a step writes are computed together
in one batched pass at the next step's first call, so pyctcdecode's one-call-per-beam
loop pays about one network pass a step. With the same model it decodes what pyctcdecode
decodes with kenlm's. A model that reads the whole line (``lstm``, ``awd``, ``deep``,
``infgram``), whose context the kenlm API's states cannot hold, is scored through
:class:`WholeLine`: a state is every word since ``<s>``, and each history's next-word
row is computed once (one network pass, an LSTM's a step from its prefix's state) and
read for every word pyctcdecode scores after it.

Saved by ``decoder.save_to_dir`` as pyctcdecode saves its own (``attrs.json``,
``unigrams.txt``) beside a copy of the model (a file or a model directory); pyctcdecode's
``load_from_dir`` assumes its own class, so a saved decoder comes back as
``BeamSearchDecoderCTC(alphabet, PyctcdecodeLM.load_from_dir(path + "/language_model"))``.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from pyctcdecode.constants import (
    DEFAULT_ALPHA,
    DEFAULT_BETA,
    DEFAULT_SCORE_LM_BOUNDARY,
    DEFAULT_UNK_LOGP_OFFSET,
    LOG_BASE_CHANGE_FACTOR,
)
from pyctcdecode.language_model import LanguageModel

try:  # pyctcdecode's main branch wraps states in KenlmState; its release 0.5 does not
    from pyctcdecode.language_model import KenlmState

    def _wrap(state):
        return KenlmState(state)

    def _unwrap(state):
        return state.state
except ImportError:
    def _wrap(state):
        return state

    def _unwrap(state):
        return state

from ..base.checks import number
from ..base.errors import NnlmError
from ..models import load_model
from ..text.specials import BOS, EOS, UNK
from . import kenlm
from .whole_line import WholeLine, reads_whole_line

MODEL_NAME = "nnlm_model"  # the model's copy in a saved decoder's language-model folder


def unigrams_of(model) -> list[str]:
    """The words of a model (a path or a loaded model), specials left out: pyctcdecode's
    ``unigrams=``, which ``build_ctcdecoder`` cannot read from a binary file itself
    (without them it decodes with no word list, far worse: see docs/guide/decoders.md).

    Good: ``build_ctcdecoder(labels, "runs/kn5.bin", unigrams=unigrams_of("runs/kn5.bin"))``.
    """
    lm = load_model(model) if isinstance(model, (str, os.PathLike)) else model
    return [w for w in lm.vocab.words if w not in (BOS, EOS, UNK)]


def _weights(alpha, beta, unk_score_offset) -> tuple[float, float, float]:
    """The three numbers of pyctcdecode's score, finite (a NaN made every score NaN)."""
    return (number(alpha, "alpha"), number(beta, "beta"),
            number(unk_score_offset, "unk_score_offset"))


class PyctcdecodeLM(LanguageModel):
    """pyctcdecode's ``LanguageModel`` over an nnlm model (module docstring): a path or a
    loaded model; ``unigrams`` default to the model's vocabulary; the other settings and
    their defaults are pyctcdecode's (``build_ctcdecoder``'s)."""

    def __init__(self, model, unigrams=None, alpha: float = DEFAULT_ALPHA,
                 beta: float = DEFAULT_BETA, unk_score_offset: float = DEFAULT_UNK_LOGP_OFFSET,
                 score_boundary: bool = DEFAULT_SCORE_LM_BOUNDARY):
        self.source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
        lm = load_model(model) if self.source is not None else model
        if unigrams is None:
            unigrams = unigrams_of(lm)
        whole = reads_whole_line(lm)
        scorer = WholeLine(lm) if whole else kenlm.Model(lm)
        self._new_state = WholeLine.State if whole else kenlm.State
        alpha, beta, unk_score_offset = _weights(alpha, beta, unk_score_offset)
        super().__init__(scorer, unigrams, alpha, beta, unk_score_offset, score_boundary)

    def reset_params(self, **params) -> None:
        """pyctcdecode's: new ``alpha``, ``beta``, ``unk_score_offset`` or
        ``score_boundary``, the numbers checked finite."""
        for name in ("alpha", "beta", "unk_score_offset"):
            if name in params:
                params[name] = number(params[name], name)
        super().reset_params(**params)

    def get_start_state(self):
        if isinstance(self._kenlm_model, WholeLine):  # a new utterance: rows of the last
            self._kenlm_model.new_utterance()       # one are not read again
        state = self._new_state()
        if self.score_boundary:
            self._kenlm_model.BeginSentenceWrite(state)
        else:
            self._kenlm_model.NullContextWrite(state)
        return _wrap(state)

    def _get_raw_end_score(self, start_state) -> float:
        if not self.score_boundary:
            return 0.0
        return float(self._kenlm_model.BaseScore(start_state, EOS, self._new_state()))

    def score(self, prev_state, word: str, is_last_word: bool = False):
        """pyctcdecode's score (its alpha, beta and unknown-word offset) with nnlm's
        states."""
        end_state = self._new_state()
        lm_score = self._kenlm_model.BaseScore(_unwrap(prev_state), word, end_state)
        if (len(self._unigram_set) > 0 and word not in self._unigram_set) \
                or word not in self._kenlm_model:
            lm_score += self.unk_score_offset
        if is_last_word:
            lm_score += self._get_raw_end_score(end_state)
        return self.alpha * lm_score * LOG_BASE_CHANGE_FACTOR + self.beta, _wrap(end_state)

    # -- pyctcdecode's save and load -----------------------------------------------------
    def save_to_dir(self, filepath: str) -> None:
        if self.source is None:
            raise NnlmError("a PyctcdecodeLM made from a loaded model cannot be saved: make "
                            "it from the model's path")
        folder = Path(filepath)
        (folder / self._ATTRS_SERIALIZED_FILENAME).write_text(json.dumps(
            self.serializable_attrs))
        (folder / self._UNIGRAMS_SERIALIZED_FILENAME).write_text(
            "".join(u + "\n" for u in sorted(self._unigram_set)), encoding="utf-8")
        target = folder / MODEL_NAME
        if os.path.isdir(self.source):
            shutil.copytree(self.source, target)
        else:
            shutil.copy2(self.source, target)

    @classmethod
    def load_from_dir(cls, filepath: str, unigram_encoding=None) -> PyctcdecodeLM:
        folder = Path(filepath)
        attrs = json.loads((folder / cls._ATTRS_SERIALIZED_FILENAME).read_text())
        unigrams = (folder / cls._UNIGRAMS_SERIALIZED_FILENAME).read_text(
            encoding=unigram_encoding or "utf-8").split("\n")
        return cls(folder / MODEL_NAME, [u for u in unigrams if u], **attrs)

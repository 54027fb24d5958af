"""Any nnlm model as a language model of flashlight-text's decoders (the beam search behind
torchaudio's ``ctc_decoder``): a subclass of its ``LM`` with ``start``, ``score`` and
``finish``, the same contract as flashlight's own ``KenLM`` class::

    from flashlight.lib.text.decoder import LexiconDecoder
    from nnlm.decoding.flashlight import FlashlightLM

    lm = FlashlightLM("runs/kn5.bin", word_dict)   # any nnlm model, or a loaded one
    decoder = LexiconDecoder(options, trie, lm, sil, blank, unk, [], False)

Scores are log10, as flashlight's KenLM returns them (so ``lm_weight`` means the same).
States are flashlight's ``LMState`` objects, one per token path (``state.child(i)``), as
its KenLM keeps them; each maps to the nnlm State it stands for.

- **Back-off models** score through the compiled per-call path of :mod:`nnlm.kenlm`
  (KenLM's algorithm and minimized states over nnlm's mapped trie or hash indexes): the
  ``score`` flashlight calls is that C query itself, bound with ``functools.partial``
  (no Python frame a call), and each (state, word) is scored once.
- **Networks and mixtures** keep each state's whole next-word distribution once
  computed (one pass per state, however many words are scored after it). On a GPU the
  states ``score`` creates are also queued, and the first ``score`` from any queued state
  runs one batched forward pass for all of them (a step's hypotheses are created in one
  step and scored from in the next). On the CPU that does not pay: on Brown, about 1 in
  4 queued states is ever scored from (670 rows computed for 171 read), and the decode
  took the same time (``bench/decoding/flashlight_lm.py``).

The maps are cleared at ``start``, which the decoder calls once per utterance.
"""

from __future__ import annotations

import array
import functools
import os

import numpy as np
from flashlight.lib.text.decoder import LM, LMState

from ..base.errors import NnlmError
from ..base.sysmem import release_free_memory
from ..lm import LOG10_E
from ..models import load_model
from ..text.specials import BOS_ID, EOS_ID, NO_WORD, UNK_ID
from . import kenlm
from .core import DecoderValueError
from .whole_line import reads_whole_line

BATCH_CAP = 4096  # queued states scored in one network pass at most


def _word_ids(vocab, dictionary) -> np.ndarray:
    """The model's id of each of the decoder's word indices (``<unk>``'s if unknown), as
    flashlight's KenLM maps them."""
    ids = np.empty(dictionary.index_size(), np.int64)
    for i in range(dictionary.index_size()):
        ids[i] = vocab.index.get(dictionary.get_entry(i), UNK_ID)
    return ids


class FlashlightLM(LM):
    """flashlight-text's ``LM`` over an nnlm model (module docstring). ``model``: a path
    or a loaded model; ``dictionary``: the decoder's word dictionary (for a lexicon
    decoder) or token dictionary (lexicon-free), a flashlight ``Dictionary``."""

    def __init__(self, model, dictionary):
        LM.__init__(self)
        lm = load_model(model) if isinstance(model, (str, os.PathLike)) else model
        self.lm = lm
        self.ids = _word_ids(lm.vocab, dictionary)
        self.k = lm.order - 1
        self.backoff = hasattr(lm, "state_lengths")
        self.states: dict = {}  # LMState -> nnlm.kenlm State (back-off) or context tuple
        self.scored: dict = {}  # (LMState, token) -> (its child, log10 score): back-off
        if self.backoff:
            self.fast = kenlm.Model(lm)  # the compiled per-call path over this model
            self.base_score, self.new_state = self.fast.BaseScore, kenlm.State
            self.words = [lm.vocab.words[i] for i in self.ids]
            query = getattr(self.fast, "_fast", None)
            if query is not None:  # score in C: flashlight's call then runs no Python frame
                ids = array.array("i", (int(i) for i in self.ids))
                self.score = functools.partial(query.memo_score, self.states, self.scored,
                                               ids)
        self.rows: dict = {}  # context tuple -> float32 log10 row (networks)
        self.queued: set = set()  # networks on a GPU: states to compute with the next miss
        self.queue_rows = not self.backoff and kenlm._on_gpu(lm)

    # -- flashlight's contract -------------------------------------------------------
    def start(self, start_with_nothing: bool):
        self.states.clear()
        self.scored.clear()
        self.rows.clear()
        self.queued.clear()
        if reads_whole_line(self.lm):  # an LSTM: its arenas' freed pages back
            release_free_memory()  # (whole_line.py; other networks' rows are reused as
            # they are, and trimming them made `modern` decode 1.8x slower)
        state = LMState()
        if self.backoff:
            s = self.new_state()
            (self.fast.NullContextWrite if start_with_nothing else self.fast.BeginSentenceWrite)(s)
            self.states[state] = s
        else:
            if start_with_nothing:
                raise NnlmError(f"{self.lm.kind} model has no null context (only back-off "
                                "n-gram models do); decode with start_with_nothing=False")
            self.states[state] = (BOS_ID,) * self.k
        return state

    def score(self, state, token_index: int):
        if self.backoff:  # the hot path: a dict lookup, or one C query
            hit = self.scored.get((state, token_index))
            if hit is not None:
                return hit
            if not 0 <= token_index < len(self.words):
                raise NnlmError(f"flashlight LM: invalid token index {token_index}")
            out = state.child(token_index)
            after = self.new_state()
            score = float(self.base_score(self._known(state), self.words[token_index], after))
            self.states[out] = after
            self.scored[(state, token_index)] = out, score
            return out, score
        if not 0 <= token_index < len(self.ids):
            raise NnlmError(f"flashlight LM: invalid token index {token_index}")
        return self._network_score(state, token_index, int(self.ids[token_index]))

    def finish(self, state):
        if self.backoff:
            out = state.child(-1)
            after = self.new_state()
            return out, float(self.base_score(self._known(state), "</s>", after))
        return self._network_score(state, -1, EOS_ID)

    def _known(self, state):
        """What this LM keeps for ``state``: one it returned since the last start()."""
        found = self.states.get(state)
        if found is None:
            raise DecoderValueError("flashlight LM: a state this LM did not return since its "
                                    "last start() (states belong to one LM and one "
                                    "utterance)")
        return found

    # -- networks ------------------------------------------------------------------------
    def _network_score(self, state, child_index: int, word: int):
        out = state.child(child_index)
        ctx = self._known(state)
        if ctx not in self.rows:
            self._run_queued(ctx)
        nxt = ctx[1:] + (word,) if self.k else ()
        if out not in self.states:
            self.states[out] = nxt
            if self.queue_rows and nxt not in self.rows:
                self.queued.add(nxt)
        return out, float(self.rows[ctx][word])

    def _run_queued(self, needed: tuple) -> None:
        """One batched pass over every queued context (``needed`` among them)."""
        todo = [c for c in self.queued if c not in self.rows]
        if needed not in todo:
            todo.append(needed)
        self.queued.clear()
        for lo in range(0, len(todo), BATCH_CAP):
            part = todo[lo:lo + BATCH_CAP]
            contexts = np.array(part, np.int64).reshape(len(part), self.k)
            if np.any(contexts == NO_WORD):
                raise NnlmError("flashlight LM: a network has no null context")
            rows = (np.asarray(self.lm.next_logprobs(contexts)) * LOG10_E).astype(np.float32)
            for c, row in zip(part, rows):
                self.rows[c] = row

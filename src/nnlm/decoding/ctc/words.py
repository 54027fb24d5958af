"""CTC beam search with shallow fusion over the whole vocabulary at once, in torch (CPU or
CUDA), and the same search one word at a time, its reference.

The acoustic model's labels are the language model's words (word or subword tokens, as
in NeMo's and Riva's subword CTC models) plus a blank; ``log_probs`` is [T, |V| + 1],
the blank last. A hypothesis is a label sequence (the prefix) with two Viterbi scores,
the best alignment of the frames so far that ends in a blank (``sb``) and the best that
ends in its last label (``sl``), and its language-model score. At each frame every
hypothesis either stays (a blank, or its last label repeated: the prefix is unchanged)
or extends by a word v; repeating v right after v needs a blank between (CTC's rule).
A hypothesis ranks by

    max(sb, sl) + lm_weight * log p_LM(prefix) + word_bonus * len(prefix)

and the ``beam`` best survive, hypotheses with the same prefix merged (the larger of
each Viterbi score). At the end, ``</s>``'s LM score is added. This is frame-synchronous
shallow fusion as NGPU-LM uses it for greedy and beam decoding (Bataev et al. 2025); the
alignment scores are Viterbi (max) rather than CTC's sum over alignments, so that two
implementations can agree exactly.

:func:`beam_search` advances all hypotheses over all words in one whole-vocabulary step
of the LM (:mod:`nnlm.decoding.dense`; run only for the contexts a frame creates, a
hypothesis that stays keeping its rows) and picks the beam by one ``topk`` per frame;
prefixes are tracked by a 64-bit rolling hash, and an extension that lands on a prefix
already in the beam (its parent extended by its last word) is merged into it.
:func:`reference_beam_search` does the same with a dict of prefixes and one
``BaseScore`` call per (hypothesis, word): slow, and the oracle of the fast one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from ...base.checks import ArgumentTypeError, ArgumentValueError, integer, number
from ...base.sysmem import check_allocation
from ...text.specials import BOS_ID, EOS_ID
from ..api import DecoderState
from ..dense import next_contexts, tensor_lm

LN10 = math.log(10.0)
_HASH_MUL = 0x100000001B3  # FNV's 64-bit prime: prefixes as a rolling hash (wrapping int64)


@dataclass(frozen=True)
class Hypothesis:
    """A decoded label sequence and its scores (natural logs)."""

    words: list[int]
    score: float  # the ranking score, </s> included
    acoustic: float  # max(sb, sl): the best alignment's log-probability
    lm: float  # log p_LM(words </s>), natural log


# bytes a search holds per (hypothesis, label) at a frame: the extension scores, their LM
# part, the ranks, the LM's rows and torch's temporaries, float64 and masks (measured
# peak about 60), and per hypothesis and frame the back-pointers kept for the end
BYTES_PER_CELL = 80
BYTES_PER_STEP = 16


def _checked(log_probs, beam, lm_weight, word_bonus, vocab_size: int) -> tuple:
    """The search's arguments, each checked in one line naming it; ``log_probs`` as a
    float64 tensor (a numpy array is taken too)."""
    if isinstance(log_probs, np.ndarray):
        log_probs = torch.from_numpy(log_probs)
    if not isinstance(log_probs, torch.Tensor):
        raise ArgumentTypeError(f"log_probs: a tensor [T, |V| + 1], not "
                                f"{type(log_probs).__name__}")
    if log_probs.ndim != 2 or log_probs.shape[1] != vocab_size + 1:
        raise ArgumentValueError(f"beam search: log_probs of shape [T, {vocab_size + 1}] "
                                 f"(the model's {vocab_size} words, then the blank), not "
                                 f"{list(log_probs.shape)}")
    if not log_probs.dtype.is_floating_point:
        raise ArgumentTypeError(f"log_probs: floating-point log-probabilities, not "
                                f"{log_probs.dtype}")
    log_probs = log_probs.to(torch.float64)
    if bool(torch.isnan(log_probs).any()) or bool((log_probs == math.inf).any()):
        raise ArgumentValueError("log_probs holds NaN or +inf: log-probabilities are finite "
                                 "or -inf")
    beam = integer(beam, "beam", 1)
    lm_weight = number(lm_weight, "lm_weight", 0)
    word_bonus = number(word_bonus, "word_bonus")
    widest = 1  # the most hypotheses the search can hold: (|V| + 1)^T, or the beam
    for _ in range(len(log_probs)):
        widest = min(beam, widest * (vocab_size + 1))
        if widest == beam:
            break
    check_allocation(widest * ((vocab_size + 1) * BYTES_PER_CELL
                               + BYTES_PER_STEP * len(log_probs)),
                     f"beam search with beam={beam} over {vocab_size:,} words and "
                     f"{len(log_probs):,} frames", "give a smaller beam")
    return log_probs, beam, lm_weight, word_bonus


@dataclass
class _Beam:
    """The hypotheses of a frame, as tensors (B rows)."""

    sb: torch.Tensor  # float64: the best alignment ending in a blank
    sl: torch.Tensor  # float64: the best alignment ending in the last label
    lm: torch.Tensor  # float64: lm_weight * log p_LM(prefix)
    length: torch.Tensor  # int64: words in the prefix
    last: torch.Tensor  # int64: the last word (-1: none)
    hashes: torch.Tensor  # int64: the prefix's rolling hash
    parents: torch.Tensor  # int64: the hash of the prefix without its last word
    contexts: torch.Tensor  # int64 [B, k]: the LM's state

    @classmethod
    def start(cls, k: int, dev) -> _Beam:
        def one(value, dtype=torch.int64):
            return torch.full((1,), value, dtype=dtype, device=dev)
        return cls(one(0.0, torch.float64), one(-math.inf, torch.float64),
                   one(0.0, torch.float64), one(0), one(-1), one(0), one(-1),
                   torch.full((1, k), BOS_ID, dtype=torch.int64, device=dev))


def _frame(h: _Beam, frame: torch.Tensor, lm_rows: torch.Tensor, beam: int,
           lm_weight: float, word_bonus: float) -> tuple[_Beam, torch.Tensor, torch.Tensor]:
    """One frame: every hypothesis stays or extends by every word, merges, the ``beam``
    best kept. Returns the new beam, each survivor's parent row, and the word it added
    (-1 where it stayed)."""
    V = lm_rows.shape[1]
    neg = torch.tensor(-math.inf, dtype=torch.float64, device=frame.device)
    best = torch.maximum(h.sb, h.sl)
    stay_sb = best + frame[V]  # a blank
    stay_sl = torch.where(h.last >= 0, h.sl + frame[h.last.clamp_min(0)], neg)  # a repeat
    ext = best[:, None] + frame[None, :V]  # a new word v, from either ending...
    same = torch.arange(V, device=frame.device)[None, :] == h.last[:, None]
    ext = torch.where(same, h.sb[:, None] + frame[None, :V], ext)  # ...v == last: a blank
    ext_lm = h.lm[:, None] + lm_weight * lm_rows
    # an extension of row b by v that is already row c (c's parent is b): merged into c;
    # prefixes are unique in a beam, so c's parent is found among the sorted hashes
    # (a B x B comparison took a terabyte at beam 10^6)
    order = torch.argsort(h.hashes)
    sorted_hashes = h.hashes[order]
    at = torch.searchsorted(sorted_hashes, h.parents).clamp_max(len(order) - 1)
    c_idx = torch.nonzero((sorted_hashes[at] == h.parents) & (h.last >= 0),
                          as_tuple=True)[0]
    b_idx = order[at[c_idx]]
    if len(b_idx):
        v_idx = h.last[c_idx]
        stay_sl = stay_sl.clone()
        stay_sl[c_idx] = torch.maximum(stay_sl[c_idx], ext[b_idx, v_idx])
        ext[b_idx, v_idx] = neg
    ext[:, BOS_ID] = neg  # <s> is context only
    B = len(h.sb)
    ranks = torch.cat([torch.maximum(stay_sb, stay_sl) + h.lm + word_bonus * h.length,
                       (ext + ext_lm + word_bonus * (h.length[:, None] + 1)).reshape(-1)])
    n = max(1, min(beam, int(torch.isfinite(ranks).sum())))
    top = torch.topk(ranks, n).indices
    is_stay = top < B
    flat = (top - B).clamp_min(0)
    row = torch.where(is_stay, top, flat // V)
    word = torch.where(is_stay, torch.full_like(top, -1), flat % V)
    new = _Beam(
        sb=torch.where(is_stay, stay_sb[row], neg),
        sl=torch.where(is_stay, stay_sl[row], ext.reshape(-1)[flat]),
        lm=torch.where(is_stay, h.lm[row], ext_lm.reshape(-1)[flat]),
        length=h.length[row] + (~is_stay).long(),
        last=torch.where(is_stay, h.last[row], word),
        hashes=torch.where(is_stay, h.hashes[row], h.hashes[row] * _HASH_MUL + word + 1),
        parents=torch.where(is_stay, h.parents[row], h.hashes[row]),
        contexts=torch.where(is_stay[:, None], h.contexts[row],
                             next_contexts(h.contexts, row, word.clamp_min(0))))
    return new, row, word


@torch.no_grad()
def beam_search(log_probs: torch.Tensor, lm, beam: int = 8, lm_weight: float = 0.5,
                word_bonus: float = 0.0) -> list[Hypothesis]:
    """The ``beam`` best label sequences for ``log_probs`` [T, |V| + 1] (blank last) with
    ``lm`` (a loaded model, or its tensor form from :func:`~.dense.tensor_lm`) fused,
    best first. Runs where ``log_probs`` lies."""
    device = log_probs.device if isinstance(log_probs, torch.Tensor) else "cpu"
    step = lm if hasattr(lm, "advance") and hasattr(lm, "V") else tensor_lm(lm, device)
    log_probs, beam, lm_weight, word_bonus = _checked(log_probs, beam, lm_weight,
                                                      word_bonus, step.V)
    dev = log_probs.device

    def lm_rows(contexts):  # natural log; none at all with a weight of 0 (0 * -inf: NaN)
        if lm_weight:
            return step.advance(contexts).to(torch.float64)
        return torch.zeros((len(contexts), step.V), dtype=torch.float64, device=dev)

    h, history = _Beam.start(step.k, dev), []
    rows = lm_rows(h.contexts)
    for t in range(len(log_probs)):
        h, row, word = _frame(h, log_probs[t], rows, beam, lm_weight, word_bonus)
        history.append(torch.stack([row, word]).cpu())
        rows = rows[row]  # a hypothesis that stayed keeps its context, and its row
        added = word >= 0
        if bool(added.any()):  # the LM runs only for the contexts this frame made
            rows[added] = lm_rows(h.contexts[added])
    final_lm = h.lm + lm_weight * rows[:, EOS_ID]
    acoustic = torch.maximum(h.sb, h.sl)
    score = acoustic + final_lm + word_bonus * h.length
    out = []
    for i in torch.argsort(score, descending=True).cpu().tolist():
        words, r = [], i
        for back in history[::-1]:
            if int(back[1, r]) >= 0:
                words.append(int(back[1, r]))
            r = int(back[0, r])
        out.append(Hypothesis(words[::-1], float(score[i]), float(acoustic[i]),
                              float(final_lm[i]) / lm_weight if lm_weight else 0.0))
    return out


def _offer(cand: dict):
    """Add a candidate to ``cand``, merged with one of the same prefix (the larger of
    each Viterbi score; the LM score is the prefix's either way)."""
    def offer(prefix, sb, sl, lm, state):
        if prefix in cand:
            old = cand[prefix]
            old[0], old[1] = max(old[0], sb), max(old[1], sl)
        else:
            cand[prefix] = [sb, sl, lm, state]
    return offer


def reference_beam_search(log_probs: np.ndarray, model, beam: int = 8,
                          lm_weight: float = 0.5, word_bonus: float = 0.0
                          ) -> list[Hypothesis]:
    """:func:`beam_search` one hypothesis and one word at a time, with a dict of prefixes
    and ``model.BaseScore`` (an :class:`nnlm.Decoder`) per extension: its oracle."""

    V = len(model.vocab)
    log_probs, beam, lm_weight, word_bonus = _checked(log_probs, beam, lm_weight,
                                                      word_bonus, V)
    log_probs = log_probs.cpu().numpy()
    blank = V
    start = DecoderState()
    model.BeginSentenceWrite(start)
    # prefix -> [sb, sl, lm_sum (weighted), state]
    beam_now = {(): [0.0, -math.inf, 0.0, start]}
    words = model.vocab.words
    for frame in log_probs:
        cand: dict[tuple, list] = {}
        offer = _offer(cand)

        for prefix, (sb, sl, lm, state) in beam_now.items():
            best = max(sb, sl)
            offer(prefix, best + frame[blank],
                  sl + frame[prefix[-1]] if prefix else -math.inf, lm, state)
            for v in range(V):
                if v == BOS_ID:
                    continue
                acoustic = (sb if prefix and v == prefix[-1] else best) + frame[v]
                out = DecoderState()
                lp = model.BaseScore(state, words[v], out) * LN10
                offer(prefix + (v,), -math.inf, acoustic, lm + lm_weight * lp if lm_weight else lm,
                      out)

        def rank(item):
            prefix, (sb, sl, lm, _) = item
            return max(sb, sl) + lm + word_bonus * len(prefix)

        kept = sorted(cand.items(), key=rank, reverse=True)[:beam]
        beam_now = dict(kept)
    out = []
    for prefix, (sb, sl, lm, state) in beam_now.items():
        eos = model.BaseScore(state, "</s>", DecoderState()) * LN10
        final_lm = lm + lm_weight * eos if lm_weight else lm
        score = max(sb, sl) + final_lm + word_bonus * len(prefix)
        out.append(Hypothesis(list(prefix), score, max(sb, sl),
                              final_lm / lm_weight if lm_weight else 0.0))
    return sorted(out, key=lambda h: h.score, reverse=True)

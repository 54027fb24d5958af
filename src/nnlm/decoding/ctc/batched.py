"""CTC prefix beam search over a batch of utterances at once, on tensors (CPU or CUDA),
over character or subword labels, with words fused as pyctcdecode fuses them: its beams,
computed a frame at a time for the whole batch.

A beam is pyctcdecode's: finished words, a partial word, the last label read (the blank
after a blank) and one score, the log of the sum over the alignments merged into it
(:mod:`.prefix_search` has the rules). At each frame every beam meets every label worth
reading (at least ``token_min_logp``, and the frame's best): a blank or its last label
again leaves the words as they are; a separator (``" "``; a label starting with ``▁``)
finishes the partial word; any other label extends it. Beams that agree on their words,
partial word and last label are one (log-sum-exp), found by one sort of the candidates'
64-bit keys a frame. Each ranks by

    score + its finished words' fused scores + the partial word's score

with the scores of :mod:`.fusion` (``alpha``, ``beta``, ``unk_score_offset``, the
partial word's offset scaled past 6 characters, and with a lexicon, ``unk_score_offset``
-inf, the best LM score of the listed words it starts). The fused score of finishing a
beam's partial word, and the LM context after it, are computed once, when the partial
word changes (one batched point query of the LM for all new beams of a frame:
:func:`~nnlm.decoding.dense.word_scores`), so a separator costs no LM call. Beams more
than ``beam_prune_logp`` below their utterance's best are dropped and the
``beam_width`` best kept. At the end every partial word is finished, beams with the
same words merged and ``</s>`` scored.

What differs from pyctcdecode's search (and the compiled one, which follows it to the
bit): merged scores are summed in another order, so they agree to the last bits, and a
tie at the edge of the beam can break the other way; a label ending in ``▁`` makes the
next label start a word for that beam only (pyctcdecode: for whichever beam meets one
next); no LM states. Word frames are pyctcdecode's: the last merged beam's, read back
along its back-pointers at the end (a blank, the last label again, a new label).

Each frame is a fixed number of tensor operations over the batch's candidates, none per
beam: the batch decodes where its logits lie.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import torch

from ...text.specials import BOS_ID, EOS_ID, NO_WORD, UNK_ID
from ..dense import check_device_memory, word_scores
from .fusion import AVG_TOKEN_LEN, LOG_BASE_CHANGE_FACTOR

LN10 = LOG_BASE_CHANGE_FACTOR  # log10 -> ln
# words, then beams' keys, as rolling hashes (wrapping int64); each level its own odd
# multiplier, so that no structure of one (a word's characters) lines up with another's
_TEXT_MUL = -0x61C8864680B583EB  # 0x9E3779B97F4A7C15, the golden ratio's, as int64
_KEY_MUL = (0x2545F4914F6CDD1D, 0x5851F42D4C957F2D)
_KEY_BITS = 48  # of a beam's key, below its utterance's index, in the frame's one sort
MAX_BATCH = 2 ** (63 - _KEY_BITS) - 1  # utterances a batch holds
START, BLANK_LAST = -2, -1  # a beam's last label before any frame, and after a blank
REPEAT = -2  # in the back-pointers: the slot read its last label again (BLANK_LAST: a blank)
# bytes a search holds per (utterance, beam, label) at a frame, and per (beam, frame) for
# the back-pointers: what the memory check is asked for before the first frame
_BYTES_PER_CANDIDATE = 200
_BYTES_PER_STEP = 16


class BatchBeam(NamedTuple):
    """One decoded hypothesis, as pyctcdecode's ``decode_beams_batch`` gives one: its text,
    each word with its (first, last + 1) frame, CTC's log-probability of its labels
    (``logit_score``) and the score it ranks by, the LM's included (``lm_score``)."""

    text: str
    text_frames: list[tuple[str, tuple[int, int]]]
    logit_score: float
    lm_score: float


@dataclass(frozen=True)
class Settings:
    """pyctcdecode's settings of one search."""

    beam_width: int
    beam_prune_logp: float
    token_min_logp: float
    prune_history: bool = False
    log_add: bool = True  # merged beams sum their scores; False: the larger (Viterbi)


@dataclass
class Fusion:
    """The LM's weights in the fused score (:mod:`.fusion`)."""

    alpha: float
    beta: float
    unk_score_offset: float
    score_boundary: bool


@dataclass
class _Beams:
    """[N, K] per field (``ctx``, ``close_ctx``: [N, K, k]); an empty slot scores -inf."""

    score: torch.Tensor  # log of the sum over the alignments merged into the beam
    last: torch.Tensor  # the last label read (BLANK_LAST after a blank; START)
    text: torch.Tensor  # the finished words, hashed
    lm: torch.Tensor  # their fused scores
    part_hash: torch.Tensor  # the partial word (0: none) and its characters
    part_len: torch.Tensor
    part_score: torch.Tensor  # its score
    close: torch.Tensor  # the fused score of finishing it now (0: none)
    ctx: torch.Tensor  # the LM context after the finished words
    close_ctx: torch.Tensor  # ... and after the partial word too
    brk: torch.Tensor  # the next label starts a word (after a label ending in ▁)
    recent: torch.Tensor  # [N, K, max(1, n - 1)] the last finished words, hashed

    @classmethod
    def start(cls, N: int, K: int, k: int, pad: int, dev, m: int = 1) -> _Beams:
        """One empty beam an utterance, its context ``pad`` (``<s>``, or the null
        context), the other slots empty."""
        f64 = {"dtype": torch.float64, "device": dev}
        score = torch.full((N, K), -math.inf, **f64)
        score[:, 0] = 0.0
        zeros = torch.zeros((N, K), dtype=torch.int64, device=dev)
        ctx = torch.full((N, K, k), pad, dtype=torch.int64, device=dev)
        return cls(score, zeros + START, zeros.clone(), torch.zeros((N, K), **f64),
                   zeros.clone(), zeros.clone(), torch.zeros((N, K), **f64),
                   torch.zeros((N, K), **f64), ctx, ctx.clone(),
                   torch.zeros((N, K), dtype=torch.bool, device=dev),
                   torch.zeros((N, K, m), dtype=torch.int64, device=dev))

    def at(self, flat: torch.Tensor, names=None) -> dict[str, torch.Tensor]:
        """The fields ``names`` (default: all) at the flat slots ``flat`` (n * K + i)."""
        out = {}
        for name in names or [f.name for f in fields(self)]:
            x = getattr(self, name)
            out[name] = x.reshape(x.shape[0] * x.shape[1], *x.shape[2:]).index_select(0, flat)
        return out


def key_of(text: torch.Tensor, part_hash: torch.Tensor, last: torch.Tensor) -> torch.Tensor:
    """A beam's identity (pyctcdecode's: words, partial word, last label) as 64 bits."""
    return (text * _KEY_MUL[0] + part_hash) * _KEY_MUL[1] + last + 3


def finished_text(text: torch.Tensor, part_hash: torch.Tensor, part_len: torch.Tensor
                  ) -> torch.Tensor:
    """The words' hash once the partial word (where there is one) is finished."""
    return torch.where(part_len > 0, text * _TEXT_MUL + part_hash, text)


def _sorted_groups(n: torch.Tensor, key: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The candidates sorted so that each (utterance, key) is together, utterances in
    order: the order, where each group starts, each sorted candidate's group."""
    mixed = (n << _KEY_BITS) | (key & ((1 << _KEY_BITS) - 1))
    order = torch.argsort(mixed)
    k = mixed[order]
    first = torch.ones_like(k, dtype=torch.bool)
    first[1:] = k[1:] != k[:-1]
    return order, first, torch.cumsum(first, 0) - 1


def grouped(n: torch.Tensor, key: torch.Tensor, score: torch.Tensor, made: torch.Tensor,
            log_add: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Candidates with the same (utterance, key) as one: each group's last-made candidate
    (the largest ``made``: pyctcdecode keeps the last merged beam's word frames) and the
    log-sum-exp of its scores (``log_add`` False: the largest), groups in utterance
    order. One sort of 64 bits a candidate: the utterance above (``MAX_BATCH``), 48 bits
    of the key below (two keys of one utterance's frame share them about once in 2^48 /
    candidates^2)."""
    order, first, group = _sorted_groups(n, key)
    x = score[order]
    top = torch.full_like(x, -math.inf).scatter_reduce(0, group, x, "amax")
    shift = torch.where(top > -math.inf, top, torch.zeros_like(top))
    total = torch.zeros_like(x).scatter_add(0, group, torch.exp(x - shift[group]))
    m = made[order]
    latest = torch.full_like(m, -1).scatter_reduce(0, group, m, "amax")
    heads = order[m == latest[group]]  # one a group, in group order
    if not log_add:
        return heads, top[:len(heads)]
    sums = (shift + torch.log(total))[:len(heads)]
    return heads, torch.where(top[:len(heads)] > -math.inf, sums, top[:len(heads)])


def best_per_row(n: torch.Tensor, rank: torch.Tensor, N: int, width: int,
                 prune: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Of candidates grouped by utterance ``n`` (in order), the ``width`` best of each
    within ``prune`` of its best: their indices and places (0 = best). One ``topk`` over
    an [N, most candidates of an utterance] matrix."""
    sizes = torch.bincount(n, minlength=N)
    firsts = torch.cumsum(sizes, 0) - sizes
    most = int(sizes.max()) if len(n) else 0
    if most == 0:
        empty = torch.zeros(0, dtype=torch.int64, device=n.device)
        return empty, empty
    dense = torch.full((N, most), -math.inf, dtype=rank.dtype, device=rank.device)
    dense[n, torch.arange(len(n), device=n.device) - firsts[n]] = rank
    best, cols = torch.topk(dense, min(width, most), dim=1)
    keep = (best > -math.inf) & (best >= best[:, :1] + prune)
    place = torch.arange(cols.shape[1], device=n.device).expand_as(cols)
    return (firsts[:, None] + cols)[keep], place[keep]


def first_of_each(n: torch.Tensor, key: torch.Tensor, place: torch.Tensor, K: int
                  ) -> torch.Tensor:
    """Where each candidate is the best placed of those with its (utterance, key)."""
    order, first, group = _sorted_groups(n, key)
    best = torch.full_like(place, K).scatter_reduce(0, group, place[order], "amin")
    kept = torch.zeros_like(first)
    kept[order] = place[order] == best[group]
    return kept


def renumbered(n: torch.Tensor, place: torch.Tensor, N: int, K: int) -> torch.Tensor:
    """Places 0, 1, ... again in each utterance, in their order, after some were taken."""
    taken = torch.zeros((N, K), dtype=torch.int64, device=n.device)
    taken[n, place] = 1
    return (torch.cumsum(taken, 1) - 1)[n, place]


class BatchedSearch:
    """The search of the module docstring for one alphabet and LM: ``table`` a
    :class:`~.word_table.WordTable`, ``step`` a tensor LM (:func:`~nnlm.decoding.dense.
    tensor_lm`; None: no LM) on the same device."""

    def __init__(self, table, step, fusion: Fusion, null: int = NO_WORD):
        """``null``: the context word of KenLM's null context (``lm_score_boundary``
        False): no word for a back-off model, ``<s>`` for a network, as nnlm.kenlm
        pads."""
        self.table, self.step, self.fusion, self.null = table, step, fusion, null
        self.hot = None  # a run's HotwordTable (set on the run's copy)
        self.k = step.k if step is not None else 0
        self.device = table.device

    def start(self, N: int, K: int) -> _Beams:
        pad = BOS_ID if self.fusion.score_boundary else self.null
        return _Beams.start(N, K, self.k, pad, self.device, max(1, self.k))

    # -- the fused scores ------------------------------------------------------------------
    def partial_scores(self, hashes: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """pyctcdecode's score of a word being spelled (module docstring; 0 without LM):
        a hotword's prefix scores as the hotwords say, in place of the LM's."""
        lm = self._lm_partial_scores(hashes, lengths)
        if self.hot is None:
            return lm
        starts, score = self.hot.partial(hashes)
        return torch.where(starts & (lengths > 0), score, lm)

    def _lm_partial_scores(self, hashes: torch.Tensor, lengths: torch.Tensor
                           ) -> torch.Tensor:
        f = self.fusion
        if self.step is None:
            return torch.zeros(hashes.shape, dtype=torch.float64, device=self.device)
        if self.table.has_prefixes:
            starts, best = self.table.prefix_best(hashes)
        else:
            starts, best = torch.zeros_like(hashes, dtype=torch.bool), None
        scale = torch.clamp(lengths.to(torch.float64) / AVG_TOKEN_LEN, min=1.0)
        if math.isinf(f.unk_score_offset) and f.unk_score_offset < 0 and best is not None:
            known = f.alpha * LN10 * best  # a lexicon: the best word it starts (smeared)
        else:
            known = torch.zeros_like(scale)
        unknown = torch.full_like(scale, f.unk_score_offset) * scale
        return torch.where(lengths == 0, torch.zeros_like(scale),
                           torch.where(starts, known, unknown))

    def closing(self, ctx: torch.Tensor, hashes: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """The fused score of finishing each hashed word after ``ctx``, and the context
        after it (an unknown word is ``<unk>`` to the LM, plus ``unk_score_offset``); a
        hotword word adds the hotwords' weight."""
        bonus = 0.0 if self.hot is None else self.hot.word_bonus(hashes)
        if self.step is None:
            return bonus + torch.zeros(hashes.shape, dtype=torch.float64,
                                       device=self.device), ctx
        f = self.fusion
        ids, listed = self.table.word_ids(hashes)
        word = torch.where(ids >= 0, ids, torch.full_like(ids, UNK_ID))
        log10 = word_scores(self.step, ctx, word, log10=True, checked=False).to(
            torch.float64)
        unk = torch.where(listed, torch.zeros_like(log10),
                          torch.full_like(log10, f.unk_score_offset))
        score = f.alpha * LN10 * (log10 + unk) + f.beta
        if f.unk_score_offset == -math.inf:  # forbidden, whatever alpha (0 * -inf: NaN)
            score = torch.where(listed, score, torch.full_like(score, -math.inf))
        after = torch.cat([ctx[:, 1:], word[:, None]], dim=1) if self.k else ctx
        return score + bonus, after

    def end_scores(self, close: torch.Tensor, close_ctx: torch.Tensor) -> torch.Tensor:
        """What finishing a beam adds: its partial word's closing score, then ``</s>``
        after it (flat tensors)."""
        if self.step is None or not self.fusion.score_boundary:
            return close
        eos = torch.full(close.shape, EOS_ID, dtype=torch.int64, device=self.device)
        log10 = word_scores(self.step, close_ctx, eos, log10=True, checked=False).to(
            torch.float64)
        return close + self.fusion.alpha * LN10 * log10

    # -- one frame -------------------------------------------------------------------------
    def candidates(self, b: _Beams, lp: torch.Tensor, allowed: torch.Tensor
                   ) -> dict[str, torch.Tensor]:
        """Every live beam with every label ``allowed`` in its utterance, as flat tensors
        of what a new beam's key and rank need (``flat``: the beam's slot, n * K + i;
        ``ext``: the label extends it, where a blank or a repeat leaves it)."""
        N, K = b.score.shape
        t = self.table
        pn, x = allowed.nonzero(as_tuple=True)
        flat = (pn[:, None] * K + torch.arange(K, device=self.device)).reshape(-1)
        x = x.repeat_interleave(K)
        live = b.score.reshape(-1).index_select(0, flat) > -math.inf
        flat, x = flat[live], x[live]
        n = flat // K

        def at(field):
            return field.reshape(-1).index_select(0, flat)

        last, ph, pl = at(b.last), at(b.part_hash), at(b.part_len)
        ext = (x != t.blank) & (x != last)
        starts = t.starts[x] | at(b.brk)
        sep = t.separator[x]
        finishes = ext & (sep | starts) & (pl > 0)
        new_ph = torch.where(starts, t.piece[x], ph * t.pow[x] + t.piece[x])
        new_pl = torch.where(starts, t.piece_len[x], pl + t.piece_len[x])
        keep = ~ext | sep
        close = at(b.close)
        return {
            "flat": flat, "n": n, "x": x, "ext": ext, "finishes": finishes,
            "score": at(b.score) + lp.reshape(-1).index_select(0, n * lp.shape[1] + x),
            "last": torch.where(x == t.blank, torch.full_like(x, BLANK_LAST), x),
            "text": finished_text(at(b.text), ph, torch.where(finishes, pl, 0 * pl)),
            "lm": at(b.lm) + torch.where(finishes, close, torch.zeros_like(close)),
            "part_hash": torch.where(keep, torch.where(ext, 0 * ph, ph), new_ph),
            "part_len": torch.where(keep, torch.where(ext, 0 * pl, pl), new_pl)}

    def frame(self, b: _Beams, lp: torch.Tensor, active: torch.Tensor | None, beam_width: int,
              beam_prune_logp: float, token_min_logp: float, prune_history: bool = False,
              log_add: bool = True) -> tuple[_Beams, torch.Tensor, torch.Tensor]:
        """The beams after one frame of log-probabilities ``lp`` [N, L] (utterances not
        ``active`` unchanged; None: all active), with each new slot's source slot and what
        it read (a label, BLANK_LAST, REPEAT). ``prune_history``: of beams that agree on
        their last n - 1 words, partial word and last label, the best only (pyctcdecode's,
        after the trim); ``log_add`` False: merged beams keep the larger score."""
        N, K = b.score.shape
        allowed = lp >= token_min_logp  # the labels read: these and the frame's best
        allowed[torch.arange(N, device=self.device), lp.argmax(1)] = True
        if active is not None:
            allowed &= active[:, None]
        c = self.candidates(b, lp, allowed)
        heads, sums = grouped(c["n"], key_of(c["text"], c["part_hash"], c["last"]),
                              c["score"], c["flat"], log_add)  # made in slot order
        h = {name: value.index_select(0, heads) for name, value in c.items()}
        part_score = torch.where(h["ext"], self.partial_scores(h["part_hash"], h["part_len"]),
                                 b.part_score.reshape(-1)[h["flat"]])
        pick, place = best_per_row(h["n"], sums + h["lm"] + part_score, N, beam_width,
                                   beam_prune_logp)
        g = {name: value.index_select(0, pick) for name, value in h.items()}
        g["score"], g["part_score"] = sums.index_select(0, pick), part_score.index_select(0, pick)
        m = b.recent.shape[2]
        recent = b.recent.reshape(N * K, m).index_select(0, g["flat"])
        finished = b.part_hash.reshape(-1).index_select(0, g["flat"])
        g["recent"] = torch.where(g["finishes"][:, None],
                                  torch.cat([recent[:, 1:], finished[:, None]], 1), recent)
        if prune_history:
            key = torch.zeros_like(finished)
            for j in range(m):
                key = key * _KEY_MUL[0] + g["recent"][:, j]
            kept = first_of_each(g["n"], key_of(key, g["part_hash"], g["last"]), place, K)
            g = {name: value[kept] for name, value in g.items()}
            place = renumbered(g["n"], place[kept], N, K)
        return self._placed(b, g, place, active)

    def _placed(self, b: _Beams, g: dict[str, torch.Tensor], place: torch.Tensor,
                active: torch.Tensor | None) -> tuple[_Beams, torch.Tensor, torch.Tensor]:
        """The new beams from the picked candidates ``g`` (each at ``place`` in its
        utterance's row), their LM fields completed (a new partial word's closing score:
        one query for all), utterances past their end left as they were."""
        N, K = b.score.shape
        flat, ext, finishes = g.pop("flat"), g.pop("ext"), g.pop("finishes")
        x, rows = g.pop("x"), g.pop("n")
        old = b.at(flat, ("ctx", "close_ctx", "close", "brk"))
        g["ctx"] = torch.where(finishes[:, None], old["close_ctx"], old["ctx"])
        g["close"] = torch.where(ext, torch.zeros_like(old["close"]), old["close"])
        g["close_ctx"] = torch.where(ext[:, None], g["ctx"], old["close_ctx"])
        g["brk"] = torch.where(ext, self.table.ends[x], old["brk"])
        fresh = ext & (g["part_len"] > 0)
        if self.step is not None or self.hot is not None:
            score, after = self.closing(g["ctx"][fresh], g["part_hash"][fresh])
            g["close"][fresh], g["close_ctx"][fresh] = score, after
        new = self.start(N, K)
        new.score[:, 0] = -math.inf
        for name, value in g.items():
            getattr(new, name)[rows, place] = value
        src = torch.arange(K, device=self.device).expand(N, K).clone()
        label = torch.full((N, K), -1, dtype=torch.int64, device=self.device)
        src[rows, place] = flat - rows * K
        label[rows, place] = torch.where(ext, x, torch.where(  # what each slot read:
            x == self.table.blank, torch.full_like(x, BLANK_LAST), torch.full_like(x, REPEAT)))
        if active is None:  # every utterance still has frames
            return new, src, label
        keep = active[:, None]  # utterances past their end: as they were
        for f in fields(_Beams):
            x, y = getattr(new, f.name), getattr(b, f.name)
            setattr(new, f.name, torch.where(keep.view(N, 1, *([1] * (x.dim() - 2))), x, y))
        return new, torch.where(keep, src, torch.arange(K, device=self.device)), \
            torch.where(keep, label, -1)

    # -- a batch -----------------------------------------------------------------------------
    def check_sizes(self, N: int, T: int, L: int, K: int) -> None:
        """Refuse, before the first frame, a batch the device cannot hold."""
        check_device_memory(N * K * (L * _BYTES_PER_CANDIDATE + T * _BYTES_PER_STEP),
                            f"CTC search of {N:,} utterances x {T:,} frames at beam {K:,}",
                            "decode fewer utterances at a time", self.device)

    @torch.no_grad()
    def run(self, lp: torch.Tensor, lengths: torch.Tensor, settings: Settings,
            hot=None, best_only: bool = False) -> list[list[BatchBeam]]:
        """Every utterance's beams, best first: ``lp`` [N, T, L] log-probabilities,
        ``lengths`` [N] frames of each, ``hot`` the hotwords (a
        :class:`~.word_table.HotwordTable`, or None)."""
        run = self.begin(lp.shape[0], settings, hot)
        run.feed(lp, lengths)
        return run.finish(best_only)

    def begin(self, N: int, settings: Settings, hot=None) -> Run:
        """A search of ``N`` utterances fed a chunk of frames at a time (:class:`Run`)."""
        search = copy.copy(self)  # the run's hotwords on a copy: runs may share a decoder
        search.hot = hot
        return Run(search, N, settings)

    def finish(self, b: _Beams, history: list[torch.Tensor], beam_width: int,
               beam_prune_logp: float, best_only: bool = False, log_add: bool = True
               ) -> list[list[BatchBeam]]:
        """pyctcdecode's end: partial words finished, beams with the same words merged,
        ``</s>`` scored, pruned and trimmed; their labels read back frame by frame
        (``best_only``: each utterance's best beam, its text, no word frames)."""
        N, K = b.score.shape
        flat = (b.score.reshape(-1) > -math.inf).nonzero(as_tuple=True)[0]
        s = b.at(flat)
        n = flat // K
        text = finished_text(s["text"], s["part_hash"], s["part_len"])
        heads, logit = grouped(n, text, s["score"], flat, log_add)  # the beams' last
        rank = logit + s["lm"][heads] + self.end_scores(s["close"][heads],
                                                        s["close_ctx"][heads])
        pick, place = best_per_row(n[heads], rank, N, beam_width, beam_prune_logp)
        rows = n[heads][pick].cpu().numpy()
        slots = (flat[heads][pick] - n[heads][pick] * K).cpu().numpy()
        logit, rank = logit[pick].cpu().numpy(), rank[pick].cpu().numpy()
        steps = torch.stack(history).cpu().numpy() if history else \
            np.zeros((0, 2, N, K), np.int32)
        labels = np.full((len(steps), len(rows)), -1, np.int64)
        at = slots
        for t in range(len(steps) - 1, -1, -1):
            labels[t] = steps[t, 1][rows, at]
            at = steps[t, 0][rows, at]
        out: list[list[BatchBeam]] = [[] for _ in range(N)]
        places = place.cpu().numpy()
        for j in np.argsort(places, kind="stable"):
            if best_only and places[j] > 0:
                break
            events = labels[:, j]
            text = self.table.text(events[events >= 0].tolist())
            frames = [] if best_only else self.table.word_frames(events.tolist())
            out[rows[j]].append(BatchBeam(text, list(zip(text.split(), frames)),
                                          float(logit[j]), float(rank[j])))
        return out


class Run:
    """One batch's search, fed chunk by chunk: the beams and the back-pointers so far.
    :meth:`feed` advances each utterance by its chunk's frames (a chunk may be empty for
    some); :meth:`finish` gives the beams as if the utterances ended here, and leaves the
    run as it was, so more chunks may follow. Chunked, a batch decodes as it does whole."""

    def __init__(self, search: BatchedSearch, N: int, settings: Settings):
        self.search, self.settings = search, settings
        self.beams = search.start(N, settings.beam_width)
        self.history: list[torch.Tensor] = []
        self.frames = 0  # of the longest utterance so far

    @torch.no_grad()
    def feed(self, lp: torch.Tensor, lengths: torch.Tensor) -> None:
        """The next chunk: ``lp`` [N, T, L] log-probabilities, ``lengths`` [N] frames of
        each utterance in it."""
        s, (N, T, L) = self.settings, lp.shape
        if N != self.beams.score.shape[0]:
            raise ValueError(f"a chunk of {N} utterances for a stream of "
                             f"{self.beams.score.shape[0]}")
        self.frames += T
        self.search.check_sizes(N, self.frames, L, s.beam_width)
        shortest = int(lengths.min()) if N else 0
        for t in range(T):
            active = None if t < shortest else lengths > t  # None: all
            self.beams, src, label = self.search.frame(
                self.beams, lp[:, t], active, s.beam_width, s.beam_prune_logp,
                s.token_min_logp, s.prune_history, s.log_add)
            self.history.append(torch.stack([src, label]).to(torch.int32))

    @torch.no_grad()
    def finish(self, best_only: bool = False) -> list[list[BatchBeam]]:
        """Every utterance's beams if it ended here, best first (``best_only``: the best,
        without word frames)."""
        s = self.settings
        return self.search.finish(self.beams, self.history, s.beam_width, s.beam_prune_logp,
                                  best_only, s.log_add)

"""CTC prefix beam search over a batch of utterances at once, on tensors (CPU or CUDA),
over character or subword labels, with words fused as pyctcdecode fuses them.

A beam is a label prefix with CTC's two sums over its alignments (Hannun et al. 2014):
``pb``, those ending in a blank, and ``pnb``, those ending in its last label. At each
frame a beam *stays* (a blank: pb' = pb + pnb + p(blank); its last label repeated:
pnb' = pnb + p(last)) or *extends* by a label c (pnb'(prefix c) = (pb if c repeats the
last label, else pb + pnb) + p(c)); an extension that lands on a prefix already in the
beam (its parent extended by its last label) is added into it. Prefixes are 64-bit
rolling hashes of their labels; a beam keeps its parent's, so the merge is one sort
and one search a frame. A separator read again with no word being spelled leaves the
text as it is, so it is added into its beam, as pyctcdecode keys beams by text.

Words form as in pyctcdecode (:mod:`.prefix_search`): a separator (``" "``; a label
starting with ``▁``) finishes the word being spelled, any other label extends it. A
beam ranks by

    log(pb + pnb) + its finished words' fused scores + the partial word's score

with the scores of :mod:`.fusion` (``alpha``, ``beta``, ``unk_score_offset``, the
partial word's offset scaled past 6 characters, and with a lexicon, ``unk_score_offset``
-inf, the best LM score of the listed words it starts). The fused score of finishing a
beam's partial word, and the LM context after it, are computed once, when the partial
word changes (one batched point query of the LM for all new beams of a frame:
:func:`~nnlm.decoding.dense.word_scores`), so a separator costs no LM call. Beams more
than ``beam_prune_logp`` below their utterance's best are dropped and the
``beam_width`` best kept; labels below ``token_min_logp`` (other than the frame's best)
are not tried. At the end the partial word is finished and ``</s>`` scored.

What differs from pyctcdecode's search (and the compiled one, which follows it to the
bit): a beam is a label prefix with its two sums, where pyctcdecode keys beams by text,
partial word and last label and merges them in its own order, so scores differ in the
last bits and a tie can break the other way; no hotwords, ``prune_history`` or word
frames. With beams wide enough to hold every prefix, the result is exact: the test
compares it with the sum over every alignment.

Each frame is a fixed number of tensor operations over the batch's candidates, none per
beam: the batch decodes where its logits lie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple

import numpy as np
import torch

from ...base.sysmem import check_allocation
from ...text.specials import BOS_ID, EOS_ID, NO_WORD, UNK_ID
from ..dense import word_scores

LN10 = math.log(10.0)
MIN_TOKEN_CLIP_P = 1e-15  # probabilities are clipped here before their log (pyctcdecode's)
AVG_TOKEN_LEN = 6  # a partial word's unknown offset scales past this many characters
_HASH_MUL = 0x100000001B3  # prefixes of labels as a rolling hash (wrapping int64)
_NONE = 2**63 - 1  # an empty slot's hash in the parent search (sorted last; 1 in 2^64 real)
# bytes a search holds per (utterance, beam, label) at a frame, and per (beam, frame) for
# the back-pointers: what check_allocation is asked for before the first frame
_BYTES_PER_CANDIDATE = 160
_BYTES_PER_STEP = 16
BOUND_CANDIDATES = True  # skip extensions the stays already keep out (exact; tests turn it off)


class BatchBeam(NamedTuple):
    """One decoded hypothesis: its text, CTC's log-probability of its labels
    (``logit_score``) and the score it ranks by, the LM's included (``lm_score``, as
    pyctcdecode names it)."""

    text: str
    logit_score: float
    lm_score: float


@dataclass
class Fusion:
    """The LM's weights in the fused score (:mod:`.fusion`)."""

    alpha: float
    beta: float
    unk_score_offset: float
    score_boundary: bool


@dataclass
class _Beams:
    """[N, K] per field (``ctx``, ``close_ctx``: [N, K, k]); an empty slot has pb = pnb
    = -inf."""

    pb: torch.Tensor
    pnb: torch.Tensor
    hash: torch.Tensor  # the label prefix
    parent: torch.Tensor  # the prefix without its last label
    last: torch.Tensor  # the last label (-1: none)
    lm: torch.Tensor  # fused scores of the finished words
    part_hash: torch.Tensor  # the partial word (0: none) and its characters
    part_len: torch.Tensor
    part_score: torch.Tensor  # its score
    close: torch.Tensor  # the fused score of finishing it now (0: none)
    ctx: torch.Tensor  # the LM context after the finished words
    close_ctx: torch.Tensor  # ... and after the partial word too
    brk: torch.Tensor  # the next label starts a word (after a label ending in ▁)

    @classmethod
    def start(cls, N: int, K: int, k: int, boundary: bool, dev) -> _Beams:
        f64 = {"dtype": torch.float64, "device": dev}
        i64 = {"dtype": torch.int64, "device": dev}
        pb = torch.full((N, K), -math.inf, **f64)
        pb[:, 0] = 0.0
        zeros = torch.zeros((N, K), **i64)
        ctx = torch.full((N, K, k), BOS_ID if boundary else NO_WORD, **i64)
        return cls(pb, torch.full((N, K), -math.inf, **f64), zeros + 1, zeros, zeros - 1,
                   torch.zeros((N, K), **f64), zeros.clone(), zeros.clone(),
                   torch.zeros((N, K), **f64), torch.zeros((N, K), **f64), ctx, ctx.clone(),
                   torch.zeros((N, K), dtype=torch.bool, device=dev))

    def total(self) -> torch.Tensor:
        return torch.logaddexp(self.pb, self.pnb)

    def rank(self) -> torch.Tensor:
        return self.total() + self.lm + self.part_score

    def take(self, n: torch.Tensor, i: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every field at (n, i) (flat index tensors)."""
        return {f.name: getattr(self, f.name)[n, i] for f in fields(self)}


class BatchedSearch:
    """The search of the module docstring for one alphabet and LM: ``table`` a
    :class:`~.word_table.WordTable`, ``step`` a tensor LM (:func:`~nnlm.decoding.dense.
    tensor_lm`; None: no LM) on the same device."""

    def __init__(self, table, step, fusion: Fusion):
        self.table, self.step, self.fusion = table, step, fusion
        self.k = step.k if step is not None else 0
        self.device = table.device

    # -- the fused scores ------------------------------------------------------------------
    def partial_scores(self, hashes: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """pyctcdecode's score of a word being spelled (module docstring); 0 without LM."""
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
        after it (an unknown word is ``<unk>`` to the LM, plus ``unk_score_offset``)."""
        f = self.fusion
        ids, listed = self.table.word_ids(hashes)
        word = torch.where(ids >= 0, ids, torch.full_like(ids, UNK_ID))
        log10 = word_scores(self.step, ctx, word, log10=True).to(torch.float64)
        unk = torch.where(listed, torch.zeros_like(log10),
                          torch.full_like(log10, f.unk_score_offset))
        score = f.alpha * LN10 * (log10 + unk) + f.beta
        if f.unk_score_offset == -math.inf:  # forbidden, whatever alpha (0 * -inf: NaN)
            score = torch.where(listed, score, torch.full_like(score, -math.inf))
        after = torch.cat([ctx[:, 1:], word[:, None]], dim=1) if self.k else ctx
        return score, after

    def end_scores(self, b: _Beams) -> torch.Tensor:
        """[N, K]: what finishing each beam adds: its partial word, then ``</s>``."""
        if self.step is None:
            return torch.zeros_like(b.pb)
        out = b.close.clone()
        if self.fusion.score_boundary:
            N, K = b.pb.shape
            eos = torch.full((N * K,), EOS_ID, dtype=torch.int64, device=self.device)
            log10 = word_scores(self.step, b.close_ctx.reshape(N * K, self.k), eos, log10=True)
            out += self.fusion.alpha * LN10 * log10.to(torch.float64).reshape(N, K)
        return out

    # -- one frame -------------------------------------------------------------------------
    def idle_repeat(self, last: torch.Tensor, part_len: torch.Tensor) -> torch.Tensor:
        """Where the last label read again after a blank leaves the text as it is: a
        separator (or a bare ``▁``) with no word being spelled. pyctcdecode keys a beam
        by its text, partial word and last label, so that beam is the same one: the
        extension is added into it, not kept as a prefix of its own."""
        t = self.table
        c = last.clamp_min(0)
        textless = t.separator[c] | (t.starts[c] & (t.piece_len[c] == 0))
        return (last >= 0) & textless & (part_len == 0)

    def stays(self, b: _Beams, lp: torch.Tensor, allowed: torch.Tensor, active: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """pb', pnb' of every beam staying, extensions merged in, and [N, K, L] where an
        extension (beam, label) was merged (no longer a candidate of its own)."""
        N, K = b.pb.shape
        valid = b.pb > -math.inf
        valid |= b.pnb > -math.inf
        total = b.total()
        last = b.last.clamp_min(0)
        none = torch.full_like(b.pnb, -math.inf)
        blank = self.table.blank
        pb = torch.where(allowed[:, blank, None], total + lp[:, blank, None], none)
        tried = allowed.gather(1, last)  # pyctcdecode tries only these labels
        p_last = lp.gather(1, last)
        pnb = torch.where((b.last >= 0) & tried, b.pnb + p_last, none)
        # each beam's parent among the beams: one sort of the hashes, one search a row
        hashes, slots = torch.sort(torch.where(valid, b.hash, torch.full_like(b.hash, _NONE)))
        at = torch.searchsorted(hashes, b.parent.contiguous()).clamp_max(K - 1)
        has = (hashes.gather(1, at) == b.parent) & valid & (b.last >= 0) & tried
        src = slots.gather(1, at)  # the parent's slot, where it is in the beam
        from_pb = b.last.gather(1, src) == b.last
        base = torch.where(from_pb, b.pb.gather(1, src), total.gather(1, src))
        pnb = torch.where(has, torch.logaddexp(pnb, base + p_last), pnb)
        again = self.idle_repeat(b.last, b.part_len) & tried  # the text unchanged
        pnb = torch.where(again, torch.logaddexp(pnb, b.pb + p_last), pnb)
        merged = torch.zeros((N, K, lp.shape[1]), dtype=torch.bool, device=self.device)
        rows = torch.arange(N, device=self.device)[:, None].expand(N, K)
        merged[rows[has], src[has], last[has]] = True
        merged[rows[again], torch.arange(K, device=self.device).expand(N, K)[again],
               last[again]] = True
        keep = active[:, None]
        return torch.where(keep, pb, b.pb), torch.where(keep, pnb, b.pnb), merged

    def extend(self, b: _Beams, lp: torch.Tensor, n: torch.Tensor, i: torch.Tensor,
               c: torch.Tensor) -> dict[str, torch.Tensor]:
        """Beam (n, i) extended by label c (flat tensors): the new pnb, words' scores,
        partial word and its score; ``finishes``: whether c finished a word."""
        t = self.table
        flat = n * b.pb.shape[1] + i

        def at(x):  # one flat gather: faster than indexing by (n, i) on the CPU
            return x.reshape(-1).index_select(0, flat)

        last, pb, pnb, old_len = at(b.last), at(b.pb), at(b.pnb), at(b.part_len)
        base = torch.where(c == last, pb, torch.logaddexp(pb, pnb))
        starts = t.starts[c] | at(b.brk)
        finishes = (t.separator[c] | starts) & (old_len > 0)
        part_hash = torch.where(starts, t.piece[c], at(b.part_hash) * t.pow[c] + t.piece[c])
        part_len = torch.where(starts, t.piece_len[c], old_len + t.piece_len[c])
        sep = t.separator[c]
        part_hash = torch.where(sep, torch.zeros_like(part_hash), part_hash)
        part_len = torch.where(sep, torch.zeros_like(part_len), part_len)
        close = at(b.close)
        lm = at(b.lm) + torch.where(finishes, close, torch.zeros_like(close))
        p = lp.reshape(-1).index_select(0, n * lp.shape[1] + c)
        return {"pnb": base + p, "lm": lm, "part_hash": part_hash,
                "part_len": part_len, "part_score": self.partial_scores(part_hash, part_len),
                "finishes": finishes}

    def candidates(self, b: _Beams, lp: torch.Tensor, allowed: torch.Tensor,
                   merged: torch.Tensor, floor: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(n, i, c) of every extension tried: a live beam, a label worth reading, not
        merged into a beam already there, and not certain to rank below ``floor`` [N]
        (what the stays alone already keep out): its rank is at most log(pb + pnb) + p(c)
        + the words' scores + a finished word's closing score if positive, where a partial
        word's score is never positive (``unk_score_offset`` <= 0, ``alpha`` >= 0)."""
        N, K = b.pb.shape
        f = self.fusion
        if BOUND_CANDIDATES and f.unk_score_offset <= 0 and f.alpha >= 0:
            bound = b.total() + b.lm + b.close.clamp_min(0)
            worth = (bound[:, :, None] + lp[:, None, :]) >= floor[:, None, None]
            n, i, c = (worth & allowed[:, None, :]).nonzero(as_tuple=True)
        else:
            pn, pc = allowed.nonzero(as_tuple=True)
            n = pn.repeat_interleave(K)
            i = torch.arange(K, device=self.device).repeat(len(pn))
            c = pc.repeat_interleave(K)
        flat = n * K + i
        live = (b.pb.reshape(-1)[flat] > -math.inf) | (b.pnb.reshape(-1)[flat] > -math.inf)
        live &= ~merged.reshape(-1)[flat * merged.shape[2] + c]
        return n[live], i[live], c[live]

    def frame(self, b: _Beams, lp: torch.Tensor, active: torch.Tensor, beam_width: int,
              beam_prune_logp: float, token_min_logp: float
              ) -> tuple[_Beams, torch.Tensor, torch.Tensor]:
        """The beams after one frame of log-probabilities ``lp`` [N, L] (utterances not
        ``active`` unchanged), with each new slot's source slot and label (-1: stayed).
        Candidates rank in one [N, K * L + K] matrix: extension (i, c) at i * L + c, the
        stays after; one ``topk`` a frame picks every utterance's beam."""
        N, K = b.pb.shape
        L = lp.shape[1]
        allowed = (lp >= token_min_logp)  # the labels tried: these and the frame's best
        allowed[torch.arange(N, device=self.device), lp.argmax(1)] = True
        allowed &= active[:, None]
        pb, pnb, merged = self.stays(b, lp, allowed, active)
        allowed[:, self.table.blank] = False  # a blank never extends
        stay_rank = torch.logaddexp(pb, pnb) + b.lm + b.part_score
        kth = stay_rank.min(1).values if K <= beam_width else \
            torch.topk(stay_rank, beam_width, dim=1).values[:, -1]
        floor = torch.maximum(kth, stay_rank.max(1).values + beam_prune_logp)
        n, i, c = self.candidates(b, lp, allowed, merged, floor)
        ext = self.extend(b, lp, n, i, c)
        ranks = torch.full((N, K * L + K), -math.inf, dtype=torch.float64, device=self.device)
        ranks[n, i * L + c] = ext["pnb"] + ext["lm"] + ext["part_score"]
        ranks[:, K * L:] = stay_rank
        width = min(beam_width, ranks.shape[1])
        best, cols = torch.topk(ranks, width, dim=1)
        keep = best > -math.inf
        keep &= (best >= best[:, :1] + beam_prune_logp) | ~active[:, None]
        is_ext = cols < K * L
        src = torch.where(is_ext, cols // L, cols - K * L)
        label = torch.where(is_ext & keep, cols % L, torch.full_like(cols, -1))
        if width < K:  # fewer candidates than slots: the rest empty
            pad = torch.zeros((N, K - width), dtype=cols.dtype, device=self.device)
            src, label = torch.cat([src, pad], 1), torch.cat([label, pad - 1], 1)
            keep = torch.cat([keep, pad.bool()], 1)
        return self._gather(b, lp, pb, pnb, src, label, keep), src, label

    def _gather(self, b: _Beams, lp, pb, pnb, src, label, keep) -> _Beams:
        """The new beams: slot j from beam ``src[j]``, extended by ``label[j]`` (-1:
        stayed), empty where not ``keep``; a new partial word gets its closing score."""
        N, K = src.shape
        stay = label < 0
        n = torch.arange(N, device=self.device)[:, None].expand(N, K)
        old = b.take(n, src)
        ext = self.extend(b, lp, n.reshape(-1), src.reshape(-1), label.clamp_min(0).reshape(-1))
        ext = {name: value.reshape(N, K) for name, value in ext.items()}
        none = torch.full_like(old["pb"], -math.inf)
        new = dict(old)
        new["pb"] = torch.where(stay & keep, pb[n, src], none)
        new["pnb"] = torch.where(keep, torch.where(stay, pnb[n, src], ext["pnb"]), none)
        for name in ("lm", "part_hash", "part_len", "part_score"):
            new[name] = torch.where(stay, old[name], ext[name])
        new["hash"] = torch.where(stay, old["hash"], old["hash"] * _HASH_MUL + label + 1)
        new["parent"] = torch.where(stay, old["parent"], old["hash"])
        new["last"] = torch.where(stay, old["last"], label)
        new["brk"] = torch.where(stay, old["brk"], self.table.ends[label.clamp_min(0)])
        if self.step is not None:
            ctx = torch.where(ext["finishes"][..., None], old["close_ctx"], old["ctx"])
            new["ctx"] = torch.where(stay[..., None], old["ctx"], ctx)
            new["close"] = torch.where(stay, old["close"], torch.zeros_like(old["close"]))
            new["close_ctx"] = torch.where(stay[..., None], old["close_ctx"], new["ctx"])
            fresh = ~stay & keep & (new["part_len"] > 0)  # a new partial word: its closing
            if bool(fresh.any()):
                score, after = self.closing(new["ctx"][fresh], new["part_hash"][fresh])
                new["close"][fresh] = score
                new["close_ctx"][fresh] = after
        return _Beams(**new)

    # -- a batch -----------------------------------------------------------------------------
    def check_sizes(self, N: int, T: int, L: int, K: int) -> None:
        """Refuse, before the first frame, a batch the device cannot hold."""
        need = N * K * (L * _BYTES_PER_CANDIDATE + T * _BYTES_PER_STEP)
        what = f"CTC search of {N:,} utterances x {T:,} frames at beam {K:,}"
        if self.device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(self.device)
            if need > free:
                raise ValueError(f"{what} needs {need / 2**30:.1f} GiB on {self.device}, "
                                 f"which has {free / 2**30:.1f} GiB free; decode fewer "
                                 "utterances at a time")
            return
        check_allocation(need, what, "decode fewer utterances at a time")

    @torch.no_grad()
    def run(self, lp: torch.Tensor, lengths: torch.Tensor, beam_width: int,
            beam_prune_logp: float, token_min_logp: float) -> list[list[BatchBeam]]:
        """Every utterance's beams, best first: ``lp`` [N, T, L] log-probabilities,
        ``lengths`` [N] frames of each."""
        N, T, L = lp.shape
        self.check_sizes(N, T, L, beam_width)
        b = _Beams.start(N, beam_width, self.k, self.fusion.score_boundary, self.device)
        if self.step is not None:  # the empty partial word's closing: none, the same context
            b.close_ctx = b.ctx.clone()
        history = []
        for t in range(T):
            active = lengths > t
            b, src, label = self.frame(b, lp[:, t], active, beam_width, beam_prune_logp,
                                       token_min_logp)
            history.append(torch.stack([src, label]).to(torch.int32))
        final = b.total() + b.lm + self.end_scores(b)
        return self._beams(b, final, history)

    def _beams(self, b: _Beams, final: torch.Tensor, history: list[torch.Tensor]
               ) -> list[list[BatchBeam]]:
        """Each utterance's beams by final score, their labels read back frame by frame."""
        N, K = final.shape
        order = torch.argsort(final, dim=1, descending=True, stable=True)
        steps = torch.stack(history).cpu().numpy() if history else \
            np.zeros((0, 2, N, K), np.int32)
        rows = np.arange(N)[:, None]
        at = order.cpu().numpy()
        labels = np.full((len(steps), N, K), -1, np.int64)
        for t in range(len(steps) - 1, -1, -1):
            labels[t] = steps[t, 1][rows, at]
            at = steps[t, 0][rows, at]
        final_sorted = final.gather(1, order).cpu().numpy()
        logit = b.total().gather(1, order).cpu().numpy()
        out = []
        for n in range(N):
            beams = []
            for j in range(K):
                if final_sorted[n, j] == -math.inf and j > 0:
                    break
                seq = labels[:, n, j]
                beams.append(BatchBeam(self.table.text(seq[seq >= 0].tolist()),
                                       float(logit[n, j]), float(final_sorted[n, j])))
            out.append(beams)
        return out

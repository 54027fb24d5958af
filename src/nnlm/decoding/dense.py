"""The whole vocabulary in one step, as tensors: a batch of decoder states in, the score of
every next word out, on the CPU or a GPU.

NGPU-LM (Bataev et al., Interspeech 2025) turns a back-off model into tensors and
advances a batch of hypotheses over the whole vocabulary at once,
``advance(states[B]) -> scores[B, V]``, which is what a GPU beam search (or greedy
decoding with shallow fusion) over a subword vocabulary needs: the acoustic model's
outputs and the LM's scores are then two [B, V] tensors to add.

A state here is a context: the last k = n - 1 word ids (``NO_WORD`` where there is
none; ``<s>``-padded at a sentence's start), a ``LongTensor [B, k]``. The state after
word w is the context shifted by one with w appended (:func:`next_contexts`): a decoder
computes it only for the (row, word) pairs it keeps.

For a back-off model (Katz 1987; Kneser-Ney as stored by :mod:`nnlm.ngram.backoff`), with
c_j the last j words of the context and bow(c_j) = 1 where c_j is not stored:

    log p(w | c_k) = log P(c_j w) + sum_{i = j+1..k} log bow(c_i)

for the longest j whose n-gram (c_j w) is stored (j = 0: the unigram). One pass over the
context lengths j = 1..k computes every row at once: start from the unigrams plus every
back-off weight of the context, and at each j overwrite the entries of c_j's stored
children with log P(c_j w) plus the back-off weights of the longer contexts (their
suffix sums, computed first, so the whole row is touched once). The children of a
context are one contiguous run of each order's entries grouped by context, so each pass
is a gather and a scatter over the batch's runs, and the context ids are
``searchsorted`` over each order's sorted keys (``id(g2..gk) * |V| + g1``): no Python
per state, the same code on the CPU and CUDA.

A network gives its rows in one forward pass (:class:`TensorNetwork`), on the device
where it runs; a mixture mixes its components' rows (:class:`TensorMixture`).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ..base.errors import NnlmError, a
from ..base.sysmem import check_allocation
from ..text.specials import NO_WORD

LOG10_E = 1.0 / math.log(10.0)


def check_device_memory(need: int, what: str, advice: str, device: torch.device) -> None:
    """Refuse, before allocating, ``need`` bytes that ``device`` cannot hold (a GPU's free
    memory, or :func:`check_allocation` on the CPU): one line naming ``what``."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        if need > free:
            raise NnlmError(f"{what} needs {need / 2**30:.1f} GiB on {device}, which has "
                            f"{free / 2**30:.1f} GiB free; {advice}")
        return
    check_allocation(need, what, advice)


def check_batch(B: int, V: int, dtype: torch.dtype, device: torch.device,
                copies: int = 3) -> None:
    """Refuse, before allocating, a batch whose [B, |V|] rows (and ``copies`` of them in
    temporaries) the device cannot hold: one line naming the sizes."""
    need = B * V * torch.empty((), dtype=dtype).element_size() * copies
    check_device_memory(need, f"advance over {B:,} states x {V:,} words",
                        "advance fewer states at a time", device)


def sorted_lookup(keys: torch.Tensor, query: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Where each query is in the sorted ``keys``: whether it is there, and its index
    (meaningless where it is not; 0 for empty ``keys``). One ``searchsorted``."""
    if len(keys) == 0:
        return torch.zeros_like(query, dtype=torch.bool), torch.zeros_like(query)
    at = torch.searchsorted(keys, query).clamp_max(len(keys) - 1)
    return keys[at] == query, at


def _as_contexts(contexts, k: int, device: torch.device) -> torch.Tensor:
    """``contexts`` as an int64 tensor on ``device``, checked to be [B, k]."""
    contexts = torch.as_tensor(contexts, dtype=torch.int64, device=device)
    if contexts.ndim != 2 or contexts.shape[1] != k:
        raise NnlmError(f"advance: contexts of shape [B, {k}] (the last n-1 word ids), not "
                        f"{list(contexts.shape)}")
    return contexts


def next_contexts(contexts: torch.Tensor, rows: torch.Tensor,
                  words: torch.Tensor) -> torch.Tensor:
    """The contexts after ``words[i]`` follows ``contexts[rows[i]]``: [len(rows), k]."""
    picked = contexts[rows]
    if picked.shape[1] == 0:
        return picked
    return torch.cat([picked[:, 1:], words.to(picked.dtype)[:, None]], dim=1)


def _expand(start: torch.Tensor, end: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row, position) of every position in every row's [start, end): the runs laid end
    to end, vectorized (``repeat_interleave`` and one ``arange``)."""
    sizes = (end - start).clamp_min(0)
    rows = torch.repeat_interleave(torch.arange(len(sizes), device=sizes.device), sizes)
    if len(rows) == 0:
        return rows, rows
    firsts = torch.cumsum(sizes, 0) - sizes  # where each run begins in the output
    offset = torch.arange(len(rows), device=sizes.device) - firsts[rows]
    return rows, start[rows] + offset


class TensorBackoff:
    """A back-off n-gram model's arrays as tensors on ``device`` for
    :meth:`advance` (see the module docstring). ``dtype``: of the scores (float32 by
    default; float64 where a caller sums probabilities)."""

    def __init__(self, model, device: str | torch.device = "cpu",
                 dtype: torch.dtype = torch.float32):
        if not hasattr(model, "levels") or not hasattr(model, "unigram_log_bow"):
            raise NnlmError(f"{a(getattr(model, 'kind', 'unknown'))} model is not a back-off "
                            "n-gram model; use TensorNetwork for a network, or "
                            "nnlm.Decoder.advance for any model")
        self.device = torch.device(device)
        self.dtype = dtype
        self.order = model.order
        self.k = model.order - 1
        self.V = len(model.vocab)

        def put(x, dt=torch.int64):
            return torch.as_tensor(np.ascontiguousarray(x)).to(self.device, dt)

        self.unigram = put(model.unigram_logp, dtype)
        self.unigram_bow = put(model.unigram_log_bow, dtype)
        # per order k = 2..n: the entries grouped by context (children); below the top
        # order, the sorted keys (to find contexts) and the back-off weights (of contexts
        # one order up): the top order is never a context
        self.keys, self.bows, self.offsets, self.child_words, self.child_logp = [], [], [], [], []
        self._sort_maps = []  # where an order's keys are not sorted (a model from ARPA)
        for level in model.levels[:-1]:
            keys = np.asarray(level.keys, np.int64)
            unsorted = len(keys) > 1 and bool(np.any(keys[1:] <= keys[:-1]))
            order = np.argsort(keys, kind="stable") if unsorted else None
            self.keys.append(put(keys[order] if unsorted else keys))
            self._sort_maps.append(put(order) if unsorted else None)
            self.bows.append(put(level.log_bow, dtype))
        for level in model.levels:
            by = np.asarray(level.by_prefix, np.int64)
            self.offsets.append(put(level.prefix_offsets))
            self.child_words.append(put(np.asarray(level.last, np.int64)[by]))
            self.child_logp.append(put(np.asarray(level.logp)[by], dtype))

    def _find(self, i: int, queries: torch.Tensor) -> torch.Tensor:
        """The entry of each key in order i + 2 (-1 where absent or the query is -1)."""
        found, at = sorted_lookup(self.keys[i], queries)
        found &= queries >= 0
        if self._sort_maps[i] is not None:
            at = self._sort_maps[i][at]
        return torch.where(found, at, torch.full_like(at, -1))

    def context_ids(self, contexts: torch.Tensor) -> list[torch.Tensor]:
        """ids[j-1] = the id of c_j (the last j words) at order j, -1 where not stored."""
        if self.k == 0:
            return []
        ids = [contexts[:, -1].clone()]
        for j in range(2, self.k + 1):
            word = contexts[:, -j]
            prev = ids[-1]
            query = torch.where((prev >= 0) & (word >= 0), prev * self.V + word,
                                torch.full_like(prev, -1))
            ids.append(self._find(j - 2, query))
        return ids

    def _checked_contexts(self, contexts, what: str) -> torch.Tensor:
        contexts = _as_contexts(contexts, self.k, self.device)
        if len(contexts) and (int(contexts.max()) >= self.V or int(contexts.min()) < NO_WORD):
            raise NnlmError(f"{what}: a context word id is outside 0 .. {self.V - 1} (or "
                            f"{NO_WORD}: no word)")
        return contexts

    def _backoff_sums(self, ids: list[torch.Tensor], B: int) -> torch.Tensor:
        """after[j] = sum of log bow(c_i) for i = j+1..k (0 where c_i is not stored)."""
        zero = torch.zeros((), dtype=self.dtype, device=self.device)
        bows = torch.zeros((len(ids) + 1, B), dtype=self.dtype, device=self.device)
        for j, cid in enumerate(ids, start=1):
            table = self.unigram_bow if j == 1 else self.bows[j - 2]
            bows[j - 1] = torch.where(cid >= 0, table[cid.clamp_min(0)], zero)
        return torch.flip(torch.cumsum(torch.flip(bows, [0]), 0), [0])  # S_j, then 0

    @torch.no_grad()
    def advance(self, contexts: torch.Tensor, log10: bool = False) -> torch.Tensor:
        """[B, V]: log p(w | contexts[b]) for every word w (natural log, or log10), in
        one pass over the context lengths (module docstring)."""
        contexts = self._checked_contexts(contexts, "advance")
        B = len(contexts)
        check_batch(B, self.V, self.dtype, self.device)
        ids = self.context_ids(contexts)
        after = self._backoff_sums(ids, B)
        row = self.unigram[None, :] + after[0][:, None]
        for j, cid in enumerate(ids, start=1):
            present = cid >= 0
            safe = cid.clamp_min(0)
            offsets = self.offsets[j - 1]
            start = torch.where(present, offsets[safe], torch.zeros_like(safe))
            end = torch.where(present, offsets[safe + 1], torch.zeros_like(safe))
            r, pos = _expand(start, end)
            row[r, self.child_words[j - 1][pos]] = self.child_logp[j - 1][pos] + after[j][r]
        return row * LOG10_E if log10 else row

    def _child_keys(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per order j + 1 = 2..n: its n-grams' keys ``id(c_j) * |V| + w``, sorted, and
        their log P (made on first use: only :meth:`score` reads them)."""
        if getattr(self, "_children", None) is None:
            self._children = []
            for offsets, words, logp in zip(self.offsets, self.child_words, self.child_logp):
                sizes = offsets[1:] - offsets[:-1]
                prefix = torch.repeat_interleave(
                    torch.arange(len(sizes), device=self.device), sizes)
                keys, order = torch.sort(prefix * self.V + words)
                self._children.append((keys, logp[order]))
        return self._children

    @torch.no_grad()
    def score(self, contexts: torch.Tensor, words: torch.Tensor, log10: bool = False,
              checked: bool = True) -> torch.Tensor:
        """[B]: log p(words[b] | contexts[b]), the one entry of :meth:`advance`'s row a
        word-level decoder reads: the longest stored (c_j w) found by one
        ``searchsorted`` an order, plus the back-off weights of the longer contexts.
        ``checked=False``: ids a search made itself, not checked (each check waits for
        the device)."""
        words = torch.as_tensor(words, dtype=torch.int64, device=self.device)
        if checked:
            contexts = self._checked_contexts(contexts, "score")
            if words.shape != contexts.shape[:1]:
                raise NnlmError(f"score: one word per context ({len(contexts)}), not "
                                f"{list(words.shape)}")
            if len(words) and (int(words.min()) < 0 or int(words.max()) >= self.V):
                raise NnlmError(f"score: a word id is outside 0 .. {self.V - 1}")
        ids = self.context_ids(contexts)
        after = self._backoff_sums(ids, len(words))
        best = self.unigram[words] + after[0]
        for j, (cid, (keys, logp)) in enumerate(zip(ids, self._child_keys()), start=1):
            if len(keys) == 0:
                continue
            query = torch.where(cid >= 0, cid * self.V + words, torch.full_like(cid, -1))
            found, at = sorted_lookup(keys, query)
            found &= query >= 0
            best = torch.where(found, logp[at] + after[j], best)  # longer j: overwritten
        return best * LOG10_E if log10 else best


def word_scores(step, contexts: torch.Tensor, words: torch.Tensor,
                log10: bool = False, checked: bool = True) -> torch.Tensor:
    """[B]: log p(words[b] | contexts[b]) from any tensor LM: a back-off model's own
    point query, or the word's entry of a network's (or mixture's) whole row
    (``checked``: as :meth:`TensorBackoff.score`'s)."""
    if hasattr(step, "score"):
        return step.score(contexts, words, log10, checked)
    words = torch.as_tensor(words, dtype=torch.int64, device=step.device)
    return step.advance(contexts, log10).gather(1, words[:, None])[:, 0]


class TensorNetwork:
    """A network of the neural family behind the same :meth:`advance`: one forward pass
    for the batch, on the device it was placed on, its rows kept there."""

    def __init__(self, lm):
        if not hasattr(lm, "next_log_softmax"):
            raise NnlmError(f"{a(getattr(lm, 'kind', 'unknown'))} model is not a network; "
                            "use TensorBackoff for a back-off n-gram model")
        self.lm = lm
        self.order = lm.order
        self.k = lm.order - 1
        self.V = len(lm.vocab)
        self.device = next(lm.model.parameters()).device

    @torch.no_grad()
    def advance(self, contexts: torch.Tensor, log10: bool = False) -> torch.Tensor:
        contexts = _as_contexts(contexts, self.k, self.device)
        check_batch(len(contexts), self.V, torch.float32, self.device)
        out = self.lm.next_log_softmax(contexts)
        return out * LOG10_E if log10 else out


class TensorMixture:
    """A mixture (nnlm.mixture) behind the same :meth:`advance`: each component's rows,
    mixed in log space with the weights of each context's bucket (computed on the CPU from
    the context's last two words, as the mixture does)."""

    def __init__(self, mixture, device: str | torch.device | None = None):
        self.mixture = mixture
        self.parts = [tensor_lm(m, device) for m in mixture.components]
        self.device = torch.device(device or "cpu")
        self.order = mixture.order
        self.k = mixture.order - 1
        self.V = len(mixture.vocab)

    @torch.no_grad()
    def advance(self, contexts: torch.Tensor, log10: bool = False) -> torch.Tensor:
        contexts = _as_contexts(contexts, self.k, self.device)
        check_batch(len(contexts), self.V, torch.float32, self.device,
                    copies=2 * len(self.parts) + 1)
        rows = self.mixture._rows(contexts.cpu().numpy())
        with np.errstate(divide="ignore"):
            logw = torch.as_tensor(np.log(self.mixture.weights[rows]), dtype=torch.float32,
                                   device=self.device)  # (B, K)
        mixed = torch.logsumexp(torch.stack([
            part.advance(contexts[:, self.k - part.k:].to(part.device)).float().to(self.device)
            + logw[:, [i]] for i, part in enumerate(self.parts)]), dim=0)
        return mixed * LOG10_E if log10 else mixed


def tensor_lm(model, device: str | torch.device | None = None):
    """The tensor form of ``model`` for a batched whole-vocabulary step: a back-off
    model's arrays moved to ``device`` (default: the CPU), a network where it runs (moved
    to ``device`` if given), or a mixture of such components."""
    if hasattr(model, "next_log_softmax"):
        if device is not None:
            model.model.to(device)
        return TensorNetwork(model)
    if hasattr(model, "components"):
        return TensorMixture(model, device)
    return TensorBackoff(model, device or "cpu")

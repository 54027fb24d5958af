"""Encodings of a long history for the feed-forward networks: what lets a fixed-size input
see more than the last n - 1 words.

A context row holds the last K word ids, oldest first, ``<s>`` where the history reaches
before the start of the line (``Stream.contexts``). The ``<s>`` of the line itself is the
last ``<s>`` of a row; the ones before it are padding, and no encoding here counts them.

- :func:`fofe_codes`: the fixed-size ordinally-forgetting encoding of Zhang, Jiang, Xu,
  Hou & Dai (2015), *The Fixed-Size Ordinally-Forgetting Encoding Method for Neural
  Network Language Models*: z_t = alpha z_{t-1} + e(w_t), projected through C, so the code
  of a history is sum_j alpha^j C(w_{t-j}). The code ending at each of the last slots
  stands where the word itself stood (their higher-order FOFE).
- :func:`weighted_average`: a (learned) weighting of the embeddings of the words before
  the window, normalized over the words present: the distant-context average of Sun &
  Iyyer (2021), *Revisiting Simple Neural Probabilistic Language Models*.
"""

from __future__ import annotations

import torch

from ...text.vocab import BOS_ID


def present(contexts: torch.Tensor) -> torch.Tensor:
    """(B, K) bool: the slots that hold a word of the line (its ``<s>`` included), False
    for the padding before the line's ``<s>``."""
    bos = contexts == BOS_ID
    later_bos = bos.flip(1).cumsum(1).flip(1)  # <s> at or after each slot
    return ~(bos & (later_bos > 1))


def fofe_codes(E: torch.Tensor, keep: torch.Tensor, alpha: float, slots: int) -> torch.Tensor:
    """The FOFE codes of the history ending at each of the last ``slots`` positions, most
    recent first: (B, slots, m). ``E`` (B, K, m) the words' features, oldest first;
    ``keep`` (B, K) the slots that count. Code i (i = 0 the newest) is
    sum_{j >= 0} alpha^j E[K-1-i-j]: a (slots, K) matrix of powers of alpha times E."""
    K = E.shape[1]
    newest = torch.arange(K - 1, K - 1 - slots, -1, device=E.device)  # (slots,)
    lag = newest[:, None] - torch.arange(K, device=E.device)[None, :]  # (slots, K)
    powers = torch.where(lag >= 0, torch.tensor(alpha, dtype=E.dtype,
                                                 device=E.device) ** lag.clamp_min(0),
                         torch.zeros((), dtype=E.dtype, device=E.device))
    return torch.einsum("sk,bkm->bsm", powers, E * keep.unsqueeze(2).to(E.dtype))


def weighted_average(E: torch.Tensor, keep: torch.Tensor,
                     logits: torch.Tensor | None) -> torch.Tensor:
    """sum_k a_k E_k / sum_k a_k over the slots kept, a_k = exp(logits_k) (1 without
    logits: the plain mean); a row with no slot kept gives 0. (B, m)."""
    if logits is None:
        a = keep.to(E.dtype)
    else:
        a = torch.exp(logits - logits.detach().max()).unsqueeze(0) * keep.to(E.dtype)
    total = a.sum(1, keepdim=True)
    return torch.einsum("bk,bkm->bm", a / total.clamp_min(torch.finfo(E.dtype).tiny), E)


def decayed_sum(E: torch.Tensor, keep: torch.Tensor, alpha: float) -> torch.Tensor:
    """sum_j alpha^j E[K-1-j] over the slots kept (the FOFE code of ``E``'s slots, the
    newest weighted 1). (B, m)."""
    return fofe_codes(E, keep, alpha, 1)[:, 0]

"""The energy-minimization variant of the NPLM (Bengio et al. 2003, section "Alternative
variant"): the predicted word is read through its feature vector too.

With x = (C(w_t), C(w_{t-1}), ..., C(w_{t-n+1})) (the target first), the network gives an
energy, low for likely sequences::

    E(w_{t-n+1}, ..., w_t) = v . tanh(d + H x) + sum_{i=0}^{n-1} b_{w_{t-i}}
    P(w_t = j | context) = exp(-E(..., j)) / sum_i exp(-E(..., i))

``v_per_word`` indexes v by the target word (v_j: |V| x h), which gives the network as
many parameters as the ordinary model's U, as the paper suggests.

Scoring every candidate takes care. H x splits into the context's part, a = d + H_c x_c
(one (B, h) product), and the target's, H_t C(j); G = C H_t^T (|V| x h) is computed once a
step. What remains is tanh(a_b + G_j) for every row b and candidate j, a (B, |V|, h)
tensor that is never stored: :class:`EnergyLogits` walks the vocabulary in blocks and
recomputes each block's tanh in backward. The context's biases are the same for every
candidate, so they cancel in P; they are kept in the energy (and in the raw scores that
NCE and self-normalization train) as the paper writes it.

The output row of word j is C(j) itself (``output_matrix`` is C), which is what lets a
new word get a probability from its feature vector alone (``NeuralLM.add_words``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from .network import Network, NetworkConfig, check_outputs_and_dropout
from .output import gather_rows

BLOCK_ELEMENTS: int | None = None  # (row, candidate, unit) values per block; None: the
# device's own below (tests set a small one to walk several blocks)
CPU_BLOCK = 1 << 20  # 4 MB in float32: the fastest of 2^14 ... 2^22 measured, one
# thread, B = 256, |V| = 14,118, h = 50 (bench/neural/energy.py speed)
CUDA_BLOCK = 1 << 26  # 256 MB: a GPU wants few, large blocks (bench/neural/energy.py speed
# --device cuda)


def block_elements(device: torch.device) -> int:
    """Values of the (B, |V|, h) tensor formed at once on ``device``."""
    if BLOCK_ELEMENTS is not None:
        return BLOCK_ELEMENTS
    return CUDA_BLOCK if torch.device(device).type == "cuda" else CPU_BLOCK


@dataclass(frozen=True)
class EnergyConfig(NetworkConfig):
    """n, m, h (hidden units), v per word or shared, dropout on the context features."""

    network_name: ClassVar[str] = "energy"
    h: int = 50
    v_per_word: bool = False
    dropout_x: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.h < 1:
            raise ValueError("the energy network needs h >= 1")
        if self.output_size is not None:
            raise ValueError("the energy network scores every word through C: no short-list")
        check_outputs_and_dropout(self, False, self.dropout_x)

    @property
    def x_size(self) -> int:
        return self.order * self.m  # the target's features included

    def num_parameters(self) -> int:
        """|V| m (C) + h (n m + 1) (H, d) + |V| (b) + h or |V| h (v)."""
        V, n, m, h = self.vocab_size, self.order, self.m, self.h
        return V * m + h * (n * m + 1) + V + (V * h if self.v_per_word else h)


EXP_SAFE = 40.0  # |a|, |G| below this: exp(2a) and exp(2G) are finite, non-zero float32


class EnergyLogits(torch.autograd.Function):
    """-v . tanh(a_b + G_j) for every row b of ``a`` (B, h) and row j of ``G`` (J, h):
    (B, J). ``v``: (h,) shared or (J, h) per candidate.

    tanh is the cost: torch's takes 2.8 ns a value on this project's machine, where a
    product, a sum and a reciprocal take 0.1 ns each. So the (B, J, h) values are formed as

        tanh(a + G) = 1 - 2 R,   R = 1 / (1 + exp(2a) exp(2G))

    with exp(2a) (B, h) and exp(2G) (J, h) computed once: a product, +1 and a reciprocal
    per value, no transcendental. Exact in real arithmetic; in float32 within a few ulps
    of tanh. While |a| and |G| stay below EXP_SAFE the exponentials are finite and
    non-zero, so their product is never inf * 0; beyond it (no trained model seen here
    comes close), and on a GPU, the block takes R = sigmoid(-2 (a + G)) instead. The
    vocabulary is walked in blocks (``block_elements``) and backward recomputes each
    block's R (d tanh = 4 R (1 - R)) instead of keeping (B, J, h) values.
    """

    @staticmethod
    def forward(ctx, a, G, v):
        B, J, h = len(a), len(G), a.shape[1]
        step = max(1, block_elements(a.device) // max(1, B * h))
        out = torch.empty(B, J, dtype=a.dtype, device=a.device)
        dtype = a.dtype
        A, E = _exponentials(a, G)
        v_ = v.to(dtype)
        shared = v.dim() == 1
        vsum = v.sum(-1)  # sum_k v_k (per candidate when v is per word)
        for j in range(0, J, step):
            blk = slice(j, j + step)
            R = _half_sigmoid(A, E, a, G, blk, dtype)  # (B, blk, h)
            # -v . tanh = -sum v + 2 R . v
            if shared:
                out[:, blk] = torch.matmul(R, v_).mul_(2).sub_(vsum)
            else:
                out[:, blk] = R.mul_(v_[None, blk]).sum(-1).mul_(2).sub_(vsum[None, blk])
        ctx.save_for_backward(a, G, v)
        ctx.step = step
        return out.to(a.dtype)

    @staticmethod
    def backward(ctx, grad):
        a, G, v = ctx.saved_tensors
        step, J = ctx.step, len(G)
        A, E = _exponentials(a, G)
        ga, gG, gv = torch.zeros_like(a), torch.empty_like(G), torch.zeros_like(v)
        grad = grad.to(a.dtype)
        shared = v.dim() == 1
        for j in range(0, J, step):
            blk = slice(j, j + step)
            R = _half_sigmoid(A, E, a, G, blk, a.dtype)  # (B, blk, h)
            g = grad[:, blk]  # d loss / d logit, (B, blk)
            # logit = -sum v + 2 R . v: d logit / d v = 2R - 1 = -tanh
            if shared:
                gv += torch.einsum("bj,bjh->h", g, R).mul_(2).sub_(g.sum())
            else:
                gv[blk] = torch.einsum("bj,bjh->jh", g, R).mul_(2).sub_(g.sum(0)[:, None])
            # d logit / d pre = -v (1 - tanh^2) = -4 v R (1 - R)
            q = torch.addcmul(R, R, R, value=-1)  # R (1 - R)
            if not shared:
                q.mul_(v[None, blk])
            g4 = g * -4
            ga += torch.einsum("bj,bjh->bh", g4, q)
            gG[blk] = torch.einsum("bj,bjh->jh", g4, q)
        if shared:
            ga.mul_(v)
            gG.mul_(v)
        return ga, gG, gv


def _exponentials(a: torch.Tensor, G: torch.Tensor):
    """exp(2a), exp(2G), or None where they are not safe to multiply, and on a GPU. There
    the values are memory-bound, not transcendental-bound, so R = sigmoid(-2 (a + G)) costs
    no more than the product form (an H100 trained the energy step at 46,100 words/s this
    way against 40,000 with exponentials; bench/neural/energy.py speed --device cuda), and the
    range check would read a value back to the host, which a CUDA graph cannot capture."""
    if a.is_cuda:
        return None, None
    if a.abs().max() >= EXP_SAFE or G.abs().max() >= EXP_SAFE:
        return None, None
    return torch.exp(2 * a), torch.exp(2 * G)


def _half_sigmoid(A, E, a, G, blk: slice, dtype) -> torch.Tensor:
    """R = (1 - tanh(a_b + G_j)) / 2 = 1 / (1 + exp(2a) exp(2G)) for the rows ``blk`` of G:
    (B, blk, h), in ``dtype``."""
    if A is None:  # R = sigmoid(-2 (a + G)): one sum and one sigmoid per value
        return torch.add(a[:, None, :], G[None, blk]).mul_(-2).sigmoid_().to(dtype)
    R = torch.mul(A.to(dtype)[:, None, :], E.to(dtype)[None, blk])
    return R.add_(1).reciprocal_()


def energy_logits(a: torch.Tensor, G: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """-v . tanh(a_b + G_j): (B, J); see :class:`EnergyLogits`."""
    return EnergyLogits.apply(a, G, v)


class EnergyNetwork(Network):
    """The energy-minimization NPLM (see the module docstring). Tensors under the paper's
    names: C, H (h x n m; its first m columns H_t act on the target), d, v, b."""

    linear_output = False

    def __init__(self, config: EnergyConfig):
        super().__init__(config)
        V, h, n, m = config.vocab_size, config.h, config.order, config.m
        self.H = nn.Parameter(torch.empty(h, n * m))
        self.d = nn.Parameter(torch.zeros(h))
        self.v = nn.Parameter(torch.zeros(V, h) if config.v_per_word else torch.zeros(h))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """C ~ U(-0.1, 0.1), H ~ U(+-1/sqrt(n m)); v, d, b start at 0 (a uniform model)."""
        with torch.no_grad():
            self.C.uniform_(-0.1, 0.1, generator=generator)
            bound = self.config.x_size ** -0.5
            self.H.uniform_(-bound, bound, generator=generator)
            self.d.zero_()
            self.v.zero_()
            self.b.zero_()

    @property
    def output_matrix(self) -> torch.Tensor:
        return self.C  # the output row of word j is its feature vector C(j)

    def init_output_bias(self, value: float) -> None:
        """Raw scores -E start at ``value``: each of the n biases in E is -value / n."""
        with torch.no_grad():
            self.b.fill_(-value / self.config.order)

    def bias_shifted(self, shift: float) -> torch.Tensor:
        """-E holds n biases: each grows by shift / n."""
        return self.b.detach() + shift / self.config.order

    def weights(self) -> list[nn.Parameter]:
        return [self.C, self.H, self.v]

    def biases(self) -> list[nn.Parameter]:
        return [self.d, self.b]

    def sampled_params(self) -> list[nn.Parameter]:
        return [self.C, self.b, *([self.v] if self.config.v_per_word else [])]

    def named_tensors(self) -> dict[str, torch.Tensor]:
        return {"C": self.C, "H": self.H, "d": self.d, "v": self.v, "b": self.b}

    # -- the energy ------------------------------------------------------------------
    def context_part(self, contexts: torch.Tensor, sparse: bool = False
                     ) -> tuple[torch.Tensor, torch.Tensor]:
        """a = d + H_c x_c (B, h), and the context's share of the biases (B,)."""
        m = self.config.m
        x = self.features(contexts, sparse)
        if self.config.dropout_x and self.training:
            x = F.dropout(x, self.config.dropout_x)
        a = F.linear(x, self.H[:, m:], self.d)
        bias = gather_rows(self.b, contexts.reshape(-1), sparse).view(contexts.shape).sum(1)
        return a, bias

    def scores(self, contexts: torch.Tensor, rows: torch.Tensor | None = None,
               sparse: bool = False, bf16: bool = False) -> torch.Tensor:
        """-E, float32. ``rows`` None: (B, |V|) over every word, ``<s>`` at -inf; (K,):
        the K candidates shared by the batch, (B, K); (B, K): K candidates per row, (B, K).
        With ``sparse`` the gradients of C, b (and v per word) touch only the rows used."""
        m = self.config.m
        a, ctx_bias = self.context_part(contexts, sparse)
        H_t = self.H[:, :m]
        if rows is None:
            G = self.C @ H_t.t()  # (|V|, h): H_t C(j) for every word, once
            y = energy_logits(a, G, self.v)  # float32: bf16 is slower (bench/neural/energy.py)
            return y - (self.b + ctx_bias[:, None]) + self.mask
        flat = rows.reshape(-1)
        c = gather_rows(self.C, flat, sparse) @ H_t.t()  # (K', h)
        b = gather_rows(self.b, flat, sparse)
        if rows.dim() == 1:  # shared: (B, K, h) from (B, 1, h) + (1, K, h)
            T = torch.tanh(a[:, None, :] + c[None])
            b = b[None]
        else:
            T = torch.tanh(a[:, None, :] + c.view(*rows.shape, -1))
            b = b.view(rows.shape)
        if self.config.v_per_word:
            v = gather_rows(self.v, flat, sparse).view(*rows.shape, -1)
            e = (T * (v[None] if rows.dim() == 1 else v)).sum(-1)
        else:
            e = T @ self.v
        return -(e + b + ctx_bias[:, None])

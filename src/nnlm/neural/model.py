"""The neural probabilistic language model of Bengio, Ducharme, Vincent & Jauvin (2003).

    x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))        # (B, (n-1) m)
    y = b + W x + U tanh(d + H x)                           # (B, |V|)
    p(w_t = i | context) = exp(y_i) / sum_j exp(y_j)

C is the |V| x m word feature matrix; H (h x (n-1)m) and d (h) the hidden layer; U
(|V| x h) the hidden-to-output weights; W (|V| x (n-1)m) the optional direct connections
(W = 0 when off); b (|V|) the output biases. h = 0 drops the hidden layer (the paper's
MLP3/MLP4). ``<s>`` is never predicted: its output is masked to -inf.

W and U are stored side by side in one (|V|, (n-1)m + h) matrix so that the output layer
is a single matrix product on z = [x, tanh(d + H x)]; ``model.W`` and ``model.U`` are views
of it, and checkpoints store C, H, d, U, W, b under the paper's names. Pure module: no
file I/O, no argparse.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..vocab import BOS_ID
from .output import fused_output_nll, output_logits


@dataclass(frozen=True)
class NPLMConfig:
    """Architecture: n (order), m (feature size), h (hidden units), direct connections."""

    vocab_size: int
    order: int = 5  # n: the model conditions on n - 1 words
    m: int = 60
    h: int = 50
    direct: bool = True
    dropout_x: float = 0.0  # dropout on the concatenated features x
    dropout_h: float = 0.0  # dropout on the hidden activations
    tied: bool = False  # U = C: the output layer reuses the word features (needs h = m)

    def __post_init__(self):
        if self.order < 2:
            raise ValueError("order (n) must be at least 2")
        if self.m < 1 or self.h < 0:
            raise ValueError("need m >= 1 and h >= 0")
        if self.h == 0 and not self.direct:
            raise ValueError("h = 0 without direct connections leaves the output constant")
        if self.tied and (self.h != self.m or self.direct):
            raise ValueError(f"tied output weights (U = C) need h = m and no direct connections "
                             f"(here h={self.h}, m={self.m}, direct={self.direct}); the modern "
                             "preset is one such network")

    @property
    def context_size(self) -> int:
        return self.order - 1

    @property
    def x_size(self) -> int:
        return (self.order - 1) * self.m

    def num_parameters(self) -> int:
        """|V|(1 + nm + h) + h(1 + (n-1)m) with direct connections; minus |V|(n-1)m without;
        minus |V|h more when U is C."""
        V, n, m, h = self.vocab_size, self.order, self.m, self.h
        total = V * (1 + n * m + h) + h * (1 + (n - 1) * m)
        if not self.direct:
            total -= V * (n - 1) * m
        return total - V * h if self.tied else total

    def to_dict(self) -> dict:
        return asdict(self)


class NPLMNetwork(nn.Module):
    """y = b + W x + U tanh(d + H x) (see the module docstring)."""

    def __init__(self, config: NPLMConfig):
        super().__init__()
        self.config = config
        V, m, h, k = config.vocab_size, config.m, config.h, config.x_size
        self.C = nn.Parameter(torch.empty(V, m))
        self.H = nn.Parameter(torch.empty(h, k)) if h else None
        self.d = nn.Parameter(torch.zeros(h)) if h else None
        out_in = (k if config.direct else 0) + h
        # [W | U]; with tied weights U is C and there is no separate output matrix
        self.out_weight = None if config.tied else nn.Parameter(torch.zeros(V, out_in))
        self.b = nn.Parameter(torch.zeros(V))
        self.register_buffer("mask", torch.zeros(V), persistent=False)
        self.mask[BOS_ID] = float("-inf")
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """C ~ U(-0.1, 0.1), H ~ U(+-1/sqrt((n-1)m)); U, W, b, d start at 0, so an untrained
        model is uniform over the |V| - 1 predictable words."""
        with torch.no_grad():
            self.C.uniform_(-0.1, 0.1, generator=generator)
            if self.H is not None:
                bound = self.config.x_size ** -0.5
                self.H.uniform_(-bound, bound, generator=generator)
                self.d.zero_()
            if self.out_weight is not None:
                self.out_weight.zero_()
            self.b.zero_()

    @property
    def output_matrix(self) -> torch.Tensor:
        """The (|V|, out_in) matrix of the output product y = b + output_matrix z."""
        return self.C if self.config.tied else self.out_weight

    # the paper's names for the two halves of the output matrix
    @property
    def W(self) -> torch.Tensor | None:
        return self.out_weight[:, : self.config.x_size] if self.config.direct else None

    @property
    def U(self) -> torch.Tensor | None:
        h = self.config.h
        if not h or self.config.tied:
            return None  # tied: U is C
        return self.out_weight[:, self.out_weight.shape[1] - h :]

    def weights(self) -> list[nn.Parameter]:
        """Parameters that take weight decay (C, H, U, W); the biases b, d take none."""
        return [p for p in (self.C, self.H, self.out_weight) if p is not None]

    def biases(self) -> list[nn.Parameter]:
        return [p for p in (self.d, self.b) if p is not None]

    def features(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """x: (B, (n-1) m), most recent word first as in the paper (contexts are oldest first)."""
        x = F.embedding(contexts.flip(1), self.C, sparse=sparse)  # (B, n-1, m)
        return x.reshape(len(contexts), -1)

    def hidden_input(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """z = [x, tanh(d + H x)] (only the parts the output layer uses): (B, out_in)."""
        cfg = self.config
        x = self.features(contexts, sparse)
        if cfg.dropout_x and self.training:
            x = F.dropout(x, cfg.dropout_x)
        parts = [x] if cfg.direct else []
        if cfg.h:
            a = torch.tanh(F.linear(x, self.H, self.d))  # (B, h)
            if cfg.dropout_h and self.training:
                a = F.dropout(a, cfg.dropout_h)
            parts.append(a)
        return torch.cat(parts, dim=1) if len(parts) > 1 else parts[0]

    def forward(self, contexts: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Logits y (B, |V|), float32, ``<s>`` at -inf."""
        return self.output_logits(self.hidden_input(contexts), bf16)

    def output_logits(self, z: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """y = b + [W U] z for z from ``hidden_input``, ``<s>`` at -inf."""
        return output_logits(z, self.output_matrix, self.b + self.mask, bf16)

    def loss(self, contexts: torch.Tensor, targets: torch.Tensor, bf16: bool = False,
             sparse: bool = False) -> torch.Tensor:
        """Summed negative log-likelihood of ``targets`` (natural log), fused and memory-light."""
        z = self.hidden_input(contexts, sparse)
        return fused_output_nll(z, self.output_matrix, self.b, self.mask, targets, bf16)

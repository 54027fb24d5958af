"""A deep feed-forward NPLM with a long context: Sun & Iyyer (2021), *Revisiting Simple
Neural Probabilistic Language Models*, adapted to a corpus of Brown's size.

The network reads the last n - 1 words as the NPLM does, and the S words before them
(``history``) as one averaged vector, then goes deeper than one hidden layer::

    x   = (C(w_{t-1}), ..., C(w_{t-n+1}), f(C(w_{t-n}), ..., C(w_{t-n-S+1})))
    a_0 = gelu(d + H x)                                           # (B, h)
    a_l = a_{l-1} + drop(W2_l gelu(W1_l LN_l(a_{l-1}) + d1_l) + d2_l)   l = 1..L
    z   = P LN(a_L)                  (tied: U = C, P maps h to m; untied: z = LN(a_L))
    y   = b + U z

f, the distant context (``far``): ``learned`` weights a_k = exp(D_k) per distance,
normalized over the words of the line present (a learned decay); ``mean``: the plain
average; ``fofe``: sum_j alpha^j C(w) (the FOFE code of Zhang et al. 2015); ``none``: no
distant context (S must be 0). Padding before the line's ``<s>`` never counts.

``word_dropout`` replaces each word of a training context by ``<unk>`` with a fixed
chance: the blank noising of Xie et al. (2017, *Data Noising as Smoothing in Neural
Network Language Models*), which keeps the network from leaning on any one context word.
``far_spans`` K > 1 averages K spans of the S words, the nearest shortest, instead of all
of them as one. ``residual`` and ``layer_norm`` switch the two ingredients off for the
ablations; ``tied`` shares C between reading and predicting words (Press & Wolf 2017).
Every choice of the ``deep`` preset is documented with the ablation that justified it
(docs/deep.md, bench/neural/deep.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ...text.vocab import BOS_ID, UNK_ID
from .context import decayed_sum, present, weighted_average
from .network import Network, NetworkConfig, check_history, check_outputs_and_dropout

FAR = ("learned", "mean", "fofe", "none")


@dataclass(frozen=True)
class DeepConfig(NetworkConfig):
    """n (window n - 1 words), S (history: words before the window), m, h, L (layers)."""

    network_name: ClassVar[str] = "deep"
    order: int = 6
    m: int = 256
    history: int = 58  # S: earlier words of the line, averaged into one vector
    far: str = "learned"  # how the S words are combined (FAR)
    fofe_alpha: float = 0.7  # alpha of far = fofe
    far_spans: int = 1  # K: the S words as K averages of spans, each twice the last
    h: int = 512
    layers: int = 2  # L residual blocks
    residual: bool = True
    layer_norm: bool = True
    tied: bool = True  # U = C through a projection P (h -> m)
    dropout_x: float = 0.1  # on x
    dropout_h: float = 0.1  # on each block's output and on a_0
    word_dropout: float = 0.0  # training: each context word becomes <unk> with this chance

    def __post_init__(self):
        super().__post_init__()
        if self.far not in FAR:
            raise ValueError(f"far={self.far!r}: choose from {', '.join(FAR)}")
        check_history(self.history, self.fofe_alpha)
        if self.far != "fofe" and self.fofe_alpha != type(self).fofe_alpha:
            raise ValueError(f"fofe_alpha={self.fofe_alpha} weights FOFE codes only: set "
                             "far='fofe'")
        if (self.far == "none") != (self.history == 0):
            raise ValueError("far='none' goes with history=0, and history=0 with far='none'")
        if self.far_spans < 1 or (self.far_spans > 1 and self.far not in ("learned", "mean")) \
                or self.far_spans > max(self.history, 1):
            raise ValueError(f"far_spans={self.far_spans}: at least 1, at most history, and "
                             "more than 1 only with far='learned' or 'mean'")
        if self.h < 1 or self.layers < 0:
            raise ValueError("need h >= 1 and layers >= 0")
        check_outputs_and_dropout(self, self.tied, self.dropout_x, self.dropout_h,
                                  self.word_dropout)

    @property
    def x_size(self) -> int:
        return (self.order - 1 + (self.far != "none") * self.far_spans) * self.m

    def num_parameters(self) -> int:
        V, Vo, m, h, L = self.vocab_size, self.outputs, self.m, self.h, self.layers
        total = V * m + Vo + h * (self.x_size + 1) + L * 2 * (h * h + h)
        total += 2 * h * (L + 1) if self.layer_norm else 0
        total += self.history if self.far == "learned" else 0
        return total + (m * h if self.tied else Vo * h)


def far_spans(S: int, K: int) -> list[tuple[int, int]]:
    """The slots [lo, hi) of the S distant words (oldest first) split into K spans, the
    nearest first, each about twice as long as the one before it: a few averages that
    keep some of the order of the distant words (Sun & Iyyer 2021 average fixed spans).

    >>> far_spans(58, 3)
    [(50, 58), (33, 50), (0, 33)]
    >>> far_spans(58, 1)
    [(0, 58)]
    """
    ends, total = [], (1 << K) - 1
    for i in range(K):  # distance from the window at which span i ends
        end = round(S * ((2 << i) - 1) / total)
        ends.append(min(max(end, (ends[-1] if ends else 0) + 1), S - (K - 1 - i)))
    starts = [0, *ends[:-1]]
    return [(S - end, S - start) for start, end in zip(starts, ends)]


class DeepNetwork(Network):
    """See the module docstring. Named tensors: C, H, d, b, then per block l ``W1.l``,
    ``d1.l``, ``W2.l``, ``d2.l`` (and ``g.l``, ``beta.l``: LN_l), the final ``g``,
    ``beta``, ``P`` (tied) or ``U``, and ``D`` (learned distant weights)."""

    def __init__(self, config: DeepConfig):
        super().__init__(config)
        h, L = config.h, config.layers
        self.H = nn.Parameter(torch.empty(h, config.x_size))
        self.d = nn.Parameter(torch.zeros(h))
        self.W1 = nn.ParameterList([nn.Parameter(torch.empty(h, h)) for _ in range(L)])
        self.d1 = nn.ParameterList([nn.Parameter(torch.zeros(h)) for _ in range(L)])
        self.W2 = nn.ParameterList([nn.Parameter(torch.empty(h, h)) for _ in range(L)])
        self.d2 = nn.ParameterList([nn.Parameter(torch.zeros(h)) for _ in range(L)])
        norms = L + 1 if config.layer_norm else 0
        self.g = nn.ParameterList([nn.Parameter(torch.ones(h)) for _ in range(norms)])
        self.beta = nn.ParameterList([nn.Parameter(torch.zeros(h)) for _ in range(norms)])
        self.P = nn.Parameter(torch.empty(config.m, h)) if config.tied else None
        self.U = None if config.tied else nn.Parameter(torch.empty(config.outputs, h))
        self.D = nn.Parameter(torch.zeros(config.history)) if config.far == "learned" else None
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """C ~ U(-0.1, 0.1); each weight matrix ~ U(+-1/sqrt(fan in)), except a block's W2
        under residual connections, which starts at 0 so that an untrained block is the
        identity; biases 0, LN gains 1, D = 0 (the plain mean)."""
        cfg = self.config
        with torch.no_grad():
            self.C.uniform_(-0.1, 0.1, generator=generator)
            for w in [self.H, *self.W1, *self.W2, self.P, self.U]:
                if w is not None:
                    bound = w.shape[1] ** -0.5
                    w.uniform_(-bound, bound, generator=generator)
            if cfg.residual:
                for w in self.W2:
                    w.zero_()
            for p in [self.d, *self.d1, *self.d2, *self.beta, self.b]:
                p.zero_()
            for p in self.g:
                p.fill_(1.0)
            if self.D is not None:
                self.D.zero_()

    @property
    def output_matrix(self) -> torch.Tensor:
        return self.C if self.config.tied else self.U

    def weights(self) -> list[nn.Parameter]:
        """C, H, the blocks' W1, W2, P or U take weight decay; biases, LN and D do not."""
        return [p for p in (self.C, self.H, *self.W1, *self.W2, self.P, self.U)
                if p is not None]

    def biases(self) -> list[nn.Parameter]:
        return [p for p in (self.d, *self.d1, *self.d2, *self.g, *self.beta, self.b, self.D)
                if p is not None]

    def features(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """x: the window's n - 1 vectors, most recent first, then the distant context."""
        cfg = self.config
        S = cfg.history
        E = F.embedding(contexts, self.C, sparse=sparse)  # (B, K, m), oldest first
        parts = [E[:, S:].flip(1).reshape(len(contexts), -1)]
        if cfg.far != "none":
            far, keep = E[:, :S], present(contexts)[:, :S]  # the line's <s> may be later
            if cfg.far == "fofe":
                parts.append(decayed_sum(far, keep, cfg.fofe_alpha))
            else:
                for lo, hi in far_spans(S, cfg.far_spans):
                    D = None if self.D is None else self.D[lo:hi]
                    parts.append(weighted_average(far[:, lo:hi], keep[:, lo:hi], D))
        return torch.cat(parts, dim=1)

    def _norm(self, a: torch.Tensor, i: int) -> torch.Tensor:
        if not self.config.layer_norm:
            return a
        return F.layer_norm(a, a.shape[-1:], self.g[i], self.beta[i])

    def hidden_input(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """z: (B, m) tied, (B, h) untied."""
        cfg = self.config
        drop = self.training
        if cfg.word_dropout and drop:  # blank noising; the line's <s> and padding stay
            blank = torch.rand(contexts.shape, device=contexts.device) < cfg.word_dropout
            contexts = torch.where(blank & (contexts != BOS_ID), UNK_ID, contexts)
        x = self.features(contexts, sparse)
        if cfg.dropout_x and drop:
            x = F.dropout(x, cfg.dropout_x)
        a = F.gelu(F.linear(x, self.H, self.d))
        if cfg.dropout_h and drop:
            a = F.dropout(a, cfg.dropout_h)
        for i in range(cfg.layers):
            r = F.linear(F.gelu(F.linear(self._norm(a, i), self.W1[i], self.d1[i])),
                         self.W2[i], self.d2[i])
            if cfg.dropout_h and drop:
                r = F.dropout(r, cfg.dropout_h)
            a = a + r if cfg.residual else F.gelu(r)
        a = self._norm(a, cfg.layers)
        return F.linear(a, self.P) if cfg.tied else a

    def named_tensors(self) -> dict[str, torch.Tensor]:
        out = {"C": self.C, "H": self.H, "d": self.d, "b": self.b}
        for i in range(self.config.layers):
            out.update({f"W1.{i}": self.W1[i], f"d1.{i}": self.d1[i], f"W2.{i}": self.W2[i],
                        f"d2.{i}": self.d2[i]})
        for i in range(len(self.g)):
            out.update({f"g.{i}": self.g[i], f"beta.{i}": self.beta[i]})
        for name in ("P", "U", "D"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

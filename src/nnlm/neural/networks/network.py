"""The protocol every network of the neural family implements, and their registry.

A network maps a batch of contexts to the input z of one linear output layer::

    z = network.hidden_input(contexts)            # (B, k)
    y = b + output_matrix z                       # (B, |V_out|): logits

Everything that depends only on (z, output rows, biases) is written once, outside the
networks: the objectives (full softmax, NCE, self-normalization: ``objectives.py``), the
optimizers (``optim.py``), scoring (``nplm_lm.py``) and checkpoints (``checkpoint.py``).
A network says, besides ``hidden_input``:

- ``output_matrix`` (|V_out|, k) and ``b`` (|V_out|): the output rows and biases;
- ``named_tensors()`` / ``load_named_tensors()``: what a checkpoint holds, under the
  paper's names (C, H, d, U, W, b);
- ``weights()`` / ``biases()``: which parameters take weight decay (the biases never do);
- ``C``: the word features, whose rows a batch touches sparsely (``input_rows``).

|V_out| is |V| except under a short-list (Schwenk 2007), where the network predicts the
K most frequent words and one "not in the list" output.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from ...base.errors import NnlmError
from ...text.vocab import BOS_ID
from .context import fofe_codes, present
from .output import gather_rows, output_logits


@dataclass(frozen=True)
class NetworkConfig:
    """What every network of the family has: |V| (input rows), n, m, |V_out|."""

    network_name: ClassVar[str] = ""  # the registry's name (networks/registry.py)
    vocab_size: int
    order: int = 5  # n: the model conditions on n - 1 words
    m: int = 60
    output_size: int | None = None  # |V_out|: None is |V| (a short-list: K + 1)

    def __post_init__(self):
        if self.order < 2:
            raise ValueError("order (n) must be at least 2")
        if self.m < 1:
            raise ValueError("need m >= 1")
        if self.output_size is not None and not 2 < self.output_size <= self.vocab_size:
            raise ValueError(f"output size {self.output_size} outside (2, |V| = "
                             f"{self.vocab_size}]")

    @property
    def context_size(self) -> int:
        """Words a row of contexts holds: the window's n - 1, and the ``history`` words
        before it of the networks that read further (FOFE codes, deep's average)."""
        return self.order - 1 + getattr(self, "history", 0)

    @property
    def x_size(self) -> int:
        return (self.order - 1) * self.m

    @property
    def outputs(self) -> int:
        """|V_out|: rows of the output layer."""
        return self.output_size or self.vocab_size

    def to_dict(self) -> dict:
        return {"network": self.network_name, **asdict(self)}


class Network(nn.Module):
    """Base of the family: word features C, output biases b and the ``<s>`` mask.

    Subclasses define ``hidden_input``, ``output_matrix``, ``named_tensors``, ``weights``
    and ``biases``.
    """

    config: NetworkConfig
    #: y = b + output_matrix z (the fused output kernels apply); False for a network
    #: that scores candidates some other way through ``scores`` (the energy model)
    linear_output: ClassVar[bool] = True
    #: True for a network that reads the line word by word (the LSTM): it trains on line
    #: pieces (``segments.SpanPlan``) and scores a text line by line
    recurrent: ClassVar[bool] = False

    def __init__(self, config: NetworkConfig):
        super().__init__()
        self.config = config
        self.C = nn.Parameter(torch.empty(config.vocab_size, config.m))
        self.b = nn.Parameter(torch.zeros(config.outputs))
        self.register_buffer("mask", torch.zeros(config.outputs), persistent=False)
        self.mask[BOS_ID] = float("-inf")  # <s> is context only, never predicted

    @property
    def device(self) -> torch.device:
        return self.C.device

    def take_penalty(self) -> torch.Tensor | None:
        """A regularizer of the last training pass, per target word, to add to its loss
        (the LSTM's AR and TAR); None for most networks."""
        return None

    def features(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """x = (C(w_{t-1}), ..., C(w_{t-n+1})): (B, (n-1) m), most recent word first as in
        the paper (contexts are oldest first)."""
        x = F.embedding(contexts.flip(1), self.C, sparse=sparse)  # (B, n-1, m)
        return x.reshape(len(contexts), -1)

    def hidden_input(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        raise NotImplementedError

    @property
    def output_matrix(self) -> torch.Tensor:
        raise NotImplementedError

    @property
    def tied(self) -> bool:
        """True when the output rows are the word features C (U = C)."""
        return self.output_matrix is self.C

    def forward(self, contexts: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """Logits y (B, |V_out|), float32, ``<s>`` at -inf."""
        return self.scores(contexts, bf16=bf16)

    def output_logits(self, z: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """y = b + output_matrix z for z from ``hidden_input``, ``<s>`` at -inf."""
        return output_logits(z, self.output_matrix, self.b + self.mask, bf16)

    def scores(self, contexts: torch.Tensor, rows: torch.Tensor | None = None,
               sparse: bool = False, bf16: bool = False) -> torch.Tensor:
        """Raw scores y (log-probabilities up to log Z), float32. ``rows`` None: (B, |V_out|)
        over every output, ``<s>`` at -inf; (K,): K candidates shared by the batch, (B, K);
        (B, K): K candidates per row, (B, K)."""
        z = self.hidden_input(contexts, sparse)
        if rows is None:
            return self.output_logits(z, bf16)
        flat = rows.reshape(-1)
        w = gather_rows(self.output_matrix, flat, sparse)
        b = gather_rows(self.b, flat, sparse)
        if rows.dim() == 1:
            return z @ w.t() + b
        return torch.einsum("bk,bjk->bj", z, w.view(*rows.shape, -1)) + b.view(rows.shape)

    def word_tensor_names(self) -> list[str]:
        """The named tensors with one row per word (what grows with the vocabulary)."""
        return [k for k in ("C", "U", "W", "b", "v") if k in self.named_tensors()
                and self.named_tensors()[k].shape[0] == self.config.vocab_size
                and (k != "v" or self.named_tensors()[k].dim() == 2)]

    def word_parameters(self) -> list[nn.Parameter]:
        """The parameters whose rows are the per-word tensors (C, b and the output rows:
        the NPLM's [W | U], the LBL's U, the energy model's per-word v): what an open
        vocabulary learns for the words it adds."""
        named = self.named_tensors()
        storages = {named[k].untyped_storage().data_ptr() for k in self.word_tensor_names()}
        return [p for p in self.parameters() if p.untyped_storage().data_ptr() in storages]

    def sampled_params(self) -> list[nn.Parameter]:
        """Parameters whose rows a sampled objective (NCE) touches sparsely."""
        return [self.output_matrix, self.b]

    def bias_shifted(self, shift: float) -> torch.Tensor:
        """The biases b that lower every raw score by ``shift`` (probabilities unchanged)."""
        return self.b.detach() - shift

    def init_output_bias(self, value: float) -> None:
        """Start every output bias at ``value`` (self-normalized objectives: log 1/|V|)."""
        with torch.no_grad():
            self.b.fill_(value)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def load_named_tensors(self, tensors: dict[str, torch.Tensor], where: str) -> None:
        """Copy checkpoint tensors into the network (checked first). A named tensor may be
        a view of a parameter (the NPLM's W and U are halves of one matrix): copying into
        the view writes the parameter."""
        self.check_tensors(tensors, where)
        with torch.no_grad():
            for name, p in self.named_tensors().items():
                p.copy_(tensors[name])

    def check_tensors(self, tensors: dict[str, torch.Tensor], where: str) -> None:
        """Names, shapes and finiteness of checkpoint tensors against this network."""
        want = self.named_tensors()
        missing = sorted(set(want) - set(tensors))
        if missing:
            raise NnlmError(f"{where}: missing tensors {missing}; the checkpoint is incomplete")
        for name, t in want.items():
            if tensors[name].shape != t.shape:
                raise NnlmError(f"{where}: {name} has shape {tuple(tensors[name].shape)}, the "
                                f"config says {tuple(t.shape)}; files from different runs?")
            if not torch.isfinite(tensors[name]).all():
                raise NnlmError(f"{where}: {name} holds NaN or infinite values")
            if tensors[name].numel() and tensors[name].abs().max() > WEIGHT_LIMIT:
                raise NnlmError(f"{where}: {name} holds values beyond +-{WEIGHT_LIMIT:g} "
                                f"(up to {float(tensors[name].abs().max()):.3g}), which no "
                                "trained network has and which overflow in scoring; the "
                                "file is damaged")


# trained weights stay orders of magnitude below this; a file with larger ones
# is damaged, and its finite values would overflow to inf/NaN once multiplied and summed
WEIGHT_LIMIT = 1e6


def check_outputs_and_dropout(config: NetworkConfig, tied: bool, *dropouts: float) -> None:
    """What every config with tied output rows and dropout checks: tied rows are C, one a
    word, so not with a short-list; each dropout in [0, 1)."""
    if tied and config.output_size is not None:
        raise ValueError("tied output weights (U = C) need one output row per word: "
                         "not with a short-list")
    for p in dropouts:
        if not 0 <= p < 1:
            raise ValueError(f"dropout {p} outside [0, 1)")


def check_history(history: int, fofe_alpha: float) -> None:
    """A long context's settings: S >= 0 words, the FOFE factor alpha in (0, 1)."""
    if history < 0:
        raise ValueError("need history >= 0")
    if not 0 < fofe_alpha < 1:
        raise ValueError(f"fofe_alpha={fofe_alpha} outside (0, 1)")


# -- the NPLM of Bengio et al. (2003) ------------------------------------------------------
@dataclass(frozen=True)
class NPLMConfig(NetworkConfig):
    """y = b + W x + U tanh(d + H x): n, m, h (hidden units), direct connections W."""

    network_name: ClassVar[str] = "nplm"
    h: int = 50
    direct: bool = True
    dropout_x: float = 0.0  # dropout on the concatenated features x
    dropout_h: float = 0.0  # dropout on the hidden activations
    tied: bool = False  # U = C: the output layer reuses the word features (needs h = m)
    context: str = "window"  # or "fofe": each slot of x holds a FOFE code (context.py)
    history: int = 0  # words before the window that the FOFE codes reach back to
    fofe_alpha: float = 0.7  # the forgetting factor alpha of context = fofe

    def __post_init__(self):
        super().__post_init__()
        if self.context not in ("window", "fofe"):
            raise ValueError(f"context={self.context!r}: choose window or fofe")
        if self.history and self.context != "fofe":
            raise ValueError(f"history={self.history} reaches past the window only through "
                             "FOFE codes: set context='fofe'")
        check_history(self.history, self.fofe_alpha)
        if self.context != "fofe" and self.fofe_alpha != type(self).fofe_alpha:
            raise ValueError(f"fofe_alpha={self.fofe_alpha} weights FOFE codes only: set "
                             "context='fofe'")
        if self.h < 0:
            raise ValueError("need h >= 0")
        if self.h == 0 and not self.direct:
            raise ValueError("h = 0 without direct connections leaves the output constant")
        if self.tied and (self.h != self.m or self.direct):
            raise ValueError(f"tied output weights (U = C) need h = m and no direct connections "
                             f"(here h={self.h}, m={self.m}, direct={self.direct}); the modern "
                             "preset is one such network")
        check_outputs_and_dropout(self, self.tied, self.dropout_x, self.dropout_h)

    def num_parameters(self) -> int:
        """|V|(1 + nm + h) + h(1 + (n-1)m) with direct connections; minus |V|(n-1)m without;
        minus |V|h more when U is C. (With a short-list, |V_out| output rows.)"""
        V, Vo, n, m, h = self.vocab_size, self.outputs, self.order, self.m, self.h
        total = V * m + Vo * (1 + (n - 1) * m + h) + h * (1 + (n - 1) * m)
        if not self.direct:
            total -= Vo * (n - 1) * m
        return total - Vo * h if self.tied else total


class NPLMNetwork(Network):
    """The neural probabilistic language model of Bengio, Ducharme, Vincent & Jauvin (2003).

        x = (C(w_{t-1}), C(w_{t-2}), ..., C(w_{t-n+1}))        # (B, (n-1) m)
        y = b + W x + U tanh(d + H x)                           # (B, |V|)
        p(w_t = i | context) = exp(y_i) / sum_j exp(y_j)

    C is the |V| x m word feature matrix; H (h x (n-1)m) and d (h) the hidden layer; U
    (|V| x h) the hidden-to-output weights; W (|V| x (n-1)m) the optional direct
    connections; b (|V|) the output biases. h = 0 drops the hidden layer (the paper's
    MLP3/MLP4). W and U are stored side by side in one (|V|, (n-1)m + h) matrix, so the
    output layer is a single product on z = [x, tanh(d + H x)]; ``W`` and ``U`` are views.

    With ``context = "fofe"`` slot i of x holds the FOFE code of the history up to
    w_{t-i} instead of C(w_{t-i}) (Zhang et al. 2015; ``context.py``), reaching ``history``
    words past the window: n = 2 is their first-order FOFE network, n = 3 the second.
    """

    def __init__(self, config: NPLMConfig):
        super().__init__(config)
        V, h, k = config.outputs, config.h, config.x_size
        self.H = nn.Parameter(torch.empty(h, k)) if h else None
        self.d = nn.Parameter(torch.zeros(h)) if h else None
        out_in = (k if config.direct else 0) + h
        # [W | U]; with tied weights U is C and there is no separate output matrix
        self.out_weight = None if config.tied else nn.Parameter(torch.zeros(V, out_in))
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
        if self.config.context == "window":
            return super().features(contexts, sparse)
        E = F.embedding(contexts, self.C, sparse=sparse)
        codes = fofe_codes(E, present(contexts), self.config.fofe_alpha,
                           self.config.order - 1)
        return codes.reshape(len(contexts), -1)

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

    def named_tensors(self) -> dict[str, torch.Tensor]:
        """C, H, d, U, W, b (U absent when tied, W without direct connections)."""
        out = {"C": self.C, "b": self.b}
        if self.H is not None:
            out.update(H=self.H, d=self.d)
            if self.U is not None:
                out["U"] = self.U
        if self.W is not None:
            out["W"] = self.W
        return out


# -- the log-bilinear model of Mnih & Hinton (2007) ---------------------------------------
@dataclass(frozen=True)
class LBLConfig(NetworkConfig):
    """r_hat = sum_i C_i r(w_{t-i}); y_w = r_hat . q(w) + b_w: n, m, tied q = r."""

    network_name: ClassVar[str] = "lbl"
    tied: bool = False  # q = r: one vector per word for reading and predicting it
    dropout_x: float = 0.0  # dropout on the context representations

    def __post_init__(self):
        super().__post_init__()
        check_outputs_and_dropout(self, self.tied, self.dropout_x)

    def num_parameters(self) -> int:
        """|V| m (r) + (n-1) m^2 (the C_i) + |V_out| (m + 1) (q, b), less |V| m when tied."""
        V, Vo, n, m = self.vocab_size, self.outputs, self.order, self.m
        return V * m + (n - 1) * m * m + Vo * (0 if self.tied else m) + Vo


class LBLNetwork(Network):
    """The log-bilinear language model of Mnih & Hinton (2007), *Three new graphical models
    for statistical language modelling*.

        r_hat = sum_{i=1}^{n-1} C_i r(w_{t-i})          # (B, m): the predicted feature vector
        y_w = r_hat . q(w) + b_w                          # (B, |V|)

    No hidden non-linearity: the predicted word is represented by a feature vector q(w)
    too, and the score is a dot product. Stored under the family's names: the word
    representations r are the rows of ``C`` (as in the NPLM), the position matrices
    C_1 ... C_{n-1} (m x m each) are the blocks of ``H`` = [C_1 ... C_{n-1}] (m x (n-1)m)
    so that r_hat = H x with x as in the NPLM, q is ``U`` (|V| x m) and b the biases;
    with ``tied`` q = r (U = C).
    """

    def __init__(self, config: LBLConfig):
        super().__init__(config)
        m = config.m
        self.H = nn.Parameter(torch.empty(m, config.x_size))
        self.U = None if config.tied else nn.Parameter(torch.empty(config.outputs, m))
        self.reset_parameters()

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """r, q ~ U(-0.1, 0.1); each C_i starts near the identity / (n-1), so r_hat starts
        as the mean of the context's vectors (a bag of words); b = 0."""
        with torch.no_grad():
            self.C.uniform_(-0.1, 0.1, generator=generator)
            m, n1 = self.config.m, self.config.context_size
            eye = torch.eye(m) / n1
            self.H.uniform_(-0.01, 0.01, generator=generator)
            self.H.add_(eye.repeat(1, n1))
            if self.U is not None:
                self.U.uniform_(-0.1, 0.1, generator=generator)
            self.b.zero_()

    @property
    def output_matrix(self) -> torch.Tensor:
        return self.C if self.U is None else self.U

    def weights(self) -> list[nn.Parameter]:
        return [p for p in (self.C, self.H, self.U) if p is not None]

    def biases(self) -> list[nn.Parameter]:
        return [self.b]

    def hidden_input(self, contexts: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """r_hat = H x = sum_i C_i r(w_{t-i}): (B, m)."""
        x = self.features(contexts, sparse)
        if self.config.dropout_x and self.training:
            x = F.dropout(x, self.config.dropout_x)
        return F.linear(x, self.H)

    def named_tensors(self) -> dict[str, torch.Tensor]:
        out = {"C": self.C, "H": self.H, "b": self.b}
        if self.U is not None:
            out["U"] = self.U
        return out


def uniform_log_bias(config: NetworkConfig) -> float:
    """log 1/|V_out|: the output bias that makes an untrained network's Z about 1."""
    return -math.log(config.outputs - 1)

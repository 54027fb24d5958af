"""g as a recurrent network: an LSTM over the line, the network that Bengio et al. (2003)
name beside the feed-forward one ("may be implemented by a feed-forward or a recurrent
neural network"), in the manner of Zaremba, Sutskever & Vinyals (2014), *Recurrent
Neural Network Regularization* (dropout between layers, never on the recurrent
connections) and Press & Wolf (2017) (output tied to C)::

    x_t        = drop(C(w_t))                                   # (B, m)
    (a_t, c_t) = LSTM_L(x_t, (a_{t-1}, c_{t-1}))                  # (B, h); a_0 = c_0 = 0
    z_t        = P drop(a_t)                (tied: (B, m); untied: z_t = drop(a_t))
    y_t        = b + U z_t                                      # U = C when tied

The words it reads are the line's, from its ``<s>``, and at most the last n - 1 of them
(``order`` = n: 1025 by default, more than any Brown paragraph). A window that does not
reach back to the line's ``<s>`` (a line longer than n - 1 words) is read from its first
word with a zero state. That is the model every path computes:

- a batch of contexts (``Stream.contexts``, ``nnlm.Decoder``'s states, generation): each
  row's words of the line are read, left-aligned, and the state after the last one
  gives z (:meth:`LSTMNetwork.hidden_input` on a tensor);
- a batch of :class:`~nnlm.neural.networks.spans.Spans` (training, and scoring a whole
  text: ``NeuralLM.logprobs``): each row is read once and every position gives its z,
  so a line of L words costs L steps instead of L^2 / 2.

Because the state starts at zero at the line's ``<s>`` and nothing reads before it,
scoring line by line and scoring through contexts give the same numbers (the tests check
it, through ``nnlm.Decoder`` too).

The regularizers of Merity, Keskar & Socher (2018), *Regularizing and Optimizing LSTM
Language Models* (AWD-LSTM), each off by default and on in the ``awd`` preset; all act in
training only, so scoring is the network above:

- ``dropout_w``: DropConnect (Wan et al. 2013) on each layer's W_hh, one mask a pass, so
  the recurrence itself is regularized and the fused LSTM kernel still runs;
- ``locked``: each dropout mask is drawn once a row and kept over its positions
  (variational dropout, Gal & Ghahramani 2016), on x, between layers (``dropout_l``) and
  on a_t;
- ``dropout_e``: embedding dropout, a word's whole vector C_w dropped (and the rest
  scaled by 1 / (1 - p)) for a pass;
- ``ar`` and ``tar``: activation regularization alpha mean(drop(a_t)^2) and temporal
  activation regularization beta mean((a_t - a_{t-1})^2) on the last layer's a_t, added
  to the loss per target word (:meth:`LSTMNetwork.take_penalty`).
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from .context import present
from .network import Network, NetworkConfig, check_outputs_and_dropout
from .spans import Spans


@contextmanager
def uncompacted():
    """cuDNN's LSTM without its warning that the weights are not one block of memory: a
    W_hh with DropConnect is a new tensor each batch, and averaged weights swapped in for
    validation are not the module's block either; cuDNN then copies them into one block
    per call, about as long as reading them, which at these sizes is microseconds."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "RNN module weights are not part")
        yield


LSTM_WINDOW = 1025  # n: reads at most the last 1024 words of the line


@dataclass(frozen=True)
class LSTMConfig(NetworkConfig):
    """n (reads at most n - 1 words of the line), m, h, L layers, ``span``: the longest
    piece of a line that training reads from one state."""

    network_name: ClassVar[str] = "lstm"
    order: int = LSTM_WINDOW
    m: int = 256
    h: int = 512
    layers: int = 1
    tied: bool = True  # U = C through a projection P (h -> m)
    dropout_x: float = 0.3  # on the words read, C(w_t)
    dropout_h: float = 0.4  # between layers and on a_t
    span: int = 256  # training cuts longer lines into pieces of this many words
    dropout_e: float = 0.0  # embedding dropout: a word's whole C_w, for a pass
    dropout_w: float = 0.0  # DropConnect on each layer's W_hh
    dropout_l: float | None = None  # between layers (None: dropout_h)
    locked: bool = False  # one dropout mask a row, kept over its positions
    ar: float = 0.0  # alpha: activation regularization on the last layer's a_t
    tar: float = 0.0  # beta: temporal activation regularization

    def __post_init__(self):
        super().__post_init__()
        if self.h < 1 or self.layers < 1:
            raise ValueError("need h >= 1 and layers >= 1")
        if self.span < 1:
            raise ValueError("need span >= 1")
        if self.output_size is not None:
            raise ValueError("the lstm network predicts every word: no short-list")
        check_outputs_and_dropout(self, self.tied, self.dropout_x, self.dropout_h,
                                  self.dropout_e, self.dropout_w, self.between)
        if not (self.ar >= 0 and self.tar >= 0 and math.isfinite(self.ar + self.tar)):
            raise ValueError(f"ar={self.ar}, tar={self.tar}: each must be >= 0")

    @property
    def between(self) -> float:
        """Dropout between stacked layers."""
        return self.dropout_h if self.dropout_l is None else self.dropout_l

    def num_parameters(self) -> int:
        V, Vo, m, h, L = self.vocab_size, self.outputs, self.m, self.h, self.layers
        lstm = 4 * h * (m + h + 2) + (L - 1) * 4 * h * (2 * h + 2)
        return V * m + Vo + lstm + (m * h if self.tied else Vo * h)


class LSTMNetwork(Network):
    """See the module docstring. Named tensors: C, b, per layer l ``W_ih.l``, ``W_hh.l``,
    ``b_ih.l``, ``b_hh.l`` (gates in PyTorch's order i, f, g, o), and ``P`` (tied) or
    ``U``."""

    recurrent: ClassVar[bool] = True

    def __init__(self, config: LSTMConfig):
        super().__init__(config)
        self.rnn = nn.LSTM(config.m, config.h, config.layers, batch_first=True,
                           dropout=config.dropout_h if config.layers > 1 else 0.0)
        self.P = nn.Parameter(torch.empty(config.m, config.h)) if config.tied else None
        self.U = None if config.tied else nn.Parameter(torch.empty(config.outputs, config.h))
        self.reset_parameters()

    def _layer(self, kind: str, layer: int) -> nn.Parameter:
        return getattr(self.rnn, f"{kind}_l{layer}")

    def reset_parameters(self, generator: torch.Generator | None = None) -> None:
        """C ~ U(-0.1, 0.1); the LSTM's weights and P or U ~ U(+-1/sqrt(h)); biases 0
        except the forget gates' (1, so that the state is kept at first: Gers et al.
        2000)."""
        cfg = self.config
        bound = cfg.h ** -0.5
        with torch.no_grad():
            self.C.uniform_(-0.1, 0.1, generator=generator)
            for w in [*self._weights(), self.P, self.U]:
                if w is not None:
                    w.uniform_(-bound, bound, generator=generator)
            self.b.zero_()
            for layer in range(cfg.layers):
                for kind in ("bias_ih", "bias_hh"):
                    bias = self._layer(kind, layer)
                    bias.zero_()
                    bias[cfg.h : 2 * cfg.h] = 0.5  # i, f, g, o: the forget gate's sum is 1

    def _weights(self) -> list[nn.Parameter]:
        return [self._layer(k, i) for i in range(self.config.layers)
                for k in ("weight_ih", "weight_hh")]

    @property
    def output_matrix(self) -> torch.Tensor:
        return self.C if self.config.tied else self.U

    def weights(self) -> list[nn.Parameter]:
        """C, the LSTM's weight matrices and P or U take weight decay; biases do not."""
        return [p for p in (self.C, *self._weights(), self.P, self.U) if p is not None]

    def biases(self) -> list[nn.Parameter]:
        return [self.b, *(self._layer(k, i) for i in range(self.config.layers)
                          for k in ("bias_ih", "bias_hh"))]

    def _drop(self, x: torch.Tensor, p: float) -> torch.Tensor:
        """Dropout on x (B, T, k) in training: a mask per element, or with ``locked`` one
        per row and unit, kept over the row's positions."""
        if not p or not self.training:
            return x
        if not self.config.locked:
            return F.dropout(x, p)
        keep = x.new_empty(x.shape[0], 1, x.shape[2]).bernoulli_(1 - p)
        return x * (keep / (1 - p))

    def _embed(self, inputs: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """x_t = drop(C(w_t)) for every position of ``inputs`` (B, T): (B, T, m); in
        training, with ``dropout_e``, a dropped word's C_w is zero at all its positions."""
        x = F.embedding(inputs, self.C, sparse=sparse)
        p = self.config.dropout_e
        if p and self.training:
            keep = self.C.new_empty(self.C.shape[0]).bernoulli_(1 - p) / (1 - p)
            x = x * keep[inputs].unsqueeze(-1)
        return self._drop(x, self.config.dropout_x)

    def read(self, inputs: torch.Tensor, sparse: bool = False) -> torch.Tensor:
        """a_t for every position of ``inputs`` (B, T), each row read from a zero state:
        (B, T, h). A position reads only the ones before it, so what follows a row's
        end (padding) changes nothing before it. Training reads layer by layer, with
        DropConnect on W_hh and the dropout between layers."""
        x = self._embed(inputs, sparse)
        if not inputs.shape[1]:
            return x.new_zeros(*inputs.shape, self.config.h)
        if not self.training:
            with uncompacted():
                return self.rnn(x)[0]
        cfg = self.config
        zero = x.new_zeros(1, x.shape[0], cfg.h)
        for layer in range(cfg.layers):
            if layer:
                x = self._drop(x, cfg.between)
            w_hh = self._layer("weight_hh", layer)
            if cfg.dropout_w:
                w_hh = F.dropout(w_hh, cfg.dropout_w)
            params = [self._layer("weight_ih", layer), w_hh, self._layer("bias_ih", layer),
                      self._layer("bias_hh", layer)]
            with uncompacted():
                x = torch.lstm(x, (zero, zero), params, True, 1, 0.0, True, False, True)[0]
        return x

    def take_penalty(self) -> torch.Tensor | None:
        """The last training pass's alpha mean(drop(a_t)^2) + beta mean((a_t -
        a_{t-1})^2) over the positions read (Merity et al. 2018), once: None without
        ``ar`` and ``tar`` or when already taken."""
        penalty, self._penalty = getattr(self, "_penalty", None), None
        return penalty

    def _regularize(self, a: torch.Tensor, dropped: torch.Tensor, mask: torch.Tensor) -> None:
        """Keep AR and TAR of a training pass's last layer a (B, T, h), before and after
        its dropout, for :meth:`take_penalty`."""
        cfg, penalty = self.config, a.new_zeros(())
        if cfg.ar:
            penalty = penalty + cfg.ar * dropped[mask].square().mean()
        if cfg.tar and a.shape[1] > 1:
            pairs = mask[:, 1:]  # both positions read
            if pairs.any():
                penalty = penalty + cfg.tar * (a[:, 1:] - a[:, :-1])[pairs].square().mean()
        self._penalty = penalty

    def read_states(self, inputs: torch.Tensor, lengths: torch.Tensor, state=None
                    ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """Read row r's first ``lengths[r]`` words of ``inputs`` (B, T), from ``state``
        ((L, B, h) a and c) or a zero state: (a after each row's last word (B, h), the
        state there). What a decoder continues from (``recurrent_states.py``)."""
        packed = nn.utils.rnn.pack_padded_sequence(self._embed(inputs), lengths.cpu(),
                                                   batch_first=True, enforce_sorted=False)
        with uncompacted():
            _, (a, c) = self.rnn(packed, state)
        return a[-1], (a, c)

    @torch.no_grad()
    def step(self, words: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor],
             bf16: bool = False) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """One word more for each row (``words`` (B,)) from ``state`` ((L, B, h) a and c),
        in evaluation: :meth:`read_states` of one word, with each layer's gates in one
        product [x_t, a_{t-1}] [W_ih, W_hh]^T + b_ih + b_hh (a third of nn.LSTM's time
        for the few rows of a decoder's step; ``bf16``: the products in bfloat16, 4x
        faster again where the CPU has bf16 instructions)."""
        x, (a0, c0) = F.embedding(words, self.C), state
        tops, cells = [], []
        for layer, (w, b) in enumerate(self._step_weights(bf16)):
            xh = torch.cat([x, a0[layer]], 1)
            gates = (torch.mm(xh.to(w.dtype), w.t()).float() + b) if bf16 else \
                torch.addmm(b, xh, w.t())
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * c0[layer] + torch.sigmoid(i) * torch.tanh(g)
            x = torch.sigmoid(o) * torch.tanh(c)
            tops.append(x)
            cells.append(c)
        return x, (torch.stack(tops), torch.stack(cells))

    def _step_weights(self, bf16: bool) -> list:
        """Per layer ([W_ih, W_hh], b_ih + b_hh), in bfloat16 with ``bf16``; kept while
        the weights stay as they are (torch's version counters)."""
        params = [self._layer(k, i) for i in range(self.config.layers)
                  for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        key = (bf16, *((p.data_ptr(), p._version) for p in params))
        if getattr(self, "_step_key", None) != key:
            dtype = torch.bfloat16 if bf16 else torch.float32
            self._step_cache = [
                (torch.cat([params[4 * i].detach(), params[4 * i + 1].detach()], 1)
                 .to(dtype).contiguous(),
                 (params[4 * i + 2] + params[4 * i + 3]).detach())
                for i in range(self.config.layers)]
            self._step_key = key
        return self._step_cache

    def output(self, a: torch.Tensor, drop: bool = True) -> torch.Tensor:
        """z from a_t (N, h) (``drop``: with its dropout, in training)."""
        if drop and self.config.dropout_h and self.training:
            a = F.dropout(a, self.config.dropout_h)
        return F.linear(a, self.P) if self.config.tied else a

    @staticmethod
    def line_words(contexts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Each context row's words of the line (the last ``<s>`` on, or all K where the
        row holds none), left-aligned: (inputs (B, longest), count (B,))."""
        count = present(contexts).sum(1)  # words of the line in each row, its <s> included
        K, longest = contexts.shape[1], int(count.max()) if len(contexts) else 0
        # slot j holds word K - count + j
        at = (K - count)[:, None] + torch.arange(longest, device=contexts.device)[None, :]
        return contexts.gather(1, at.clamp(max=K - 1)), count

    def hidden_input(self, contexts, sparse: bool = False) -> torch.Tensor:
        """z: (N, m) tied, (N, h) untied. ``contexts`` a :class:`Spans` batch: one z for
        each position read, rows in order; an int tensor (B, K) of contexts (oldest
        first): one z per row, after reading the row's words of the line
        (:meth:`line_words`)."""
        if isinstance(contexts, Spans):
            a = self.read(contexts.inputs, sparse)
            if not self.training:
                return self.output(a[contexts.mask()])
            mask = contexts.mask()
            dropped = self._drop(a, self.config.dropout_h)
            if self.config.ar or self.config.tar:
                self._regularize(a, dropped, mask)
            return self.output(dropped[mask], drop=False)
        inputs, count = self.line_words(contexts)
        a = self.read(inputs, sparse)
        return self.output(a[torch.arange(len(contexts), device=a.device), count - 1])

    def named_tensors(self) -> dict[str, torch.Tensor]:
        out = {"C": self.C, "b": self.b}
        names = {"weight_ih": "W_ih", "weight_hh": "W_hh", "bias_ih": "b_ih", "bias_hh": "b_hh"}
        for i in range(self.config.layers):
            for kind, name in names.items():
                out[f"{name}.{i}"] = self._layer(kind, i)
        for name in ("P", "U"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

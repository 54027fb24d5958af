"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals 2018): the network learns from
the text as it scores it.

The text is read in order, in segments of whole lines (at least ``segment`` tokens each).
Segment s is scored with the weights theta_{s-1}; then one gradient step on its mean
negative log-likelihood, and a pull back toward the trained weights theta_0::

    theta_s = theta_{s-1} - eta grad L(s; theta_{s-1}) + decay (theta_0 - theta_{s-1})

(their SGD rule with the global prior as the decay). Each position is scored before any
step that saw it, so the numbers are perplexities. The network is a copy: the model
itself never changes, and without dropout the run repeats exactly.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from ...base.progress import progress_bar
from ...text.stream import Stream
from .hidden import line_slots, lines_hidden, target_logprobs


@dataclass(frozen=True)
class DynamicSettings:
    """eta (the step), the decay toward the trained weights, tokens a segment."""

    lr: float
    decay: float
    segment: int = 100

    def __post_init__(self):
        if not (self.lr >= 0 and 0 <= self.decay <= 1 and self.segment >= 1):
            raise ValueError(f"dynamic lr={self.lr} (>= 0), decay={self.decay} (in [0, 1]), "
                             f"segment={self.segment} (>= 1)")

    def to_dict(self) -> dict:
        return {"lr": self.lr, "decay": self.decay, "segment": self.segment}


def segments(stream: Stream, tokens: int) -> list[np.ndarray]:
    """Runs of consecutive lines holding at least ``tokens`` slots each (the last may hold
    fewer; a longer line is a segment alone)."""
    out, lo, start = [], 0, 0
    for i in range(stream.num_lines):
        if stream.offsets[i + 1] - start >= tokens:
            out.append(np.arange(lo, i + 1))
            lo, start = i + 1, stream.offsets[i + 1]
    if lo < stream.num_lines:
        out.append(np.arange(lo, stream.num_lines))
    return out


def learning_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A copy of the network that scores as ``model`` does in evaluation and can take a
    gradient on every device. cuDNN computes an RNN's gradient only in training mode, so
    the copy's recurrent modules run in training mode with their own dropout set to 0 (they
    then compute what evaluation computes), their weights compacted into one block."""
    net = copy.deepcopy(model).eval()
    for module in net.modules():
        if isinstance(module, torch.nn.RNNBase):
            module.dropout = 0.0
            module.train()
            module.flatten_parameters()
    return net


def dynamic_logprobs(lm, stream: Stream, settings: DynamicSettings, keep_hidden: bool = False,
                     label: str = "dynamic evaluation") -> tuple[np.ndarray, torch.Tensor | None]:
    """(log p of every slot, float64; z of every slot as it was scored, or None): the
    text scored in order with a copy of ``lm``'s network that takes a step after each
    segment (see the module docstring)."""
    net = learning_copy(lm.model)
    view = copy.copy(lm)
    view.model = net
    params = [p for p in net.parameters() if p.requires_grad]
    trained = [p.detach().clone() for p in params]
    out = np.empty(len(stream))
    hidden = [] if keep_hidden else None
    with progress_bar(len(stream), label, "tokens", delay=2.0) as bar:
        for lines in segments(stream, settings.segment):
            slots = line_slots(stream, lines)
            z = lines_hidden(view, stream, lines)
            targets = torch.from_numpy(stream.ids[slots].astype(np.int64)).to(z.device)
            lp, lp64 = target_logprobs(net, z, targets)
            out[slots] = lp64
            if hidden is not None:
                hidden.append(z.detach())
            for p in params:
                p.grad = None
            (-lp.mean()).backward()
            with torch.no_grad():
                for p, p0 in zip(params, trained):
                    if p.grad is not None:
                        p.sub_(p.grad, alpha=settings.lr)
                    if settings.decay:
                        p.add_(p0 - p, alpha=settings.decay)
            bar.update(len(slots))
    return out, (torch.cat(hidden) if hidden else None)

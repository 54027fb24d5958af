"""Dynamic evaluation (Krause, Kahembwe, Murray & Renals 2018): the network learns from
the text as it scores it.

The text is read in order, in segments of whole lines (at least ``segment`` tokens each).
Segment s is scored with the weights theta_{s-1}; then one gradient step on its mean
negative log-likelihood, and a pull back toward the trained weights theta_0::

    theta_s = theta_{s-1} - eta grad L(s; theta_{s-1}) + decay (theta_0 - theta_{s-1})

(their SGD rule with the global prior as the decay), or their RMS rule, which scales
both terms per parameter by the root mean square MS of its gradients on held-out text
(a segment's mean-NLL gradient, with the trained weights)::

    theta_s = theta_{s-1} - eta grad / (MS + eps) + decay r (theta_0 - theta_{s-1}),
    r = min(MS / mean(MS), 1 / decay),    eps = EPS mean(MS)

so a weight that moves much in the text's gradients adapts fast and is pulled back fast,
and one that seldom moves keeps its trained value. Krause et al. take MS over the training
text; here it is taken over the text the settings are tuned on (``--valid``), which the
network did not fit, so its gradients are those the evaluated text will give. Each
position is scored before any step that saw it, so the numbers are perplexities. The
network is a copy: the model itself never changes, and without dropout the run repeats
exactly.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import torch

from ...base.errors import warn
from ...base.progress import progress_bar
from ...base.sysmem import check_allocation
from ...text.stream import Stream
from .hidden import line_slots, lines_hidden, target_logprobs

RULES = ("sgd", "rms")
DEFAULT_RULE = "rms"
EPS = 1.0  # eps of the RMS rule, as a fraction of the mean MS (0.1 overflowed on Brown)


@dataclass(frozen=True)
class DynamicSettings:
    """eta (the step), the decay toward the trained weights, tokens a segment, the rule
    (``sgd`` or ``rms``) and, for ``rms``, MS (:func:`gradient_rms`)."""

    lr: float
    decay: float
    segment: int = 100
    rule: str = "sgd"
    statistics: list | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not (self.lr >= 0 and 0 <= self.decay <= 1 and self.segment >= 1
                and self.rule in RULES):
            raise ValueError(f"dynamic lr={self.lr} (>= 0), decay={self.decay} (in [0, 1]), "
                             f"segment={self.segment} (>= 1), rule={self.rule!r} "
                             f"(one of {', '.join(RULES)})")

    def to_dict(self) -> dict:
        return {"lr": self.lr, "decay": self.decay, "segment": self.segment, "rule": self.rule}


SEGMENT_BYTES_PER_WORD = 16  # a segment's slots: logits, their softmax and gradient (float32)


def check_segment(lm, segment: int) -> None:
    """A segment of ``segment`` tokens is one forward and backward pass: its |V|-wide
    outputs must fit in memory (a segment of 10^9 tokens is refused, not allocated)."""
    check_allocation(segment * len(lm.vocab) * SEGMENT_BYTES_PER_WORD,
                     f"dynamic evaluation with segment={segment} over {len(lm.vocab):,} "
                     "words", "give a smaller segment (tokens a step)")


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


def gradient_rms(lm, stream: Stream, segment: int,
                 label: str = "gradient statistics") -> list[torch.Tensor]:
    """MS: per parameter of ``lm``'s network (in ``parameters()`` order), the root mean
    square over ``stream``'s segments of the gradient of a segment's mean NLL, with the
    trained weights."""
    check_segment(lm, segment)
    view, params = _learner(lm)
    sums = [torch.zeros_like(p) for p in params]
    parts = segments(stream, segment)
    with progress_bar(len(stream), label, "tokens", delay=2.0) as bar:
        for lines in parts:
            slots = line_slots(stream, lines)
            _backward(_scored_segment(view, stream, lines, slots)[0], params)
            with torch.no_grad():
                for p, acc in zip(params, sums):
                    if p.grad is not None:
                        acc.add_(p.grad.square())
            bar.update(len(slots))
    return [(acc / max(len(parts), 1)).sqrt() for acc in sums]


def _learner(lm):
    """(a view of ``lm`` over a learning copy of its network, the copy's parameters)."""
    view = copy.copy(lm)
    view.model = learning_copy(lm.model)
    return view, [p for p in view.model.parameters() if p.requires_grad]


def _scored_segment(view, stream: Stream, lines: np.ndarray, slots: np.ndarray):
    """(log p of the segment's slots with gradients, the same in float64, z) under the
    copy's weights now."""
    z = lines_hidden(view, stream, lines)
    targets = torch.from_numpy(stream.ids[slots].astype(np.int64)).to(z.device)
    lp, lp64 = target_logprobs(view.model, z, targets)
    return lp, lp64, z


def _backward(lp: torch.Tensor, params: list) -> None:
    """The gradient of the segment's mean NLL into each parameter's ``grad``."""
    for p in params:
        p.grad = None
    (-lp.mean()).backward()


class _Rule:
    """One step of the SGD or RMS rule on ``params`` (see the module docstring)."""

    def __init__(self, settings: DynamicSettings, params: list):
        self.lr, self.decay = settings.lr, settings.decay
        rms = settings.statistics
        self.trained = [p.detach().clone() for p in params]
        self.scale = self.pull = None
        if settings.rule == "rms":
            if rms is None or [m.shape for m in rms] != [p.shape for p in params]:
                raise ValueError("the rms rule needs MS for every parameter (gradient_rms)")
            mean = float(torch.stack([m.mean() for m in rms]).mean())
            eps = EPS * mean if mean > 0 else 1.0
            self.scale = [1.0 / (m.to(p.device) + eps) for m, p in zip(rms, params)]
            if self.decay:  # r = min(MS / mean MS, 1 / decay)
                self.pull = [(m.to(p.device) / max(mean, 1e-30)).clamp(max=1.0 / self.decay)
                             for m, p in zip(rms, params)]

    @torch.no_grad()
    def step(self, params: list) -> None:
        for i, (p, p0) in enumerate(zip(params, self.trained)):
            back = None
            if self.decay:  # from theta_{s-1}, as the step
                back = p0 - p if self.pull is None else (p0 - p) * self.pull[i]
            if p.grad is not None:
                g = p.grad if self.scale is None else p.grad * self.scale[i]
                p.sub_(g, alpha=self.lr)
            if back is not None:
                p.add_(back, alpha=self.decay)


def dynamic_logprobs(lm, stream: Stream, settings: DynamicSettings, keep_hidden: bool = False,
                     label: str = "dynamic evaluation") -> tuple[np.ndarray, torch.Tensor | None]:
    """(log p of every slot, float64; z of every slot as it was scored, or None): the
    text scored in order with a copy of ``lm``'s network that takes a step after each
    segment (see the module docstring)."""
    check_segment(lm, settings.segment)
    view, params = _learner(lm)
    rule = _Rule(settings, params)
    before = [p.detach().clone() for p in params]  # the weights before the last step
    out = np.empty(len(stream))
    hidden = [] if keep_hidden else None
    undone = 0
    with progress_bar(len(stream), label, "tokens", delay=2.0) as bar:
        for lines in segments(stream, settings.segment):
            slots = line_slots(stream, lines)
            lp, lp64, z = _scored_segment(view, stream, lines, slots)
            if not np.isfinite(lp64).all():
                # the last step took the weights where the softmax overflows: undo it
                # and score the segment again, so that no number comes from broken weights
                _assign(params, before)
                undone += 1
                lp, lp64, z = _scored_segment(view, stream, lines, slots)
            out[slots] = lp64
            if hidden is not None:
                hidden.append(z.detach())
            _backward(lp, params)
            _assign(before, params)
            rule.step(params)
            bar.update(len(slots))
    if undone:
        warn(f"{label}: {undone} step(s) overflowed the softmax and were undone; "
             "a smaller --dynamic-lr avoids them")
    return out, (torch.cat(hidden) if hidden else None)


@torch.no_grad()
def _assign(targets: list, sources: list) -> None:
    for t, s in zip(targets, sources):
        t.copy_(s)

"""The exponential moving average of a network's weights (``--average A``).

Polyak & Juditsky (1992) average the iterates of stochastic gradient descent; as an
exponential moving average, after every update t and over every parameter theta,

    A <- a A + (1 - a) theta,    a = min(A_decay, (1 + t) / (10 + t)),

the warm-up keeping the first updates from leaving the average at the initial weights.
Training itself never sees the average: validation, early stopping and the saved model
use it (:meth:`WeightAverage.applied`), and a saved state carries it, so a stopped run
resumes exactly.
"""

from __future__ import annotations

import contextlib

import torch

PREFIX = "__average__."  # the averaged weights' names in a saved state


class WeightAverage:
    """The moving average of ``model``'s parameters with decay ``decay`` (see above)."""

    def __init__(self, decay: float):
        self.decay = decay
        self.weights: list[torch.Tensor] | None = None  # one per parameter, in order

    def update(self, model: torch.nn.Module, step: int) -> None:
        """After update ``step``: fold the network's current weights in."""
        params = [p.detach() for p in model.parameters()]
        if self.weights is None:
            self.weights = [p.clone() for p in params]
            return
        torch._foreach_lerp_(self.weights, params,
                             1.0 - min(self.decay, (1 + step) / (10 + step)))

    @contextlib.contextmanager
    def applied(self, model: torch.nn.Module):
        """The network holds the averaged weights inside the block (copied in place, so an
        optimizer's or a CUDA graph's references stay valid), its own after it."""
        if self.weights is None:
            yield
            return
        params = list(model.parameters())
        own = [p.detach().clone() for p in params]
        with torch.no_grad():
            torch._foreach_copy_(params, self.weights)
        try:
            yield
        finally:
            with torch.no_grad():
                torch._foreach_copy_(params, own)

    def tensors(self, model: torch.nn.Module) -> dict[str, torch.Tensor]:
        """The average as a saved state's named tensors (nothing before the first update)."""
        if self.weights is None:
            return {}
        return {f"{PREFIX}{name}": a.detach().cpu()
                for (name, _), a in zip(model.named_parameters(), self.weights)}

    def restore(self, model: torch.nn.Module, tensors: dict[str, torch.Tensor]) -> None:
        """Take the average out of a saved state's ``tensors`` (removing its entries);
        a state saved before the first update holds none."""
        saved = {k[len(PREFIX):]: tensors.pop(k) for k in list(tensors) if k.startswith(PREFIX)}
        if saved:
            self.weights = [saved[name].to(p.device, p.dtype)
                            for name, p in model.named_parameters()]

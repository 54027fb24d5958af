"""What a :class:`~nnlm.neural.training.train.Trainer` is given: the network, the
objective and the optimizer, built here from a run's settings.

The network starts from ``seed`` (its weights drawn from their own generator, so every
process of a run starts alike). The objective (full softmax, NCE, self-normalization)
and the optimizer (the paper's SGD, Adam, AdamW) follow :class:`TrainConfig`; NCE needs
each output's training count for its noise, so where those are not known yet both wait
for :func:`complete_parts`, which the trainer calls with the training text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..networks.network import Network, NetworkConfig
from ..networks.registry import build_network
from ..objectives import Objective, make_objective
from ..optim import AdamOptimizer, PaperSGD
from ..settings import TrainConfig


@dataclass
class Parts:
    """A run's network, objective and optimizer (these two None until NCE's counts are
    known), whether C's rows (and a sampled objective's output rows) update sparsely, and
    the counts the objective was built with."""

    model: Network
    objective: Objective | None = None
    optimizer: PaperSGD | AdamOptimizer | None = None
    sparse: bool = False
    train_counts: np.ndarray | None = None


def build_parts(model_config: NetworkConfig, config: TrainConfig, device: torch.device,
                scheme, train_counts: np.ndarray | None = None) -> Parts:
    """The network on ``device`` (laid out for ``scheme``) and, unless they wait for the
    training counts, its objective and optimizer."""
    torch.manual_seed(config.seed)
    # weights, gradients and two Adam moments, all in this process's memory on a CPU
    model = build_network(model_config, copies=4 if device.type == "cpu" else 1)
    model.reset_parameters(torch.Generator().manual_seed(config.seed))
    parts = Parts(model, train_counts=train_counts)
    ready = train_counts is not None or not config.spec.needs_counts
    if ready:
        _make_objective(parts, config, device)
    scheme.prepare(model)
    model.to(device)
    if ready:
        _make_optimizer(parts, config, scheme)
    return parts


def complete_parts(parts: Parts, config: TrainConfig, device: torch.device, scheme,
                   train_counts: np.ndarray) -> None:
    """The objective and optimizer that waited for the training counts."""
    parts.train_counts = train_counts
    _make_objective(parts, config, device)
    _make_optimizer(parts, config, scheme)


def _make_objective(parts: Parts, config: TrainConfig, device: torch.device) -> None:
    parts.objective = make_objective(config, parts.train_counts).to(device)
    parts.objective.prepare(parts.model)


def _make_optimizer(parts: Parts, config: TrainConfig, scheme) -> None:
    net, objective = parts.model, parts.objective
    # sparse rows: C's rows seen in a batch (paper's SGD, or any optimizer under a
    # sampled objective); under NCE the sampled output rows and biases too
    parts.sparse = objective.sparse_output or (config.optimizer == "sgd" and not net.tied)
    sparse_params = [net.C] if parts.sparse else []
    if objective.sparse_output:
        sparse_params += net.sampled_params()
    sparse_params = list({id(p): p for p in sparse_params}.values())
    scheme.attach(net, sparse_params)
    if config.optimizer == "sgd":
        parts.optimizer = PaperSGD(net, config.lr, config.lr_decay, config.weight_decay,
                                   sparse=sparse_params)
        return
    sparse = [net.C, *net.sampled_params()] if objective.sparse_output else []
    parts.optimizer = AdamOptimizer(net, config.optimizer, config.lr, config.weight_decay,
                                    sparse=list({id(p): p for p in sparse}.values()))

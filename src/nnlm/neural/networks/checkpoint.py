"""Network tensors on disk: safetensors under the paper's names, loaded without pickle.

A neural model directory (written by ``nnlm.models.save_model`` or by ``nnlm train``)::

    CKPT/
      config.json          model kind, vocabulary fingerprint, network config, training settings
      vocab.txt            the vocabulary
      model.safetensors    C, H, d, U, W, b of the best model on validation
      shortlist_backoff/   a short-list network's n-gram model (any nnlm model directory)
      metrics.csv          one row per epoch (training runs)
      learning_curve.png
      state/               the latest training state, to resume
        model.safetensors  parameters at the last checkpoint
        optimizer.safetensors + trainer.json (step, epoch, RNG states, best validation)

This module only moves a network's tensors to and from files; the header, the
vocabulary and the registry of model kinds are ``nnlm.models``'s.
"""

from __future__ import annotations

import errno
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import load_file, save_file

from ...base.errors import NnlmError
from ...model_files import check_binding
from ...text.fileio import atomic_path
from .network import Network, NetworkConfig
from .registry import build_network

BINDING_KEY = "nnlm_binding"  # in the safetensors metadata (see nnlm.model_files.array_binding)


def read_safetensors(path: Path, binding: str | None = None) -> dict[str, torch.Tensor]:
    """The tensors of ``path``, checked to carry ``binding`` (None: not checked)."""
    if not path.exists():
        raise NnlmError(f"{path}: missing; the checkpoint is incomplete")
    try:
        with safe_open(str(path), framework="pt") as f:
            found = (f.metadata() or {}).get(BINDING_KEY)
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise NnlmError(f"{path}: unreadable ({str(e).splitlines()[0]}); the file may be "
                        "truncated") from None
    check_binding(path, found, binding)
    return tensors


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path, binding: str) -> None:
    """Write ``tensors`` to ``path`` (a temporary of :func:`atomic_path`) with ``binding``."""
    try:
        save_file(tensors, str(path), metadata={BINDING_KEY: binding})
    except SafetensorError as e:  # a full disk or a bad path arrives as SafetensorError
        raise OSError(errno.EIO, str(e).splitlines()[0], str(path)) from None


def network_tensors(net: Network) -> dict[str, torch.Tensor]:
    """The network's named tensors, detached, contiguous, on the CPU (for saving)."""
    return {k: v.detach().contiguous().cpu().clone() for k, v in net.named_tensors().items()}


def write_network(net: Network, path: Path, binding: str, bias_shift: float = 0.0) -> None:
    """Write the network's tensors to ``path`` atomically, bound to the model (``binding``);
    ``bias_shift`` is subtracted from every output bias b (softmax is unchanged by it; raw
    scores y_w move by it)."""
    tensors = network_tensors(net)
    if bias_shift:
        tensors["b"] = net.bias_shifted(bias_shift)
    write_tensors(tensors, path, binding)


def write_tensors(tensors: dict[str, torch.Tensor], path: Path, binding: str) -> None:
    """Write named CPU tensors to ``path`` atomically, bound to the model (``binding``)."""
    with atomic_path(path) as tmp:
        save_safetensors(tensors, tmp, binding)


def read_network(config: NetworkConfig, path: Path, binding: str | None = None) -> Network:
    """A network of ``config`` with the tensors of ``path`` (checked: binding, names,
    shapes, finite)."""
    net = build_network(config, hint=f"is {path.parent / 'config.json'} damaged or edited?")
    net.load_named_tensors(read_safetensors(path, binding), str(path))
    return net

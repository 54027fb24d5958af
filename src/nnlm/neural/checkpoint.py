"""Checkpoints: a directory anyone can read, written atomically, loaded without pickle.

    CKPT/
      config.json          model kind, vocabulary fingerprint, NPLMConfig, TrainConfig
      vocab.txt            the vocabulary
      model.safetensors    C, H, d, U, W, b of the best model on validation
      metrics.csv          one row per epoch
      learning_curve.png
      state/               the latest training state, to resume
        model.safetensors  parameters at the last checkpoint
        optimizer.safetensors + trainer.json (step, epoch, RNG states, best validation)

Everything is safetensors (tensors) or JSON (the rest): loading never unpickles.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file

from ..errors import NnlmError
from ..models import FORMAT_VERSION, load_vocab_for, read_header
from ..vocab import Vocabulary
from .model import NPLMConfig, NPLMNetwork
from .nplm_lm import NPLM


def paper_tensors(model: NPLMNetwork) -> dict[str, torch.Tensor]:
    """The parameters under the paper's names (W and U split out of the output matrix)."""
    out = {"C": model.C, "b": model.b}
    if model.H is not None:
        out.update(H=model.H, d=model.d)
        if model.U is not None:  # absent when tied: U is C
            out["U"] = model.U
    if model.W is not None:
        out["W"] = model.W
    return {k: v.detach().contiguous().clone() for k, v in out.items()}


def load_paper_tensors(model: NPLMNetwork, tensors: dict[str, torch.Tensor], where: str) -> None:
    want = paper_tensors(model)
    missing = sorted(set(want) - set(tensors))
    if missing:
        raise NnlmError(f"{where}: missing tensors {missing}; the checkpoint is incomplete")
    for name, t in want.items():
        if tensors[name].shape != t.shape:
            raise NnlmError(f"{where}: {name} has shape {tuple(tensors[name].shape)}, the "
                            f"config says {tuple(t.shape)}; files from different runs?")
    with torch.no_grad():
        model.C.copy_(tensors["C"])
        model.b.copy_(tensors["b"])
        k = model.config.x_size if model.config.direct else 0
        if model.H is not None:
            model.H.copy_(tensors["H"])
            model.d.copy_(tensors["d"])
            if model.U is not None:
                model.out_weight[:, k:].copy_(tensors["U"])
        if model.W is not None:
            model.out_weight[:, :k].copy_(tensors["W"])


def read_safetensors(path: Path) -> dict[str, torch.Tensor]:
    if not path.exists():
        raise NnlmError(f"{path}: missing; the checkpoint is incomplete")
    try:
        return load_file(str(path))
    except (SafetensorError, OSError, ValueError) as e:
        raise NnlmError(f"{path}: unreadable ({str(e).splitlines()[0]}); the file may be "
                        "truncated") from None


def write_header(directory: Path, vocab: Vocabulary, config: NPLMConfig, train: dict) -> None:
    header = {"nnlm_model": "nplm", "format_version": FORMAT_VERSION, "vocab_size": len(vocab),
              "vocab_fingerprint": vocab.fingerprint, "config": config.to_dict(), "train": train}
    (directory / "config.json").write_text(json.dumps(header, indent=2) + "\n", encoding="utf-8")


def load_neural(path: str | Path) -> tuple[NPLM, dict]:
    """The model of a checkpoint directory (its best weights) and its header."""
    path = Path(path)
    header = read_header(path)
    if header["nnlm_model"] != "nplm":
        raise NnlmError(f"{path}: a {header['nnlm_model']} model, not a neural checkpoint")
    vocab = load_vocab_for(path, header)
    try:
        config = NPLMConfig(**header["config"])
    except (TypeError, ValueError) as e:
        raise NnlmError(f"{path / 'config.json'}: bad model config ({e})") from None
    model = NPLMNetwork(config)
    load_paper_tensors(model, read_safetensors(path / "model.safetensors"),
                       str(path / "model.safetensors"))
    return NPLM(vocab, model), header


class _Loader:
    """Registered in nnlm.models: ``load_model(dir)`` on a neural checkpoint."""

    @staticmethod
    def load_dir(path, header, vocab):
        return load_neural(path)[0]

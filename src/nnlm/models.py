"""Saving and loading any nnlm model: one directory, one format, one registry.

A saved model is a directory::

    MODEL/
      config.json     {"nnlm_model": "addk", "format_version": 2, "vocab_size": ...,
                       "vocab_fingerprint": ..., "model_id": ..., "config": {...}}
      vocab.txt       the vocabulary (see nnlm.vocab)
      ...             the kind's own files: arrays.npz for count-based models (loaded
                      with allow_pickle=False), model.safetensors for networks, ...

One protocol for every kind (count-based, neural, mixture): a model class has ``kind``,
``config()``, ``save_files(directory, binding)`` (its own files, each carrying
``binding``, see :func:`nnlm.lm.array_binding`; :class:`~nnlm.lm.LanguageModel`
writes ``arrays()`` to arrays.npz by default) and the class method
``load_dir(path, header, vocab)``. :func:`write_header` is the one writer of config.json.
Loading checks config.json's fields and types, that ``vocab.txt`` is the vocabulary the
model was trained with, and that every array file carries the model's binding, so a
model never silently scores with another vocabulary's ids or another model's arrays.
Model kinds are registered below by import path, so loading an n-gram model never imports torch.
"""

from __future__ import annotations

import importlib
import json
import os
import uuid
from pathlib import Path

from .errors import NnlmError
from .fileio import atomic_path, atomic_write_text, os_error_message, read_head
from .lm import LanguageModel, array_binding
from .vocab import Vocabulary

FORMAT_VERSION = 2  # 2: model_id, and array files bound to config.json

# kind -> "module:Class"; each class has kind, config(), save_files(dir), load_dir(...)
MODEL_KINDS = {
    "addk": "nnlm.ngram.addk:AddK",
    "backoff": "nnlm.ngram.backoff:BackoffNgram",
    "kn": "nnlm.ngram.kneser_ney:KneserNey",
    "interpolated": "nnlm.ngram.interpolated:DeletedInterpolation",
    "class": "nnlm.ngram.classes:ClassNgram",
    "nplm": "nnlm.neural.nplm_lm:NeuralLM",  # imports torch only when loaded
    "mixture": "nnlm.mixture:Mixture",
}


def _model_class(kind: str):
    if kind not in MODEL_KINDS:
        raise NnlmError(f"unknown model kind {kind!r}; known: {', '.join(sorted(MODEL_KINDS))}")
    module, name = MODEL_KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def new_model_id() -> str:
    return uuid.uuid4().hex[:16]


def write_header(directory: str | os.PathLike, kind: str, vocab: Vocabulary, config: dict,
                 model_id: str, **extra) -> None:
    """Write ``directory/config.json`` atomically: the one header of every model directory.

    ``extra`` adds sections beside ``config`` (a training run adds ``train``).
    """
    header = {"nnlm_model": kind, "format_version": FORMAT_VERSION, "vocab_size": len(vocab),
              "vocab_fingerprint": vocab.fingerprint, "model_id": model_id, "config": config,
              **extra}
    atomic_write_text(Path(directory) / "config.json", json.dumps(header, indent=2) + "\n")


def save_model(model: LanguageModel, path: str | os.PathLike) -> Path:
    """Write ``model`` (any kind) to the directory ``path`` atomically, replacing it."""
    path = Path(path)
    model_id = new_model_id()
    config = model.config()
    with atomic_path(path) as tmp:
        tmp.mkdir()
        model.save_files(tmp, array_binding(model.kind, model.vocab.fingerprint, config,
                                            model_id))
        model.vocab.save(tmp / "vocab.txt")
        write_header(tmp, model.kind, model.vocab, config, model_id)
    return path


HEADER_FIELDS = {"nnlm_model": str, "format_version": int, "vocab_size": int,
                 "vocab_fingerprint": str, "config": dict}


def read_header(path: str | os.PathLike) -> dict:
    """The parsed ``config.json`` of a saved model, its fields and their types checked."""
    path = Path(path)
    if not path.exists():
        raise NnlmError(f"{path}: no such model directory")
    if not path.is_dir():
        raise NnlmError(f"{path}: not a model directory (expected config.json, vocab.txt, ...)")
    config_path = path / "config.json"
    if not config_path.exists():
        raise NnlmError(f"{config_path}: missing; is {path} an nnlm model directory?")
    try:
        header = json.loads(config_path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NnlmError(f"{config_path}: not valid JSON ({e}); the file may be truncated") from None
    except OSError as e:
        raise NnlmError(os_error_message(config_path, e)) from None
    if not isinstance(header, dict) or "nnlm_model" not in header:
        raise NnlmError(f"{config_path}: not an nnlm model config (no 'nnlm_model' key)")
    for key, kind in HEADER_FIELDS.items():
        value = header.get(key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise NnlmError(f"{config_path}: field {key!r} should be a {kind.__name__}, got "
                            f"{value!r}")
    if header["format_version"] > FORMAT_VERSION:
        raise NnlmError(f"{config_path}: format version {header['format_version']} is newer "
                        f"than this nnlm understands ({FORMAT_VERSION}); upgrade nnlm")
    if header["format_version"] >= 2 and not isinstance(header.get("model_id"), str):
        raise NnlmError(f"{config_path}: field 'model_id' should be a str")
    return header


def load_vocab_for(path: Path, header: dict) -> Vocabulary:
    """The model's vocabulary, checked against the size and fingerprint it was saved with."""
    vocab = Vocabulary.load(path / "vocab.txt")
    if len(vocab) != header["vocab_size"] or vocab.fingerprint != header["vocab_fingerprint"]:
        raise NnlmError(
            f"{path / 'vocab.txt'}: does not match the model ({len(vocab)} words, fingerprint "
            f"{vocab.fingerprint}; the model was trained with {header['vocab_size']} words, "
            f"fingerprint {header['vocab_fingerprint']})"
        )
    return vocab


def is_arpa(path: Path) -> bool:
    """Whether ``path`` is an ARPA file (plain or compressed)."""
    if not path.is_file():
        return False
    head = read_head(path).removeprefix(b"\xef\xbb\xbf").lstrip()
    return head.startswith(b"\\data\\")


_LOADING: list[Path] = []  # model directories being loaded, to catch a cycle of mixtures


def load_model(path: str | os.PathLike) -> LanguageModel:
    """Load any saved nnlm model directory, or an ARPA file."""
    path = Path(path)
    if is_arpa(path):
        from .ngram.arpa import read_arpa

        return read_arpa(path)
    header = read_header(path)
    cls = _model_class(header["nnlm_model"])
    vocab = load_vocab_for(path, header)
    real = Path(os.path.realpath(path))
    if real in _LOADING:
        raise NnlmError(f"{path / 'config.json'}: the model includes itself (a mixture whose "
                        "component is the mixture); rebuild it with other components")
    _LOADING.append(real)
    try:
        return cls.load_dir(path, header, vocab)
    except (KeyError, TypeError, ValueError, IndexError) as e:  # a field missing or mistyped
        raise NnlmError(f"{path / 'config.json'}: a setting is missing or has the wrong type "
                        f"({type(e).__name__}: {e}); the file was edited or is damaged") from None
    finally:
        _LOADING.pop()

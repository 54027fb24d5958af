"""The model directory's format, below every model kind: config.json, the bindings that
tie a model's array files to it, arrays.npz, and what an output may replace.

A saved model is a directory::

    MODEL/
      config.json     {"nnlm_model": "addk", "format_version": 2, "vocab_size": ...,
                       "vocab_fingerprint": ..., "model_id": ..., "config": {...}}
      vocab.txt       the vocabulary (see nnlm.text.vocab); a back-off model's trie also
                      holds it, mapped, and opens without reading this file
      ...             the kind's own files: arrays.npz for count-based models (loaded
                      with allow_pickle=False), model.safetensors for networks, ...

:func:`write_header` is the one writer of config.json and :func:`read_header` its one
reader. Every array file carries the model's binding (:func:`array_binding`), so a model
never silently scores with another vocabulary's ids or another model's arrays. Which
class reads which kind, and loading any model from a path, are :mod:`nnlm.models`'s.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from .base.digest import sha256_hex
from .base.errors import NnlmError
from .text.jsonfiles import Int, Optional, check_fields, read_json

# typing.TYPE_CHECKING without importing typing, nor fileio's modules below: reading a
# config.json (nnlm.kenlm opening a model directory) stays as small as kenlm's process
TYPE_CHECKING = False
if TYPE_CHECKING:
    import numpy as np

    from .text.vocab import Vocabulary

FORMAT_VERSION = 2  # 2: model_id, and array files bound to config.json


BINDING_KEY = "__nnlm_binding__"  # the binding inside an arrays.npz (uint8 bytes)


def array_binding(kind: str, vocab_fingerprint: str, config: dict, model_id: str) -> str:
    """The fingerprint that ties a model's array files to its config.json.

    A hash of the kind, the vocabulary's fingerprint, the config and the model's random
    id, written into every array file (arrays.npz, model.safetensors) and checked on
    load: arrays copied from another model, even one with the same vocabulary and
    settings, or a config.json edited after the fact, are refused instead of scoring.
    """
    text = json.dumps([kind, vocab_fingerprint, config, model_id], sort_keys=True)
    return sha256_hex(text.encode("utf-8"))[:16]


class ContentBinding:
    """The binding of a model with one array file, made from what the file holds: its
    ``model_id`` is a hash of the kind, the vocabulary, the config and every section's
    CRC-32 (which the trie writer computes anyway; ``write_arrays`` too), so that the
    same estimate saved twice, or written by a cluster's workers instead of one process,
    is the same directory byte for byte, and what was built on it (a mixture) keeps
    loading. Called by the writer once its sections are written, before its header."""

    def __init__(self, kind: str, vocab_fingerprint: str, config: dict):
        self.kind, self.vocab_fingerprint, self.config = kind, vocab_fingerprint, config
        self.model_id: str | None = None

    def __call__(self, checksums: dict[str, int]) -> str:
        text = json.dumps([self.kind, self.vocab_fingerprint, self.config,
                           sorted(checksums.items())], sort_keys=True)
        self.model_id = sha256_hex(text.encode("utf-8"))[:16]
        return array_binding(self.kind, self.vocab_fingerprint, self.config, self.model_id)


def header_binding(header: dict) -> str | None:
    """The binding a model directory's array files must carry (None: a format-1 model,
    saved before bindings existed, loads unchecked)."""
    if header.get("format_version", 1) < 2:
        return None
    return array_binding(header["nnlm_model"], header["vocab_fingerprint"], header["config"],
                         header.get("model_id", ""))


def check_binding(path: Path, found: str | None, expected: str | None) -> None:
    if expected is not None and found != expected:
        raise NnlmError(f"{path}: belongs to another model (fingerprint {found or 'none'}, "
                        f"config.json wants {expected}); the model directory was mixed from "
                        "two models or edited by hand. Retrain or restore it")


def write_arrays(path: Path, arrays: dict[str, np.ndarray], binding) -> None:
    """``arrays`` as an .npz file at ``path``, with ``binding`` inside (a str, or a
    :class:`ContentBinding`, given each array's CRC-32)."""
    import zlib

    import numpy as np  # here: reading a config.json imports no numpy (nnlm.kenlm)

    if callable(binding):
        binding = binding({name: zlib.crc32(np.ascontiguousarray(a).data)
                           for name, a in arrays.items()})
    np.savez(path, **arrays, **{BINDING_KEY: np.frombuffer(binding.encode(), np.uint8)})


def read_arrays(path: Path, binding: str | None = None) -> dict[str, np.ndarray]:
    """The arrays of an .npz file (never unpickled), checked: readable, bound to the
    model (``binding``), and no NaN or +inf in a float array (-inf is a log of 0)."""
    import zipfile  # here: a model without .npz files (a mapped trie) never needs it

    import numpy as np

    if not path.exists():
        raise NnlmError(f"{path}: missing; the model directory is incomplete")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as e:
        raise NnlmError(f"{path}: unreadable ({e}); the file may be truncated") from None
    found = arrays.pop(BINDING_KEY, None)
    check_binding(path, None if found is None else bytes(found).decode(errors="replace"),
                  binding)
    for name, a in arrays.items():
        if a.dtype.kind == "f" and (np.isnan(a).any() or np.isposinf(a).any()):
            raise NnlmError(f"{path}: array {name!r} holds NaN or +inf; the model is corrupt")
    return arrays



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
    from .text.fileio import atomic_write_text

    atomic_write_text(Path(directory) / "config.json", json.dumps(header, indent=2) + "\n")


# -- what an output may replace --------------------------------------------------------
# kinds that may replace each other: retraining an n-gram model with another method is
# ordinary; an n-gram model never silently replaces a network or a mixture
FAMILIES = {"addk": "n-gram", "backoff": "n-gram", "kn": "n-gram", "interpolated": "n-gram",
            "class": "n-gram", "stupid": "n-gram", "infgram": "n-gram", "nplm": "neural",
            "mixture": "mixture"}
# every name nnlm writes inside a model directory (a training run's included)
MODEL_ENTRIES = frozenset({"config.json", "vocab.txt", "arrays.npz", "ngrams.trie",
                           "class_ngrams.trie", "classes.tsv", "components",
                           "model.safetensors", "state", "shortlist_backoff", "base", "index",
                           "metrics.csv",
                           "learning_curve.png", "tensorboard"})


def _foreign_entries(path: Path) -> list[str]:
    """The names in ``path`` that nnlm does not write (its hidden temporaries aside)."""
    from .text.fileio import TEMP_NAME

    return sorted(e.name for e in path.iterdir()
                  if e.name not in MODEL_ENTRIES and not TEMP_NAME.match(e.name))


def check_model_output(path: str | os.PathLike, kind: str, training_run: bool = False) -> None:
    """Refuse to write a model directory over anything but a model nnlm wrote of the same
    family (``FAMILIES``), or, for a training run (``training_run``), an unfinished start
    of one that holds no trained weights yet.

    A new or empty folder is always fine. Everything else, a folder of the user's own
    files above all, is refused in one line before any work starts, so an output never
    replaces what it should not: a model directory is swapped in whole, and whatever the
    old folder held would be gone.
    """
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir():
        raise NnlmError(f"{path}: is a file; a model directory cannot replace it. Choose "
                        "another output")
    if not any(path.iterdir()):
        return
    try:
        header = json.loads((path / "config.json").read_text(encoding="utf-8"))
        found = header["nnlm_model"] if isinstance(header, dict) else None
    except (OSError, ValueError, KeyError, TypeError):
        found = None
    foreign = _foreign_entries(path)
    if found not in FAMILIES:
        shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise NnlmError(f"{path}: exists and is not an nnlm model directory"
                        f"{f' (it holds {shown})' if shown else ''}; nnlm replaces only a "
                        "model it wrote. Choose a new or empty output")
    is_run = "train" in header
    if training_run:
        if (path / "state" / "trainer.json").exists():
            raise NnlmError(f"{path}: already holds a training run; add resume=True to continue "
                            "it, or choose another output")
        if not is_run or (path / "model.safetensors").exists() or foreign:
            raise NnlmError(f"{path}: exists and is not an unfinished training run; choose a "
                            "new or empty output (training would overwrite what is there)")
        return
    if is_run:
        raise NnlmError(f"{path}: holds a neural training run; a {kind} model would replace "
                        "its checkpoint. Choose another output")
    if FAMILIES[found] != FAMILIES[kind]:
        raise NnlmError(f"{path}: holds a {found} model; a {kind} model replaces only "
                        f"{FAMILIES[kind]} models. Choose another output, or remove it first")
    if foreign:
        raise NnlmError(f"{path}: holds files nnlm did not write ({', '.join(foreign[:3])}"
                        f"{', ...' if len(foreign) > 3 else ''}); replacing the model would "
                        "delete them. Move them, or choose another output")


HEADER_FIELDS = {"nnlm_model": str, "format_version": Int(min=1), "vocab_size": Int(min=3),
                 "vocab_fingerprint": str, "config": dict,
                 "model_id": Optional(str), "train": Optional(dict)}


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
    header = read_json(config_path, {"nnlm_model": Optional(str)}, "a model's header")
    if "nnlm_model" not in header:
        raise NnlmError(f"{config_path}: not an nnlm model config (no 'nnlm_model' key)")
    check_fields(header, HEADER_FIELDS, str(config_path))
    if header["format_version"] > FORMAT_VERSION:
        raise NnlmError(f"{config_path}: format version {header['format_version']} is newer "
                        f"than this nnlm understands ({FORMAT_VERSION}); upgrade nnlm")
    if header["format_version"] >= 2 and not isinstance(header.get("model_id"), str):
        raise NnlmError(f"{config_path}: field 'model_id' should be a str")
    return header


def load_vocab_for(path: Path, header: dict) -> Vocabulary:
    """The model's vocabulary, checked against the size and fingerprint it was saved with."""
    from .text.vocab import Vocabulary

    vocab = Vocabulary.load(path / "vocab.txt")
    if len(vocab) != header["vocab_size"] or vocab.fingerprint != header["vocab_fingerprint"]:
        raise NnlmError(
            f"{path / 'vocab.txt'}: does not match the model ({len(vocab)} words, fingerprint "
            f"{vocab.fingerprint}; the model was trained with {header['vocab_size']} words, "
            f"fingerprint {header['vocab_fingerprint']})"
        )
    return vocab


def model_identity(path: str | os.PathLike, model=None) -> str:
    """What identifies the saved model at ``path``: its model_id (new at every save) for
    a directory, a SHA-256 of the bytes for a file (ARPA). ``model``: the model loaded
    from ``path``, whose ``source_id`` is used where it has one (no second read)."""
    if model is not None and getattr(model, "source_id", None):
        return model.source_id
    path = Path(path)
    if path.is_dir():
        return str(read_header(path).get("model_id"))
    import hashlib  # OpenSSL's SHA-256, fast on a large file (see nnlm.base.digest)

    try:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
        return "sha256:" + digest.hexdigest()
    except OSError as e:
        from .text.fileio import os_error_message

        raise NnlmError(os_error_message(path, e)) from None

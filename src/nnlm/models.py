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

import hashlib
import importlib
import json
import os
import uuid
from pathlib import Path

from .errors import NnlmError
from .fileio import TEMP_NAME, atomic_path, atomic_write_text, os_error_message, read_head
from .jsonfiles import Int, Optional, check_fields, read_json
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
    "stupid": "nnlm.ngram.stupid:StupidBackoff",
    "nplm": "nnlm.neural.nplm_lm:NeuralLM",  # imports torch only when loaded
    "mixture": "nnlm.mixture:Mixture",
}


def _model_class(kind: str):
    if kind not in MODEL_KINDS:
        raise NnlmError(f"unknown model kind {kind!r}; known: {', '.join(sorted(MODEL_KINDS))}")
    module, name = MODEL_KINDS[kind].split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        from .extras import missing_extra

        error = missing_extra(e, f"a {kind} model")
        if error is None:
            raise
        raise error from None


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


# -- what an output may replace --------------------------------------------------------
# kinds that may replace each other: retraining an n-gram model with another method is
# ordinary; an n-gram model never silently replaces a network or a mixture
FAMILIES = {"addk": "n-gram", "backoff": "n-gram", "kn": "n-gram", "interpolated": "n-gram",
            "class": "n-gram", "stupid": "n-gram", "nplm": "neural", "mixture": "mixture"}
# every name nnlm writes inside a model directory (a training run's included)
MODEL_ENTRIES = frozenset({"config.json", "vocab.txt", "arrays.npz", "ngrams.trie",
                           "class_ngrams.trie", "classes.tsv", "components",
                           "model.safetensors", "state", "shortlist_backoff", "metrics.csv",
                           "learning_curve.png", "tensorboard"})


def _foreign_entries(path: Path) -> list[str]:
    """The names in ``path`` that nnlm does not write (its hidden temporaries aside)."""
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
            raise NnlmError(f"{path}: already holds a training run; add --resume to continue "
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


def save_model(model: LanguageModel, path: str | os.PathLike) -> Path:
    """Write ``model`` (any kind) to the directory ``path`` atomically, replacing an older
    model of its family there (:func:`check_model_output` says what may be replaced)."""
    path = Path(path)
    check_model_output(path, model.kind)
    model_id = new_model_id()
    config = model.config()
    with atomic_path(path) as tmp:
        tmp.mkdir()
        model.save_files(tmp, array_binding(model.kind, model.vocab.fingerprint, config,
                                            model_id))
        model.vocab.save(tmp / "vocab.txt")
        write_header(tmp, model.kind, model.vocab, config, model_id)
    return path


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
    vocab = Vocabulary.load(path / "vocab.txt")
    if len(vocab) != header["vocab_size"] or vocab.fingerprint != header["vocab_fingerprint"]:
        raise NnlmError(
            f"{path / 'vocab.txt'}: does not match the model ({len(vocab)} words, fingerprint "
            f"{vocab.fingerprint}; the model was trained with {header['vocab_size']} words, "
            f"fingerprint {header['vocab_fingerprint']})"
        )
    return vocab


KENLM_BINARY_MAGIC = b"mmap lm http://kheafield.com/code"


def _first_line(path: Path) -> bytes:
    """The first line of ``path``'s content that is neither blank nor a ``#`` comment
    (KenLM allows both before an ARPA file's ``\\data\\``); b"" if there is none."""
    head = read_head(path, 1 << 16).removeprefix(b"\xef\xbb\xbf")
    for line in head.split(b"\n"):
        line = line.strip()
        if line and not line.startswith(b"#"):
            return line
    return b""


def is_arpa(path: Path) -> bool:
    """Whether ``path`` is an ARPA file (plain or compressed)."""
    return path.is_file() and _first_line(path) == b"\\data\\"


def _not_a_model(path: Path) -> NnlmError:
    """Why the file ``path`` is no model nnlm reads, in one line."""
    if read_head(path, 1) == b"":
        return NnlmError(f"{path}: empty file; expected an ARPA file or an nnlm model "
                         "directory")
    line = _first_line(path)[:40].decode("utf-8", "replace")
    return NnlmError(f"{path}: neither an ARPA file nor an nnlm model directory (its first "
                     f"line that is not blank or a # comment is {line!r}, not \\data\\)")


_LOADING: list[Path] = []  # model directories being loaded, to catch a cycle of mixtures
LOAD_TRIES = 3  # a model replaced while it is read is read again, at most this often


def load_model(path: str | os.PathLike, strict: bool = False) -> LanguageModel:
    """Load any saved nnlm model directory or one-file model, an ARPA file or a KenLM
    binary (``strict``: refuse a file whose distributions sum above 1, which KenLM loads;
    see :func:`read_arpa`).

    A directory read while another process replaces it (an atomic swap between reading
    config.json and the arrays) is read again from the start: the reader gets one whole
    version, old or new, and a mismatch is blamed on the files only when the model did
    not change meanwhile. The loaded model carries ``source_id``: the model_id of its
    config.json (None for an ARPA file), which mixtures record for their components.
    """
    path = Path(path)
    from .ngram.store.trie_map import is_trie_file, load_trie_file

    if is_trie_file(path):  # a one-file model
        model = load_trie_file(path)
        model.source_id = None
        return model
    if path.is_file() and read_head(path, len(KENLM_BINARY_MAGIC)) == KENLM_BINARY_MAGIC:
        from .ngram.store.kenlm_binary import read_kenlm_binary

        model = read_kenlm_binary(path, strict=strict)
        model.source_id = None
        return model
    if path.is_file() and not is_arpa(path):
        raise _not_a_model(path)
    if is_arpa(path):
        from .ngram.store.arpa_read import read_arpa

        model = read_arpa(path, strict=strict)
        model.source_id = None
        return model
    real = Path(os.path.realpath(path))
    if real in _LOADING:
        raise NnlmError(f"{path / 'config.json'}: the model includes itself (a mixture whose "
                        "component is the mixture); rebuild it with other components")
    _LOADING.append(real)
    try:
        for attempt in range(LOAD_TRIES):
            header = read_header(path)
            try:
                model = _load_dir(path, header)
                model.source_id = header.get("model_id")
                return model
            except NnlmError:
                if attempt + 1 == LOAD_TRIES or not _replaced_since(path, header):
                    raise
        raise AssertionError("unreachable")
    finally:
        _LOADING.pop()


def _load_dir(path: Path, header: dict) -> LanguageModel:
    cls = _model_class(header["nnlm_model"])
    vocab = load_vocab_for(path, header)
    try:
        return cls.load_dir(path, header, vocab)
    except (KeyError, TypeError, ValueError, IndexError) as e:  # a field missing or mistyped
        raise NnlmError(f"{path / 'config.json'}: a setting is missing or has the wrong type "
                        f"({type(e).__name__}: {e}); the file was edited or is damaged") from None


def _replaced_since(path: Path, header: dict) -> bool:
    """Whether the model directory at ``path`` is no longer the one ``header`` came from."""
    try:
        now = read_header(path)
    except NnlmError:
        return False
    return now.get("model_id") != header.get("model_id")


def model_identity(path: str | os.PathLike, model: LanguageModel | None = None) -> str:
    """What identifies the saved model at ``path``: its model_id (new at every save) for
    a directory, a SHA-256 of the bytes for a file (ARPA). ``model``: the model loaded
    from ``path``, whose ``source_id`` is used where it has one (no second read)."""
    if model is not None and getattr(model, "source_id", None):
        return model.source_id
    path = Path(path)
    if path.is_dir():
        return str(read_header(path).get("model_id"))
    try:
        with open(path, "rb") as f:
            return "sha256:" + hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as e:
        raise NnlmError(os_error_message(path, e)) from None

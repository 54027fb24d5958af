"""Saving and loading any nnlm model: one registry of kinds, one loader for every path.

A saved model is a directory in the format of :mod:`nnlm.model_files` (config.json,
vocab.txt and the kind's own files, bound to each other). Besides directories,
:func:`load_model` takes one-file models, ARPA files and KenLM's binaries.

One protocol for every kind (count-based, neural, mixture): a model class has ``kind``,
``config()``, ``save_files(directory, binding, save)`` (its own files, each carrying
``binding``; :class:`~nnlm.lm.LanguageModel` writes ``arrays()`` to arrays.npz by
default) and the class method ``load_dir(path, header, vocab, load)``. ``save`` and
``load`` are :func:`save_model` and :func:`load_model` themselves, handed down for the
models nested inside another (a mixture's components, a short-list's n-gram model), so
that no model family imports this module. Model kinds are registered below by import
path, so loading an n-gram model never imports torch.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import time
from pathlib import Path

from .base import magic
from .base.errors import NnlmError, warn
from .lm import LanguageModel
from .model_files import (
    ContentBinding,
    array_binding,
    check_model_output,
    load_vocab_for,
    new_model_id,
    read_header,
    write_header,
)
from .ngram.store.trie_layout import verifying
from .text.fileio import atomic_path, read_head

# kind -> "module:Class"; each class has kind, config(), save_files(...), load_dir(...)
MODEL_KINDS = {
    "addk": "nnlm.ngram.estimate.addk:AddK",
    "backoff": "nnlm.ngram.backoff:BackoffNgram",
    "kn": "nnlm.ngram.estimate.kneser_ney:KneserNey",
    "interpolated": "nnlm.ngram.estimate.interpolated:DeletedInterpolation",
    "class": "nnlm.ngram.estimate.classes:ClassNgram",
    "stupid": "nnlm.ngram.estimate.stupid:StupidBackoff",
    "infgram": "nnlm.ngram.infgram:InfgramLM",
    "nplm": "nnlm.neural.nplm_lm:NeuralLM",  # imports torch only when loaded
    "mixture": "nnlm.mixture:Mixture",
    "nltk": "nnlm.nltk.bridge:NltkModel",  # an nnlm.nltk model's save()
}


def model_class(kind: str):
    """The class that reads and writes models of ``kind`` (imported on first use)."""
    if kind not in MODEL_KINDS:
        raise NnlmError(f"unknown model kind {kind!r}; known: {', '.join(sorted(MODEL_KINDS))}")
    module, name = MODEL_KINDS[kind].split(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as e:
        from .base.extras import missing_extra

        error = missing_extra(e, f"a {kind} model")
        if error is None:
            raise
        raise error from None


def save_model(model: LanguageModel, path: str | os.PathLike) -> Path:
    """Write ``model`` (any kind) to the directory ``path`` atomically, replacing an older
    model of its family there (:func:`check_model_output` says what may be replaced)."""
    path = Path(path)
    check_model_output(path, model.kind)
    model_id = new_model_id()
    config = model.config()
    tokenizer = getattr(model.vocab, "tokenizer", None)
    if tokenizer is not None:  # a subword model reads text through its own copy
        config = {**config, "tokenizer": tokenizer.config()}
    by_content = model.bound_by_content  # the model's id from its content, once written
    binding = ContentBinding(model.kind, model.vocab.fingerprint, config) if by_content \
        else array_binding(model.kind, model.vocab.fingerprint, config, model_id)
    with atomic_path(path) as tmp:
        tmp.mkdir()
        if tokenizer is not None:
            shutil.copyfile(tokenizer.path, tmp / tokenizer.config()["file"])
        model.save_files(tmp, binding, save_model)
        if by_content:
            model_id = binding.model_id
        model.vocab.save(tmp / "vocab.txt")
        write_header(tmp, model.kind, model.vocab, config, model_id)
    return path


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
LOAD_TRIES = 100  # a model replaced while it is read is read again, at most this often


def load_model(path: str | os.PathLike, strict: bool = False,
               verify: bool = True) -> LanguageModel:
    """Load any saved nnlm model directory or one-file model, an ARPA file or a KenLM
    binary (``strict``: refuse a file whose distributions sum above 1, which KenLM loads;
    see :func:`read_arpa`). ``verify`` (the default, as every command does): check every
    section of nnlm's mapped files against its CRC-32 first, reading the whole file
    (about a second a GB); ``verify=False`` maps it and checks its header, sizes and
    small tables only, as :mod:`nnlm.kenlm` opens by default. docs/conventions.md has
    the table of which entry point checks what.

    A directory read while another process replaces it (an atomic swap between reading
    config.json and the arrays) is read again from the start, as long as each new try
    finds a newer version (at most ``LOAD_TRIES`` times): the reader gets one whole
    version, old or new, and a mismatch is blamed on the files only when the model did
    not change meanwhile. The loaded model carries ``source_id``: the model_id of its
    config.json (None for an ARPA file), which mixtures record for their components.
    """
    with verifying() if verify else contextlib.nullcontext():
        model = _load(Path(path), strict)
    model.loaded_from = Path(path)  # for its repr
    return model


def _load(path: Path, strict: bool) -> LanguageModel:
    from .ngram.store.trie_map import is_trie_file, load_trie_file

    if is_trie_file(path):  # a one-file model
        model = load_trie_file(path, model_class)
        model.source_id = None
        return model
    if path.is_file() and read_head(path, len(magic.KENLM_BINARY)) == magic.KENLM_BINARY:
        from .ngram.formats.kenlm_binary import read_kenlm_binary

        model = read_kenlm_binary(path, strict=strict)
        model.source_id = None
        return model
    if path.is_file() and not is_arpa(path):
        raise _not_a_model(path)
    if is_arpa(path):
        from .ngram.formats.arpa_read import read_arpa

        model = read_arpa(path, strict=strict)
        model.source_id = None
        return model
    real = Path(os.path.realpath(path))
    if real in _LOADING:
        raise NnlmError(f"{path / 'config.json'}: the model includes itself (a mixture whose "
                        "component is the mixture); rebuild it with other components")
    _LOADING.append(real)
    try:
        for _ in range(LOAD_TRIES):
            header = read_header(path)
            try:
                model = _load_dir(path, header)
                model.source_id = header.get("model_id")
                _attach_tokenizer(model, path, header)
                return model
            except NnlmError:
                if not _replaced_since(path, header):
                    raise
        raise NnlmError(f"{path}: replaced {LOAD_TRIES} times while it was being read; load "
                        "it again once the program writing it is done")
    finally:
        _LOADING.pop()


def _attach_tokenizer(model: LanguageModel, path: Path, header: dict) -> None:
    """A subword model's tokenizer, from the copy its directory keeps."""
    config = header.get("config")
    if isinstance(config, dict) and config.get("tokenizer"):
        from .text.tokenizer import load_tokenizer

        model.vocab.tokenizer = load_tokenizer(path, config["tokenizer"])


def _load_dir(path: Path, header: dict) -> LanguageModel:
    cls = model_class(header["nnlm_model"])
    try:
        mapped = getattr(cls, "load_dir_mapped", None)  # its vocabulary in its own file
        model = mapped(path, header) if mapped else None
        if model is not None:
            return model
        return cls.load_dir(path, header, load_vocab_for(path, header), load_model)
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


def verify_model(path: str | os.PathLike) -> dict:
    """Load the model at ``path`` with every mapped section checked; what was checked
    (NnlmError, one line naming the file and section, if anything is damaged). ``ok`` is
    False where no checksum could be checked (a file written before sections had them,
    or a format without any: ARPA, KenLM binaries, arrays): loaded, but not verified."""
    path = Path(path)
    began = time.perf_counter()
    with verifying() as log:
        model = load_model(path)
    seconds = time.perf_counter() - began
    files = [{"file": f, "sections": n} for f, n in dict(log).items()]
    unsummed = [f["file"] for f in files if f["sections"] == 0]
    for f in unsummed:
        warn(f"{f}: written before nnlm kept a checksum per section: only its header and "
             "sizes were checked; write it again (nnlm ngram convert) to add them")
    sections = sum(f["sections"] for f in files)
    if sections:
        how = f"whole; {sections} sections in {len(files)} mapped " \
              f"file{'s' * (len(files) > 1)} match their checksums"
    elif files:
        how = "NOT VERIFIED: its files carry no checksums (written before nnlm kept " \
              "them); loaded and its sizes checked"
    else:
        how = "NOT VERIFIED: its format carries no checksums (ARPA, KenLM binary, " \
              "arrays); loaded and checked"
    return {"path": str(path), "kind": getattr(model, "kind", type(model).__name__),
            "order": model.order, "files": files, "sections": sections,
            "seconds": round(seconds, 3), "ok": sections > 0,
            "summary": f"{path}: {how} ({seconds:.2f} s)"}


def convert(source: str | os.PathLike, target: str | os.PathLike,
            quantize: tuple[int, int] | None = None, strict: bool = False,
            force: bool = False, kenlm: bool = False) -> dict:
    """``nnlm ngram convert``: the back-off model at ``source`` into ``target`` (ARPA, a
    one-file model, KenLM's probing file with ``kenlm``, or a model directory:
    :func:`nnlm.ngram.formats.convert.convert`, with ``quantize``, ``strict`` and
    ``force``), loaded and saved by this module."""
    from .ngram.formats.convert import convert as convert_with

    return convert_with(source, target, quantize, strict, force, kenlm=kenlm,
                        load=load_model, save=save_model)

"""The models a server holds: named, loaded once at start-up, each with its own batcher.

A MODEL argument is any path :func:`nnlm.load_model` takes (a model directory, an ARPA
file, a one-file or KenLM binary model), named by its directory or file stem, or
``NAME=PATH``. n-gram models are memory-mapped where their format allows (nnlm's trie,
KenLM's probing binaries), so the workers of ``--workers N`` share one copy in the page
cache.

A mapped file must not change under its reader: a file truncated or rewritten in place
(``cp new.bin served.bin``) would give numbers of neither model, or a SIGBUS. So before
each request a model's files are compared with what was loaded (device, inode, size,
modification and change times: one ``stat`` a file): a model whose files changed is
loaded again, checked whole, and answers as the new model; one that cannot be loaded
answers 503 until its files are whole again, and the other models keep serving.
Replacing a file by rename (``mv new.bin served.bin``) is the safe way: the old version
stays mapped for the requests already running.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import NnlmError
from ..lm import LanguageModel
from .batching import Batcher

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
STEM_SUFFIXES = (".gz", ".xz", ".bz2", ".arpa", ".bin", ".binary", ".nnlm")


@dataclass
class ServedModel:
    name: str
    path: Path
    lm: LanguageModel
    batcher: Batcher
    created: int  # the model file's modification time (OpenAI's ``created``)
    stamp: tuple = ()  # its files as loaded (file_stamp)
    options: tuple = ()  # (wait, max_rows, threads, bf16, device): how to load it again
    broken: tuple | None = None  # the stamp of a version that failed to load, and why

    @property
    def kind(self) -> str:
        return getattr(self.lm, "kind", type(self.lm).__name__)

    @property
    def has_features(self) -> bool:
        """Whether the model has word feature vectors C (embeddings, neighbours)."""
        return hasattr(self.lm, "embed") and hasattr(self.lm, "neighbors")

    def describe(self) -> dict:
        return {"id": self.name, "object": "model", "created": self.created,
                "owned_by": "nnlm", "kind": self.kind, "order": self.lm.order,
                "vocab_size": len(self.lm.vocab), "features": self.has_features,
                "path": str(self.path)}


    def current(self) -> ServedModel:
        """This model if its files are as loaded; else the model loaded again from them
        (checked whole); NnlmError if that fails (the server answers 503)."""
        try:
            stamp = file_stamp(self.path)
        except OSError as e:
            raise NnlmError(f"{self.path}: cannot be read now ({e.strerror or e})") from None
        if stamp == self.stamp:
            return self
        if self.broken is not None and self.broken[0] == stamp:
            raise NnlmError(self.broken[1])
        try:
            return load_one(self.name, self.path, *self.options)
        except NnlmError as e:
            message = f"{e}; the file changed while served (replace model files by rename)"
            self.broken = (stamp, message)
            raise NnlmError(message) from None


def file_stamp(path: Path) -> tuple:
    """What identifies a model's files as they are now: (device, inode, size, mtime and
    ctime in ns) of ``path`` and, for a directory, of every file beneath it."""
    def one(p):
        st = os.stat(p)
        return (str(p), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    if not path.is_dir():
        return (one(path),)
    out = [one(path)]
    for root, dirs, files in os.walk(path):
        dirs.sort()
        out += [one(os.path.join(root, f)) for f in sorted(files)]
    return tuple(out)


def parse_spec(spec: str) -> tuple[str, Path]:
    """``NAME=PATH`` or ``PATH`` (named by its stem) -> (name, path).

    >>> parse_spec("kn=runs/kn5"), parse_spec("models/lm.arpa.gz")
    (('kn', PosixPath('runs/kn5')), ('lm', PosixPath('models/lm.arpa.gz')))
    """
    name, sep, path = spec.partition("=")
    if sep and NAME.match(name):
        return name, Path(path)
    path = Path(spec)
    stem = path.name
    while stem.endswith(STEM_SUFFIXES):
        stem = stem.rsplit(".", 1)[0]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", stem).lstrip("._-")[:64] or "model"
    return stem, path


def load_one(name: str, path: Path, wait: float, max_rows: int, threads: int | None = None,
             bf16: bool = False, device: str = "cpu") -> ServedModel:
    """One model, loaded with every mapped section checked against its checksum; its
    networks (if any) placed on ``device`` and scoring in bfloat16 if ``bf16``."""
    from ..models import load_model
    from ..ngram.store.trie_layout import verifying

    if not path.exists():
        raise NnlmError(f"{path}: no such model")
    stamp = file_stamp(path)
    with verifying():
        lm = load_model(path)
    if lm.neural_parts() or bf16 or device != "cpu":
        from ..neural.runtime import configure_for_scoring

        configure_for_scoring(lm, device, bf16, False, threads)
    return ServedModel(name, path, lm, Batcher(lm, wait, max_rows), int(path.stat().st_mtime),
                       stamp, (wait, max_rows, threads, bf16, device))


def load_models(specs: list[str], wait: float, max_rows: int, threads: int | None = None,
                bf16: bool = False, device: str = "cpu") -> dict[str, ServedModel]:
    """Load every model (NnlmError naming the first that fails); names must differ."""
    out: dict[str, ServedModel] = {}
    for spec in specs:
        name, path = parse_spec(spec)
        if name in out:
            raise NnlmError(f"two models are named {name!r} ({out[name].path} and {path}); "
                            f"name them: NAME=PATH")
        out[name] = load_one(name, path, wait, max_rows, threads, bf16, device)
    return out

"""The models a server holds: named, loaded once at start-up, each with its own batcher.

A MODEL argument is any path :func:`nnlm.load_model` takes (a model directory, an ARPA
file, a one-file or KenLM binary model), named by its directory or file stem, or
``NAME=PATH``. n-gram models are memory-mapped where their format allows (nnlm's trie,
KenLM's probing binaries), so the workers of ``--workers N`` share one copy in the page
cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import NnlmError
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


def load_models(specs: list[str], wait: float, max_rows: int, threads: int | None = None
                ) -> dict[str, ServedModel]:
    """Load every model (NnlmError naming the first that fails); names must differ."""
    from ..models import load_model

    out: dict[str, ServedModel] = {}
    for spec in specs:
        name, path = parse_spec(spec)
        if name in out:
            raise NnlmError(f"two models are named {name!r} ({out[name].path} and {path}); "
                            f"name them: NAME=PATH")
        if not path.exists():
            raise NnlmError(f"{path}: no such model")
        lm = load_model(path)
        if lm.neural_parts():
            from ..neural.runtime import configure_for_scoring

            configure_for_scoring(lm, "cpu", False, False, threads)
        out[name] = ServedModel(name, path, lm, Batcher(lm, wait, max_rows),
                                int(path.stat().st_mtime))
    return out

"""The nnlm.nltk model classes by name (every subclass of its LanguageModel registers
itself), so that a saved model names its class and is read back as one."""

from __future__ import annotations

CLASSES: dict[str, type] = {}


def register(cls: type) -> None:
    CLASSES[cls.__name__] = cls

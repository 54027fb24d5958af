"""Count-based language models (no torch import anywhere under this package)."""

from .addk import AddK

__all__ = ["AddK"]

"""Suffix-array indexes of a corpus: exact counts of n-grams of any length, what follows
them, the ∞-gram and the documents that hold them (Liu et al. 2024, "Infini-gram"), in
infini-gram's own files, so that either tool opens the other's indexes.

- ``search.py``: the two batched searches, in C (``_suffix.c``) or numpy;
- ``files.py``: the files, their header and checks;
- ``build.py``: text to an index, sharded within a memory budget;
- ``index.py``: :class:`Index`, the queries.
"""

from .build import build_index
from .index import Document, Index, Next

__all__ = ["Document", "Index", "Next", "build_index"]

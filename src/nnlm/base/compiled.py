"""nnlm's compiled parts, and the one switch that turns them off.

C extensions speed up the n-gram side: ``nnlm.ngram.store._trie`` (the mapped trie's
lookups, bulk scoring and word index), ``nnlm.decoding._kenlm_query`` (``nnlm.kenlm``'s
per-call path), ``nnlm.index._suffix`` (the suffix array's searches),
``nnlm.text._words`` (reading a corpus) and ``nnlm.ngram.formats._arpa_lines``
(writing ARPA). Each has a pure-Python/numpy path
that gives the same numbers, which the tests compare it with. setup.py builds them where
a C compiler is found; without one, or with ``NNLM_NO_C=1`` in the environment (read
once, here, at first use), every caller takes the Python path.
"""

from __future__ import annotations

import importlib
import os

SWITCH = "NNLM_NO_C"  # "1": never load the compiled parts


def extension(name: str):
    """The compiled module ``name`` (e.g. ``nnlm.ngram.store._trie``), or None where it
    was not built or :data:`SWITCH` is set."""
    if os.environ.get(SWITCH) == "1":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # not built: no compiler at install
        return None

"""nnlm's compiled parts, and the one switch that turns them off.

C extensions speed up the n-gram side: ``nnlm.ngram.store._trie`` (the mapped trie's
lookups, bulk scoring and word index), ``nnlm.decoding._kenlm_query`` (``nnlm.kenlm``'s
per-call path), ``nnlm.decoding.ctc._prefix_search`` (the CTC decoder's search),
``nnlm.index._suffix`` (the suffix array's searches), ``nnlm.text._words`` (reading a
corpus), ``nnlm.ngram.formats._arpa_scan`` (reading ARPA),
``nnlm.ngram.formats._arpa_lines`` (writing it) and ``nnlm.ngram.formats._kenlm_build``
(writing KenLM's probing files). Each has a pure-Python/numpy path that gives the same
numbers, which the tests compare it with. setup.py builds them where a C compiler is
found; without one, or with ``NNLM_NO_C=1`` in the environment (read once, here, at
first use), every caller takes the Python path. A part that was not built (or does not
import) is said once a process, in one line, unless ``NNLM_NO_C=1`` says that is meant.
"""

from __future__ import annotations

import importlib
import os

from .errors import warn

SWITCH = "NNLM_NO_C"  # "1": never load the compiled parts


_missing: list[str] = []  # the parts found missing in this process (said once, at the first)


def extension(name: str):
    """The compiled module ``name`` (e.g. ``nnlm.ngram.store._trie``), or None where it
    was not built or :data:`SWITCH` is set."""
    if os.environ.get(SWITCH) == "1":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:  # not built (no compiler at install), or a broken build
        if not _missing:
            warn(f"nnlm's compiled parts are missing ({name} does not import: no C "
                 "compiler at install, or a broken build); the Python paths give the same "
                 "numbers, slower. Reinstall nnlm where a C compiler is found, or set "
                 f"{SWITCH}=1 to say the Python paths are meant")
        _missing.append(name)
        return None


def missing() -> list[str]:
    """The compiled parts this process looked for and did not find."""
    return list(_missing)

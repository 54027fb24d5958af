"""nnlm's optional parts: what each needs and the one line that says how to get it.

``pip install nnlm`` gives the count-based side: estimation, ARPA and KenLM binaries, the
kenlm-compatible module, scoring, rescoring and serving n-gram models, on numpy and
numba. The neural side (training, networks, mixtures with them, embeddings, the paper's
reproduction) needs PyTorch, safetensors and matplotlib: ``pip install ".[neural]"`` in
a checkout of nnlm (nnlm is installed from its source, not from PyPI).
A command that reaches for one of them without it ends in one line naming the extra,
never an ImportError.
"""

from __future__ import annotations

from .errors import NnlmError

NEURAL = ("torch", "safetensors", "matplotlib")
INSTALL = ('in nnlm\'s checkout, pip install ".[neural]" (PyTorch\'s CPU build first: pip '
           "install torch --index-url https://download.pytorch.org/whl/cpu)")
DISTRIBUTED = 'in nnlm\'s checkout, pip install ".[distributed]"'  # Dask


def missing_extra(error: ModuleNotFoundError, what: str = "this") -> NnlmError | None:
    """The one-line error for a missing optional package, or None if ``error`` is about
    another module (a real bug, to be raised as it is)."""
    name = (error.name or "").split(".")[0]
    if name not in NEURAL:
        return None
    return NnlmError(f"{what} needs {name}, part of nnlm's neural side, which is not "
                     f"installed: {INSTALL}")

"""nnlm's optional parts: what each needs and the one line that says how to get it.

``pip install nnlm`` gives the core: the n-gram side that decoders and scripts need
(estimation, ARPA, KenLM and nnlm files, the kenlm-compatible module, scoring, rescoring,
the CTC decoder) on numpy and nnlm's own compiled parts. Everything heavier is an extra,
named by what it is for (pyproject.toml lists them): ``neural`` (PyTorch), ``plots``,
``fast`` (numba's counting kernels), ``serve``, ``index``, ``distributed``, ``data``
(NLTK's Brown reader), ``decoders``, ``filter``, and ``all``. A command that reaches for
one of them without it ends in one line naming the extra, never an ImportError.
"""

from __future__ import annotations

from .errors import NnlmError

# an importable module -> the extras that bring it (the first is named unless the
# command that needs it is one of the others)
EXTRA_OF = {
    "torch": ("neural",), "safetensors": ("neural",),
    "matplotlib": ("plots",),
    "numba": ("fast",),
    "fastapi": ("serve",), "uvicorn": ("serve",), "starlette": ("serve",),
    "pydantic": ("serve",), "uvloop": ("serve",), "httptools": ("serve",),
    "orjson": ("serve", "filter"),
    "pydivsufsort": ("index",),
    "dask": ("distributed",), "distributed": ("distributed",),
    "nltk": ("data",),
    "huggingface_hub": ("decoders",),
    "sentencepiece": ("filter",), "zstandard": ("filter",), "pyarrow": ("filter",),
}
NEURAL = tuple(m for m, extras in EXTRA_OF.items() if "neural" in extras)
TORCH_CPU = ("PyTorch's CPU build first, if you like: pip install torch --index-url "
             "https://download.pytorch.org/whl/cpu")


def install(extra: str) -> str:
    """How to get ``extra``, as a command to paste."""
    line = f'pip install "nnlm[{extra}]"'
    return f"{line} ({TORCH_CPU})" if extra == "neural" else line


INSTALL = install("neural")
DISTRIBUTED = install("distributed")  # Dask


def missing_extra(error: ModuleNotFoundError, what: str = "this",
                  command: str | None = None) -> NnlmError | None:
    """The one-line error for a missing optional package, or None if ``error`` is about
    another module (a real bug, to be raised as it is). ``what``: who needs it;
    ``command``: the command that does, named as the extra where it is one of the
    package's (``filter`` for orjson)."""
    name = (error.name or "").split(".")[0]
    extras = EXTRA_OF.get(name)
    if extras is None:
        return None
    extra = command if command in extras else extras[0]
    return NnlmError(f"{what} needs {name}, part of nnlm's {extra} extra, which is not "
                     f"installed: {install(extra)}")

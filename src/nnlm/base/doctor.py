"""What this installation of nnlm has: its compiled parts, its optional packages, the
paths that run slow without them, and the machine (``nnlm doctor``).

Nothing here is imported to be used: each compiled part is imported once to see whether
it loads (and why not), each optional package is looked up by its distribution's
metadata (no import), so the report costs milliseconds and never warns.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys

from .compiled import SWITCH
from .extras import EXTRA_OF
from .version import __version__

# compiled part -> what is slower without it (the Python path gives the same numbers)
COMPILED = {
    "nnlm.ngram.store._trie": "mapped trie lookups, bulk scoring and the word index",
    "nnlm.decoding._kenlm_query": "nnlm.kenlm's per-call queries (BaseScore, score)",
    "nnlm.decoding.ctc._prefix_search": "the CTC decoder's search (nnlm.pyctcdecode)",
    "nnlm.index._suffix": "suffix-array searches (nnlm index, the unbounded model)",
    "nnlm.text._words": "reading a corpus into ids",
    "nnlm.ngram.formats._arpa_lines": "writing ARPA files",
    "nnlm.ngram.formats._arpa_scan": "reading ARPA files",
    "nnlm.ngram.formats._kenlm_build": "writing KenLM probing files",
}
# distribution -> what it gives; how it comes (with nnlm, an extra, or on its own) is
# EXTRA_OF's for an extra's packages
OPTIONAL = {
    "tqdm": "the progress bar on a terminal",
    "numba": "the compiled kernels of n-gram counting (and neural, distributed)",
    "fastapi": "nnlm serve",
    "uvicorn": "nnlm serve",
    "orjson": "fast JSON for nnlm serve and nnlm filter",
    "pydivsufsort": "building suffix arrays (nnlm index build)",
    "nltk": "reading NLTK's Brown corpus; the oracle of nnlm.nltk",
    "torch": "training and scoring the networks; the batch CTC decoder (CPU or GPU)",
    "safetensors": "the networks' weight files",
    "matplotlib": "plots",
    "dask": "estimation on a cluster",
    "distributed": "estimation on a cluster",
    "sentencepiece": "SentencePiece tokenizers (subword models, nnlm filter)",
    "zstandard": ".zst files",
    "pyarrow": "Parquet files",
    "huggingface_hub": "nnlm.pyctcdecode's load_from_hf_hub",
    "kenlm": "the kenlm module nnlm.kenlm replaces (the tests' oracle)",
    "pyctcdecode": "the decoder nnlm.pyctcdecode replaces (an oracle)",
}
CORE = ("tqdm",)  # what comes with nnlm; the rest not in an extra comes on its own


def compiled_parts() -> list[dict]:
    """Each compiled part: loaded, off (the switch), or missing with the reason."""
    off = os.environ.get(SWITCH) == "1"
    out = []
    for name, what in COMPILED.items():  # each imported once: whether it loads, and why not
        status, why = "compiled", ""
        if off:
            status, why = "off", f"{SWITCH}=1"
        else:
            try:
                importlib.import_module(name)
            except ImportError as e:
                status, why = "missing", str(e).splitlines()[0] if str(e) else type(e).__name__
        out.append({"part": name, "status": status, "why": why, "slower_without": what})
    return out


def optional_packages() -> list[dict]:
    """Each package nnlm can use: how it comes, its installed version (or None)."""
    return [{"package": name, "extra": extra, "version": _version(name), "for": what}
            for name, what in OPTIONAL.items() for extra in [_how(name)]]


def cpu_flags() -> list[str]:
    """The CPU features that decide nnlm's speed (bf16 training, AVX-512 kernels)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line.split(":", 1)[1].split() for line in f
                          if line.startswith("flags")), [])
    except OSError:
        return []
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "fma")
    return [x for x in wanted if x in flags]


def _how(name: str) -> str:
    if name in CORE:
        return "with nnlm"
    extras = EXTRA_OF.get(name)
    return "on its own" if extras is None else f"extra {', '.join(extras)}"


def report() -> dict:
    """The whole report, as ``nnlm doctor --json`` prints it."""
    parts = compiled_parts()
    return {
        "nnlm": __version__, "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "executable": sys.executable,
        "numpy": _version("numpy"), "cpu": cpu_flags(), "cores": os.cpu_count(),
        "compiled": parts, "optional": optional_packages(),
        "slow_paths": [p["slower_without"] for p in parts if p["status"] != "compiled"],
    }


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def render(data: dict) -> str:
    """The report as lines for a terminal."""
    lines = [f"nnlm {data['nnlm']} on Python {data['python']} ({data['platform']}), "
             f"numpy {data['numpy']}, {data['cores']} cores, CPU: "
             f"{', '.join(data['cpu']) or 'no AVX2'}"]
    lines.append("compiled parts:")
    for p in data["compiled"]:
        note = "" if p["status"] == "compiled" else f" ({p['why']}): slower {p['slower_without']}"
        lines.append(f"  {p['status']:9} {p['part']}{note}")
    lines.append("packages:")
    for p in data["optional"]:
        have = p["version"] or "not installed"
        lines.append(f"  {p['package']:14} {have:16} {p['extra']:18} {p['for']}")
    if data["slow_paths"]:
        lines.append("slow paths: " + "; ".join(data["slow_paths"]) + ". Reinstall nnlm "
                     "where a C compiler is found (pip install --force-reinstall .)")
    else:
        lines.append("every compiled part loads: no slow paths")
    return "\n".join(lines)

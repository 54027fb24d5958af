"""Opening nnlm's mapped trie (the format is in :mod:`.trie`): the header checked, every
section's bounds checked against the file, then the arrays mapped where they lie; and
one-file models, whose vocabulary and settings are inside."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ...base.errors import NnlmError
from ...text.fileio import read_head
from ...text.jsonfiles import Fields, check_fields
from ...text.specials import BOS_ID
from ...text.vocab import Vocabulary
from . import run_pointers
from .levels import backoff_arrays_problem
from .trie import MAGIC, STANDALONE, TrieLevel
from .trie_layout import (  # noqa: F401 - read_trie_header: named here too
    CODED_TABLES,
    SMALLEST_NORMAL,
    check_checksums,
    check_trie,
    map_file,
    read_trie_header,
    verify_requested,
)
from .value_codes import Coding, Decoded
from .values import Quantized
from .vocab_table import map_vocabulary


def map_trie(path: str | os.PathLike, binding: str | None, vocab_size: int,
             fingerprint: str | None = None, vocab_counts=None) -> dict:
    """Map a trie file; returns the header plus ``unigram_logp``, ``unigram_log_bow``
    (float64 copies: small, and summed in), ``levels`` (:class:`TrieLevel`) and
    ``vocab``: the mapped vocabulary (:mod:`.vocab_table`; its ``fingerprint`` is the
    one config.json or the one-file header gives; ``vocab_counts``: its counts, as
    :class:`.vocab_table.MappedVocabulary` takes them), or None in a file written before
    it held one. Sizes, bit widths, the binding and every section's bounds are checked
    first."""
    path = Path(path)
    header, start, expected, size = check_trie(path, binding, vocab_size)
    n, counts, pointers, slots = header["order"], header["counts"], header["pointers"], \
        header["slots"]
    vocab_entry = header.get("vocab")
    table = header["sections"]
    mapping = map_file(path, size)  # after every check: nothing read past the end
    if verify_requested():
        check_checksums(path, header, start, mapping)

    def section(name):
        dtype, length = expected[name]
        return np.frombuffer(mapping, dtype, length, start + table[name][0])

    coded = Coding(header, section, []) if "coded" in header else None

    def values(name, k):
        if coded is not None:
            decode = coded.logp if name == "logp" else coded.log_bow
            return Decoded(lambda: decode(k), counts[k - 1])
        coding = header["values"].get(f"{name}_{k}")
        if coding is None:
            return section(f"{name}_{k}")
        return Quantized(section(f"{name}_codes_{k}"), coding[0],
                         section(f"{name}_centers_{k}"), counts[k - 1])

    unigram_logp = section("unigram_logp").astype(np.float64)
    unigram_log_bow = section("unigram_log_bow").astype(np.float64)
    _check_small(path, header, section, expected, unigram_logp, unigram_log_bow)

    def run_starts(k):  # order k's run pointers into order k + 1
        spec, count, top = pointers[k - 1], counts[k - 1] + 1, counts[k]
        if spec[0] == "packed":
            return run_pointers.Packed(section(f"child_{k}"), spec[1], count, top)
        return run_pointers.Linear(section(f"child_lines_{k}"),
                                   section(f"child_exceptions_{k}"), spec[1], count, top)

    levels: list[TrieLevel] = []
    for k in range(2, n + 1):
        levels.append(TrieLevel(
            k, vocab_size, section(f"word_{k}"), header["word_bits"], run_starts(k - 1),
            counts[k - 1], values("logp", k), values("log_bow", k) if k < n else None,
            levels[-1] if levels else None,
            *((section(f"slots_{k}"), slots[str(k)][1], slots[str(k)][0])
              if str(k) in slots else ())))
        levels[-1].coding = coded
    if coded is not None:
        coded.levels = levels
    vocab = None
    if vocab_entry is not None:
        if fingerprint is None:
            fingerprint = header.get("model", {}).get("vocab_fingerprint", "")
        vocab = map_vocabulary(path, section, vocab_entry, fingerprint, vocab_counts)
    elif "model" in header:
        header["words"] = _embedded_words(path, section("vocab_words"),
                                          section("vocab_offsets"), vocab_size)
    return {**header, "unigram_logp": unigram_logp, "unigram_log_bow": unigram_log_bow,
            "levels": levels, "vocab": vocab, "file_bytes": size}


def _check_small(path: Path, header: dict, section, expected: dict, unigram_logp,
                 unigram_log_bow) -> None:
    """What is small is checked whole at opening: the unigrams, every code table and
    (values coded as counts) the tables their codes index. The orders' float32 arrays
    are not read (that would read the whole file): a bad number there shows in the
    scores, which nnlm.lm.check_logprobs refuses."""
    small = {"unigram_logp": unigram_logp, "unigram_log_bow": unigram_log_bow}
    small.update({key: section(f"{key.rsplit('_', 1)[0]}_centers_{key.rsplit('_', 1)[1]}")
                  for key, coding in header["values"].items() if coding is not None})
    if "coded" in header:  # the tables the codes index, and the unigrams' p
        small.update({name: section(name) for name in expected
                      if name == "unigram_p" or name.rsplit("_", 1)[0] in CODED_TABLES})
    for key, a in small.items():
        if np.isnan(a).any() or np.isposinf(a).any():
            raise NnlmError(f"{path}: {key} holds NaN or +inf; the file is damaged")
    if "coded" in header:
        problem = coded_tables_problem(small)
        if problem:
            raise NnlmError(f"{path}: {problem}; the file is damaged")
    # a quantized order's table may hold -inf: a file written before make_centers filled
    # its leading empty bins (as KenLM's MakeBins leaves them), and no value is coded
    # to it; a table of an order's own distinct values may not
    problem = backoff_arrays_problem(small if header["quantize"] is None else
                                     {"unigram_logp": unigram_logp,
                                      "unigram_log_bow": unigram_log_bow})
    if problem:
        raise NnlmError(f"{path}: {problem}; the model is corrupt")


def coded_tables_problem(tables: dict) -> str | None:
    """What is impossible in the tables a coded file's codes index (name -> array,
    checked finite already), or None: an estimate gives each word p in (0, 1] (<s>, never
    scored: 0), numerators a - D(a) >= 0, S of 0 or a normal positive number (a denormal
    one made p infinite), gamma >= 0. The C readers refuse the same (value_codes.h's
    ``tables_in_range`` and ``probabilities_in_range``)."""
    for name, a in tables.items():
        if name == "unigram_p":
            words = np.delete(a, BOS_ID)
            if a[BOS_ID] != 0 or not ((words > 0) & (words <= 1)).all():
                return "unigram_p holds a value outside (0, 1] (0 for <s>)"
            continue
        kind = name.rsplit("_", 1)[0]
        if kind in ("anum", "cgamma") and (a < 0).any():
            return f"{name} holds a negative value"
        if kind == "cS" and ((a < 0) | ((a > 0) & (a < SMALLEST_NORMAL))).any():
            return f"{name} holds a negative or denormal S"
    return None


def _embedded_words(path: Path, blob: np.ndarray, offsets: np.ndarray, V: int) -> list[str]:
    if offsets[0] != 0 or offsets[-1] != len(blob) or np.any(np.diff(offsets) < 0):
        raise NnlmError(f"{path}: its vocabulary section is damaged")
    data = blob.tobytes()
    try:
        return [data[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(),
                                                          offsets[1:].tolist())]
    except UnicodeDecodeError:
        raise NnlmError(f"{path}: a word of its vocabulary is not UTF-8") from None


def load_trie_file(path: str | os.PathLike, model_class):
    """A one-file model (``write_trie(..., standalone=True)``; ``nnlm ngram convert IN
    OUT.nnlm``): its kind, settings and vocabulary come from its header; ``model_class``
    (``nnlm.models.model_class``) gives the class of its kind."""

    path = Path(path)
    header, _ = read_trie_header(path)
    if "model" not in header:
        raise NnlmError(f"{path}: the trie file of a model directory, not a one-file model; "
                        "load the directory that holds it")
    check_fields(header, {"model": Fields({"kind": str, "config": dict,
                                           "vocab_fingerprint": str})}, str(path))
    cls = model_class(header["model"]["kind"])
    if not hasattr(cls, "from_trie"):
        raise NnlmError(f"{path}: holds a {header['model']['kind']} model; one-file models are "
                        "back-off models")
    mapped = map_trie(path, STANDALONE, header["vocab_size"])
    if mapped["vocab"] is not None:  # checked by its checksum
        return cls.from_mapped(path, mapped, mapped["vocab"], header["model"]["config"])
    try:  # written before the vocabulary was mapped: words only, checked by fingerprint
        vocab = Vocabulary(mapped["words"])
    except ValueError as e:
        raise NnlmError(f"{path}: its vocabulary is damaged ({e})") from None
    if vocab.fingerprint != header["model"]["vocab_fingerprint"]:
        raise NnlmError(f"{path}: its vocabulary does not match its fingerprint; the file is "
                        "damaged")
    return cls.from_mapped(path, mapped, vocab, header["model"]["config"])


def is_trie_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a file that starts as nnlm's trie files do."""

    p = Path(path)
    return p.is_file() and read_head(p, len(MAGIC)) == MAGIC

"""Opening nnlm's mapped trie (the format is in :mod:`.trie`): the header checked, every
section's bounds checked against the file, then the arrays mapped where they lie; and
one-file models, whose vocabulary and settings are inside."""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path

import numpy as np

from ...errors import NnlmError
from ...jsonfiles import check_fields
from ..levels import backoff_arrays_problem
from . import bits as bitpack
from . import run_pointers
from .trie import (
    ALIGN,
    BYTE_ORDER_MARK,
    FORMAT_VERSION,
    HEADER_FIELDS,
    MAGIC,
    PREFIX,
    STANDALONE,
    TrieLevel,
)
from .values import MAX_CODE_BITS, Quantized
from .vocab_table import map_vocabulary, table_size


def read_trie_header(path: Path) -> tuple[dict, int]:
    """The JSON header of a trie file and where its sections start, checked."""
    try:
        with open(path, "rb") as f:
            prefix = f.read(PREFIX.size)
            if len(prefix) < PREFIX.size or prefix[:8] != MAGIC:
                raise NnlmError(f"{path}: not an nnlm trie file (no NNLMTRIE at the start)")
            magic, mark, version, length = PREFIX.unpack(prefix)
            if mark != BYTE_ORDER_MARK:
                raise NnlmError(f"{path}: written on a machine of the other byte order; "
                                "convert it there to ARPA (nnlm ngram convert)")
            if version > FORMAT_VERSION:
                raise NnlmError(f"{path}: trie format version {version} is newer than this "
                                f"nnlm reads ({FORMAT_VERSION}); upgrade nnlm")
            size = os.fstat(f.fileno()).st_size
            if PREFIX.size + length > size:
                raise NnlmError(f"{path}: truncated inside its header ({size} bytes)")
            text = f.read(length)
    except OSError as e:
        raise NnlmError(f"{path}: cannot read ({e.strerror or e})") from None
    try:
        header = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise NnlmError(f"{path}: its header is damaged ({e})") from None
    if not isinstance(header, dict):
        raise NnlmError(f"{path}: its header is damaged (not a JSON object)")
    check_fields(header, HEADER_FIELDS, str(path))
    header["format_version"] = version
    start = -(-(PREFIX.size + length) // ALIGN) * ALIGN
    return header, start


def _expected_sections(header: dict) -> dict[str, tuple[str, int]]:
    """name -> (dtype, length) of every section the header's sizes call for."""
    n, V, counts = header["order"], header["vocab_size"], header["counts"]
    out = {"unigram_logp": ("<f4", V), "unigram_log_bow": ("<f4", V)}
    if "vocab" in header or "model" in header:  # words and offsets (one-file models
        words = header["sections"].get("vocab_words")  # written before: only those)
        out["vocab_words"] = ("|u1", words[3] if isinstance(words, list) and len(words) == 4
                              and isinstance(words[3], int) else -1)
        out["vocab_offsets"] = ("<i8", V + 1)
    if "vocab" in header:  # the mapped vocabulary's table (vocab_table)
        out["vocab_slots"] = ("<i4", header["vocab"]["slots"])
    for k in range(1, n + 1):
        if k < n:
            for name, length in run_pointers.sections(header["pointers"][k - 1], k,
                                                      counts[k - 1] + 1, counts[k]).items():
                out[name] = ("<u8", length)
        if k == 1:
            continue
        out[f"word_{k}"] = ("<u8", bitpack.packed_words(counts[k - 1], header["word_bits"]))
        if str(k) in header["slots"]:
            out[f"slots_{k}"] = ("<u8", bitpack.packed_words(*header["slots"][str(k)]))
        for name in ["logp"] + (["log_bow"] if k < n else []):
            coding = header["values"].get(f"{name}_{k}")
            if coding is None:
                out[f"{name}_{k}"] = ("<f4", counts[k - 1])
            else:
                out[f"{name}_codes_{k}"] = ("<u8", bitpack.packed_words(counts[k - 1],
                                                                         coding[0]))
                out[f"{name}_centers_{k}"] = ("<f4", coding[1])
    return out


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
    header, start = read_trie_header(path)
    vocab_entry = header.get("vocab")
    if vocab_entry is not None and not (
            isinstance(vocab_entry, dict) and isinstance(vocab_entry.get("crc32"), int)
            and isinstance(vocab_entry.get("slots"), int)
            and table_size(header["vocab_size"]) == vocab_entry["slots"]):
        raise NnlmError(f"{path}: its header's vocabulary entry is damaged")
    n, counts = header["order"], header["counts"]
    if len(counts) != n or not all(isinstance(c, int) and c >= 0 for c in counts):
        raise NnlmError(f"{path}: its header's n-gram counts do not match its order {n}")
    if header["vocab_size"] != vocab_size or counts[0] != vocab_size:
        raise NnlmError(f"{path}: made for a vocabulary of {header['vocab_size']} words, not "
                        f"this model's {vocab_size}; the model directory was mixed")
    if binding is not None and header["binding"] != binding:
        raise NnlmError(f"{path}: belongs to another model (fingerprint {header['binding']}, "
                        f"config.json wants {binding}); retrain or restore the directory")
    q = header["quantize"]
    if header["format_version"] < 2 and isinstance(header.get("child_bits"), list):
        header["pointers"] = [["packed", b] for b in header["child_bits"]]  # format 1
    pointers = header.get("pointers")
    if not (isinstance(pointers, list) and len(pointers) == n - 1 and all(
            run_pointers.spec_ok(spec, counts[k - 1] + 1, counts[k])
            for k, spec in enumerate(pointers, start=1))) or (
            q is not None and (len(q) != 2 or not all(isinstance(b, int) and 1 <= b <= 25
                                                     for b in q))):
        raise NnlmError(f"{path}: its header's bit widths are damaged")
    slots = header["slots"]
    for key, entry in slots.items():
        if not (key.isdigit() and 2 <= int(key) <= n and isinstance(entry, list)
                and len(entry) == 2 and all(isinstance(x, int) for x in entry)
                and counts[int(key) - 1] < entry[0] < 1 << 40 and 1 <= entry[1] <= 64):
            raise NnlmError(f"{path}: its header's table sizes are damaged")
    for key, coding in header["values"].items():
        if coding is not None and not (
                isinstance(coding, list) and len(coding) == 2
                and all(isinstance(x, int) for x in coding)
                and 1 <= coding[0] <= MAX_CODE_BITS and 1 <= coding[1] <= 1 << coding[0]):
            raise NnlmError(f"{path}: its header's value codes ({key}) are damaged")
    size = path.stat().st_size
    expected = _expected_sections(header)
    table = header["sections"]
    for name, (dtype, length) in expected.items():
        entry = table.get(name)
        if not (isinstance(entry, list) and len(entry) == 4 and entry[2] == dtype
                and entry[3] == length and isinstance(entry[0], int) and entry[0] >= 0
                and entry[1] == length * np.dtype(dtype).itemsize):
            raise NnlmError(f"{path}: section {name} is missing or has the wrong shape; the "
                            "file is damaged")
        if start + entry[0] + entry[1] > size:
            raise NnlmError(f"{path}: truncated ({size} bytes; section {name} ends at byte "
                            f"{start + entry[0] + entry[1]}); copy or write it again")
    with open(path, "rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""

    def section(name):
        dtype, length = expected[name]
        return np.frombuffer(mapping, dtype, length, start + table[name][0])

    def values(name, k):
        coding = header["values"].get(f"{name}_{k}")
        if coding is None:
            return section(f"{name}_{k}")
        return Quantized(section(f"{name}_codes_{k}"), coding[0],
                         section(f"{name}_centers_{k}"), counts[k - 1])

    unigram_logp = section("unigram_logp").astype(np.float64)
    unigram_log_bow = section("unigram_log_bow").astype(np.float64)
    # what is small is checked whole at opening: the unigrams and every code table (the
    # orders' float32 arrays are not read; a bad number there shows in the scores,
    # which nnlm.lm.check_logprobs refuses)
    small = {"unigram_logp": unigram_logp, "unigram_log_bow": unigram_log_bow}
    small.update({key: section(f"{key.rsplit('_', 1)[0]}_centers_{key.rsplit('_', 1)[1]}")
                  for key, coding in header["values"].items() if coding is not None})
    for key, a in small.items():
        if np.isnan(a).any() or np.isposinf(a).any():
            raise NnlmError(f"{path}: {key} holds NaN or +inf; the file is damaged")
    problem = backoff_arrays_problem(small)
    if problem:
        raise NnlmError(f"{path}: {problem}; the model is corrupt")
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
    from ...jsonfiles import Fields
    from ...vocab import Vocabulary

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
    from ...fileio import read_head

    p = Path(path)
    return p.is_file() and read_head(p, len(MAGIC)) == MAGIC

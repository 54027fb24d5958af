"""KenLM binary files' header, words and probing layout, without numpy: what
:mod:`.kenlm_binary` reads models with, and what :mod:`nnlm.kenlm` opens a probing file
with straight from the mapping (no numpy, no model), as it opens nnlm's own files.
The format's facts are in :mod:`.kenlm_binary`'s docstring."""

from __future__ import annotations

import math
import struct
from pathlib import Path

from ...base.errors import NnlmError

VERSIONED = b"mmap lm http://kheafield.com/code format version "
MAGIC = b"mmap lm http://kheafield.com/code format version 5\n\0\0"
INCOMPLETE = b"mmap lm http://kheafield.com/code incomplete\n"
SANITY = MAGIC.ljust(56, b"\0") + struct.pack("<fffIIIQ", 0.0, 1.0, -0.5, 1, 0xFFFFFFFF, 0, 1)
FIXED = struct.Struct("<B3xfiB3xI")  # order, probing multiplier, model type, words?, version
MODEL_TYPES = {0: "probing", 1: "probing with rest costs", 2: "trie", 3: "quantized trie",
               4: "trie with array-compressed pointers",
               5: "quantized trie with array-compressed pointers"}
TRIE_VERSION = 1


PROBING_VERSION = 0


def _align8(n: int) -> int:
    return (n + 7) // 8 * 8


def read_header(path: Path, data: bytes) -> tuple[dict, int]:
    """The fixed header of a KenLM binary file, checked: (fields, header size)."""
    if len(data) < len(SANITY) + FIXED.size or data[:len(SANITY)] != SANITY:
        if data[:len(INCOMPLETE)] == INCOMPLETE:
            raise NnlmError(f"{path}: a KenLM binary file that build_binary did not finish "
                            "writing; build it again")
        if data[:len(VERSIONED)] == VERSIONED:
            version = data[len(VERSIONED):len(VERSIONED) + 4].split(b"\n")[0]
            if version != b"5":
                raise NnlmError(f"{path}: KenLM binary format version "
                                f"{version.decode('ascii', 'replace')}; nnlm reads version 5 "
                                "(KenLM's since 2012): rebuild it from its ARPA file")
            if len(data) < len(SANITY) + FIXED.size:
                raise NnlmError(f"{path}: a truncated KenLM binary file ({len(data)} bytes)")
            raise NnlmError(f"{path}: a KenLM binary file from a machine of another byte order "
                            "or word size (its test values differ); rebuild it here from its "
                            "ARPA file")
        raise NnlmError(f"{path}: not a KenLM binary file")
    order, multiplier, model_type, has_words, version = FIXED.unpack_from(data, len(SANITY))
    start = len(SANITY) + FIXED.size
    if not 1 <= order <= 64 or len(data) < start + 8 * order:
        raise NnlmError(f"{path}: a damaged or truncated KenLM binary header (order {order})")
    counts = list(struct.unpack_from(f"<{order}Q", data, start))
    fields = {"order": order, "probing_multiplier": multiplier, "model_type": model_type,
              "has_words": bool(has_words), "search_version": version, "counts": counts}
    return fields, _align8(start + 8 * order)


def _check_words_kept(path: Path, header: dict) -> None:
    if not header["has_words"]:
        raise NnlmError(f"{path}: a KenLM binary file built without its words; nnlm needs "
                        "them: rebuild it from its ARPA file")


def _words(path: Path, data: bytes, at: int, count: int) -> list[str]:
    """The vocabulary's words stored after the search structure, in id order."""
    blob = data[at:]
    if not blob.startswith(b"<unk>\0"):
        raise NnlmError(f"{path}: the words at the end of this KenLM binary file are missing "
                        "or misplaced (it may be truncated, or built without its vocabulary)")
    parts = blob.split(b"\0")
    if len(parts) < count or any(parts[count:]):
        raise NnlmError(f"{path}: has {len(parts) - 1:,} words at its end, its header says "
                        f"{count:,}; the file is truncated or damaged")
    try:
        return [p.decode("utf-8") for p in parts[:count]]
    except UnicodeDecodeError:
        raise NnlmError(f"{path}: a word at its end is not UTF-8") from None


def float32(x: float) -> float:
    """``x`` rounded to float32, as KenLM's arithmetic holds it."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def probing_buckets(entries: int, multiplier: float) -> int:
    """ProbingHashTable::Size's bucket count (the product in float32, as KenLM has it: the
    exact double product of two float32 values rounds as float32 arithmetic does)."""
    return max(entries + 1, int(float32(float32(multiplier) * float32(entries))))


def probing_layout(path: Path, data, header: dict, start: int) -> dict:
    """Where a probing file's parts lie, checked against its size: ``unigrams`` (offset,
    item size), ``orders`` [(offset, item size, buckets)] for orders 2..n, ``words`` (the
    offset of the words), and ``rest`` (rest costs stored)."""
    counts, order = header["counts"], header["order"]
    if header["search_version"] != PROBING_VERSION:
        raise NnlmError(f"{path}: KenLM probing version {header['search_version']}; nnlm reads "
                        f"version {PROBING_VERSION}")
    _check_words_kept(path, header)
    if order < 2:
        raise NnlmError(f"{path}: a KenLM binary of order {order}; KenLM writes orders >= 2")
    mult = header["probing_multiplier"]
    if not (isinstance(mult, float) and math.isfinite(mult) and 0 < mult < 1e6):
        raise NnlmError(f"{path}: its header's probing multiplier is {mult!r}, not a finite "
                        "number > 0 (build_binary writes 1.5 unless -p says otherwise); the "
                        "header is damaged")
    V, rest = counts[0], header["model_type"] == 1
    pos = start
    if len(data) < pos + 8:
        raise NnlmError(f"{path}: a truncated KenLM binary file ({len(data):,} bytes)")
    if struct.unpack_from("<I", data, pos)[0] != 0:
        raise NnlmError(f"{path}: KenLM probing vocabulary version "
                        f"{struct.unpack_from('<I', data, pos)[0]}; nnlm reads version 0")
    pos += 8 + probing_buckets(V, mult) * 12  # the vocabulary's table: words come at the end
    weights = 12 if rest else 8  # p, b (, rest)
    parts = [("unigrams", weights, V + 1)]
    parts += [(f"{k}-grams", 8 + weights, probing_buckets(counts[k - 1], mult))
              for k in range(2, order)]
    parts += [(f"{order}-grams", 12, probing_buckets(counts[-1], mult))]
    offsets = []
    for name, itemsize, n in parts:
        if len(data) < pos + itemsize * n:
            raise NnlmError(f"{path}: truncated in its {name} ({len(data):,} bytes; they end "
                            f"at byte {pos + itemsize * n:,})")
        offsets.append((pos, itemsize, n))
        pos += itemsize * n
    return {"unigrams": offsets[0][:2], "orders": offsets[1:], "words": pos, "rest": rest}

"""KenLM binary files' header, words and probing layout, without numpy: what
:mod:`.kenlm_binary` reads models with, and what :mod:`nnlm.kenlm` opens a probing file
with straight from the mapping (no numpy, no model), as it opens nnlm's own files.
The format's facts are in :mod:`.kenlm_binary`'s docstring."""

from __future__ import annotations

import math
import struct
from pathlib import Path
from types import SimpleNamespace

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


def check_words_kept(path: Path, header: dict) -> None:
    if not header["has_words"]:
        raise NnlmError(f"{path}: a KenLM binary file built without its words; nnlm needs "
                        "them: rebuild it from its ARPA file")


def read_words(path: Path, data: bytes, at: int, count: int, probing: bool = False) -> list[str]:
    """The vocabulary's words stored after the search structure, in id order. A probing
    file built from an ARPA file without ``<unk>`` (a closed vocabulary) holds one word
    more than its header's unigram count, which stays the ARPA's: KenLM adds ``<unk>``
    as word 0 and sizes its unigram table ``count + 1`` for it (``probing``: allowed)."""
    blob = data[at:]
    if not blob.startswith(b"<unk>\0"):
        raise NnlmError(f"{path}: the words at the end of this KenLM binary file are missing "
                        "or misplaced (it may be truncated, or built without its vocabulary)")
    parts = blob.split(b"\0")
    if probing and len(parts) > count + 1 and parts[count] and not any(parts[count + 1:]):
        count += 1  # <unk> added to a closed vocabulary
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
    check_words_kept(path, header)
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


def required_bits(max_value: int) -> int:
    """KenLM's RequiredBits: bits to store 0..max_value (0 for 0)."""
    return int(max_value).bit_length()


class TrieLayout:
    """Where each part of a trie file lies, from its counts and bit widths."""

    def __init__(self, path: Path, data: bytes, header: dict, start: int):
        counts, order = header["counts"], header["order"]
        self.quantized = header["model_type"] in (3, 5)
        self.array = header["model_type"] in (4, 5)
        pos = start + 8 + 8 * counts[0]  # the sorted vocabulary: a count, then hashes
        self.search = pos
        self.prob_bits = self.bow_bits = 0
        if self.quantized:
            self._need(path, data, pos + 3)
            qversion, self.prob_bits, self.bow_bits = data[pos], data[pos + 1], data[pos + 2]
            if qversion != 2 or not (1 <= self.prob_bits <= 25 and 1 <= self.bow_bits <= 25):
                raise NnlmError(f"{path}: KenLM quantization version {qversion} with "
                                f"{self.prob_bits}/{self.bow_bits} bits; nnlm reads version 2 "
                                "with 1-25 bits")
            self.tables = pos + 8
            pos += (order - 2) * ((1 << self.bow_bits) + (1 << self.prob_bits)) * 4 \
                + (1 << self.prob_bits) * 4 + 8
        self.unigrams = pos
        pos += (counts[0] + 2) * 16
        self.chop = 0
        if self.array and order > 2:
            self._need(path, data, pos + 2)
            if data[pos] != 0:
                raise NnlmError(f"{path}: KenLM pointer-compression version {data[pos]}; nnlm "
                                "reads version 0")
            self.chop_config = data[pos + 1]
        self.word_bits = required_bits(counts[0])
        self.middles = []
        for k in range(2, order):
            entries, max_next = counts[k - 1], counts[k]
            quant = self.prob_bits + self.bow_bits if self.quantized else 63
            if self.array:
                chop = self._chop_bits(entries + 1, max_next)
                inline = required_bits(max_next) - chop
                n_offsets = (max_next >> (required_bits(max_next) - chop)) + 1
                offsets_at = _align8(pos) + 8
                bhiksha = 8 * (1 + n_offsets) + 7
            else:
                chop, inline, n_offsets, offsets_at, bhiksha = 0, required_bits(max_next), 0, 0, 0
            total = self.word_bits + quant + inline
            base = pos + bhiksha
            size = ((1 + entries) * total + 7) // 8 + 8
            self.middles.append(SimpleNamespace(
                k=k, n=entries, base=base, size=size, total=total, quant=quant, inline=inline,
                chop=chop, offsets_at=offsets_at, n_offsets=n_offsets))
            pos = base + size
        longest_quant = self.prob_bits if self.quantized else 31
        total = self.word_bits + longest_quant
        size = ((1 + counts[-1]) * total + 7) // 8 + 8
        self.longest = SimpleNamespace(k=order, n=counts[-1], base=pos, size=size, total=total)
        self.end = pos + size  # where the words begin

    def _chop_bits(self, max_offset: int, max_next: int) -> int:
        """ArrayBhiksha's choice of how many high pointer bits go to the table."""
        required = required_bits(max_next)
        best, lowest = 0, None
        for chop in range(0, min(required, self.chop_config) + 1):
            change = (max_next >> (required - chop)) * 64 - max_offset * chop
            if lowest is None or change < lowest:
                best, lowest = chop, change
        return best

    @staticmethod
    def _need(path, data, end):
        if len(data) < end:
            raise NnlmError(f"{path}: a truncated KenLM binary file ({len(data):,} bytes; its "
                            f"header needs at least {end:,})")

"""The layout of nnlm's trie file (:mod:`.trie` describes the format) without numpy: the
constants, the header's checks, and each section's expected shape.

Everything that decides whether a file may be mapped lives here, so that the numpy
reader (:mod:`.trie_map`) and the kenlm module's numpy-free opening
(:func:`map_sections`, for :mod:`nnlm.kenlm`) refuse exactly the same files. Importing
this module imports neither numpy nor the rest of nnlm's models: a process that only
queries a trie file through ``nnlm.kenlm`` costs what kenlm's own does.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import mmap
import os
import struct
import zlib
from pathlib import Path

from ...base import magic
from ...base.errors import NnlmError
from ...text.jsonfiles import Int, Optional, check_fields
from ...text.specials import SPECIALS

MAGIC = magic.NNLM_TRIE
BYTE_ORDER_MARK = 0x01020304
FORMAT_VERSION = 4  # the newest read and what is written: 4, the header's own CRC-32
# (header_text); 3, values coded as counts (value_codes); 2, run pointers in lines; 1,
# bit-packed run pointers. Every section has had its CRC-32 since files of version 3: a
# file of version 3 or newer without them is damaged, not old
SUMMED_FORMAT_VERSION = 3
HEADER_CRC = b', "header_crc32": '  # how the header's checksum ends its JSON text
FILE_NAME = "ngrams.trie"
ALIGN = 64
PREFIX = struct.Struct("<8sIIQ")  # magic, byte-order mark, version, JSON length
STANDALONE = "standalone"  # the binding of a one-file model (no config.json to bind to)
MAX_CODE_BITS = 25  # quantized values: at most 2^25 centers an order
ESCAPE_BLOCK_SHIFT = 9  # coded values: where each 512 entries' escapes start (value_codes)

HEADER_FIELDS = {"order": Int(min=1, max=64), "vocab_size": Int(min=3), "counts": list,
                 "binding": str, "sections": dict, "word_bits": Int(min=1, max=64),
                 "child_bits": Optional(list), "pointers": Optional(list),  # format 1; 2
                 "quantize": Optional(list), "unk_extends": bool,
                 "slots": dict, "values": dict, "model": Optional(dict),
                 "vocab": Optional(dict), "checksums": Optional(dict),
                 "coded": Optional(dict), "header_crc32": Optional(Int(min=0, max=2**32 - 1))}

ITEM_BYTES = {"|u1": 1, "<i4": 4, "<u4": 4, "<f4": 4, "<i8": 8, "<u8": 8, "<f8": 8}
BUFFER_FORMAT = {"|u1": "B", "<i4": "i", "<u4": "I", "<f4": "f", "<i8": "q", "<u8": "Q",
                 "<f8": "d"}

# the run pointers' lines (:mod:`.run_pointers`)
SHIFT = 6               # 64 pointers a line
B = 1 << SHIFT
LINE_WORDS = 8
BASE_BITS = 40


def width(largest: int) -> int:
    """Bits for values 0..largest (at least 1)."""
    return max(1, int(largest).bit_length())


def packed_words(n: int, bits: int) -> int:
    """Length in uint64 words of ``n`` values of ``bits`` bits, spare word included."""
    return (n * bits + 63) // 64 + 1


def vocab_table_size(n_words: int) -> int:
    """Slots of the vocabulary's table for ``n_words``: the power of two at or above twice
    them (at least 16)."""
    return max(16, 1 << max(2 * n_words - 1, 1).bit_length())


VOCAB_DAMAGED = "its vocabulary section is damaged (checksum or offsets); copy or write " \
    "the file again"


def checksum(sections) -> int:
    """CRC-32 of the sections' bytes (C-contiguous buffers), one after another: the
    header's ``vocab.crc32`` over the words and their offsets."""
    crc = 0
    for a in sections:
        crc = zlib.crc32(memoryview(a).cast("B"), crc)
    return crc


def vocab_problem(blob, offsets, crc: int) -> str | None:
    """What is wrong with a trie file's vocabulary sections (``blob``: the words in UTF-8
    end to end; ``offsets``: V + 1 int64), or None: their ends, their checksum against
    the header's ``crc``, and the specials first. That the offsets never decrease is the
    caller's to check (numpy, or the C reader that takes them)."""
    if offsets[0] != 0 or offsets[-1] != len(blob) or checksum([blob, offsets]) != crc:
        return VOCAB_DAMAGED
    words = memoryview(blob).cast("B")
    if tuple(bytes(words[offsets[i]:offsets[i + 1]]) for i in range(len(SPECIALS))) != \
            tuple(w.encode() for w in SPECIALS):
        return f"its vocabulary does not start with {', '.join(SPECIALS)}; the file is damaged"
    return None


def pointer_sections(spec: list, k: int, count: int, top: int) -> dict[str, int]:
    """Section name -> uint64 words of order k's run pointers, from its header entry
    (``["packed", bits]`` or ``["linear", n_exceptions]``): what the reader checks the
    file against."""
    if spec[0] == "packed":
        return {f"child_{k}": packed_words(count, spec[1])}
    return {f"child_lines_{k}": -(-count // B) * LINE_WORDS + 1,
            f"child_exceptions_{k}": packed_words(spec[1] * B, width(top))
            if spec[1] else 1}


def pointer_spec_ok(spec, count: int, top: int) -> bool:
    """Whether a run-pointer header entry is one this reader knows, with sane numbers."""
    if not isinstance(spec, list) or not spec or spec[0] not in ("packed", "linear"):
        return False
    if spec[0] == "packed":
        return len(spec) == 2 and isinstance(spec[1], int) and 1 <= spec[1] <= 64
    return (len(spec) == 2 and isinstance(spec[1], int) and 0 <= spec[1] <= -(-count // B)
            and top < 1 << BASE_BITS)


def header_text(header: dict) -> bytes:
    """``header`` as a file's JSON text, its CRC-32 (over the text before it, closed by
    the brace) its last entry: one damaged byte anywhere in the header, a key's name
    included, no longer passes for another file (a renamed "checksums" once read as a
    file without checksums)."""
    text = json.dumps(header).encode()
    return text[:-1] + HEADER_CRC + b"%d}" % zlib.crc32(text)


def header_crc_problem(text: bytes) -> str | None:
    """Why the JSON text of a header does not match its own CRC-32 (:func:`header_text`),
    or None."""
    text = text.rstrip(b" ")
    at = text.rfind(HEADER_CRC)
    digits = text[at + len(HEADER_CRC):-1] if at >= 0 else b""
    if at < 0 or not text.endswith(b"}") or not digits.isdigit():
        return "its header's own checksum is missing"
    if zlib.crc32(text[:at] + b"}") != int(digits):
        return "its header does not match its own checksum"
    return None


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
            if version < 1:
                raise NnlmError(f"{path}: its header is damaged (trie format version "
                                f"{version})")
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
    if version >= 4 or "header_crc32" in header:  # (an older version with one: damaged)
        problem = header_crc_problem(text) if version >= 4 else "its version is damaged"
        if problem:
            raise NnlmError(f"{path}: {problem}; the file is damaged: copy or write it "
                            "again")
    if version >= SUMMED_FORMAT_VERSION and "checksums" not in header:
        raise NnlmError(f"{path}: its header has no section checksums, which every file of "
                        f"format {version} has; the header is damaged")
    check_fields(header, HEADER_FIELDS, str(path))
    header.pop("header_crc32", None)
    header["format_version"] = version
    start = -(-(PREFIX.size + length) // ALIGN) * ALIGN
    return header, start


def expected_sections(header: dict) -> dict[str, tuple[str, int]]:
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
            for name, length in pointer_sections(header["pointers"][k - 1], k,
                                                 counts[k - 1] + 1, counts[k]).items():
                out[name] = ("<u8", length)
        if k == 1:
            continue
        out[f"word_{k}"] = ("<u8", packed_words(counts[k - 1], header["word_bits"]))
        if str(k) in header["slots"]:
            out[f"slots_{k}"] = ("<u8", packed_words(*header["slots"][str(k)]))
        if "coded" in header:
            continue
        for name in ["logp"] + (["log_bow"] if k < n else []):
            coding = header["values"].get(f"{name}_{k}")
            if coding is None:
                out[f"{name}_{k}"] = ("<f4", counts[k - 1])
            else:
                out[f"{name}_codes_{k}"] = ("<u8", packed_words(counts[k - 1], coding[0]))
                out[f"{name}_centers_{k}"] = ("<f4", coding[1])
    if "coded" in header:
        out.update(coded_sections(header))
    return out


def coded_sections(header: dict) -> dict[str, tuple[str, int]]:
    """The sections of a file whose values are coded as counts (:mod:`.value_codes`):
    per order k, its entries' numerators (k >= 2) and its contexts' S, gamma and
    back-off (k < n), each codes, escapes and a table; and the unigrams' p."""
    n, counts, coded = header["order"], header["counts"], header["coded"]
    out = {"unigram_p": ("<f8", header["vocab_size"])}
    for k in range(1, n + 1):
        for kind, tables in (("a", {"anum": "<f8"}),
                             ("c", {"cS": "<f8", "cgamma": "<f8", "cbow": "<f4"})):
            if (kind == "a" and k == 1) or (kind == "c" and k == n):
                continue
            bits, symbols, escapes = coded[f"{kind}_{k}"]
            out[f"{kind}codes_{k}"] = ("<u8", packed_words(counts[k - 1], bits))
            out[f"{kind}flags_{k}"] = ("<u8", counts[k - 1] // 64 + 1)
            out[f"{kind}block_{k}"] = ("<u8", (counts[k - 1] >> ESCAPE_BLOCK_SHIFT) + 2)
            out[f"{kind}esc_{k}"] = ("<u4", escapes)
            if kind == "a":
                out[f"aesc_logp_{k}"] = ("<f4", escapes)
            for name, dtype in tables.items():
                out[f"{name}_{k}"] = (dtype, symbols)
    return out


CODED_TABLES = ("anum", "cS", "cgamma", "cbow", "unigram_p")  # checked at opening
SMALLEST_NORMAL = 2.0 ** -1022  # an S between 0 and this is impossible (value_codes.h)


def coded_spec(header: dict, section, k: int, trie_spec: tuple) -> tuple:
    """Order k of a file of coded values as both C readers take it (``value_codes.h``):
    ("coded", the order's trie tuple (values empty), its numerators, its contexts (None
    at the top), the unigrams' p, their contexts); ``section(name)``: a section's
    buffer (numpy's arrays or the numpy-free reader's memoryviews)."""
    def field(kind: str, j: int) -> tuple:
        bits, n_symbols, _ = header["coded"][f"{kind}_{j}"]
        tables = ("aesc_logp", "anum") if kind == "a" else ("cS", "cgamma", "cbow")
        return (section(f"{kind}codes_{j}"), bits, n_symbols, section(f"{kind}flags_{j}"),
                section(f"{kind}block_{j}"), section(f"{kind}esc_{j}"),
                *(section(f"{t}_{j}") for t in tables))

    top = k == header["order"]
    return ("coded", trie_spec, field("a", k), None if top else field("c", k),
            section("unigram_p"), field("c", 1))


def coded_problem(header: dict) -> str | None:
    """What is wrong with a header's ``coded`` entry, or None: one [bits, symbols,
    escapes] per field, in range."""
    n, counts, coded = header["order"], header["counts"], header["coded"]
    want = {f"a_{k}" for k in range(2, n + 1)} | {f"c_{k}" for k in range(1, n)}
    if not isinstance(coded, dict) or set(coded) != want or header["quantize"] is not None:
        return "its header's value codes are damaged"
    for key, entry in coded.items():
        k = int(key.split("_")[1])
        if not (isinstance(entry, list) and len(entry) == 3
                and all(isinstance(x, int) for x in entry)
                and 1 <= entry[0] <= 31 and 1 <= entry[1] <= max(counts[k - 1], 1)
                and 0 <= entry[2] <= counts[k - 1]):
            return f"its header's value codes ({key}) are damaged"
    return None


def check_trie(path: Path, binding: str | None, vocab_size: int
               ) -> tuple[dict, int, dict[str, tuple[str, int]], int]:
    """The header of the trie file ``path``, checked whole before anything is mapped:
    sizes, bit widths, the binding (None: not checked), and every section's shape and
    bounds against the file. Returns (header, where the sections start, each section's
    (dtype, length), the file's size); a damaged file is one line (NnlmError)."""
    header, start = read_trie_header(path)
    vocab_entry = header.get("vocab")
    if vocab_entry is not None and not (
            isinstance(vocab_entry, dict) and isinstance(vocab_entry.get("crc32"), int)
            and isinstance(vocab_entry.get("slots"), int)
            and vocab_table_size(header["vocab_size"]) == vocab_entry["slots"]):
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
            pointer_spec_ok(spec, counts[k - 1] + 1, counts[k])
            for k, spec in enumerate(pointers, start=1))) or (
            q is not None and (len(q) != 2 or not all(isinstance(b, int) and 1 <= b <= 25
                                                     for b in q))):
        raise NnlmError(f"{path}: its header's bit widths are damaged")
    for key, entry in header["slots"].items():
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
    if "coded" in header and (header["format_version"] < 3 or coded_problem(header)):
        raise NnlmError(f"{path}: {coded_problem(header) or 'its header is damaged'}")
    size = path.stat().st_size
    expected = expected_sections(header)
    table = header["sections"]
    for name, (dtype, length) in expected.items():
        entry = table.get(name)
        if not (isinstance(entry, list) and len(entry) == 4 and entry[2] == dtype
                and entry[3] == length and isinstance(entry[0], int) and entry[0] >= 0
                and entry[1] == length * ITEM_BYTES[dtype]):
            raise NnlmError(f"{path}: section {name} is missing or has the wrong shape; the "
                            "file is damaged")
        if start + entry[0] + entry[1] > size:
            raise NnlmError(f"{path}: truncated ({size} bytes; section {name} ends at byte "
                            f"{start + entry[0] + entry[1]}); copy or write it again")
    spans = sorted((table[name][0], table[name][0] + table[name][1], name) for name in expected)
    for (_, end, name), (begin, _, after) in zip(spans, spans[1:]):
        if begin < end:
            raise NnlmError(f"{path}: its header's sections {name} and {after} overlap; the "
                            "header is damaged")
    sums = header.get("checksums")
    if sums is not None and not (isinstance(sums, dict) and set(sums) == set(expected) and all(
            isinstance(c, int) and 0 <= c < 1 << 32 for c in sums.values())):
        raise NnlmError(f"{path}: its header's section checksums are damaged")
    return header, start, expected, size


# -- checksums -------------------------------------------------------------------------------
_VERIFY: contextvars.ContextVar[tuple[list, ...]] = contextvars.ContextVar(
    "nnlm_verifying", default=())  # the logs of the verifying() contexts open here


@contextlib.contextmanager
def verifying():
    """Within it, every trie file that is mapped (:func:`map_sections`,
    :func:`nnlm.ngram.store.trie_map.map_trie`) has every section checked against its
    CRC-32 first (it reads the whole file: about a second a GB): what every nnlm
    command does once at opening. Yields a list of (file, sections checked) for each
    file mapped meanwhile (0 sections: a file written before sections had checksums).
    The state is the context's own (a thread's, an asyncio task's): a server's reload
    in a worker thread and a command's opening never share it."""
    log: list = []
    token = _VERIFY.set(_VERIFY.get() + (log,))
    try:
        yield log
    finally:
        _VERIFY.reset(token)


def verify_requested() -> bool:
    return bool(_VERIFY.get())


def damaged_sections(header: dict, start: int, whole) -> list[str]:
    """The sections whose bytes do not match the header's CRC-32 (``whole``: the file's
    bytes, mapped); [] for a file written before sections had checksums."""
    sums = header.get("checksums") or {}
    table = header["sections"]
    view = memoryview(whole)
    return [name for name, crc in sums.items()
            if zlib.crc32(view[start + table[name][0]:start + table[name][0] + table[name][1]])
            != crc]


def check_checksums(path: Path, header: dict, start: int, whole) -> None:
    """One line naming the first damaged section, if any (:func:`damaged_sections`);
    what was checked goes into the log of :func:`verifying`."""
    bad = damaged_sections(header, start, whole)
    for log in _VERIFY.get():
        log.append((str(path), len(header.get("checksums") or {})))
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise NnlmError(f"{path}: section {bad[0]}{more} is damaged: its bytes do not match "
                        "the checksum written with it; copy or write the file again")


def map_file(path: Path, size: int):
    """The whole file mapped read-only (b"" for an empty one)."""
    with open(path, "rb") as f:
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""


def map_sections(path: str | os.PathLike, binding: str | None, vocab_size: int):
    """``check_trie``, then the file mapped: returns (header, ``section(name)``), where a
    section is a flat memoryview of its items (format ``f``, ``Q``, ``q``, ``i`` or
    ``B``) over the mapping. No numpy: what :mod:`nnlm.kenlm` opens a file with."""
    path = Path(path)
    header, start, expected, size = check_trie(path, binding, vocab_size)
    whole = memoryview(map_file(path, size))
    if verify_requested():
        check_checksums(path, header, start, whole)
    table = header["sections"]

    def section(name: str) -> memoryview:
        dtype, length = expected[name]
        at = start + table[name][0]
        return whole[at:at + length * ITEM_BYTES[dtype]].cast(BUFFER_FORMAT[dtype])

    return header, section

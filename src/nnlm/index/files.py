"""An index on disk: infini-gram's files (Liu et al. 2024, version 4), and nnlm's header.

A shard ``i`` is three files, each infini-gram's own:

* ``tokenized.i``: every document as its separator (``width`` bytes of 0xff) and then its
  token ids, little-endian integers of ``width`` bytes (2 while ids fit under 65,535, the
  separator's value; 4 beyond);
* ``table.i``: the suffix array: for every token position, in the order of the byte
  strings that start there, the position's byte offset in ``p`` little-endian bytes,
  ``p = ceil(log2(bytes of tokenized.i) / 8)``;
* ``offset.i``: each document's byte offset, uint64.

nnlm adds ``index.json`` (every file's size and CRC-32, the token width, the documents'
kind, the vocabulary's fingerprint) and ``vocab.txt``, the words of the ids. Sizes are
checked before anything is mapped; the checksums when asked (``verify``, every command's
default: about a second a GB). Because the files are infini-gram's, its engine opens an
nnlm index as it is (the tests use it as the oracle), and nnlm opens an index infini-gram
built (no header: sizes are checked, the width inferred, and the ids have no words).
"""

from __future__ import annotations

import json
import mmap
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..base.errors import NnlmError, warn
from ..text.vocab import Vocabulary
from .search import sample_keys

HEADER = "index.json"
FORMAT = "nnlm-index"
VERSION = 1
FILES = ("tokenized", "table", "offset")
WIDTHS = (2, 4)  # token bytes nnlm reads (infini-gram's u16 and u32; u8 is for bytes)


def separator(width: int) -> int:
    """The separator's id at ``width`` bytes: all ones (65,535 or 4,294,967,295)."""
    return (1 << (8 * width)) - 1


def pointer_bytes(text_bytes: int) -> int:
    """Bytes a table entry takes for a shard of ``text_bytes``: ceil(log2(bytes) / 8), as
    infini-gram's indexer computes it (at least 1)."""
    return max(1, -(-max(text_bytes - 1, 1).bit_length() // 8))


def width_for(vocab_size: int) -> int:
    """Token bytes for a vocabulary of ``vocab_size`` ids: 2 while every id is below the
    u16 separator, else 4."""
    return 2 if vocab_size < separator(2) else 4


@dataclass
class Shard:
    """One shard, mapped: ``text`` and ``table`` are buffers read in place; ``docs`` the
    documents' byte offsets (uint64)."""

    path: Path
    number: int
    text: object
    table: object
    docs: np.ndarray
    width: int
    ptr: int
    _sample: tuple | None = None

    @property
    def tokens(self) -> int:
        return len(self.text) // self.width

    @property
    def sample(self) -> tuple:
        """The 8-byte keys of every stride-th suffix (:func:`~nnlm.index.search.sample_keys`),
        read at the first query that needs them."""
        if self._sample is None:
            self._sample = sample_keys(self.text, self.table, self.ptr)
        return self._sample

    def file(self, kind: str) -> Path:
        return self.path / f"{kind}.{self.number}"


# -- writing --------------------------------------------------------------------------------
def write_shard(directory: Path, number: int, stream: np.ndarray, doc_offsets: np.ndarray,
                suffixes: np.ndarray, text_written: bool = False) -> dict:
    """Write shard ``number``: ``stream`` (the token ids, separators included, as uint16
    or uint32; already in ``tokenized.number`` where ``text_written``), ``doc_offsets``
    (token positions of the separators) and ``suffixes`` (the token positions in the
    table's order). Returns its entry of the header."""
    width = stream.dtype.itemsize
    text = stream.astype(f"<u{width}", copy=False)
    size = len(text) * width
    ptr = pointer_bytes(size)
    entries = {}
    crc = {}
    paths = {kind: directory / f"{kind}.{number}" for kind in FILES}
    if not text_written:
        with open(paths["tokenized"], "wb") as f:
            f.write(memoryview(text).cast("B"))
    crc["tokenized"] = zlib.crc32(memoryview(text).cast("B"))
    table_crc = 0
    with open(paths["table"], "wb") as f:
        step = 1 << 22
        for lo in range(0, len(suffixes), step):
            part = (suffixes[lo:lo + step].astype("<u8") * width).view(np.uint8)
            chunk = np.ascontiguousarray(part.reshape(-1, 8)[:, :ptr]).tobytes()
            f.write(chunk)
            table_crc = zlib.crc32(chunk, table_crc)
    crc["table"] = table_crc
    offsets = (doc_offsets.astype("<u8") * width).tobytes()
    paths["offset"].write_bytes(offsets)
    crc["offset"] = zlib.crc32(offsets)
    for kind in FILES:
        entries[kind] = os.path.getsize(paths[kind])
    return {"tokens": int(len(text)), "docs": int(len(doc_offsets)), "pointer_bytes": ptr,
            "bytes": entries, "crc32": crc}


def write_header(directory: Path, width: int, documents: str, vocab: Vocabulary,
                 shards: list[dict], **extra) -> None:
    header = {"format": FORMAT, "version": VERSION, "token_bytes": width,
              "documents": documents, "vocab_size": len(vocab),
              "vocab_fingerprint": vocab.fingerprint, "tokens": sum(s["tokens"] for s in shards),
              "docs": sum(s["docs"] for s in shards), "shards": shards, **extra}
    (directory / HEADER).write_text(json.dumps(header, indent=1) + "\n", encoding="utf-8")


# -- reading --------------------------------------------------------------------------------
def _map(path: Path):
    """``path``'s bytes, memory-mapped read-only (an empty file: b"")."""
    try:
        with open(path, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                return b""
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise NnlmError(f"{path}: cannot open ({e.strerror or e})") from None


def _shard_numbers(path: Path) -> list[int]:
    numbers = sorted(int(p.name.split(".", 1)[1]) for p in path.glob("tokenized.*")
                     if p.name.split(".", 1)[1].isdigit())
    if numbers != list(range(len(numbers))):
        raise NnlmError(f"{path}: the shards are numbered {numbers[:6]}, not 0, 1, 2, ...; "
                        "a shard is missing")
    return numbers


def read_header(path: Path) -> dict | None:
    """The parsed ``index.json`` of the index at ``path``; None for an infini-gram index
    (no header); one line for a damaged header or a folder that is no index."""
    file = path / HEADER
    if not file.exists():
        if (path / "tokenized.0").exists() and (path / "table.0").exists():
            return None
        raise NnlmError(f"{path}: not an index (no {HEADER}, and no tokenized.0 and table.0 "
                        "of an infini-gram index)")
    try:
        header = json.loads(file.read_text(encoding="utf-8"))
        ok = (header["format"] == FORMAT and isinstance(header["shards"], list)
              and header["token_bytes"] in WIDTHS
              and all(isinstance(s[f], int) for s in header["shards"]
                      for f in ("tokens", "docs", "pointer_bytes"))
              and all(isinstance(s[d][k], int) for s in header["shards"]
                      for d in ("bytes", "crc32") for k in FILES))
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise NnlmError(f"{file}: damaged or not an nnlm index header")
    if header["version"] != VERSION:
        raise NnlmError(f"{file}: index format version {header['version']}; this nnlm reads "
                        f"version {VERSION}")
    return header


def infer_width(path: Path, number: int, width: int | None = None) -> int:
    """The token width of an infini-gram shard: the one ``width`` in 1, 2, 4 for which the
    table holds one entry of pointer_bytes(size) per token; a u8 index is refused, named."""
    size = (path / f"tokenized.{number}").stat().st_size
    table = (path / f"table.{number}").stat().st_size
    fits = [w for w in (1, 2, 4) if size % w == 0 and table == size // w * pointer_bytes(size)]
    if width is not None:
        fits = [w for w in fits if w == width] or ([width] if width in WIDTHS else [])
    if not fits:
        raise NnlmError(f"{path / f'table.{number}'}: {table} bytes fit no token width for "
                        f"tokenized.{number}'s {size} bytes (1, 2 or 4 bytes a token); the "
                        "index is truncated or not infini-gram's")
    if fits[0] == 1 and (width == 1 or len(fits) == 1):
        raise NnlmError(f"{path}: an infini-gram index of u8 tokens (bytes); nnlm reads u16 and "
                        "u32 indexes")
    return 2 if 2 in fits else fits[0]


def _check_shard(path: Path, number: int, width: int, entry: dict | None) -> int:
    """Sizes of shard ``number`` against each other and the header; its pointer bytes."""
    sizes = {kind: (path / f"{kind}.{number}").stat().st_size if
             (path / f"{kind}.{number}").exists() else None for kind in FILES}
    for kind, size in sizes.items():
        if size is None:
            raise NnlmError(f"{path / f'{kind}.{number}'}: missing; the index is incomplete")
        if entry is not None and size != entry["bytes"][kind]:
            raise NnlmError(f"{path / f'{kind}.{number}'}: {size} bytes where the header says "
                            f"{entry['bytes'][kind]}; the file is truncated or replaced")
    text = sizes["tokenized"]
    if text == 0 or text % width:
        raise NnlmError(f"{path / f'tokenized.{number}'}: {text} bytes, not a whole number of "
                        f"{width}-byte tokens; truncated")
    ptr = pointer_bytes(text)
    if sizes["table"] != text // width * ptr:
        raise NnlmError(f"{path / f'table.{number}'}: {sizes['table']} bytes where "
                        f"{text // width} tokens take {text // width * ptr}; truncated")
    if sizes["offset"] % 8:
        raise NnlmError(f"{path / f'offset.{number}'}: not a whole number of uint64 offsets")
    return ptr


def _check_docs(shard: Shard) -> None:
    docs = shard.docs
    sep = np.frombuffer(shard.text, f"<u{shard.width}")
    bad = (len(docs) == 0 or docs[0] != 0 or np.any(np.diff(docs.astype(np.int64)) <= 0)
           or int(docs[-1]) >= len(shard.text) or np.any(docs % shard.width)
           or np.any(sep[(docs // shard.width).astype(np.int64)] != separator(shard.width)))
    if bad:
        raise NnlmError(f"{shard.file('offset')}: its document offsets do not point at "
                        "separators in order; the index is damaged")


def open_shards(path: Path, header: dict | None, verify: bool = True,
                width: int | None = None) -> list[Shard]:
    """Every shard of the index at ``path``, checked and mapped (see the module)."""
    numbers = _shard_numbers(path)
    if header is not None and len(numbers) != len(header["shards"]):
        raise NnlmError(f"{path}: {len(numbers)} shards on disk where {HEADER} lists "
                        f"{len(header['shards'])}; the index is incomplete")
    if not numbers:
        raise NnlmError(f"{path}: no shard (tokenized.0) in the index")
    if header is None:
        widths = {infer_width(path, n, width) for n in numbers}
        if len(widths) > 1:
            raise NnlmError(f"{path}: its shards have different token widths {sorted(widths)}")
        w = widths.pop()
    else:
        w = header["token_bytes"]
    shards = []
    for n in numbers:
        entry = header["shards"][n] if header is not None else None
        ptr = _check_shard(path, n, w, entry)
        maps = {kind: _map(path / f"{kind}.{n}") for kind in FILES}
        if verify and entry is not None:
            for kind in FILES:
                if zlib.crc32(maps[kind]) != entry["crc32"][kind]:
                    raise NnlmError(f"{path / f'{kind}.{n}'}: its bytes do not match the "
                                    "checksum written with it; the index is damaged")
        shard = Shard(path, n, maps["tokenized"], maps["table"],
                      np.frombuffer(maps["offset"], "<u8"), w, ptr)
        _check_docs(shard)
        shards.append(shard)
    if header is None:
        warn(f"{path}: an infini-gram index (no {HEADER}): sizes checked, no checksums; "
             f"{w * 8}-bit token ids, with no words unless a vocabulary is given")
    return shards


def check_output(path: Path) -> None:
    """Refuse to build an index over anything but an nnlm index: a file, or a folder of
    the user's (an index replaces its folder whole). A new or empty folder is fine."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_dir():
        raise NnlmError(f"{path}: is a file; an index (a folder) cannot replace it. Choose "
                        "another output")
    names = [p.name for p in path.iterdir() if not p.name.startswith(".")]
    if not names:
        return
    ours = all(n in (HEADER, "vocab.txt") or n.split(".", 1)[0] in FILES for n in names)
    try:
        ok = json.loads((path / HEADER).read_text(encoding="utf-8"))["format"] == FORMAT
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not (ok and ours):
        shown = ", ".join(sorted(names)[:3]) + (", ..." if len(names) > 3 else "")
        raise NnlmError(f"{path}: exists and is not an nnlm index (it holds {shown}); an "
                        "index replaces only an index nnlm built. Choose a new or empty "
                        "output")

"""Writing nnlm's mapped trie (the format is in :mod:`.trie`): each section as it is
made, then the JSON header into the room kept for it at the front, atomically."""

from __future__ import annotations

import json
import os
import zlib

import numpy as np

from ...base.errors import NnlmError
from . import bits as bitpack
from . import run_pointers
from .trie import ALIGN, BYTE_ORDER_MARK, FORMAT_VERSION, MAGIC, PREFIX, STANDALONE, build_slots
from .values import code_values, signed_backoffs
from .vocab_table import vocab_sections


def _child_pointers(model, k: int) -> np.ndarray:
    """Where each order-k entry's run of extensions starts in order k+1 (n_k + 1 values)."""
    n_k = len(model.vocab) if k == 1 else len(model.levels[k - 2])
    upper = model.levels[k - 1]
    suffix = upper.keys // len(model.vocab)
    return np.searchsorted(suffix, np.arange(n_k + 1)).astype(np.int64)


# orders that may have a table beside their runs (see trie.py's docstring): float32
# files buy speed with it; quantized ones want size
HASHED_ORDERS = (2, 3)
HASHED_ORDERS_QUANTIZED = ()
# ... where the order holds at most this share of the model's n-grams and is not the
# top order. A table costs about 37 bits an n-gram of its order, a half of what the
# n-gram costs without it: on a minority order (Brown KN5's bigrams and trigrams, 11%
# and 25%) it buys 11% of bulk speed for 16% of the file; on a KN3 the bigrams are a
# third and the trigrams the rest, and tables would make the file 1.43x KenLM's trie
# (bench/vocab.py's model). The top order is looked up least (only where every lower
# order matched).
HASHED_SHARE = 0.3


def hashed_orders(counts: list[int], quantize) -> list[int]:
    """The orders of a model with ``counts`` n-grams per order that get a table."""
    total = sum(counts)
    return [k for k in (HASHED_ORDERS if quantize is None else HASHED_ORDERS_QUANTIZED)
            if k < len(counts) and counts[k - 1] <= HASHED_SHARE * total]


def _sections(model, quantize, meta: dict):
    """Yield (name, array) for every section of ``model``'s file, one at a time, filling
    ``meta`` (bit widths, tables, value codes) as they are made. The vocabulary comes
    first (:mod:`.vocab_table`: mapped at opening instead of read from vocab.txt)."""
    V = len(model.vocab)
    n = model.order
    tabled = hashed_orders(model.num_ngrams(), quantize)
    sections, meta["vocab"] = vocab_sections(model.vocab)
    yield from sections
    del sections
    yield "unigram_logp", model.unigram_logp.astype(np.float32)
    yield "unigram_log_bow", signed_backoffs(model.unigram_log_bow, model.extends(1))
    for k in range(1, n + 1):
        if k < n:
            coded = run_pointers.encode(_child_pointers(model, k))
            meta["pointers"].append(run_pointers.header_entry(coded))
            yield from run_pointers.named_sections(coded, k)
            del coded
        if k == 1:
            continue
        level = model.levels[k - 2]
        yield f"word_{k}", bitpack.pack(level.keys % V, meta["word_bits"])
        if k in tabled:
            table, n_slots = build_slots(level.keys)
            meta["slots"][str(k)] = [n_slots, bitpack.width(len(level))]
            yield f"slots_{k}", bitpack.pack(table, meta["slots"][str(k)][1])
            del table
        for name in ["logp"] + (["log_bow"] if k < n else []):
            values = np.asarray(getattr(level, name))
            if name == "log_bow":
                values = signed_backoffs(values, model.extends(k))
            coded = code_values(values, name, quantize)
            meta["values"][f"{name}_{k}"] = None if coded is None else [coded[2], len(coded[1])]
            if coded is None:
                yield f"{name}_{k}", values.astype(np.float32)
            else:
                yield f"{name}_codes_{k}", bitpack.pack(coded[0], coded[2])
                yield f"{name}_centers_{k}", coded[1]


def header_room(order: int) -> int:
    """Bytes kept for the header before the first section (it is written last, once every
    section's place is known): generous for its ~9 sections an order."""
    return -(-(4096 + 1024 * order) // ALIGN) * ALIGN




def write_trie(model, path: str | os.PathLike, binding: str,
               quantize: tuple[int, int] | None = None, standalone: bool = False) -> int:
    """Write the back-off ``model`` as a trie file at ``path`` (inside a directory that
    :func:`nnlm.text.fileio.atomic_path` stages). Returns the file's size in bytes.
    ``standalone``: a model in one file, its vocabulary and settings inside (what
    pyctcdecode and other KenLM clients want: they copy one file with the decoder).

    Streams: each section goes to the file as soon as it is made, so writing adds one
    section's arrays to the model's memory, not the whole file; the header, whose
    section table is known only at the end, goes into room kept for it at the start."""
    n = model.order
    meta = {"word_bits": bitpack.width(len(model.vocab) - 1), "pointers": [], "slots": {},
            "values": {}}
    start = header_room(n)
    table, sums = {}, {}
    offset = 0
    if standalone:
        binding = STANDALONE
        meta["model"] = {"kind": model.kind, "config": model.config(),
                         "vocab_fingerprint": model.vocab.fingerprint}
    with open(path, "wb") as f:
        for name, a in _sections(model, quantize, meta):
            f.seek(start + offset)
            data = np.ascontiguousarray(a).data
            f.write(data)
            sums[name] = zlib.crc32(data)  # nnlm ngram verify, eval, serve check them
            table[name] = [offset, a.nbytes, a.dtype.str, len(a)]
            offset += -(-a.nbytes // ALIGN) * ALIGN
        f.truncate(start + offset)
        header = {"order": n, "vocab_size": len(model.vocab), "counts": model.num_ngrams(),
                  "binding": binding, **meta, "quantize": list(quantize) if quantize else None,
                  "unk_extends": bool(getattr(model, "unk_extends", False)), "sections": table,
                  "checksums": sums}
        text = json.dumps(header).encode()
        text += b" " * (start - PREFIX.size - len(text))  # JSON allows trailing blanks
        if PREFIX.size + len(text) != start:
            raise NnlmError(f"{path}: the header outgrew its room ({len(text)} bytes)")
        f.seek(0)
        f.write(PREFIX.pack(MAGIC, BYTE_ORDER_MARK, FORMAT_VERSION, len(text)) + text)
    return start + offset



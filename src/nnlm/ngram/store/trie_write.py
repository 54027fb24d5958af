"""Writing nnlm's mapped trie (the format is in :mod:`.trie`): each section as it is
made, then the JSON header into the room kept for it at the front, atomically."""

from __future__ import annotations

import os
import zlib

import numpy as np

from ...base.errors import NnlmError
from . import bits as bitpack
from . import run_pointers
from .bits import Streamed
from .trie import ALIGN, BYTE_ORDER_MARK, FORMAT_VERSION, MAGIC, PREFIX, STANDALONE, build_slots
from .trie_layout import header_text
from .value_codes import CodedValues
from .values import lossless_centers, lossless_codes, quantized_values, signed_backoffs
from .vocab_table import vocab_sections


def _child_pointers(model, k: int) -> np.ndarray:
    """Where each order-k entry's run of extensions starts in order k+1 (n_k + 1 values)."""
    n_k = len(model.vocab) if k == 1 else len(model.levels[k - 2])
    upper = model.levels[k - 1]
    suffix = upper.keys // len(model.vocab)
    return np.searchsorted(suffix, np.arange(n_k + 1)).astype(np.int64)


def same(piece: np.ndarray, offset: int) -> np.ndarray:
    """A piece as it is (``each``'s function for the sections that store pieces as
    they come)."""
    return piece


class WholeModel:
    """A back-off model in memory as the writer's source of sections: every order is
    one piece. A model held elsewhere in pieces (a cluster's partitions) offers the same
    methods (:class:`nnlm.ngram.distributed.partitioned.PartitionedSource`), and the
    writer never holds more than a piece of an order and one section of the file."""

    def __init__(self, model):
        self.model, self.vocab, self.order = model, model.vocab, model.order
        self.counts = model.num_ngrams()
        self.unigram_logp = model.unigram_logp
        self.unk_extends = bool(getattr(model, "unk_extends", False))
        self._last: tuple = (None, None)  # the piece made last: a value section asks for
        # its order's values up to three times (sample, distinct values, codes)

    def unigram_log_bow(self) -> np.ndarray:
        return signed_backoffs(self.model.unigram_log_bow, self.model.extends(1))

    def child_pointers(self, k: int, spill) -> np.ndarray:
        return _child_pointers(self.model, k)

    def whole(self, k: int, name: str) -> np.ndarray:
        """Order k's ``name`` whole (``keys``; ``logp`` as float64, ``log_bow`` signed),
        for what needs every value at once: the tables and quantization."""
        level = self.model.levels[k - 2]
        if name == "log_bow":
            return signed_backoffs(level.log_bow, self.model.extends(k))
        return np.asarray(getattr(level, name))  # a mapped model's values may be coded

    def each(self, k: int, name: str, fn, *args):
        """fn(piece, first index, *args) for each piece of order k's ``name`` in order:
        ``words`` (ids), ``logp`` (float32), ``log_bow`` (signed float32)."""
        if self._last[0] != (k, name):
            self._last = (None, None)  # the one before goes before the next is made
            if name == "words":
                piece = self.model.levels[k - 2].keys % len(self.vocab)
            else:
                piece = self.whole(k, name).astype(np.float32, copy=False)
            self._last = ((k, name), piece)
        yield fn(self._last[1], 0, *args)


# orders that may have a table beside their runs (see trie.py's docstring): float32
# files buy speed with it; quantized ones want size
HASHED_ORDERS = (2, 3)
HASHED_ORDERS_QUANTIZED = ()
HASHED_ORDERS_CODED = (2,)
# ... where the order holds at most this share of the model's n-grams and is not the
# top order. A table costs about 37 bits an n-gram of its order, a half of what the
# n-gram costs without it: on a minority order (Brown KN5's bigrams and trigrams, 11%
# and 25%) it buys 11% of bulk speed for 16% of the file; on a KN3 the bigrams are a
# third and the trigrams the rest, and tables would make the file 1.43x KenLM's trie
# (bench/ngram/vocab.py's model). The top order is looked up least (only where every lower
# order matched).
HASHED_SHARE = 0.3


def hashed_orders(counts: list[int], quantize) -> list[int]:
    """The orders of a model with ``counts`` n-grams per order that get a table."""
    total = sum(counts)
    return [k for k in (HASHED_ORDERS if quantize is None else HASHED_ORDERS_QUANTIZED)
            if k < len(counts) and counts[k - 1] <= HASHED_SHARE * total]


def _sections(source, quantize, meta: dict, spill, counts=None):
    """Yield (name, array or :class:`Streamed`) for every section of the file of
    ``source`` (:class:`WholeModel`'s methods), one at a time, filling ``meta`` (bit
    widths, tables, value codes) as they are made. The vocabulary comes first
    (:mod:`.vocab_table`: mapped at opening instead of read from vocab.txt). ``counts``:
    a :class:`.value_codes.CodedValues`, whose codes replace the float32 values (a file
    made for size: no tables either)."""
    n = source.order
    tabled = hashed_orders(source.counts, quantize)
    if counts is not None:
        tabled = [k for k in tabled if k in HASHED_ORDERS_CODED]
    sections, meta["vocab"] = vocab_sections(source.vocab)
    yield from sections
    del sections
    yield "unigram_logp", source.unigram_logp.astype(np.float32)
    yield "unigram_log_bow", source.unigram_log_bow()
    if counts is not None:
        yield from counts.sections(1, source, meta)
    for k in range(1, n + 1):
        if k < n:
            pointers = source.child_pointers(k, spill)
            coded = run_pointers.encode_lazily(pointers)
            yield from run_pointers.streamed_sections(coded, k)
            meta["pointers"].append(run_pointers.header_entry(coded))
            getattr(pointers, "close", lambda: None)()
            del coded, pointers
        if k == 1:
            continue
        yield f"word_{k}", Streamed(np.uint64, bitpack.pack_stream(
            source.each(k, "words", same), meta["word_bits"]))
        if k in tabled:
            table, n_slots = build_slots(source.whole(k, "keys"))
            meta["slots"][str(k)] = [n_slots, bitpack.width(source.counts[k - 1])]
            yield f"slots_{k}", bitpack.pack(table, meta["slots"][str(k)][1])
            del table
        if counts is not None:
            yield from counts.sections(k, source, meta)
            continue
        for name in ["logp"] + (["log_bow"] if k < n else []):
            yield from _value_sections(source, k, name, quantize, meta)


def _value_sections(source, k: int, name: str, quantize, meta: dict):
    """Order k's probabilities or back-offs: float32, lossless codes or quantized
    (:mod:`.values`)."""
    if quantize is not None:
        codes, centers, bits = quantized_values(source.whole(k, name), name, quantize)
        meta["values"][f"{name}_{k}"] = [bits, len(centers)]
        yield f"{name}_codes_{k}", bitpack.pack(codes, bits)
        yield f"{name}_centers_{k}", centers
        return
    found = lossless_centers(source.counts[k - 1],
                             lambda fn, *args: source.each(k, name, fn, *args))
    meta["values"][f"{name}_{k}"] = None if found is None else [found[1], len(found[0])]
    if found is None:
        yield f"{name}_{k}", Streamed(np.float32, source.each(k, name, same))
        return
    centers, bits = found
    yield f"{name}_codes_{k}", Streamed(np.uint64, bitpack.pack_stream(
        source.each(k, name, lossless_codes, centers), bits))
    yield f"{name}_centers_{k}", centers


def header_room(order: int) -> int:
    """Bytes kept for the header before the first section (it is written last, once every
    section's place is known): generous for its ~9 sections an order."""
    return -(-(4096 + 1024 * order) // ALIGN) * ALIGN




def _mapped_coded(model) -> bool:
    """Whether ``model`` is a file of coded values, mapped (its codes can be written
    again)."""
    levels = getattr(model, "levels", None)
    return bool(levels) and getattr(levels[0], "coding", None) is not None


def write_trie(model, path: str | os.PathLike, binding,
               quantize: tuple[int, int] | None = None, standalone: bool = False,
               compress: bool = False) -> int:
    """Write the back-off ``model`` (or a source of its sections in pieces: see
    :class:`WholeModel`) as a trie file at ``path`` (inside a directory that
    :func:`nnlm.text.fileio.atomic_path` stages). Returns the file's size in bytes.
    ``binding``: the model directory's (a str), or a function of the sections' CRC-32s
    that gives it (:class:`nnlm.model_files.ContentBinding`). ``standalone``: a model in
    one file, its vocabulary and settings inside (what
    pyctcdecode and other KenLM clients want: they copy one file with the decoder).

    Streams: each section goes to the file as soon as it is made, and a section made in
    pieces as its pieces come, so writing adds one section's arrays to the model's
    memory, not the whole file; the header, whose section table is known only at the
    end, goes into room kept for it at the start."""
    source = model if hasattr(model, "each") else WholeModel(model)
    n = source.order
    coded = None
    if compress:
        if quantize is not None or n < 2 or (getattr(model, "value_inputs", None) is None
                                             and not _mapped_coded(model)):
            raise NnlmError("a compressed trie stores the counts of a Kneser-Ney estimate "
                            "made with --compress (keep_counts=True), of order 2 or more, "
                            "not quantized nor pruned; a model read from ARPA or a KenLM "
                            "binary has none")
        coded = CodedValues(model)
    meta = {"word_bits": bitpack.width(len(source.vocab) - 1), "pointers": [], "slots": {},
            "values": {}}
    start = header_room(n)
    table, sums = {}, {}
    offset = 0
    if standalone:
        binding = STANDALONE
        meta["model"] = {"kind": model.kind, "config": model.config(),
                         "vocab_fingerprint": model.vocab.fingerprint}
    with open(path, "wb") as f:
        for name, a in _sections(source, quantize, meta, os.path.dirname(os.fspath(path)),
                                 coded):
            f.seek(start + offset)
            table[name], sums[name] = _write_section(f, a, offset)
            offset += -(-table[name][1] // ALIGN) * ALIGN
        f.truncate(start + offset)
        if callable(binding):  # made from the sections (model_files.ContentBinding)
            binding = binding(sums)
        header = {"order": n, "vocab_size": len(source.vocab), "counts": source.counts,
                  "binding": binding, **meta, "quantize": list(quantize) if quantize else None,
                  "unk_extends": source.unk_extends, "sections": table, "checksums": sums}
        text = header_text(header)
        text += b" " * (start - PREFIX.size - len(text))  # JSON allows trailing blanks
        if PREFIX.size + len(text) != start:
            raise NnlmError(f"{path}: the header outgrew its room ({len(text)} bytes)")
        f.seek(0)
        version = FORMAT_VERSION
        f.write(PREFIX.pack(MAGIC, BYTE_ORDER_MARK, version, len(text)) + text)
    return start + offset


def _write_section(f, a, offset: int) -> tuple[list, int]:
    """Write one section (an array, or :class:`Streamed` pieces) where ``f`` stands:
    its table entry [offset, bytes, dtype, length] and its CRC-32 (which nnlm ngram
    verify, eval and serve check)."""
    pieces = a.chunks if isinstance(a, Streamed) else [a]
    dtype = a.dtype
    nbytes = crc = length = 0
    for piece in pieces:
        data = np.ascontiguousarray(piece, dtype).data
        f.write(data)
        crc = zlib.crc32(data, crc)
        nbytes += data.nbytes
        length += len(piece)
    return [offset, nbytes, dtype.str, length], crc

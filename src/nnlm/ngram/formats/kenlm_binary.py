"""KenLM's binary model files (``build_binary``), read by nnlm.

Written from the format's facts in KenLM's source (lm/binary_format.cc, lm/trie.cc,
lm/quantize.hh, lm/bhiksha.cc, lm/vocab.cc; Heafield 2011), not from its code:

* a header: the magic line ``mmap lm http://kheafield.com/code format version 5``
  padded to 56 bytes, then test values (0.0f, 1.0f, -0.5f, uint32 1 and 2^32-1, uint64
  1) that only match on a machine of the writer's byte order and word size; then the
  order, the probing multiplier, the model type (0 probing, 1 probing with rest costs,
  2 trie, 3 quantized trie, 4 trie with array-compressed pointers, 5 both), whether
  the words are stored, the search version, and the n-gram counts; 8-byte aligned;
* the vocabulary's lookup table (for a trie: a uint64 count and the sorted 64-bit
  hashes of the words, whose ranks are the word ids), then the search structure;
* the words themselves at the end, ``<unk>`` first, NUL-terminated, in id order.

The trie is KenLM's reversed trie, the same shape as nnlm's own
(:mod:`nnlm.ngram.store.trie`): unigrams are records of (float prob, float backoff,
uint64 pointer into the bigrams); order k < n packs, per entry, the word, the
probability (31 bits: its sign, always negative, dropped), the back-off (32 bits) and
the pointer into order k+1; the top order packs word and probability. Quantized
files store codes into per-order tables instead (backoff code, then probability code;
the tables follow an 8-byte header); array-compressed pointers keep the pointer's high
bits in a sorted table beside each order (Raj & Whittaker 2003). Fields are
little-endian bit streams.

:func:`read_kenlm_binary` reads a trie file into a :class:`BackoffNgram` (orders,
words and numbers as the ARPA file it was built from, checked as ARPA files are), so a
``.bin`` loads wherever nnlm takes a model and converts to ARPA or to nnlm's format.

Probing files (KenLM's default) keep, per order, an open-addressing table of 64-bit
hashes of the n-grams (KenLM's CombineWordHash over word ids, newest word first) with
their log10 probability (its sign bit a flag: the value is always negative) and back-off;
bucket = hash mod table size, linear probing, key 0 empty. Their words cannot be
recovered, so such a file is scored where it lies: :class:`KenlmProbing` is a
:class:`BackoffNgram` whose orders look n-grams up in those tables (an entry's id is its
slot), so every scorer, mixture and decoder works on it; it cannot be converted or
saved, and says so.
"""

from __future__ import annotations

import functools
import mmap
import os
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ...base.errors import NnlmError, warn
from ...text.vocab import SPECIALS, UNK, Vocabulary
from ..backoff import BackoffNgram
from ..store.values import extension_of
from .arpa_read import assemble
from .kenlm_header import (
    MODEL_TYPES,
    TRIE_VERSION,
    TrieLayout,
    check_words_kept,
    probing_layout,
    read_header,
    read_words,
)


class _Bits:
    """A region of the file as a bit stream: fields of up to 57 bits at any bit offset."""

    def __init__(self, data: bytes, start: int, size: int):
        raw = np.frombuffer(data, np.uint8, size, start)
        padded = np.zeros(-(-(size + 16) // 8) * 8, np.uint8)
        padded[:size] = raw
        self.words = padded.view("<u8")

    def read(self, bit_offsets: np.ndarray, length: int) -> np.ndarray:
        pos = np.asarray(bit_offsets, np.uint64)
        word = (pos >> np.uint64(6)).astype(np.int64)
        off = pos & np.uint64(63)
        low = self.words[word] >> off
        high = (self.words[word + 1] << np.uint64(1)) << (np.uint64(63) - off)
        return (low | high) & np.uint64((1 << length) - 1)


def read_kenlm_binary(path: str | os.PathLike, strict: bool = False):
    """A KenLM trie binary (any of build_binary's four trie types) as a back-off model;
    see the module docstring. Per-token numbers are KenLM's (float32 log10)."""
    path = Path(path)
    try:  # mapped: a probing file is queried where it lies (pages read as touched)
        with open(path, "rb") as f:
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file cannot be mapped: the header check names it
        data = b""
    except OSError as e:
        raise NnlmError(f"{path}: cannot read ({e.strerror or e})") from None
    header, start = read_header(path, data)
    kind = header["model_type"]
    if kind not in MODEL_TYPES:
        raise NnlmError(f"{path}: a KenLM binary file of model type {kind}, which nnlm does "
                        "not know")
    if kind in (0, 1):
        return _read_probing(path, data, header, start)
    if header["search_version"] != TRIE_VERSION:
        raise NnlmError(f"{path}: KenLM trie version {header['search_version']}; nnlm reads "
                        f"version {TRIE_VERSION}")
    check_words_kept(path, header)
    counts, order = header["counts"], header["order"]
    if order < 2 or counts[0] < 1:
        raise NnlmError(f"{path}: a KenLM binary of order {order}; KenLM writes orders >= 2")
    layout = TrieLayout(path, data, header, start)
    if len(data) < layout.end:
        raise NnlmError(f"{path}: truncated ({len(data):,} bytes; its header says the model "
                        f"takes {layout.end:,} before the words)")
    words = read_words(path, data, layout.end, counts[0])
    tables = _read_trie(path, data, layout, counts)
    return _to_model(path, words, tables, order, strict)


def _read_trie(path: Path, data: bytes, layout: TrieLayout, counts: list[int]) -> dict:
    """Per order: log10 probabilities, back-offs, each entry's word and its parent (the
    entry one order down whose run holds it)."""
    V = counts[0]
    uni = np.frombuffer(data, np.dtype([("p", "<f4"), ("b", "<f4"), ("next", "<u8")]),
                        V + 2, layout.unigrams)
    out = {1: SimpleNamespace(logp=uni["p"][:V].astype(np.float64),
                              bow=uni["b"][:V].astype(np.float64),
                              sign=np.signbit(uni["b"][:V]))}
    starts = uni["next"][:V + 1].astype(np.int64)
    for level in [*layout.middles, layout.longest]:
        bits = _Bits(data, level.base, level.size)
        n = level.n
        at = np.arange(n + 1, dtype=np.uint64) * np.uint64(level.total)
        word = bits.read(at[:n], layout.word_bits).astype(np.int64)
        fields = at[:n] + np.uint64(layout.word_bits)
        top = level.k == len(counts)
        if layout.quantized:
            q = level.k - 2
            per = (1 << layout.bow_bits) + (1 << layout.prob_bits)
            prob_table = layout.tables + 4 * per * q if not top else \
                layout.tables + 4 * per * (len(counts) - 2)
            probs = np.frombuffer(data, "<f4", 1 << layout.prob_bits, prob_table)
            if top:
                logp = probs[bits.read(fields, layout.prob_bits).astype(np.int64)]
                bow = np.zeros(n, np.float32)
            else:
                bows = np.frombuffer(data, "<f4", 1 << layout.bow_bits,
                                     prob_table + 4 * (1 << layout.prob_bits))
                bow = bows[bits.read(fields, layout.bow_bits).astype(np.int64)]
                logp = probs[bits.read(fields + np.uint64(layout.bow_bits),
                                       layout.prob_bits).astype(np.int64)]
        else:
            magnitude = bits.read(fields, 31).astype(np.uint32)
            logp = (magnitude | np.uint32(0x80000000)).view(np.float32)
            bow = np.zeros(n, np.float32) if top else \
                bits.read(fields + np.uint64(31), 32).astype(np.uint32).view(np.float32)
        if len(starts) != (counts[level.k - 2] + 1) or np.any(np.diff(starts) < 0) or \
                starts[0] != 0 or starts[-1] != n:
            raise NnlmError(f"{path}: the pointers into its {level.k}-grams are damaged")
        parent = np.repeat(np.arange(len(starts) - 1, dtype=np.int64), np.diff(starts))
        if len(word) and int(word.max()) >= V:
            raise NnlmError(f"{path}: a {level.k}-gram's word id is past the vocabulary; the "
                            "file is damaged")
        out[level.k] = SimpleNamespace(logp=logp.astype(np.float64), bow=bow.astype(np.float64),
                                       word=word, parent=parent, sign=np.signbit(bow))
        if not top:  # the pointers into the next order, entries 0..n inclusive
            inline = bits.read(at + np.uint64(layout.word_bits + level.quant),
                               level.inline).astype(np.int64)
            if layout.array:
                table = np.frombuffer(data, "<u8", level.n_offsets, level.offsets_at)
                high = np.searchsorted(table, np.arange(n + 1), side="right") - 1
                inline = (high.astype(np.int64) << level.inline) | inline
            starts = inline
    return out


def _to_model(path, words, tables, order, strict):
    """The words of every n-gram (walking parents down), and the model ARPA's reader
    builds from them."""
    file_words = words
    if len(set(file_words)) != len(file_words):
        raise NnlmError(f"{path}: a word appears twice in its vocabulary")
    vocab = Vocabulary([*SPECIALS, *(w for w in file_words if w not in SPECIALS)])
    remap = np.array([vocab.index[w] for w in file_words], np.int64)
    sections = {1: SimpleNamespace(logp=tables[1].logp, bow=tables[1].bow,
                                   lines=np.zeros(len(words), np.int64), count=len(words))}
    for k in range(2, order + 1):
        # column 0 is the entry's own word (the oldest); its parent one order down
        # holds the rest, newest last
        cols = [tables[k].word]
        parent = tables[k].parent
        for j in range(k - 1, 1, -1):
            cols.append(tables[j].word[parent])
            parent = tables[j].parent[parent]
        cols.append(parent)  # the unigram: the newest word
        ids = remap[np.column_stack(cols)]
        sections[k] = SimpleNamespace(logp=tables[k].logp, bow=tables[k].bow, ids=ids,
                                      lines=np.zeros(len(ids), np.int64), count=len(ids))
    if UNK in file_words and tables[1].logp[file_words.index(UNK)] == -100.0:
        warn(f"{path}: <unk> has log10 p = -100: the ARPA file it was built from had no "
             "<unk>, and KenLM gave it that value")

    model = assemble(path, vocab, file_words, remap, sections, order, strict)
    # KenLM marks with -0.0 a unigram's back-off that cannot extend; its +0.0 for a
    # missing <unk> makes a state after <unk> keep the word (nnlm.ngram.backoff.unk_extends)
    unk = file_words.index(UNK)
    model.unk_extends = bool(tables[1].bow[unk] == 0 and not tables[1].sign[unk]
                             and tables[1].logp[unk] == -100.0)
    return model


# -- probing files -------------------------------------------------------------------
_MULTIPLY = np.uint64(8978948897894561157)
_ADD = np.uint64(17894857484156487943)


def combine(node: np.ndarray, word: np.ndarray) -> np.ndarray:
    """KenLM's CombineWordHash: the hash of an n-gram extended one word to the left."""
    with np.errstate(over="ignore"):
        return (node * _MULTIPLY) ^ ((word.astype(np.uint64) + np.uint64(1)) * _ADD)


class ProbingLevel:
    """Order k of a KenLM probing file, with the part of :class:`NgramLevel`'s interface
    that scoring uses: ``find_pairs``, ``logp``, ``log_bow`` and ``extends_flags``. An
    entry's id is its slot in the table; ``keys`` there are the n-grams' hashes."""

    def __init__(self, k, table, lower, kid_of, n):
        self.k, self.table, self.lower, self.kid_of, self.n = k, table, lower, kid_of, n
        self.buckets = len(table)
        self.hashes = table["key"]

    # numpy's path reads whole-table arrays, made on first use: opening (and nnlm.kenlm's
    # compiled queries, which read the buckets where they lie) never pays for them
    @functools.cached_property
    def logp(self) -> np.ndarray:
        # the probability's sign bit is KenLM's "independent left" flag; the value is
        # always the negative one (GenericProbingProxy::Prob sets the sign)
        return -np.abs(self.table["p"].astype(np.float64)) * np.log(10)

    @functools.cached_property
    def log_bow(self) -> np.ndarray:
        if "b" not in self.table.dtype.names:
            return np.zeros(len(self.table))
        return self.table["b"].astype(np.float64) * np.log(10)

    @functools.cached_property
    def extends_flags(self) -> np.ndarray:
        # KenLM's -0.0 back-off, and only it, marks an n-gram that cannot extend
        # (HasExtension compares the bits); any other back-off, negative ones included, can
        if "b" not in self.table.dtype.names:
            return np.zeros(len(self.table), bool)
        return extension_of(self.table["b"])

    def __len__(self) -> int:
        return self.n

    def c_spec(self, top: bool) -> tuple:
        """The order as nnlm.kenlm's compiled queries take it: its buckets where they lie
        (KenLM's hashes, log10 values and flags), and each word's KenLM id."""
        raw = self.table.view(np.uint8).reshape(-1)
        return ("probing", raw, self.table.dtype.itemsize, self.buckets,
                np.ascontiguousarray(self.kid_of, np.int64))

    def _words_unknown(self, *args):
        raise NnlmError(f"{NOT_CONVERTIBLE}")

    keys = prefix = last = property(_words_unknown)
    first_and_suffix = _words_unknown

    def find_pairs(self, ids: np.ndarray, words: np.ndarray, V: int | None = None):
        """Slot of the n-gram (words[i], then the (k-1)-gram ids[i]), -1 where absent."""
        ids = np.asarray(ids, np.int64)
        words = np.asarray(words, np.int64)
        out = np.full(len(ids), -1, np.int64)
        ok = np.flatnonzero((ids >= 0) & (words >= 0))
        if not len(ok):
            return out
        node = (self.kid_of[ids[ok]].astype(np.uint64) if self.k == 2
                else self.lower.hashes[ids[ok]])
        want = combine(node, self.kid_of[words[ok]])
        pos = (want % np.uint64(self.buckets)).astype(np.int64)
        rest = np.arange(len(ok))
        for _ in range(self.buckets):
            got = self.hashes[pos[rest]]
            hit = got == want[rest]
            out[ok[rest[hit]]] = pos[rest[hit]]
            rest = rest[~hit & (got != 0)]
            if not len(rest):
                break
            pos[rest] = (pos[rest] + 1) % self.buckets
        return out


def _read_probing(path: Path, data: bytes, header: dict, start: int):
    counts, order = header["counts"], header["order"]
    layout = probing_layout(path, data, header, start)
    rest = layout["rest"]
    V = counts[0]
    weights = np.dtype([("p", "<f4"), ("b", "<f4")] + ([("r", "<f4")] if rest else []))
    middle = np.dtype([("key", "<u8"), ("p", "<f4"), ("b", "<f4")]
                      + ([("r", "<f4")] if rest else []), align=False)
    longest = np.dtype([("key", "<u8"), ("p", "<f4")])
    arrays = [np.frombuffer(data, weights, V + 1, layout["unigrams"][0])]
    for k, (offset, _, n) in enumerate(layout["orders"], start=2):
        arrays.append(np.frombuffer(data, longest if k == order else middle, n, offset))
    pos = layout["words"]
    words = read_words(path, data, pos, V, probing=True)
    V = len(words)  # the header's count, or one more: <unk> added to a closed vocabulary
    if len(set(words)) != len(words):
        raise NnlmError(f"{path}: a word appears twice in its vocabulary")
    vocab = Vocabulary([*SPECIALS, *(w for w in words if w not in SPECIALS)])
    remap = np.array([vocab.index[w] for w in words], np.int64)
    kid_of = np.empty(V, np.int64)
    kid_of[remap] = np.arange(V)
    uni = arrays[0][:V]
    ln10 = np.log(10)
    uni_logp = np.empty(V)
    uni_bow = np.empty(V)
    uni_logp[remap] = -np.abs(uni["p"].astype(np.float64)) * ln10  # the sign: a flag
    uni_bow[remap] = uni["b"] * ln10
    uni_logp[vocab.index["<s>"]] = -np.inf
    if not np.all(np.isfinite(uni_bow)) or np.isnan(uni_logp).any():
        raise NnlmError(f"{path}: a unigram's numbers are not finite; the file is damaged")
    levels = []
    for k, table in enumerate(arrays[1:], start=2):
        levels.append(ProbingLevel(k, table, levels[-1] if levels else None, kid_of,
                                   counts[k - 1]))
    model = KenlmProbing.__new__(KenlmProbing)
    BackoffNgram.__init__(model, vocab, uni_logp, uni_bow, levels)
    model.path = path
    model.unigram_extends = np.zeros(V, bool)
    model.unigram_extends[remap] = extension_of(uni["b"])
    return model


NOT_CONVERTIBLE = ("a KenLM probing file keeps hashes of its n-grams, not their words, so "
                   "it cannot be saved, pruned or converted; give the ARPA file it was built "
                   "from, or rebuild it with `build_binary trie`")


class KenlmProbing(BackoffNgram):
    """A KenLM probing file, scored where it lies (see the module docstring)."""

    def extends(self, k: int) -> np.ndarray:
        """KenLM's own flags: the sign of zero of each stored back-off."""
        return self.unigram_extends if k == 1 else self.levels[k - 2].extends_flags

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """Every word's log-probability after each context: |V| lookups a context (the
        tables cannot list a context's continuations)."""
        contexts = np.asarray(contexts, np.int64)
        V = len(self.vocab)
        out = np.empty((len(contexts), V))
        step = max(1, (1 << 20) // V)
        for lo in range(0, len(contexts), step):
            c = contexts[lo:lo + step]
            flat = self.target_logprobs(np.repeat(c, V, axis=0), np.tile(np.arange(V), len(c)))
            out[lo:lo + len(c)] = flat.reshape(len(c), V)
        return out

    def save_files(self, directory, binding, save) -> None:
        raise NnlmError(f"{self.path}: {NOT_CONVERTIBLE}")

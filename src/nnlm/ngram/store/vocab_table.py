"""The vocabulary inside a trie file, mapped as the n-grams are, instead of read into
Python objects.

A :class:`~nnlm.text.vocab.Vocabulary` read from ``vocab.txt`` keeps a str per word in a list
and again as a dict key: about 250 bytes a word once loaded, and half as much again
while the file is parsed. That is 3.5 MB for Brown's 14k words, but 260 MB for a
speech recognizer's million-word vocabulary, more than its pruned n-grams may take.
KenLM maps a hash table of its words' 64-bit hashes instead (Heafield 2011, section
3.1). A trie file carries its vocabulary in four sections:

* ``vocab_words``: the words' UTF-8 bytes end to end, and ``vocab_offsets`` (V + 1
  int64): word i is ``vocab_words[offsets[i]:offsets[i + 1]]``;
* ``vocab_slots``: an open-addressing table (int32 ids, -1 empty, a power of two at
  least 2V slots) over FNV-1a hashes of the bytes (``vocab_hash.h`` says the hash; the
  C reader and :func:`slots` here agree on it, and tests/test_ngram_store.py checks).

About 16-24 bytes a word besides the words themselves, in pages that every process
mapping the file shares. The training counts stay in ``vocab.txt`` (read only if asked
for: saving the model again needs them; nothing that scores does). The header's
``vocab`` entry holds the table's size and a CRC-32 of the words and offsets, checked
at opening (a few ms for a million words;
SHA-256 without OpenSSL would take 0.1 s). :class:`MappedVocabulary` is the
:class:`~nnlm.text.vocab.Vocabulary` over those sections: ``index`` a C mapping
(``_trie.WordIndex``; without the compiled part, a dict as before), ``words`` a sequence
that decodes a word when asked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ...base.compiled import extension
from ...base.errors import NnlmError
from ...text.vocab import Vocabulary
from .trie_layout import VOCAB_DAMAGED, checksum, vocab_problem
from .trie_layout import vocab_table_size as table_size

FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(0x100000001B3)
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def word_bytes(words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """The UTF-8 words end to end (uint8) and where each starts (V + 1 int64)."""
    encoded = [w.encode("utf-8") for w in words]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(w) for w in encoded], out=offsets[1:])
    return np.frombuffer(b"".join(encoded), np.uint8), offsets


def hashes(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """FNV-1a of every word's bytes times the golden ratio (mod 2^64), as vocab_hash.h:
    one pass per byte position over the words that long."""
    lengths = np.diff(offsets)
    h = np.full(len(lengths), FNV_OFFSET, np.uint64)
    rows = np.flatnonzero(lengths > 0)
    j = 0
    with np.errstate(over="ignore"):
        while len(rows):
            h[rows] = (h[rows] ^ blob[offsets[rows] + j].astype(np.uint64)) * FNV_PRIME
            j += 1
            rows = rows[lengths[rows] > j]
        return h * GOLDEN


def slots(blob: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The linear-probing table of the words (int32 ids, -1 empty). Placed in rounds:
    every word not yet placed tries its current slot; of those that find it empty, the
    lowest id takes it and the rest walk on one slot. A word passes a slot only when it
    is taken, so lookups that walk from the home slot meet it before any empty slot."""
    n = len(offsets) - 1
    size = table_size(n)
    table = np.full(size, -1, np.int32)
    ids = np.arange(n, dtype=np.int64)
    at = (hashes(blob, offsets) & np.uint64(size - 1)).astype(np.int64)
    while len(ids):
        free = table[at] < 0
        slot, first = np.unique(at[free], return_index=True)
        winners = np.flatnonzero(free)[first]
        table[slot] = ids[winners]
        left = np.ones(len(ids), bool)
        left[winners] = False
        ids, at = ids[left], (at[left] + 1) & (size - 1)
    return table


def vocab_sections(vocab: Vocabulary):
    """(name, array) of the vocabulary's sections, and the header's ``vocab`` entry."""
    blob, offsets = word_bytes(vocab.words)
    table = slots(blob, offsets)
    entry = {"slots": len(table), "crc32": checksum([blob, offsets])}
    return [("vocab_words", blob), ("vocab_offsets", offsets), ("vocab_slots", table)], entry


class WordList(Sequence):
    """The words of a mapped vocabulary as a read-only sequence: ``words[i]`` decodes
    word i from the mapping; a slice or iteration decodes the words it covers."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray):
        self._blob = memoryview(blob).cast("B")
        self._offsets = memoryview(offsets).cast("B").cast("q")
        self._n = len(offsets) - 1

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self._n))]
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("word id out of range")
        return str(self._blob[self._offsets[i]:self._offsets[i + 1]], "utf-8")

    def __iter__(self) -> Iterator[str]:
        text = bytes(self._blob)
        offsets = self._offsets.tolist()
        for a, b in zip(offsets[:-1], offsets[1:]):
            yield text[a:b].decode("utf-8")

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == self._n and \
            all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"WordList({self._n} words)"


class MappedVocabulary(Vocabulary):
    """A :class:`~nnlm.text.vocab.Vocabulary` over a trie file's sections (see the module
    docstring); ``fingerprint``: the one its model was saved with, which the file's
    binding or header vouches for; ``counts``: the training counts, or a function that
    reads them when first asked for (vocab.txt), or None (zeros: a one-file model)."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray, table: np.ndarray,
                 fingerprint: str, counts=None):
        self.words = WordList(blob, offsets)
        self._counts = counts
        self.mapped_sections = (blob, offsets, table)  # for nnlm.kenlm's compiled queries
        self._fingerprint = fingerprint
        native = extension("nnlm.ngram.store._trie")
        if native is None:  # not built, or switched off: a dict, as a vocab.txt gives
            self.index = {w: i for i, w in enumerate(self.words)}
        else:
            self.index = native.WordIndex(table, blob, offsets)

    @property
    def fingerprint(self) -> str:
        return self._fingerprint

    @property
    def counts(self) -> np.ndarray:
        if self._counts is None:
            self._counts = np.zeros(len(self), np.int64)
        elif callable(self._counts):
            self._counts = self._counts()
        return self._counts

    def __len__(self) -> int:
        return len(self.words)


def map_vocabulary(path, section, entry, fingerprint: str, counts=None) -> MappedVocabulary:
    """The vocabulary of the trie file ``path``: ``section(name)`` maps a section whose
    bounds are checked, ``entry`` is the header's ``vocab`` entry, ``counts`` as
    :class:`MappedVocabulary` takes them. The offsets, the specials and the checksum are
    checked here; a damaged file is one line."""
    blob, offsets, table = section("vocab_words"), section("vocab_offsets"), \
        section("vocab_slots")
    problem = VOCAB_DAMAGED if np.any(offsets[1:] < offsets[:-1]) else \
        vocab_problem(blob, offsets, entry["crc32"])
    if problem:
        raise NnlmError(f"{path}: {problem}")
    return MappedVocabulary(blob, offsets, table, fingerprint, counts)

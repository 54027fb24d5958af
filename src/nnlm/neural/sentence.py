"""Sentence embeddings from a network's word feature vectors C, in the manner of the
NNLM text-embedding modules (nnlm-en-dim128): a word's vector is its row of C, a
sentence's vector is the sum of its words' vectors over the square root of their number
(the sqrt-n combiner), the empty sentence the zero vector.

Rare and unknown words share hash buckets. The rarest ``hash_fraction`` of the vocabulary
(ids are by descending count) and every word outside it map to one of ``buckets``
buckets by a stable hash of the string (the first 8 bytes of its BLAKE2b digest, the same
in every process and on every machine). A bucket's vector starts as the mean of the
vectors of the vocabulary words that hash to it (``<unk>``'s vector when none does), so a
rare word keeps roughly its own meaning and an unknown one gets its bucket's.

``normalize`` lowercases and drops punctuation first, as the "with normalization"
variant of those modules does. Text is otherwise split on whitespace.
"""

from __future__ import annotations

import hashlib
import math
import unicodedata
from collections.abc import Iterable, Sequence
from itertools import chain

import numpy as np
import torch
import torch.nn.functional as F

from ..base.errors import NnlmError, where
from ..base.progress import progress_bar
from ..base.sysmem import check_allocation
from ..text.fileio import atomic_path, iter_line_blocks
from ..text.vocab import BOS, EOS, SPECIALS, Vocabulary, special_error

DEFAULT_BUCKETS = 1000
DEFAULT_HASH_FRACTION = 0.025
BATCH = 8192  # sentences per embedding_bag call
_CACHE_LIMIT = 1 << 20  # unknown words remembered (their bucket), then the cache restarts


def stable_bucket(word: str, buckets: int) -> int:
    """The word's bucket: BLAKE2b of its UTF-8 bytes, first 8 bytes little-endian, mod N."""
    digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little") % buckets


_PUNCT = None


def _punctuation_table() -> dict[int, None]:
    """Every Unicode punctuation code point (categories P*), to delete with str.translate."""
    global _PUNCT
    if _PUNCT is None:
        import sys

        _PUNCT = {c: None for c in range(sys.maxunicode + 1)
                  if unicodedata.category(chr(c)).startswith("P")}
    return _PUNCT


def normalize_text(line: str) -> str:
    """Lowercased, punctuation deleted ("don't" -> "dont"; a token of punctuation alone
    disappears)."""
    return line.lower().translate(_punctuation_table())


class SentenceEncoder:
    """Sentence vectors from word features ``C`` (|V|, m) over ``vocab``.

    ``table`` holds the vectors of the in-vocabulary words that keep their own row, then
    the ``buckets`` bucket vectors; ``row_of`` maps each vocabulary word to its row.
    """

    def __init__(self, vocab: Vocabulary, C: np.ndarray, buckets: int = DEFAULT_BUCKETS,
                 hash_fraction: float = DEFAULT_HASH_FRACTION, normalize: bool = False):
        if not isinstance(buckets, int) or buckets < 1:
            raise NnlmError(f"buckets must be a positive integer, got {buckets!r}")
        if not 0 <= hash_fraction < 1:
            raise NnlmError(f"hash fraction must be in [0, 1), got {hash_fraction!r}")
        C = np.asarray(C, np.float32)
        if C.shape[0] != len(vocab):
            raise NnlmError(f"C has {C.shape[0]} rows for {len(vocab)} words")
        self.vocab, self.buckets, self.normalize = vocab, buckets, normalize
        self.hash_fraction = hash_fraction
        V, m = C.shape
        words = len(vocab) - len(SPECIALS)
        rare = math.ceil(hash_fraction * words) if hash_fraction else 0
        self.first_rare = V - rare  # ids at or above this share buckets
        kept = self.first_rare
        # the table, and a list of member ids per bucket (an empty list is 56 bytes)
        check_allocation((kept + buckets) * m * 4 + buckets * 64,
                         f"a sentence-embedding table of {kept + buckets:,} rows of {m}")
        members: list[list[int]] = [[] for _ in range(buckets)]
        self.row_of: dict[str, int] = {}
        for i, w in enumerate(vocab.words):
            if i < kept:
                self.row_of[w] = i
            else:
                b = stable_bucket(w, buckets)
                members[b].append(i)
                self.row_of[w] = kept + b
        table = np.empty((kept + buckets, m), np.float32)
        table[:kept] = C[:kept]
        unk = C[vocab.index.get("<unk>", 0)]
        for b, ids in enumerate(members):
            table[kept + b] = C[ids].mean(axis=0) if ids else unk
        self.bucket_members = members
        self.table = torch.from_numpy(table)
        self._unknown: dict[str, int] = {}

    @property
    def dim(self) -> int:
        return self.table.shape[1]

    def rows(self, word: str) -> int:
        """The table row of any word (in the vocabulary or not)."""
        row = self.row_of.get(word)
        if row is None:
            row = self._unknown.get(word)
            if row is None:
                if len(self._unknown) >= _CACHE_LIMIT:
                    self._unknown.clear()
                row = self._unknown[word] = self.first_rare + stable_bucket(word, self.buckets)
        return row

    def embed(self, sentences: Iterable[str]) -> np.ndarray:
        """One float32 vector per sentence: sum of word vectors / sqrt(n); (N, m)."""
        parts = []
        batch: list[str] = []
        for s in sentences:
            batch.append(s)
            if len(batch) == BATCH:
                parts.append(self._embed_batch(batch))
                batch = []
        if batch or not parts:
            parts.append(self._embed_batch(batch))
        return np.concatenate(parts)

    def _embed_batch(self, sentences: Sequence[str]) -> np.ndarray:
        if self.normalize:
            sentences = [normalize_text(s) for s in sentences]
        token_lists = [s.split() for s in sentences]
        lengths = np.fromiter(map(len, token_lists), np.int64, len(token_lists))
        flat = list(chain.from_iterable(token_lists))
        try:  # the common case, every word known: one C-level pass
            ids = np.fromiter(map(self.row_of.__getitem__, flat), np.int64, len(flat))
        except KeyError:  # words outside the vocabulary: their buckets
            ids = np.fromiter(map(self.rows, flat), np.int64, len(flat))
        offsets = np.zeros(len(sentences), np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        out = F.embedding_bag(torch.from_numpy(ids), self.table, torch.from_numpy(offsets),
                              mode="sum")
        scale = 1.0 / np.sqrt(np.maximum(lengths, 1)).astype(np.float32)
        return out.numpy() * scale[:, None]


def embed_sentences(lm, sentences, normalize: bool = False, buckets: int | None = None,
                    hash_fraction: float | None = None) -> np.ndarray:
    """One vector per sentence from ``lm``'s word features C (``NeuralLM.embed``): the
    encoder is built once per settings and kept on the model."""
    key = (normalize, DEFAULT_BUCKETS if buckets is None else buckets,
           DEFAULT_HASH_FRACTION if hash_fraction is None else hash_fraction)
    cached = getattr(lm, "_encoder", None)
    if cached is None or cached[0] != key:
        C = lm.model.C.detach().float().cpu().numpy()
        cached = lm._encoder = (key, SentenceEncoder(lm.vocab, C, key[1], key[2],
                                                     normalize=key[0]))
    return cached[1].embed([sentences] if isinstance(sentences, str) else sentences)


def cosine_top_k(query: np.ndarray, vectors: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The k rows of ``vectors`` most similar to ``query`` by cosine, best first (a zero
    vector has similarity 0 to everything)."""
    norms = np.linalg.norm(vectors, axis=1)
    qn = float(np.linalg.norm(query))
    sims = vectors @ query / np.maximum(norms * qn, 1e-12)
    k = min(k, len(sims))
    best = np.argpartition(-sims, k - 1)[:k] if k else np.zeros(0, np.int64)
    best = best[np.argsort(-sims[best], kind="stable")]
    return [(int(i), float(sims[i])) for i in best]


def embed_file(model, source, output, **settings) -> tuple[int, int]:
    """Write one vector per line of ``source`` (a path, ``-`` for stdin) to ``output``
    (.npy, float32 (N, m), atomically); a blank line gets the zero vector and an empty
    file an empty (0, m) array. ``settings``: ``NeuralLM.embed``'s. Returns (N, m)."""
    parts = []
    with progress_bar(None, "embedding", "lines", delay=2.0) as bar:
        for first, lines in iter_line_blocks(source, allow_empty=True):
            _no_boundaries(lines, source, first)
            parts.append(model.embed(lines, **settings))
            bar.update(len(lines))
    m = int(model.model.config.m)
    vectors = np.concatenate(parts) if parts else np.zeros((0, m), np.float32)
    with atomic_path(output) as tmp, open(tmp, "wb") as f:
        np.save(f, vectors, allow_pickle=False)
    return vectors.shape


def similar_lines(model, query: str, source, k: int = 10, **settings
                  ) -> list[tuple[int, float, str]]:
    """The k lines of ``source`` nearest to ``query`` by cosine of their embeddings, best
    first: (line number from 1, similarity, line)."""
    words = query.split()
    if not words:
        raise NnlmError("the sentence to compare is empty: every line would be equally "
                        "(un)similar to it; give some words")
    if BOS in words or EOS in words:
        raise NnlmError(special_error("the sentence to compare", words))
    numbered = []  # (line number, line) of the lines with words: a blank line is no
    for first, block in iter_line_blocks(source):  # sentence, and no answer
        _no_boundaries(block, source, first)
        numbered += [(first + i, line) for i, line in enumerate(block) if line.strip()]
    vectors = model.embed([line for _, line in numbered], **settings)
    q = model.embed([query], **settings)[0]
    return [(numbered[i][0], sim, numbered[i][1]) for i, sim in cosine_top_k(q, vectors, k)]


def _no_boundaries(lines: Sequence[str], source, first: int) -> None:
    """A text's lines hold no <s> or </s> (nnlm adds sentence boundaries itself)."""
    for i, line in enumerate(lines):
        if ("<s>" in line or "</s>" in line) and (BOS in line.split() or EOS in line.split()):
            name = "<stdin>" if str(source) == "-" else str(source)
            raise NnlmError(special_error(where(name, first + i), line.split()))

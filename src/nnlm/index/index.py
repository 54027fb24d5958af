"""nnlm.Index: exact counts of any n-gram of a corpus, what follows it, the ∞-gram, and
the documents that hold it, from a suffix array (Manber & Myers 1993) over the corpus's
token ids, in infini-gram's layout (Liu et al. 2024; :mod:`nnlm.index.files`).

Every query is batched: a list of queries is one call into the searches of
:mod:`nnlm.index.search` per shard, never a Python loop over the queries. A query is a
string (split into words), a list of words or a list of token ids. A word outside the
vocabulary occurs nowhere: its n-grams count 0.

Good: ``Index.open("brown.idx").count(["of the", "the jury said"])`` -> ``array([...])``.
Bad: ``[index.count([q]) for q in queries]``: one search call a query, many times slower.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from ..base.checks import integer
from ..base.errors import NnlmError
from ..base.threads import usable_cores
from ..text.specials import BOS, EOS
from ..text.vocab import Vocabulary
from . import files
from .search import find, followers, table_entries

MISSING = -1  # the id of a word outside the vocabulary: no pattern holding it occurs
MAX_QUERY_TOKENS = 1 << 16  # a longer query is refused (a whole document is shorter)
PARALLEL_QUERIES = 64  # a batch this large is searched on every usable core
SUFFIX_TOKENS = 1 << 20  # ids in a batch of every suffix; past it, a binary search

_POOLS: dict[tuple[int, int], ThreadPoolExecutor] = {}


def _pool(threads: int) -> ThreadPoolExecutor:
    """One pool of ``threads`` threads for the process's searches, made once in each
    process (a forked child inherits the parent's pool without its threads)."""
    key = (os.getpid(), threads)
    if key not in _POOLS:
        _POOLS[key] = ThreadPoolExecutor(threads, thread_name_prefix="nnlm-index")
    return _POOLS[key]


@dataclass
class Next:
    """What follows a context: ``count`` occurrences of it, ``tokens`` (int64 ids, by
    descending count) seen after it with their ``counts`` (the most frequent ones where a
    query asked for its top k); ``total``: the occurrences followed by a token rather
    than a document's end, all tokens counted."""

    count: int
    tokens: np.ndarray
    counts: np.ndarray
    total: int
    suffix_length: int | None = None  # for the ∞-gram: the longest suffix that occurs

    def probabilities(self) -> np.ndarray:
        return self.counts / max(self.total, 1)


@dataclass
class Batch:
    """Queries as one int64 array of ids cut by ``offsets`` (Q + 1); ``missing``: the
    queries holding a word outside the vocabulary."""

    ids: np.ndarray
    offsets: np.ndarray
    missing: np.ndarray

    @classmethod
    def of(cls, ids: np.ndarray, lengths: np.ndarray) -> Batch:
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        holes = np.flatnonzero(ids == MISSING)
        missing = np.zeros(len(lengths), bool)
        missing[np.searchsorted(offsets, holes, side="right") - 1] = True
        return cls(ids, offsets, missing)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def slices(self, starts: np.ndarray, ends: np.ndarray) -> Batch:
        """The queries ``ids[starts[i]:ends[i]]``."""
        lengths = ends - starts
        where = np.repeat(starts - np.r_[0, np.cumsum(lengths)[:-1]], lengths) + \
            np.arange(int(lengths.sum()))
        return Batch.of(self.ids[where], lengths)

    def longest_occurring(self, count) -> np.ndarray:
        """Per query, the length of its longest suffix that occurs (``count``: the
        index's counts of a batch). A longer suffix occurs only where the shorter ones
        do, so for short queries every suffix is counted in one batch, and where that
        would hold more than ``SUFFIX_TOKENS`` ids (the square of a query's length) the
        length is found by a binary search, all queries in lockstep, one batch a round."""
        n = np.diff(self.offsets)
        ends = self.offsets[1:]
        if int(((n + 1) * (n + 2) // 2).sum()) <= SUFFIX_TOKENS:
            # query i's suffix of k tokens is ids[end_i - k : end_i], every k at once
            owner = np.repeat(np.arange(len(self)), n + 1)
            k = np.concatenate([np.arange(m, -1, -1) for m in n.tolist()]) if len(n) else n
            found = count(self.slices(ends[owner] - k, ends[owner])) > 0
            length = np.zeros(len(self), np.int64)
            np.maximum.at(length, owner[found], k[found])
            return length
        low, high = np.zeros(len(self), np.int64), n.astype(np.int64)  # occurs / may
        while (todo := np.flatnonzero(low < high)).size:
            mid = (low[todo] + high[todo] + 1) // 2
            found = count(self.slices(ends[todo] - mid, ends[todo])) > 0
            low[todo[found]] = mid[found]
            high[todo[~found]] = mid[~found] - 1
        return low


@dataclass
class Document:
    """A document holding a match: its number in the index, the match's token offset in
    it, and its token ids (and words, where the index has a vocabulary)."""

    doc: int
    offset: int
    tokens: list[int]
    words: list[str] | None


class Index:
    """A corpus indexed for n-gram queries of any length (see the module)."""

    def __init__(self, path: Path, shards: list[files.Shard], vocab: Vocabulary | None,
                 header: dict | None):
        self.path, self.shards, self.vocab, self.header = path, shards, vocab, header
        self.width = shards[0].width
        self.separator = files.separator(self.width)
        starts = np.cumsum([0] + [len(s.docs) for s in shards])
        self._first_doc = starts  # global number of each shard's first document

    @classmethod
    def open(cls, path: str | os.PathLike, verify: bool = True,
             vocab: Vocabulary | None = None, width: int | None = None) -> Index:
        """Open an nnlm index or an infini-gram one (``vocab``: the words of its ids, for
        an infini-gram index; ``width``: its token bytes where they cannot be inferred)."""
        path = Path(path)
        if not path.is_dir():
            raise NnlmError(f"{path}: no such index (a folder made by nnlm index build, or "
                            "infini-gram's)")
        header = files.read_header(path)
        shards = files.open_shards(path, header, verify, width)
        if header is not None:
            vocab = Vocabulary.load(path / "vocab.txt")
            if vocab.fingerprint != header["vocab_fingerprint"]:
                raise NnlmError(f"{path / 'vocab.txt'}: not the vocabulary the index was "
                                "built with (its fingerprint differs)")
        return cls(path, shards, vocab, header)

    # -- sizes ------------------------------------------------------------------------
    @property
    def tokens(self) -> int:
        """Token positions, separators included (infini-gram's count)."""
        return sum(s.tokens for s in self.shards)

    @property
    def documents(self) -> int:
        return sum(len(s.docs) for s in self.shards)

    def bytes(self) -> int:
        return sum(f.stat().st_size for s in self.shards for f in
                   (s.file(k) for k in files.FILES))

    def words(self, ids) -> list:
        """The words of token ids (the ids themselves for an index without words); an id
        past the vocabulary is a damaged index, said in one line."""
        ids = [int(i) for i in ids]
        if self.vocab is None:
            return ids
        if ids and max(ids) >= len(self.vocab):
            raise NnlmError(f"{self.path}: token id {max(ids)} is past its vocabulary of "
                            f"{len(self.vocab)} words; the index is damaged (open it with "
                            "verify=True, nnlm's default)")
        return self.vocab.decode(ids)

    # -- queries into ids -------------------------------------------------------------
    def encode(self, query) -> list[int]:
        """One query's token ids (see the module); words outside the vocabulary are
        :data:`MISSING`."""
        if isinstance(query, str):
            if self.vocab is None:
                raise NnlmError(f"{self.path}: an index of bare token ids (no vocabulary); "
                                "query it with ids")
            query = self.vocab.split(query)
        ids = []
        for t in query:
            if isinstance(t, str):
                if self.vocab is None:
                    raise NnlmError(f"{self.path}: an index without words; query it with ids")
                ids.append(self.vocab.index.get(t, MISSING))
            elif isinstance(t, (int, np.integer)) and not isinstance(t, bool):
                if not 0 <= int(t) < self.separator:
                    raise NnlmError(f"token id {int(t)}: outside 0 .. {self.separator - 1}")
                ids.append(int(t))
            else:
                raise NnlmError(f"a query is words or token ids, not {type(t).__name__}")
        if len(ids) > MAX_QUERY_TOKENS:
            raise NnlmError(f"a query of {len(ids)} tokens; at most {MAX_QUERY_TOKENS}")
        return ids

    def _batch(self, queries, allow_empty: bool = True) -> Batch:
        """The queries as one flat array of ids cut by offsets: lists of ids go through
        numpy whole, words through the vocabulary's dict in C (``map``), and only a
        batch that mixes kinds is read one query at a time."""
        if isinstance(queries, (str, bytes)) or not isinstance(queries, (list, tuple)):
            raise NnlmError("queries: a list of queries (each a string, words or ids)")
        lists = [self.vocab.split(q) if isinstance(q, str) and self.vocab is not None
                 else q for q in queries]
        lengths = np.fromiter(map(len, lists), np.int64, len(lists))
        flat = list(chain.from_iterable(lists))
        kinds = set(map(type, flat))
        if kinds <= {int, np.int64, np.int32, np.uint16, np.uint32}:
            ids = np.array(flat, np.int64) if flat else np.zeros(0, np.int64)
            if len(ids) and (ids.min() < 0 or ids.max() >= self.separator):
                bad = int(ids[(ids < 0) | (ids >= self.separator)][0])
                raise NnlmError(f"token id {bad}: outside 0 .. {self.separator - 1}")
        elif kinds == {str} and self.vocab is not None:
            get = self.vocab.index.get
            ids = np.fromiter(map(get, flat, repeat(MISSING)), np.int64, len(flat))
        else:
            one = [self.encode(q) for q in queries]
            lengths = np.fromiter(map(len, one), np.int64, len(one))
            ids = np.fromiter(chain.from_iterable(one), np.int64, int(lengths.sum()))
        if lengths.max(initial=0) > MAX_QUERY_TOKENS:
            raise NnlmError(f"a query of {int(lengths.max())} tokens; at most "
                            f"{MAX_QUERY_TOKENS}")
        if not allow_empty and (lengths == 0).any():
            raise NnlmError("an empty query: give at least one word")
        return Batch.of(ids, lengths)

    # -- ranges -----------------------------------------------------------------------
    def _on_cores(self, search, q: int) -> list:
        """``search(s, a, b)`` for queries a .. b-1 of a batch of ``q``, for every shard s
        (its number), a list of results a shard: the batch cut into as many pieces per
        shard as fill the usable cores, run on threads (the C searches release the GIL).
        A large index's searches wait on memory, so each core's misses overlap the
        other's; a small batch runs here in one piece a shard."""
        cores = usable_cores() if q >= PARALLEL_QUERIES else 1
        if cores == 1:
            return [[search(s, 0, q)] for s in range(len(self.shards))]
        pieces = -(-cores // len(self.shards))
        cuts = [q * i // pieces for i in range(pieces + 1)]
        tasks = [(s, a, b) for s in range(len(self.shards)) for a, b in zip(cuts, cuts[1:])]
        done = list(_pool(cores).map(lambda t: search(*t), tasks))
        return [done[i * pieces:(i + 1) * pieces] for i in range(len(self.shards))]

    def _ranges(self, batch: Batch) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per shard, each query's (lo, hi) table range; an empty range where it holds
        a missing word."""
        patterns = np.where(batch.ids == MISSING, 0, batch.ids).astype(
            f"<u{self.width}").tobytes()
        offsets = batch.offsets * self.width

        def search(s, a, b):  # offsets are absolute: a slice needs no new patterns
            shard = self.shards[s]
            return find(shard.text, shard.table, shard.ptr, patterns, offsets[a:b + 1],
                        shard.sample)

        out = []
        for pieces in self._on_cores(search, len(batch)):
            lo, hi = pieces[0] if len(pieces) == 1 else (
                np.concatenate([p[0] for p in pieces]), np.concatenate([p[1] for p in pieces]))
            hi[batch.missing] = lo[batch.missing]
            out.append((lo, hi))
        return out

    def count(self, queries) -> np.ndarray | int:
        """How often each query occurs (int64, one per query); a single string: an int."""
        if isinstance(queries, str):
            return int(self.count([queries])[0])
        return self._count_ids(self._batch(queries))

    def _count_ids(self, batch: Batch) -> np.ndarray:
        return sum((hi - lo for lo, hi in self._ranges(batch)),
                   np.zeros(len(batch), np.int64))

    def followers(self, batch: Batch, ranges=None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """What follows each query of ``batch`` over every shard, flat: ``rows`` (the
        query, ascending), ``tokens`` and ``counts`` (int64), one entry per (query,
        token), documents' ends left out. ``ranges``: the batch's, if already found."""
        ranges = self._ranges(batch) if ranges is None else ranges
        depth = np.diff(batch.offsets) * self.width

        def search(s, a, b):
            shard, (lo, hi) = self.shards[s], ranges[s]
            tokens, counts, offsets, _ = followers(shard.text, shard.table, shard.ptr,
                                                   shard.width, lo[a:b], hi[a:b], depth[a:b])
            rows = np.repeat(np.arange(a, b, dtype=np.int64), np.diff(offsets))
            keep = tokens != self.separator
            return rows[keep] * (1 << 32) + tokens[keep], counts[keep]

        keys, values = [], []
        for pieces in self._on_cores(search, len(batch)):
            keys += [p[0] for p in pieces]
            values += [p[1] for p in pieces]
        key, inverse = np.unique(np.concatenate(keys), return_inverse=True)
        total = np.bincount(inverse, np.concatenate(values), len(key)).astype(np.int64)
        return key >> 32, key & 0xFFFFFFFF, total

    def _next(self, batch: Batch, ranges, top_k: int | None) -> list[Next]:
        q = len(batch)
        rows, tokens, total = self.followers(batch, ranges)
        occurrences = sum(hi - lo for lo, hi in ranges)
        out = []
        cuts = np.searchsorted(rows, np.arange(q + 1))
        for i in range(q):
            t, c = tokens[cuts[i]:cuts[i + 1]], total[cuts[i]:cuts[i + 1]]
            by = np.lexsort((t, -c))[:top_k]
            out.append(Next(int(occurrences[i]), t[by], c[by], int(c.sum())))
        return out

    def next(self, queries, top_k: int | None = None) -> list[Next] | Next:
        """What follows each query: its count and the tokens after it with theirs (the
        ``top_k`` most frequent; all by default). A single string: one :class:`Next`."""
        top_k = None if top_k is None else integer(top_k, "top_k", 1)  # None: all
        if isinstance(queries, str):
            return self.next([queries], top_k)[0]
        batch = self._batch(queries)
        return self._next(batch, self._ranges(batch), top_k)

    def infgram(self, queries, top_k: int | None = None) -> list[Next] | Next:
        """The ∞-gram of each context (Liu et al. 2024): its longest suffix that occurs
        followed by a token (``suffix_length``, 0: the empty context, every token), with
        what follows that suffix."""
        top_k = None if top_k is None else integer(top_k, "top_k", 1)  # None: all
        if isinstance(queries, str):
            return self.infgram([queries], top_k)[0]
        batch = self._batch(queries)
        length = batch.longest_occurring(self._count_ids)
        out: list[Next | None] = [None] * len(batch)
        todo = np.arange(len(batch))
        while len(todo):
            ctx = batch.slices(batch.offsets[1:][todo] - length[todo], batch.offsets[1:][todo])
            found = self._next(ctx, self._ranges(ctx), top_k)
            again = []
            for i, nxt in zip(todo, found):
                if nxt.total or length[i] == 0:
                    nxt.suffix_length = int(length[i])
                    out[i] = nxt
                else:  # only documents' ends follow it: the next shorter suffix
                    length[i] -= 1
                    again.append(i)
            todo = np.array(again, np.int64)
        return out

    def longest_suffix(self, queries) -> np.ndarray:
        """Per query, the length of its longest suffix that occurs at all (int64; a
        suffix seen only at documents' ends counts: infini-gram's ∞-gram context)."""
        return self._batch(queries).longest_occurring(self._count_ids)

    def docs(self, queries, limit: int = 10) -> list[list[Document]] | list[Document]:
        """Up to ``limit`` distinct documents holding each query (in the suffix array's
        order), each with the offset of its first match met there."""
        limit = integer(limit, "limit", 1)
        if isinstance(queries, str):
            return self.docs([queries], limit)[0]
        batch = self._batch(queries, allow_empty=False)
        ranges = self._ranges(batch)
        out = []
        for i in range(len(batch)):
            found: list[Document] = []
            seen: set[int] = set()
            for s, (lo, hi) in enumerate(ranges):
                at, end = int(lo[i]), int(hi[i])
                step = limit
                while at < end and len(found) < limit:  # a document may hold many matches
                    take = min(end - at, step)
                    found += self._documents(s, at, take, seen, limit - len(found))
                    at, step = at + take, min(step * 4, 1 << 20)
            out.append(found)
        return out

    def _documents(self, s: int, lo: int, take: int, seen: set[int], most: int
                   ) -> list[Document]:
        """The documents of shard ``s``'s table entries lo .. lo+take-1 not in ``seen``
        (each once, at its first match there; at most ``most``), added to ``seen``."""
        shard = self.shards[s]
        at = table_entries(shard.table, shard.ptr, lo, lo + take)
        docs = np.searchsorted(shard.docs.astype(np.int64), at, side="right") - 1
        docs, first = np.unique(docs, return_index=True)
        order = np.argsort(first)  # in the table's order
        tokens = np.frombuffer(shard.text, f"<u{self.width}")
        ends = np.r_[shard.docs.astype(np.int64), len(shard.text)] // self.width
        out = []
        for d, a in zip(docs[order].tolist(), at[first[order]].tolist()):
            number = int(self._first_doc[s] + d)
            if number in seen:
                continue
            if len(out) == most:
                break
            seen.add(number)
            ids = tokens[ends[d] + 1:ends[d + 1]].tolist()
            words = None
            if self.vocab is not None:
                words = [w for w in self.words(ids) if w not in (BOS, EOS)]
            out.append(Document(number, int(a // self.width - ends[d] - 1), ids, words))
        return out

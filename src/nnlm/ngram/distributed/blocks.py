"""Modified Kneser-Ney over partitions of the n-grams by their last word: what each task
of the cluster path computes, on sorted numpy blocks with the one-process estimator's
compiled kernels (counting, the radix sort, the k-way run merge).

Partition i holds every n-gram, of every order, whose last word has an id in
``[bounds[i], bounds[i + 1])``. That cut is chosen because:

- an n-gram's suffixes end with its last word, so a partition holds every suffix of its
  n-grams: counting, merging the shards' counts and the adjusted counts a(g) = N1+(. g)
  (the (k+1)-grams x g end where g ends) need nothing from elsewhere;
- a level's stored order (by suffix id, then first word) sorts by the last word first,
  so each partition is a sorted piece of every level and the pieces in range order are
  the one-process model's levels;
- the lower order's p(w | h') in p(w | h) = (a - D) / S(h) + gamma(h) p(w | h') ends with
  w: it is in the same partition.

Only the context sums cross partitions: S(h) and N_j(h .) count the n-grams h x of every
x, and h lives in the partition of its own last word. Each partition sends its integer
partial sums for the contexts it uses to their home (:func:`context_requests`), which
adds them, computes gamma(h), h's back-off weight, and answers with S(h), gamma(h) and
h's id (:func:`answer_contexts`). Sums of integers are exact in any order, and gamma
comes from them by the same operations as in :class:`~nnlm.ngram.estimate.kneser_ney.
KneserNey`, so the model is the one process's to the bit (the tests compare every array).

Nothing here knows about the engine: :mod:`.estimate` moves these blocks between tasks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...base.jit_cache import first_call, njit  # numba comes with the distributed extra
from ...text.stream import Stream
from ..estimate.counts import CHUNK_POSITIONS, OrderTable, count_ngrams
from ..estimate.kneser_ney import (
    adjusted_counts,
    backoff_of,
    context_classes,
    discount_of,
    discounted_mass,
)
from ..estimate.radix import radix_unique
from ..estimate.run_merge import merge_runs
from ..store.levels import NgramLevel
from ..store.values import signed_backoffs


def interpolated(a: np.ndarray, D: np.ndarray, S_h: np.ndarray, gamma_h: np.ndarray,
                 low: np.ndarray) -> np.ndarray:
    """(a - D) / S(h), 0 where S(h) = 0, plus gamma(h) p(w | h'): the operations of
    KneserNey.fit in its order, so the bits are its bits (D's memory is reused)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.subtract(a, D, out=D)
        p /= S_h
        p[S_h == 0] = 0.0
    p += gamma_h * low
    return p


def choose_bounds(word_counts: np.ndarray, partitions: int) -> np.ndarray:
    """Word-id bounds of ``partitions`` ranges of about equal token mass (a word's count
    stands for the n-grams ending with it); fewer ranges where one word outweighs a
    range. ``bounds[0] = 0``, ``bounds[-1] = |V|``."""
    V = len(word_counts)
    weight = np.maximum(np.asarray(word_counts, np.float64), 0.0) + 1e-9  # none empty
    cum = np.cumsum(weight)
    cuts = np.searchsorted(cum, cum[-1] * np.arange(1, partitions) / partitions) + 1
    return np.unique(np.concatenate([[0], np.clip(cuts, 1, V - 1), [V]])).astype(np.int64)


def shard_pieces(stream: Stream, order: int, V: int, bounds: np.ndarray,
                 chunk: int = CHUNK_POSITIONS) -> list[list]:
    """A shard's n-grams counted (``chunk`` positions at a time, on this thread: the
    engine runs shards side by side) and cut by last word: ``out[i][k - 1]`` is partition
    i's (keys, counts) of order k, sorted, keys as in :class:`OrderTable` with suffix ids
    counted from the partition's first (k-1)-gram in this shard (order 1: word ids)."""
    tables = count_ngrams(stream, order, V, chunk, threads=1)
    P = len(bounds) - 1
    out: list[list] = [[None] * order for _ in range(P)]
    last = previous = None
    for k, table in enumerate(tables, start=1):
        last_k = table.keys if k == 1 else last[table.suffix]  # sorted: last word first
        cut = np.searchsorted(last_k, bounds)
        for i in range(P):
            keys = table.keys[cut[i]:cut[i + 1]]
            if k > 1:  # suffix ids from the partition's own first (k-1)-gram
                keys = (keys // V - previous[i]) * V + keys % V
            # counts as counting left them (32-bit below 2^31 positions): summed in 64
            # bits where the shards' pieces merge
            out[i][k - 1] = (np.ascontiguousarray(keys, np.int64),
                             np.ascontiguousarray(table.counts[cut[i]:cut[i + 1]]))
        last, previous = last_k, cut
    return out


def merge_pieces(pieces: list[list], V: int) -> list[OrderTable]:
    """One partition's tables: the shards' pieces (``pieces[s][k - 1]``) merged order by
    order, counts summed. Each shard's piece is a sorted run; its suffix ids are turned
    into the merged table's ids of order k - 1 (a monotone map, so the run stays sorted)
    and the runs are merged by :func:`merge_runs`."""
    tables: list[OrderTable] = []
    ids_of: list[np.ndarray] = []
    for k in range(1, len(pieces[0]) + 1):
        runs = []
        for s, shard in enumerate(pieces):
            keys, counts = shard[k - 1]
            if k > 1:
                keys = ids_of[s][keys // V].astype(np.int64) * V + keys % V
            runs.append((keys, counts))
        starts = np.cumsum([0] + [len(keys) for keys, _ in runs])
        keys = np.concatenate([keys for keys, _ in runs])
        counts = np.concatenate([counts for _, counts in runs]).astype(np.int64, copy=False)
        if len(runs) == 1 or len(keys) == 0:
            uniq, summed, ids = keys, counts, np.arange(len(keys))
        else:
            uniq, summed, ids = merge_runs(keys, counts, starts, threads=1)  # one a task
        ids_of = [ids[starts[s]:starts[s + 1]] for s in range(len(runs))]
        tables.append(OrderTable(uniq.copy(), summed.copy(), np.zeros(0, np.int32), V))
    return tables


def level_words(tables: list[OrderTable], V: int) -> list[np.ndarray]:
    """Each order's n-grams as (rows, k) int32 word ids, oldest first."""
    out = [tables[0].keys.astype(np.int32)[:, None]]
    for table in tables[1:]:
        suffix = out[-1][table.suffix]
        out.append(np.concatenate([(table.keys % V).astype(np.int32)[:, None], suffix], 1))
    return out


@njit(cache=True, nogil=True)
def _row_hash(rows, out):
    for i in range(rows.shape[0]):
        h = np.uint64(0x243F6A8885A308D3)
        for j in range(rows.shape[1]):
            h ^= np.uint64(rows[i, j])
            h *= np.uint64(0x9E3779B97F4A7C15)
            h ^= h >> np.uint64(29)
        out[i] = np.int64(h >> np.uint64(1))


def row_hash(rows: np.ndarray) -> np.ndarray:
    """A 63-bit hash of each row of word ids (non-negative int64), compiled: one pass
    over the rows instead of four numpy passes a column."""
    out = np.empty(len(rows), np.int64)
    if len(rows):
        first_call(_row_hash, rows, out)
    return out


def group_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each row's group, each group's first row) for equal rows of ``rows`` (n, m): by a
    hash sorted with the radix sort, every row checked against its group's first (a
    collision falls back to numpy's exact row sort)."""
    if len(rows) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    keys = rows[:, 0].astype(np.int64) if rows.shape[1] == 1 else row_hash(rows)
    _, inverse, _ = radix_unique(keys)
    first = np.empty(int(inverse.max()) + 1, np.int64)
    first[inverse[::-1]] = np.arange(len(rows) - 1, -1, -1)
    at = first[inverse]
    if all(np.array_equal(rows[at, j], rows[:, j]) for j in range(rows.shape[1])):
        return inverse.astype(np.int64), first
    _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), first.astype(np.int64)


class RowIndex:
    """Distinct rows of word ids (``table``, n x m), found by value: their hashes sorted
    once by the radix sort (order 1's rows are sorted word ids, searched as they are), so
    that every partition's queries to a home are answered from one index."""

    def __init__(self, table: np.ndarray):
        self.table = table
        self.hashes = self.by_hash = None
        if table.shape[1] > 1 and len(table):
            self.hashes, rank, _ = radix_unique(row_hash(table))
            self.by_hash = np.empty(len(table), np.int64)
            self.by_hash[rank] = np.arange(len(table))  # (a repeated hash: checked below)

    def find(self, queries: np.ndarray) -> np.ndarray:
        """The index of each row of ``queries``, every one of which is in the table."""
        table = self.table
        if self.hashes is None:
            at = np.searchsorted(table[:, 0], queries[:, 0])  # order 1: sorted word ids
        else:
            at = self.by_hash[np.minimum(np.searchsorted(self.hashes, row_hash(queries)),
                                         len(self.hashes) - 1)]
        at = np.minimum(np.asarray(at, np.int64), max(len(table) - 1, 0))
        if len(queries) and not all(np.array_equal(table[at, j], queries[:, j])
                                    for j in range(queries.shape[1])):
            index = {tuple(row): i for i, row in enumerate(table.tolist())}  # a collision
            at = np.array([index[tuple(row)] for row in queries.tolist()], np.int64)
        return at


@dataclass
class Partition:
    """One partition's state between the passes (kept where its task ran). Pickled
    without its word rows, which the tables give again (:func:`level_words`, a gather an
    order): a partition written to disk or spilled by the engine takes 20 bytes an
    n-gram less (of about 45)."""

    tables: list[OrderTable]
    adjusted: list[np.ndarray]
    words: list[np.ndarray]

    def sizes(self) -> list[int]:
        return [len(t) for t in self.tables]

    def __getstate__(self) -> dict:
        return {"tables": self.tables, "adjusted": self.adjusted}

    def __setstate__(self, state: dict) -> None:
        self.tables, self.adjusted = state["tables"], state["adjusted"]
        self.words = level_words(self.tables, self.tables[0].vocab_size)


def build_partition(pieces: list[list], V: int) -> Partition:
    """Pass 2: merge the shards' pieces and compute the adjusted counts."""
    tables = merge_pieces(pieces, V)
    return Partition(tables, adjusted_counts(tables, V), level_words(tables, V))


def counts_of_counts(part: Partition) -> np.ndarray:
    """(orders, 6): how many n-grams of each order have adjusted count 0..5+ (1..4 make
    the discounts)."""
    return np.stack([np.bincount(np.minimum(a[a > 0], 5), minlength=6) for a in part.adjusted])


def context_requests(part: Partition, bounds: np.ndarray) -> tuple[list, list[list]]:
    """Pass 3: for every order k >= 2, this partition's contexts h (the n-grams' first
    k - 1 words) with its integer partial sums, S = sum a(h x) and N_1, N_2, N_3+, sent
    to h's home: ``out[i][k - 2]`` = (h rows, S, N1, N2, N3) for partition i. Returns
    (the groups, kept here to spread the answers back over the n-grams, out)."""
    P = len(bounds) - 1
    out: list[list] = [[] for _ in range(P)]
    groups = []
    for k in range(2, len(part.tables) + 1):
        rows, a = part.words[k - 1][:, :-1], part.adjusted[k - 1]
        inverse, first = group_rows(rows)
        G = len(first)
        S = np.bincount(inverse, weights=a, minlength=G).astype(np.int64)
        n1, n2, n3 = context_classes(inverse, a, G)
        h = rows[first]
        home = np.searchsorted(bounds, h[:, -1], side="right") - 1
        # numpy sorts 16-bit integers stably by radix: P buckets in two passes
        order = np.argsort(home.astype(np.int16) if P < 1 << 15 else home, kind="stable")
        cuts = np.searchsorted(home[order], np.arange(P + 1))
        # kept until pass 5 and counts of word types sent (N_j(h) <= |V|): 32-bit where
        # they fit, which the engine moves and out_of_core stores in two thirds the bytes
        small = np.int32 if len(rows) < 2**31 else np.int64
        groups.append((inverse.astype(small), order.astype(small), cuts))
        n1, n2, n3 = (n.astype(np.int32) for n in (n1, n2, n3))
        for i in range(P):
            pick = order[cuts[i]:cuts[i + 1]]
            out[i].append((h[pick], S[pick], n1[pick], n2[pick], n3[pick]))
    return groups, out


def answer_contexts(part: Partition, requests: list[list], discounts: np.ndarray,
                    offsets: np.ndarray) -> tuple[list, list[list]]:
    """Pass 4 at h's home: the partial sums of every partition for this partition's
    (k-1)-grams added, gamma(h) computed, and each asker answered: ``out[j][k - 2]`` =
    (S(h), gamma(h), global id of h) for its rows. Returns (gammas: gamma of this
    partition's n-grams of orders 1..N-1, their back-off weights; out; has_child: which
    of them some longer n-gram has as its context, the trie's extension flags).
    ``offsets[k - 1]``: this partition's first id in the model's order-k level."""
    out: list[list] = [[] for _ in range(len(requests))]
    gammas, has_child = [], []
    for k in range(2, len(part.tables) + 1):
        home = part.words[k - 2]
        asked = [r[k - 2] for r in requests]
        index = RowIndex(home)  # once for every asker
        where = [index.find(h) for h, *_ in asked]
        at = np.concatenate(where) if where else np.zeros(0, np.int64)
        S, n1, n2, n3 = (_summed(asked, at, len(home), column) for column in (1, 2, 3, 4))
        gamma = backoff_of(S, discounted_mass(n1, n2, n3, discounts[k - 1]))
        gammas.append(gamma)
        has_child.append(np.bincount(at, minlength=len(home)) > 0)
        for j, rank in enumerate(where):
            out[j].append((S[rank], gamma[rank], rank + offsets[k - 2]))
    return gammas, out, has_child


def _summed(asked: list, at: np.ndarray, n: int, column: int) -> np.ndarray:
    """Column ``column`` of every asker's rows added up per home row (integers, exact)."""
    values = np.concatenate([r[column] for r in asked]).astype(np.float64)
    return np.bincount(at, weights=values, minlength=n)


@dataclass
class FilePiece:
    """A partition's piece of one level as the model's file stores it: keys, float32
    log-probabilities and back-offs whose zero is signed by whether the n-gram extends
    (16 bytes an n-gram, against an :class:`NgramLevel`'s 40)."""

    keys: np.ndarray
    logp: np.ndarray
    log_bow: np.ndarray

    def __len__(self) -> int:
        return len(self.keys)


def interpolate(part: Partition, groups: list, gammas: list, answers: list[list],
                discounts: np.ndarray, unigram_p: np.ndarray, offsets: np.ndarray, V: int,
                has_child: list | None = None) -> list:
    """Pass 5: p(h w) = (a - D) / S(h) + gamma(h) p(w | h') for every n-gram of order
    >= 2 here, and this partition's piece of each stored level (orders 2..N).
    ``groups`` and ``gammas``: this partition's from passes 3 and 4; ``answers[i]``:
    partition i's answers to it; ``unigram_p``: p of its unigrams; ``offsets[k - 1]``:
    its first id in order k's level. With ``has_child`` (pass 4's extension flags), the
    pieces are :class:`FilePiece` (all a model written from the pieces needs), else
    :class:`NgramLevel`."""
    N = len(part.tables)
    levels = []
    low = unigram_p
    for k in range(2, N + 1):
        table, a, w = part.tables[k - 1], part.adjusted[k - 1], part.words[k - 1]
        inverse, order, cuts = groups[k - 2]
        S_g, gamma_g, id_g = (np.empty(len(order)), np.empty(len(order)),
                              np.empty(len(order), np.int64))
        for i, answer in enumerate(answers):
            pick = order[cuts[i]:cuts[i + 1]]
            S_g[pick], gamma_g[pick], id_g[pick] = answer[k - 2]
        D = discount_of(a, discounts[k - 1])
        p = interpolated(a, D, S_g[inverse], gamma_g[inverse], low[table.suffix])
        suffix = table.suffix
        if k == 2:  # the model keys order 2 by word ids
            keys, prefix = w[:, 1].astype(np.int64) * V + w[:, 0], w[:, 0]
        else:
            keys = (suffix + offsets[k - 2]) * V + w[:, 0]
            prefix = id_g[inverse]
        gamma = gammas[k - 1] if k < N else np.broadcast_to(1.0, len(p))
        with np.errstate(divide="ignore"):
            if has_child is None:
                levels.append(NgramLevel(keys, np.log(p), np.log(gamma), prefix, w[:, -1], 0))
            else:
                bow = np.zeros(0, np.float32)  # the top order stores no back-offs
                if k < N:
                    bow = signed_backoffs(np.log(gamma), has_child[k - 1] | (gamma != 1))
                levels.append(FilePiece(keys, np.log(p).astype(np.float32), bow))
        low = p
    return levels


def trie_array(levels: list[NgramLevel], has_child: list[np.ndarray], k: int, name: str,
               first: np.ndarray, V: int, lo: int, hi: int) -> np.ndarray:
    """Entries [lo, hi) of this partition's piece of one array of order k in the model's
    file: ``pointers`` (where each entry's run of extensions starts in order k + 1: a
    level is sorted by suffix id, and an entry's extensions end with its last word, so
    they are here), ``words``, ``keys``, ``logp`` (float32) or ``log_bow`` (float32, its
    zero signed by whether the entry extends, as
    :func:`nnlm.ngram.store.values.signed_backoffs`). ``first[k - 1]``: the partition's
    first id in order k (order 1: its first word)."""
    if name == "pointers":  # the first key at or above id * V: the first extension of id
        ids = np.arange(first[k - 1] + lo, first[k - 1] + hi, dtype=np.int64)
        return np.searchsorted(levels[k - 1].keys, ids * V) + first[k]
    level = levels[k - 2]
    if name == "words":
        return level.keys[lo:hi] % V
    if name == "keys":
        return level.keys[lo:hi]
    if name == "logp":
        return level.logp[lo:hi].astype(np.float32, copy=False)
    if isinstance(level, FilePiece):
        return level.log_bow[lo:hi]
    bow = level.log_bow[lo:hi]
    return signed_backoffs(bow, has_child[k - 1][lo:hi] | (bow != 0))


def unigrams_of(part: Partition) -> tuple[np.ndarray, np.ndarray]:
    """This partition's unigrams: word ids and adjusted counts."""
    return part.tables[0].keys, part.adjusted[0]


def unigram_model(words: np.ndarray, a: np.ndarray, d: np.ndarray, V: int
                  ) -> tuple[np.ndarray, float]:
    """p of every seen word (order 1 interpolated with the uniform distribution over the
    |V| - 1 predictable words) and gamma of the empty context, as KneserNey computes
    them."""
    zero = np.zeros(len(a), np.int64)
    S = np.bincount(zero, weights=a, minlength=1)
    gamma = backoff_of(S, discounted_mass(*context_classes(zero, a, 1), d))
    p = interpolated(a, discount_of(a, d), S[zero], gamma[zero],
                     np.full(len(a), 1.0 / (V - 1)))
    return p, float(gamma[0])

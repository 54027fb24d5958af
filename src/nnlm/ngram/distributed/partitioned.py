"""The passes of :mod:`.blocks` in order, and the model from the partitions' pieces:
written to its file a chunk at a time (:class:`PartitionedSource`, the trie writer's
source; :class:`StreamedKneserNey`, what ``save_model`` takes), or assembled in memory
(:func:`assemble_model`). :func:`estimate_partitioned` runs every task in this process
(the reference the cluster path is tested against); the cluster's client runs the same
passes as tasks (:mod:`.estimate`) and writes or assembles the same way."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ...text.stream import Stream
from ...text.vocab import BOS_ID, Vocabulary
from ..estimate.kneser_ney import KneserNey, check_fallback, discounts_of_counts
from ..store.levels import NgramLevel
from ..store.trie import FILE_NAME
from ..store.trie_write import same, write_trie
from ..store.values import signed_backoffs
from . import blocks


def discounts_of(counts: np.ndarray, fallback) -> np.ndarray:
    """(orders, 3) discounts from the counts-of-counts summed over the partitions."""
    return np.stack([discounts_of_counts(counts[k - 1], k, fallback)
                     for k in range(1, len(counts) + 1)])


def offsets_of(sizes: np.ndarray) -> np.ndarray:
    """(P, N): where partition i's n-grams of order k start in the model's level."""
    return np.cumsum(sizes, axis=0) - sizes


def unigram_arrays(V: int, order: int, words: np.ndarray, unigram_p: np.ndarray,
                   gamma0: float, unigram_gammas: list[np.ndarray]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """log p and log gamma of every word (|V| of each), as :meth:`KneserNey.fit` makes
    them: the unseen words share gamma(empty context) uniformly, <s> is never predicted."""
    uni = np.full(V, gamma0 / (V - 1))
    uni[words] = unigram_p
    uni[BOS_ID] = 0.0
    uni_bow = np.ones(V)
    if order > 1:
        uni_bow[words] = np.concatenate(unigram_gammas)
    with np.errstate(divide="ignore"):
        return np.log(uni), np.log(uni_bow)


def assemble_model(vocab: Vocabulary, order: int, fallback, discounts: np.ndarray,
                   words: np.ndarray, unigram_p: np.ndarray, gamma0: float,
                   unigram_gammas: list[np.ndarray],
                   pieces_of: Callable[[int], list[NgramLevel]]) -> KneserNey:
    """The KneserNey model from the partitions' pieces in range order (``pieces_of(k)``:
    every partition's piece of order k, fetched order by order so that only one order's
    pieces are held beside the model; ``unigram_gammas[i]``: partition i's unigrams'
    back-off weights), arrays laid out as :meth:`KneserNey.fit` lays them out."""
    V = len(vocab)
    model = KneserNey(vocab, order, fallback)
    model.discounts = discounts
    model.unigram_logp, model.unigram_log_bow = unigram_arrays(V, order, words, unigram_p,
                                                               gamma0, unigram_gammas)
    model.levels = []
    below = len(words)
    for k in range(2, order + 1):
        pieces = pieces_of(k)

        def joined(name: str, pieces=pieces) -> np.ndarray:
            return np.concatenate([getattr(piece, name) for piece in pieces])

        level = NgramLevel(joined("keys"), joined("logp"), joined("log_bow"), joined("prefix"),
                           joined("last"), V if k == 2 else below)
        del pieces
        model.levels.append(level)
        below = len(level)
    return model


class SpilledPointers:
    """Run pointers written to a file as their pieces come, read back a slice at a time
    (the trie's pointer coder reads them twice, to choose a layout and to code it), so
    that an order's pointers never sit in memory whole. Read with ``np.fromfile``, not a
    mapping: a mapping's pages would count in this process's memory."""

    def __init__(self, path: Path, pieces):
        self.path = Path(path)
        self.n = 0
        with open(self.path, "wb") as f:
            for piece in pieces:
                piece = np.ascontiguousarray(piece, np.int64)
                f.write(piece.data)
                self.n += len(piece)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index):
        if isinstance(index, slice):
            lo, hi, _ = index.indices(self.n)
            return np.fromfile(self.path, np.int64, max(0, hi - lo), offset=8 * lo)
        return int(np.fromfile(self.path, np.int64, 1, offset=8 * (index % self.n))[0])

    def close(self) -> None:
        self.path.unlink(missing_ok=True)


# entries of an array the writer takes at a time: the client holds a few such chunks
# (16 MB of int64 each), however large a partition grows
CHUNK = 1 << 21


def spans(sizes, chunk: int | None = None) -> list[tuple[int, int, int]]:
    """(partition, lo, hi) of every chunk of an order, partition after partition, for
    partitions of ``sizes`` entries."""
    chunk = chunk or CHUNK
    return [(j, lo, min(int(n), lo + chunk)) for j, n in enumerate(sizes)
            for lo in range(0, int(n), chunk)]


class PartitionedSource:
    """A model held as its partitions' pieces, as the trie writer's source of sections
    (the methods of :class:`nnlm.ngram.store.trie_write.WholeModel`): each section is
    written from chunks of the pieces in range order, so the file is the one-process
    model's, byte for byte, while the writer holds a few chunks and one section.

    ``apply(k, name, spans, fn, *args)`` yields fn(chunk, first index, *args) for each
    span (partition, lo, hi) in turn, the chunk being entries [lo, hi) of what
    :func:`.blocks.trie_array` makes of the partition's order k ``name``: in this process
    (:func:`estimate_partitioned`), or as tasks where the partitions lie (:mod:`.estimate`).
    ``sizes``: (P, N) entries a partition holds of each order (order 1: the words of its
    range)."""

    def __init__(self, vocab: Vocabulary, order: int, sizes: np.ndarray,
                 unigram_logp: np.ndarray, unigram_log_bow: np.ndarray,
                 extends1: np.ndarray, apply):
        self.vocab, self.order, self.sizes = vocab, order, np.asarray(sizes)
        self.counts = [int(c) for c in self.sizes.sum(axis=0)]
        self.unigram_logp, self.unk_extends = unigram_logp, False
        self._bow, self._extends1, self.apply = unigram_log_bow, extends1, apply

    def unigram_log_bow(self) -> np.ndarray:
        return signed_backoffs(self._bow, self._extends1 | (self._bow != 0))

    def child_pointers(self, k: int, spill) -> SpilledPointers:
        return SpilledPointers(Path(spill) / f".pointers-{k}.tmp", itertools.chain(
            self.each(k, "pointers", same), [np.array([self.counts[k]], np.int64)]))

    def whole(self, k: int, name: str) -> np.ndarray:
        return np.concatenate([np.zeros(0, np.int64), *self.each(k, name, same)])

    def each(self, k: int, name: str, fn, *args):
        return self.apply(k, name, spans(self.sizes[:, k - 1]), fn, *args)


class StreamedKneserNey:
    """A modified Kneser-Ney model that stays in its partitions until it is saved: what
    :func:`nnlm.models.save_model` needs (kind, vocabulary, settings, the files), with
    the file written from the pieces (:class:`PartitionedSource`). The saved directory
    is the one-process model's; load it to use the model."""

    kind = KneserNey.kind

    def __init__(self, source: PartitionedSource, discounts: np.ndarray):
        self.source, self.vocab, self.order = source, source.vocab, source.order
        self.discounts = discounts
        self.unigram_logp, self.unigram_log_bow = source.unigram_logp, source._bow

    def config(self) -> dict:
        return {"order": self.order, "discounts": self.discounts.tolist()}

    def num_ngrams(self) -> list[int]:
        return list(self.source.counts)

    bound_by_content = True  # the one-process model's file and id, byte for byte

    def save_files(self, directory: Path, binding, save) -> None:
        write_trie(self.source, Path(directory) / FILE_NAME, binding)


def streamed_model_of(vocab: Vocabulary, order: int, discounts: np.ndarray, bounds: np.ndarray,
                      sizes: np.ndarray, words: np.ndarray, unigram_p: np.ndarray,
                      gamma0: float, unigram_gammas: list, unigram_children: list,
                      apply) -> StreamedKneserNey:
    """The model whose file is written from its partitions' pieces through ``apply`` (see
    :class:`PartitionedSource`), wherever they lie: the unigrams' arrays from what each
    partition said of its words (``unigram_gammas``, their back-off weights;
    ``unigram_children``, which extend: both unused at order 1)."""
    V = len(vocab)
    uni_logp, uni_bow = unigram_arrays(V, order, words, unigram_p, gamma0, unigram_gammas)
    extends1 = extends_of_unigrams(V, words, unigram_children if order > 1 else [])
    return StreamedKneserNey(PartitionedSource(vocab, order, file_sizes(bounds, sizes),
                                               uni_logp, uni_bow, extends1, apply), discounts)


def first_ids(bounds: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """(P, N): each partition's first id in each order of the file (order 1: its first
    word id; above: its first entry of the level)."""
    return np.concatenate([bounds[:-1, None], offsets[:, 1:]], axis=1).astype(np.int64)


def file_sizes(bounds: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(P, N): the entries each partition holds of each order of the file (order 1:
    every word id of its range, seen or not)."""
    return np.concatenate([np.diff(bounds)[:, None], sizes[:, 1:]], axis=1).astype(np.int64)


def extends_of_unigrams(V: int, words: np.ndarray, has_child: list[np.ndarray]) -> np.ndarray:
    """Which words some stored bigram has as its context, from each partition's flags
    for its seen words (laid end to end in ``words``' order)."""
    out = np.zeros(V, bool)
    if has_child:
        out[words] = np.concatenate(has_child)
    return out


def estimate_partitioned(streams: Sequence[Stream], order: int, vocab: Vocabulary,
                         partitions: int, discount_fallback=None, streamed: bool = False):
    """Modified Kneser-Ney of the shards ``streams`` (one text, cut at line ends) through
    ``partitions`` partitions by last word, every pass in this process. ``streamed``:
    return a :class:`StreamedKneserNey`, whose file is written from the pieces, instead
    of the model assembled in memory."""
    fallback = check_fallback(discount_fallback)
    V, N = len(vocab), order
    bounds = blocks.choose_bounds(vocab.counts, partitions)
    P = len(bounds) - 1
    pieces = [blocks.shard_pieces(stream, N, V, bounds) for stream in streams]
    parts = [blocks.build_partition([shard[i] for shard in pieces], V) for i in range(P)]
    del pieces
    discounts = discounts_of(sum(blocks.counts_of_counts(part) for part in parts), fallback)
    sizes = np.array([part.sizes() for part in parts])
    offsets = offsets_of(sizes)
    words = np.concatenate([blocks.unigrams_of(part)[0] for part in parts])
    a1 = np.concatenate([blocks.unigrams_of(part)[1] for part in parts])
    unigram_p, gamma0 = blocks.unigram_model(words, a1, discounts[0], V)
    asked = [blocks.context_requests(part, bounds) for part in parts]
    answered = [blocks.answer_contexts(parts[i], [asked[j][1][i] for j in range(P)],
                                       discounts, offsets[i]) for i in range(P)]
    levels = [blocks.interpolate(parts[j], asked[j][0], answered[j][0],
                                 [answered[i][1][j] for i in range(P)], discounts,
                                 unigram_p[offsets[j, 0]:offsets[j, 0] + sizes[j, 0]],
                                 offsets[j], V, answered[j][2] if streamed else None)
              for j in range(P)]
    gammas = [home[0][0] if N > 1 else None for home in answered]
    if not streamed:
        return assemble_model(vocab, N, fallback, discounts, words, unigram_p, gamma0, gammas,
                              lambda k: [part[k - 2] for part in levels])
    first = first_ids(bounds, offsets)

    def apply(k, name, chunks, fn, *args):
        for j, lo, hi in chunks:
            piece = blocks.trie_array(levels[j], answered[j][2], k, name, first[j], V, lo, hi)
            yield fn(piece, int(first[j, k - 1]) + lo, *args)

    return streamed_model_of(vocab, N, discounts, bounds, sizes, words, unigram_p, gamma0,
                             gammas, [home[2][0] for home in answered if N > 1], apply)

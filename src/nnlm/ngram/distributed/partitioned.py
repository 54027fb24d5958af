"""The passes of :mod:`.blocks` in order, and the model assembled from the partitions'
pieces. :func:`estimate_partitioned` runs every task in this process (the reference the
cluster path is tested against); the cluster's client runs the same passes as tasks
(:mod:`.estimate`) and assembles the same way (:func:`assemble_model`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ...text.stream import Stream
from ...text.vocab import BOS_ID, Vocabulary
from ..estimate.kneser_ney import KneserNey, check_fallback, discounts_of_counts
from ..store.levels import NgramLevel
from . import blocks


def discounts_of(counts: np.ndarray, fallback) -> np.ndarray:
    """(orders, 3) discounts from the counts-of-counts summed over the partitions."""
    return np.stack([discounts_of_counts(counts[k - 1], k, fallback)
                     for k in range(1, len(counts) + 1)])


def offsets_of(sizes: np.ndarray) -> np.ndarray:
    """(P, N): where partition i's n-grams of order k start in the model's level."""
    return np.cumsum(sizes, axis=0) - sizes


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
    uni = np.full(V, gamma0 / (V - 1))
    uni[words] = unigram_p
    uni[BOS_ID] = 0.0
    uni_bow = np.ones(V)
    if order > 1:
        uni_bow[words] = np.concatenate(unigram_gammas)
    with np.errstate(divide="ignore"):
        model.unigram_logp = np.log(uni)
    model.unigram_log_bow = np.log(uni_bow)
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


def estimate_partitioned(streams: Sequence[Stream], order: int, vocab: Vocabulary,
                         partitions: int, discount_fallback=None) -> KneserNey:
    """Modified Kneser-Ney of the shards ``streams`` (one text, cut at line ends) through
    ``partitions`` partitions by last word, every pass in this process."""
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
                                 offsets[j], V) for j in range(P)]
    gammas = [gammas[0] if N > 1 else None for gammas, _ in answered]
    return assemble_model(vocab, N, fallback, discounts, words, unigram_p, gamma0, gammas,
                          lambda k: [part[k - 2] for part in levels])

"""The cluster path's passes (nnlm.ngram.distributed.blocks), run in one process over
partitions by last word, against the one-process estimator: the same model, every array
equal to the bit, for any number of shards and partitions."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import trie_file_parts, zipf_corpus
from nnlm import Stream, Vocabulary
from nnlm.ngram.distributed import blocks
from nnlm.ngram.distributed.partitioned import estimate_partitioned
from nnlm.ngram.estimate.kneser_ney import KneserNey


def corpus(seed: int = 0, sentences: int = 600):
    lines = zipf_corpus(seed=seed, n_sentences=sentences, n_words=60)
    counts: dict = {}
    for line in lines:
        for w in line:
            counts[w] = counts.get(w, 0) + 1
    return lines, Vocabulary.from_counts(counts)


def assert_same_model(a: KneserNey, b: KneserNey) -> None:
    assert np.array_equal(a.discounts, b.discounts)
    assert np.array_equal(a.unigram_logp, b.unigram_logp)
    assert np.array_equal(a.unigram_log_bow, b.unigram_log_bow)
    assert len(a.levels) == len(b.levels)
    for x, y in zip(a.levels, b.levels):
        for name in ("keys", "logp", "log_bow", "prefix", "last"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
        assert x.n_prefixes == y.n_prefixes


@pytest.mark.parametrize("order", [1, 2, 3, 5])
@pytest.mark.parametrize("shards, partitions", [(1, 1), (1, 3), (3, 2), (4, 7), (2, 60)])
def test_partitions_give_the_one_process_model_to_the_bit(order, shards, partitions):
    lines, vocab = corpus(seed=order + shards)
    whole = KneserNey(vocab, order, discount_fallback=True).fit(Stream.from_lines(lines, vocab))
    cuts = np.linspace(0, len(lines), shards + 1).astype(int)
    streams = [Stream.from_lines(lines[a:b], vocab) for a, b in zip(cuts[:-1], cuts[1:])]
    parted = estimate_partitioned(streams, order, vocab, partitions, discount_fallback=True)
    assert_same_model(parted, whole)


@pytest.mark.parametrize("order", [1, 2, 4])
@pytest.mark.parametrize("partitions, chunk", [(1, None), (3, None), (3, 7), (60, 64)])
def test_the_file_written_from_the_pieces_is_the_one_process_file(order, partitions, chunk,
                                                                  tmp_path, monkeypatch):
    """The model saved from its partitions' pieces (never assembled), chunk by chunk, is
    the file the one-process model saves, byte for byte: pointers, words, tables, values,
    checksums (chunks of 7 entries cut the bit-packed words and codes mid-word)."""
    from nnlm.models import load_model, save_model
    from nnlm.ngram.distributed import partitioned

    if chunk:
        monkeypatch.setattr(partitioned, "CHUNK", chunk)

    lines, vocab = corpus(seed=order + partitions)
    whole = KneserNey(vocab, order, discount_fallback=True).fit(Stream.from_lines(lines, vocab))
    streams = [Stream.from_lines(lines[:300], vocab), Stream.from_lines(lines[300:], vocab)]
    streamed = estimate_partitioned(streams, order, vocab, partitions, discount_fallback=True,
                                    streamed=True)
    assert not hasattr(streamed, "levels")  # nothing assembled
    save_model(whole, tmp_path / "one")
    save_model(streamed, tmp_path / "parts")
    one, parts = (trie_file_parts(tmp_path / name / "ngrams.trie") for name in ("one", "parts"))
    assert parts[0] == one[0] and parts[1] == one[1]
    assert not list((tmp_path / "parts").glob(".pointers*"))  # the spilled pointers go
    loaded = load_model(tmp_path / "parts")
    assert np.array_equal(loaded.discounts, whole.discounts)
    test = Stream.from_lines(lines[:50], vocab)
    assert np.array_equal(loaded.logprobs(test), load_model(tmp_path / "one").logprobs(test))


def test_bounds_split_the_token_mass_and_cover_the_vocabulary():
    counts = np.array([0, 0, 50, 1000, 400, 300, 200, 100, 50, 20, 10, 5])
    bounds = blocks.choose_bounds(counts, 3)
    assert bounds[0] == 0 and bounds[-1] == len(counts) and np.all(np.diff(bounds) > 0)
    mass = [counts[a:b].sum() for a, b in zip(bounds[:-1], bounds[1:])]
    assert len(mass) <= 3 and max(mass) <= 1000 + 50  # one heavy word may fill a range
    assert list(blocks.choose_bounds(counts, 1)) == [0, len(counts)]


def test_grouping_and_finding_rows_survive_hash_collisions(monkeypatch):
    rng = np.random.default_rng(0)
    rows = rng.integers(0, 5, (500, 3)).astype(np.int32)
    inverse, first = blocks.group_rows(rows)
    assert np.array_equal(rows[first][inverse], rows)
    assert len(first) == len(np.unique(rows, axis=0))
    table = np.unique(rows, axis=0)
    assert np.array_equal(table[blocks.RowIndex(table).find(rows)], rows)
    monkeypatch.setattr(blocks, "row_hash", lambda r: np.zeros(len(r), np.int64))  # all collide
    inverse, first = blocks.group_rows(rows)
    assert np.array_equal(rows[first][inverse], rows) and len(first) == len(table)
    assert np.array_equal(table[blocks.RowIndex(table).find(rows)], rows)

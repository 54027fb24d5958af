"""nnlm.nltk's count tables against brute force (collections.Counter over tuples): counts
made in many small batches, merged into many small blocks, with words arriving midway
(re-keying what was counted), in both key forms (packed uint64 and records), and every
level statistic the smoothings read."""

from __future__ import annotations

import random
from collections import Counter, defaultdict

import numpy as np
import pytest

from nnlm.nltk import tables as tables_module
from nnlm.nltk.tables import KeyCodec, NgramTables


def random_text(seed: int, sentences: int = 300) -> list[list[str]]:
    rng = random.Random(seed)
    return [[f"w{min(int(rng.paretovariate(0.8)), 400)}" for _ in range(rng.randint(1, 12))]
            for _ in range(sentences)]


def everygrams(sentence: list[str], order: int):
    for i in range(len(sentence)):
        for k in range(1, order + 1):
            if i + k <= len(sentence):
                yield tuple(sentence[i:i + k])


@pytest.fixture
def small_batches(monkeypatch):
    """Batches of 16 tokens and blocks of 4 keys: every merge and split path runs."""
    monkeypatch.setattr(tables_module, "BATCH_TOKENS", 16)
    monkeypatch.setattr(tables_module, "BLOCK", 4)
    monkeypatch.setattr(tables_module, "CHUNK", 8)


def counted_as_tuples(tables: NgramTables) -> Counter:
    out = Counter()
    for k in tables.orders():
        rows, counts = tables.counted(k)
        for row, count in zip(rows.tolist(), counts.tolist()):
            out[tuple(tables.words[i] for i in row)] += count
    return out


@pytest.mark.parametrize("reserve", [0, 1 << 20])  # packed keys; records (4 x 20 bits > 64)
def test_counts_in_batches_and_blocks_are_a_counters(small_batches, reserve):
    text, order = random_text(0), 4
    expected = Counter(g for s in text for g in everygrams(s, order))
    tables = NgramTables()
    tables.reserve(reserve)
    half = len(text) // 2
    for sentence in text[:half]:  # one n-gram at a time: new words re-key the counts
        for gram in everygrams(sentence, order):
            tables.add(gram)
    for lo in range(half, len(text), 7):  # in bulk, a few sentences a batch
        batch = text[lo:lo + 7]
        flat = np.array([tables.word_id(w) for s in batch for w in s], np.int32)
        tables.add_windows(flat, np.array([len(s) for s in batch]), order)
    assert KeyCodec(4, tables.bits).packed == (reserve == 0)
    assert counted_as_tuples(tables) == expected
    for k, (keys, counts) in tables.counted_keys().items():
        rows = KeyCodec(k, tables.bits).unpack(keys).tolist()
        assert rows == sorted(rows) and len(set(map(tuple, rows))) == len(rows)
        assert counts.sum() == sum(c for g, c in expected.items() if len(g) == k)


@pytest.mark.parametrize("reserve", [0, 1 << 20])
def test_every_level_statistic_is_the_brute_force_ones(small_batches, reserve):
    text, order = random_text(1, 200), 3
    counts = Counter(g for s in text for g in everygrams(s, order))
    tables = NgramTables()
    tables.reserve(reserve)
    for gram in counts.elements():
        tables.add(gram)
    total, types = defaultdict(int), defaultdict(int)
    before, continuation_total = defaultdict(set), defaultdict(int)
    for gram, c in counts.items():
        if len(gram) > 1:
            total[gram[:-1]] += c
            types[gram[:-1]] += 1
            before[gram[1:]].add(gram[0])
    for gram, words in before.items():
        if len(gram) > 1:
            continuation_total[gram[:-1]] += len(words)
    levels = tables.levels()
    for level in levels.values():
        rows = level.codec.unpack(level.keys)
        for i, row in enumerate(rows.tolist()):
            gram = tuple(tables.words[w] for w in row)
            assert level.stat("count")[i] == counts[gram]
            assert level.stat("context_total")[i] == total[gram]
            assert level.stat("context_types")[i] == types[gram]
            assert level.stat("continuations")[i] == len(before[gram])
            assert level.stat("continuation_total")[i] == continuation_total[gram]
        assert tables.find(levels, rows).tolist() == list(range(len(rows)))
    unseen = np.array([[0, 10_000], [-1, 0]], np.int64)
    assert tables.find(levels, unseen).tolist() == [-1, -1]


@pytest.mark.parametrize(("start", "dtype"), [(2**16 - 10, np.int32), (2**31 - 10, np.int64)])
def test_counts_past_their_type_widen_instead_of_wrapping(start, dtype):
    tables = NgramTables()
    keys = KeyCodec(1, 1).pack(np.array([[0], [1]]))
    for _ in range(3):
        tables._merge(1, keys.copy(), np.array([start, 5], np.int64))
    _, counts = tables.counted_keys()[1]
    assert counts.dtype == dtype and counts.tolist() == [3 * start, 15]

"""The compiled ARPA formatter (nnlm.ngram.formats._arpa_lines) against Python's, its
oracle: the same bytes for every number (Python's f"{x:.7g}" of log10, -99 for -inf) and
the same files, plain and compressed."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from nnlm.ngram.formats import arpa_write
from nnlm.ngram.formats.arpa_write import WordTexts, ngram_lines

pytestmark = pytest.mark.skipif(arpa_write._arpa_lines is None,
                                reason="nnlm.ngram.formats._arpa_lines is not built")

WORDS = WordTexts(["<unk>", "<s>", "</s>", "a", "é", "日本", "x"])


def values(seed: int, n: int = 50_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scaled = rng.normal(0, 1, n) * 10.0 ** rng.integers(-12, 12, n)
    edges = [0.0, -0.0, -np.inf, np.inf, np.nan, 1e-300, -1e300, 5e-324, -2.302585092994046,
             np.log(0.5), np.log(1e-7), -1e-7, np.nextafter(-1.0, 0)]
    return np.concatenate([scaled, edges, rng.normal(-3, 1, n)])


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_every_line_is_pythons(seed, k):
    logp = values(seed)
    ids = np.random.default_rng(seed).integers(0, 7, (len(logp), k))
    bows = np.random.default_rng(seed + 9).permutation(logp)
    for bow in (bows, None):
        fast = ngram_lines(WORDS, ids, logp, bow)
        assert isinstance(fast, bytes)
        assert fast.decode("utf-8") == ngram_lines(WORDS, ids, logp, bow, compiled=False)


def test_ids_outside_the_vocabulary_and_mismatched_arrays_are_refused():
    with pytest.raises(ValueError, match="outside the vocabulary"):
        ngram_lines(WORDS, np.array([[0, 7]]), np.zeros(1), None)
    with pytest.raises(ValueError, match="disagree"):
        ngram_lines(WORDS, np.array([[0, 1]]), np.zeros(2), None)


@pytest.mark.parametrize("name", ["m.arpa", "m.arpa.gz"])
def test_the_written_file_is_the_python_writers(tmp_path, monkeypatch, name):
    from nnlm.ngram.estimate.kneser_ney import KneserNey
    from nnlm.text.corpus import read_corpus

    text = tmp_path / "t.txt"
    rng = np.random.default_rng(1)
    words = ["the", "a", "cat", "sat", "on", "mat", "é", "日本"]
    text.write_text("\n".join(" ".join(rng.choice(words, int(rng.integers(1, 9))))
                              for _ in range(400)) + "\n", encoding="utf-8")
    vocab, stream = read_corpus(text)
    model = KneserNey(vocab, 4, discount_fallback=True).fit(stream)
    fast = arpa_write.write_arpa(model, tmp_path / ("fast-" + name))
    monkeypatch.setattr(arpa_write, "_arpa_lines", None)
    slow = arpa_write.write_arpa(model, tmp_path / ("slow-" + name))
    read = gzip.decompress if name.endswith(".gz") else bytes
    assert read(fast.read_bytes()) == read(slow.read_bytes())
    assert b"\\4-grams:" in read(fast.read_bytes())

"""nnlm ngram merge: static interpolation of back-off models into one (SRILM's -mix-lm),
against the runtime mixture (nnlm.mixture, an independent path), each model's own scores,
the distributions' sums, and the kenlm module reading the merged ARPA file."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import toy_world, write
from nnlm.cli import main
from nnlm.mixture import Mixture
from nnlm.models import load_model
from nnlm.ngram.backoff import ngram_words
from nnlm.ngram.estimate.merge import merge_backoff


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = toy_world(tmp_path_factory.mktemp("merge"))
    # a second model on other text over the same vocabulary, and one with words of its own
    assert main(["ngram", "train", str(w / "toy/valid.txt"), "--order", "2",
                 "--discount-fallback", "--vocab", str(w / "kn3/vocab.txt"),
                 "-o", str(w / "kn2")]) == 0
    other = write(w / "other.txt", "the zebra sleeps in the zoo\nthe cat sees a zebra\n" * 30
                  + "a dog runs in the zoo\n" * 20)
    assert main(["ngram", "train", str(other), "--order", "3", "--discount-fallback",
                 "-o", str(w / "zoo")]) == 0
    return w


def _null_padded(words: np.ndarray, order: int) -> np.ndarray:
    ctx = np.full((len(words), order - 1), -1, np.int64)
    k = words.shape[1]
    ctx[:, order - k:] = words[:, :-1]
    return ctx


def test_the_merged_model_is_the_runtime_mixture_on_every_stored_ngram(world):
    a, b = load_model(world / "kn3"), load_model(world / "kn2")
    merged = merge_backoff([a, b], [0.7, 0.3])
    mixture = Mixture([a, b], weights=[0.7, 0.3])
    checked = 0
    for words in ngram_words(merged):
        ctx = _null_padded(words, merged.order)
        np.testing.assert_allclose(merged.target_logprobs(ctx, words[:, -1]),
                                   mixture.target_logprobs(ctx, words[:, -1]), atol=1e-9)
        checked += len(words)
    assert checked > 300
    np.testing.assert_allclose(merged.unigram_logp[3:], mixture.next_logprobs(
        np.full((1, merged.order - 1), -1))[0][3:], atol=1e-9)


def test_every_merged_distribution_sums_to_one(world):
    a, b = load_model(world / "kn3"), load_model(world / "zoo")
    merged = merge_backoff([a, b], [0.5, 0.5])
    contexts = [_null_padded(np.c_[w, np.zeros(len(w), np.int64)], merged.order)
                for w in ngram_words(merged)[:-1]]  # every stored context, and unseen ones
    rng = np.random.default_rng(0)
    contexts.append(rng.integers(0, len(merged.vocab), size=(40, merged.order - 1)))
    for ctx in contexts:
        total = np.exp(merged.next_logprobs(ctx)).sum(axis=1)
        np.testing.assert_allclose(total, 1.0, atol=1e-6)


def test_different_vocabularies_merge_over_their_union(world):
    """A word only one model knows gets that model's weighted probability (the other's is
    0): checked by brute force with each model's own scorer."""
    a, b = load_model(world / "kn3"), load_model(world / "zoo")
    merged = merge_backoff([a, b], [0.6, 0.4])
    assert "zebra" in merged.vocab and "zebra" not in a.vocab
    assert set(a.vocab.words) | set(b.vocab.words) == set(merged.vocab.words)
    def log_p(model, context, word):  # the model's own back-off score, null-padded
        if word not in model.vocab:
            return -np.inf
        ids = [model.vocab.index.get(w, 0) for w in [*context, word]]
        ctx = np.full((1, model.order - 1), -1, np.int64)
        take = min(len(context), model.order - 1)
        if take:
            ctx[0, -take:] = ids[len(context) - take:len(context)]
        return float(model.target_logprobs(ctx, np.array([ids[-1]]))[0])

    checked = 0
    for words in ngram_words(merged)[:2]:
        for row in words[::7]:
            context = [merged.vocab.words[i] for i in row[:-1]]
            word = merged.vocab.words[row[-1]]
            expected = 0.6 * np.exp(log_p(a, context, word)) + 0.4 * np.exp(log_p(b, context,
                                                                                  word))
            assert np.exp(log_p(merged, context, word)) == pytest.approx(expected, rel=1e-9)
            checked += 1
    assert checked > 40
    zebra = log_p(merged, ["the"], "zebra")
    assert np.exp(zebra) == pytest.approx(0.4 * np.exp(log_p(b, ["the"], "zebra")))


def test_a_model_merged_with_itself_is_itself(world):
    a = load_model(world / "kn3")
    merged = merge_backoff([a, a], [0.4, 0.6])
    for words_a, words_m in zip(ngram_words(a), ngram_words(merged)):
        assert len(words_a) == len(words_m)
    text = (world / "toy/test.txt").read_text().splitlines()[:20]
    for line in text:
        assert merged.sentence_logprob(line) == pytest.approx(a.sentence_logprob(line),
                                                              abs=1e-5)


def test_the_merge_command_and_kenlm_reading_its_arpa(world, capsys):
    out, arpa = world / "merged", world / "merged.arpa"
    assert main(["ngram", "merge", str(world / "kn3"), str(world / "zoo"), "--valid",
                 str(world / "toy/valid.txt"), "-o", str(out), "--arpa", str(arpa)]) == 0
    said = capsys.readouterr().out
    assert "weights" in said and "n-grams per order" in said
    merged = load_model(out)
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    theirs = kenlm.Model(str(arpa))
    for line in (world / "toy/test.txt").read_text().splitlines()[:20] + ["the zebra sleeps"]:
        assert theirs.score(line) == pytest.approx(
            merged.sentence_logprob(line) / np.log(10), abs=1e-4)


@pytest.mark.parametrize("tail, message", [
    ([], "needs --weights"),
    (["--weights", "0.5", "0.6"], "summing to 1"),
    (["--weights", "1.0"], "one per model"),
])
def test_merge_errors_are_one_line(world, capsys, tail, message):
    code = main(["ngram", "merge", str(world / "kn3"), str(world / "kn2"), "-o",
                 str(world / "bad"), *tail])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1

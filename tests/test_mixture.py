"""Mixtures: weights sum to 1, EM never does worse than its starting points or the best
component, distributions sum to 1, save/load, and the CLI."""

import numpy as np
import pytest

from conftest import write
from nnlm import NnlmError, Stream, Vocabulary, evaluate, load_model
from nnlm.cli import main
from nnlm.mixture import ContextBuckets, Mixture
from nnlm.ngram import AddK, DeletedInterpolation, KneserNey
from nnlm.text.vocab import BOS_ID


def corpus(seed, n=200):
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(12)]
    return [[words[(j * 3 + rng.integers(0, 3)) % 12] for j in range(rng.integers(1, 9))]
            for _ in range(n)]


@pytest.fixture(scope="module")
def setup():
    lines = corpus(0)
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line})
    train = Stream.from_lines(lines, vocab)
    valid = Stream.from_lines(corpus(1, 80), vocab)
    models = [KneserNey(vocab, 3, discount_fallback=True).fit(train),
              AddK(vocab, 1, k=1.0).fit(train),
              DeletedInterpolation(vocab, 2).fit(train, valid)]
    return vocab, train, valid, models


def test_em_is_no_worse_than_the_best_component_or_the_even_mixture(setup):
    vocab, train, valid, models = setup
    even = Mixture(models[:2])
    even_ll = even.logprobs(valid).mean()
    history = even.fit_weights(valid, 40)
    assert np.isclose(even.weights.sum(), 1.0)
    assert all(b >= a - 1e-12 for a, b in zip(history, history[1:]))
    learned_ll = even.logprobs(valid).mean()
    best_single = max(m.logprobs(valid).mean() for m in models[:2])
    assert learned_ll >= even_ll - 1e-12 and learned_ll >= best_single - 1e-9


def test_bucketed_weights_sum_to_one_per_bucket_and_beat_a_single_vector(setup):
    vocab, train, valid, models = setup
    single = Mixture(models)
    single.fit_weights(valid)
    bucketed = Mixture(models, buckets=ContextBuckets.from_stream(train, len(vocab)))
    bucketed.fit_weights(valid)
    assert np.allclose(bucketed.weights.sum(axis=1), 1.0)
    assert bucketed.weights.shape[0] > 1
    assert bucketed.logprobs(valid).mean() >= single.logprobs(valid).mean() - 1e-9


def test_mixed_distribution_sums_to_one_and_matches_per_token_scores(setup):
    vocab, train, valid, models = setup
    mix = Mixture(models, weights=[0.2, 0.3, 0.5],
                  buckets=ContextBuckets.from_stream(train, len(vocab)))
    contexts = valid.contexts(mix.order)[:40]
    dist = mix.next_logprobs(contexts)
    assert np.allclose(np.exp(dist).sum(axis=1), 1.0, atol=1e-9)
    assert np.all(dist[:, BOS_ID] == -np.inf)
    assert np.allclose(mix.target_logprobs(contexts, valid.ids[:40]),
                       dist[np.arange(40), valid.ids[:40]], atol=1e-10)
    # by hand: the 0.5 / 0.5 mixture is the average of the two probabilities
    half = Mixture(models[:2], weights=[0.5, 0.5])
    want = np.log(0.5 * np.exp(models[0].logprobs(valid)) + 0.5 * np.exp(models[1].logprobs(valid)))
    assert np.allclose(half.logprobs(valid), want)


def test_bad_mixtures(setup):
    vocab, train, valid, models = setup
    with pytest.raises(NnlmError, match="sum to 1"):
        Mixture(models[:2], weights=[0.7, 0.7])
    other = Vocabulary.from_counts({"x": 1})
    foreign = AddK(other, 1).fit(Stream.from_lines([["x"]], other))
    with pytest.raises(NnlmError, match="another vocabulary"):
        Mixture([models[0], foreign])


def test_mix_cli_saves_a_model_that_eval_and_score_use(tmp_path, capsys):
    lines = corpus(0)
    write(tmp_path / "train.txt", "\n".join(" ".join(x) for x in lines) + "\n")
    write(tmp_path / "valid.txt", "\n".join(" ".join(x) for x in corpus(1, 80)) + "\n")
    t, v = str(tmp_path / "train.txt"), str(tmp_path / "valid.txt")
    assert main(["ngram", "train", t, "--order", "3", "--discount-fallback",
                 "-o", str(tmp_path / "runs/kn")]) == 0
    assert main(["ngram", "train", t, "--method", "interpolated", "--valid", v,
                 "-o", str(tmp_path / "runs/di")]) == 0
    assert main(["mix", "--valid", v, str(tmp_path / "runs/kn"), str(tmp_path / "runs/di"),
                 "--per-bucket", t, "-o", str(tmp_path / "runs/mix")]) == 0
    out = capsys.readouterr().out
    assert "runs/mix" in out and "weights" in out
    mixture = load_model(tmp_path / "runs/mix")
    assert isinstance(mixture, Mixture) and mixture.buckets is not None
    code = main(["eval", str(tmp_path / "runs/mix"), v, "--json"])
    assert code == 0
    assert '"perplexity"' in capsys.readouterr().out
    # moving the whole folder keeps the mixture loadable (component paths are relative)
    (tmp_path / "runs").rename(tmp_path / "moved")
    assert evaluate(load_model(tmp_path / "moved/mix"), Stream.from_lines(corpus(1, 80),
                    mixture.vocab)).perplexity > 1
    code = main(["mix", "--valid", v, str(tmp_path / "moved/kn"), "-o", str(tmp_path / "x")])
    assert code == 2


def test_the_same_estimate_is_the_same_directory_and_its_mixture_keeps_loading(tmp_path):
    """An n-gram model's id comes from its content: training it again (the README's KenLM
    section rewrites runs/kn5 with --arpa) writes the same bytes, so a mixture built on
    it keeps loading; an estimate that differs gets another id, and the mixture refuses
    it."""
    from conftest import directory_bytes

    write(tmp_path / "train.txt", "\n".join(" ".join(x) for x in corpus(0)) + "\n")
    write(tmp_path / "other.txt", "\n".join(" ".join(x) for x in corpus(2)) + "\n")
    write(tmp_path / "valid.txt", "\n".join(" ".join(x) for x in corpus(1, 80)) + "\n")
    t, v = str(tmp_path / "train.txt"), str(tmp_path / "valid.txt")
    kn = ["ngram", "train", t, "--order", "3", "--discount-fallback", "-o"]
    assert main([*kn, str(tmp_path / "kn")]) == 0
    assert main(["ngram", "train", t, "--method", "addk", "--order", "2", "-o",
                 str(tmp_path / "addk")]) == 0
    assert main(["mix", "--valid", v, str(tmp_path / "kn"), str(tmp_path / "addk"),
                 "-o", str(tmp_path / "mix")]) == 0
    before = directory_bytes(tmp_path / "kn")
    assert main([*kn, str(tmp_path / "kn"), "--arpa", str(tmp_path / "kn.arpa")]) == 0
    assert directory_bytes(tmp_path / "kn") == before
    assert main(["eval", str(tmp_path / "mix"), v]) == 0
    assert main(["ngram", "train", str(tmp_path / "other.txt"), "--order", "3",
                 "--discount-fallback", "-o", str(tmp_path / "kn")]) == 0
    assert main(["eval", str(tmp_path / "mix"), v]) == 2  # another estimate: refused

"""Pruning back-off models: counts (lmplz --prune) and relative entropy
(Stolcke 1998), checked by brute force: full distributions still sum to 1, and each
n-gram's entropy increase equals P(h) KL(p(.|h) || p'(.|h)) computed from the
distributions of the model with that n-gram actually removed."""

import math

import numpy as np
import pytest

from conftest import write
from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.lm import logsumexp
from nnlm.ngram import KneserNey, read_arpa, write_arpa
from nnlm.ngram.backoff import ngram_words
from nnlm.ngram.estimate.prune import context_log_probability, entropy_deltas, prune, prune_entropy
from nnlm.text.vocab import BOS_ID, EOS_ID
from test_ngram import stream_and_vocab, zipf_corpus


@pytest.fixture(scope="module")
def kn3():
    stream, vocab = stream_and_vocab(zipf_corpus(n_sentences=300))
    return KneserNey(vocab, 3, discount_fallback=True).fit(stream), stream


def all_contexts(model):
    V = len(model.vocab)
    words = [w for w in range(V) if w != EOS_ID]
    return np.array([[a, b] for a in words for b in words], np.int64)


def test_keeping_everything_changes_nothing(kn3):
    model, stream = kn3
    same = prune(model, [np.ones(len(level), bool) for level in model.levels])
    assert np.allclose(same.logprobs(stream), model.logprobs(stream), atol=1e-10)


def test_a_pruned_model_is_normalized_and_closed(kn3, tmp_path):
    model, _ = kn3
    rng = np.random.default_rng(0)
    pruned = prune(model, [rng.random(len(level)) < 0.3 for level in model.levels])
    assert sum(pruned.num_ngrams()[1:]) < sum(model.num_ngrams()[1:])
    sums = logsumexp(pruned.next_logprobs(all_contexts(pruned)), axis=1)
    assert np.abs(sums).max() < 1e-10
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "pruned file" repair needed: contexts kept
        back = read_arpa(write_arpa(pruned, tmp_path / "p.arpa"))
    assert np.allclose(back.next_logprobs(all_contexts(pruned)),
                       pruned.next_logprobs(all_contexts(pruned)), atol=1e-5)


def test_entropy_deltas_equal_brute_force_kl(kn3):
    model, _ = kn3
    deltas = entropy_deltas(model)
    V = len(model.vocab)
    for k in (2, 3):
        level, d = model.levels[k - 2], deltas[k - 2]
        needed = np.zeros(len(level), bool)  # n-grams a longer one needs are never pruned
        if k == 2:
            upper = model.levels[1]
            needed[upper.prefix] = True
            needed[upper.keys // V] = True
        candidates = np.flatnonzero(~needed)[:: max(1, (~needed).sum() // 6)][:6]
        words = ngram_words(model)[k - 2]
        log_ph = context_log_probability(model, k - 1)
        for i in candidates:
            mask = [np.ones(len(lv), bool) for lv in model.levels]
            mask[k - 2][i] = False
            without = prune(model, mask)
            h = words[i, :-1]
            ctx = np.full((1, model.order - 1), -1, np.int64)
            ctx[0, model.order - 1 - len(h):] = h
            p, q = model.next_logprobs(ctx)[0], without.next_logprobs(ctx)[0]
            ok = np.isfinite(p)
            kl = float(np.sum(np.exp(p[ok]) * (p[ok] - q[ok])))
            ph = math.exp(log_ph[level.prefix[i]])
            if k == 2:  # P(h) by hand: a sentence start is certain, a word its unigram
                want_ph = 1.0 if h[0] == BOS_ID else math.exp(model.unigram_logp[h[0]])
                assert ph == pytest.approx(want_ph, rel=1e-9)
            assert d[i] == pytest.approx(ph * kl, rel=1e-6, abs=1e-15)


def test_entropy_pruning_trades_size_for_perplexity_monotonically(kn3):
    model, stream = kn3
    sizes, ppl = [], []
    for theta in (1e-9, 1e-6, 1e-4):
        pruned = prune_entropy(model, theta)
        sizes.append(sum(pruned.num_ngrams()[1:]))
        ppl.append(math.exp(-pruned.logprobs(stream).mean()))
    assert sizes[0] > sizes[1] > sizes[2] and ppl[0] <= ppl[1] <= ppl[2]


def test_count_pruning_keeps_frequent_and_needed_ngrams(kn3):
    model, stream = kn3
    pruned = KneserNey(model.vocab, 3, discount_fallback=True).fit(stream, prune_counts=[0, 1, 1])
    assert sum(pruned.num_ngrams()[1:]) < sum(model.num_ngrams()[1:])
    sums = logsumexp(pruned.next_logprobs(all_contexts(pruned)), axis=1)
    assert np.abs(sums).max() < 1e-10
    with pytest.raises(NnlmError, match="must not decrease"):
        KneserNey(model.vocab, 3, discount_fallback=True).fit(stream, prune_counts=[0, 2, 1])
    with pytest.raises(NnlmError, match="unigram threshold of 0"):
        KneserNey(model.vocab, 3, discount_fallback=True).fit(stream, prune_counts=[1, 1, 1])


def test_prune_through_the_cli_and_kenlm_agrees(tmp_path, capsys):
    lines = "\n".join(" ".join(s) for s in zipf_corpus(n_sentences=300)) + "\n"
    train = write(tmp_path / "train.txt", lines)
    assert main(["ngram", "train", str(train), "--order", "3", "--discount-fallback",
                 "-o", str(tmp_path / "kn")]) == 0
    assert main(["ngram", "prune", str(tmp_path / "kn"), "--threshold", "1e-6",
                 "-o", str(tmp_path / "p"), "--arpa", str(tmp_path / "p.arpa")]) == 0
    assert "kept" in capsys.readouterr().out
    assert main(["ngram", "train", str(train), "--prune", "0", "1", "--discount-fallback",
                 "-o", str(tmp_path / "c")]) == 0
    assert main(["ngram", "train", str(train), "--prune", "0", "2", "1",
                 "-o", str(tmp_path / "d")]) == 2
    assert "must not decrease" in capsys.readouterr().err
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    from nnlm import Stream, load_model

    ours = load_model(tmp_path / "p")
    test = zipf_corpus(seed=9, n_sentences=30)
    theirs = kenlm.Model(str(tmp_path / "p.arpa"))
    got = ours.logprobs(Stream.from_lines(test, ours.vocab)) / math.log(10)
    want = [s[0] for line in test for s in theirs.full_scores(" ".join(line))]
    assert np.abs(got - np.array(want)).max() < 1e-5

"""Stupid Backoff (Brants et al. 2007) against a brute-force reading of its definition,
through every door: bulk scoring, explicit contexts, the kenlm API's word-by-word states,
save and load; and refused where its scores would pass for probabilities."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from conftest import write, zipf_corpus
from nnlm import Stream, Vocabulary, load_model, save_model
from nnlm.cli import main
from nnlm.ngram import StupidBackoff


def brute(lines: list[list[str]], order: int, alpha: float):
    """S(w | h) from n-gram counts over "<s> words </s>", by the definition."""
    counts = Counter()
    for words in lines:
        seq = ["<s>", *words, "</s>"]
        for k in range(1, order + 1):
            for i in range(len(seq) - k + 1):
                counts[tuple(seq[i:i + k])] += 1
    vocab_words = {w for words in lines for w in words} | {"</s>"}
    total = sum(max(counts[(w,)], 1) for w in vocab_words)

    def score(w, h):
        if not h:
            return max(counts[(w,)], 1) / total
        if counts[(*h, w)] > 0:
            return counts[(*h, w)] / counts[tuple(h)]
        return alpha * score(w, h[1:])
    return score


@pytest.mark.parametrize("order,alpha", [(2, 0.4), (3, 0.4), (4, 0.25)])
def test_scores_follow_the_definition(order, alpha, tmp_path):
    lines = zipf_corpus(seed=order, n_sentences=200, n_words=30)
    vocab = Vocabulary.from_counts(Counter(w for s in lines for w in s))
    stream = Stream.from_lines(lines, vocab)
    lm = StupidBackoff(vocab, order, alpha).fit(stream)
    score = brute(lines, order, alpha)
    want = [math.log(score(w, tuple((["<s>"] + s[:i])[-(order - 1):])))
            for s in lines for i, w in enumerate([*s, "</s>"])]
    assert np.allclose(lm.logprobs(stream), want, atol=1e-12)
    contexts = stream.contexts(order)
    assert np.allclose(lm.target_logprobs(contexts, stream.ids), want, atol=1e-12)
    # the kenlm API, word by word from <s>: states keep every word in view
    import nnlm.kenlm as kenlm

    api = kenlm.Model(lm)
    for s in lines[:20]:
        got = [p for p, _, _ in api.full_scores(" ".join(s))]
        assert np.allclose(got, [v * math.log10(math.e) for v in
                                 [math.log(score(w, tuple((["<s>"] + s[:i])[-(order - 1):])))
                                  for i, w in enumerate([*s, "</s>"])]], atol=1e-5)
        a, b = kenlm.State(), kenlm.State()
        api.BeginSentenceWrite(a)
        walked = []
        for w in [*s, "</s>"]:
            walked.append(api.BaseScore(a, w, b))
            a, b = b, a
        assert np.allclose(walked, got, atol=1e-6)
    save_model(lm, tmp_path / "sb")
    back = load_model(tmp_path / "sb")
    assert back.kind == "stupid" and back.alpha == alpha
    assert np.allclose(back.logprobs(stream), want, atol=1e-6)  # the trie keeps float32


def test_the_command_line_trains_scores_and_refuses_what_needs_probabilities(tmp_path,
                                                                              capsys):
    for name, seed, n in (("train.txt", 1, 300), ("test.txt", 2, 20)):
        write(tmp_path / name, "".join(" ".join(s) + "\n" for s in zipf_corpus(seed, n)))
    train, test, sb = tmp_path / "train.txt", tmp_path / "test.txt", tmp_path / "sb"
    assert main(["ngram", "train", str(train), "--method", "stupid", "--order", "3",
                 "-o", str(sb)]) == 0
    capsys.readouterr()
    assert main(["score", str(sb), str(test)]) == 0
    out, err = capsys.readouterr()
    assert "scores, not probabilities" in err and "perplexity" not in err.splitlines()[-1]
    assert all(row.split("\t")[3] == "-" for row in out.splitlines()[1:])
    assert main(["ngram", "train", str(train), "--order", "3", "--discount-fallback",
                 "-o", str(tmp_path / "kn")]) == 0
    for argv, message in [
        (["eval", str(sb), str(test)], "needs probabilities"),
        (["mix", str(sb), str(tmp_path / "kn"), "--valid", str(test), "-o",
          str(tmp_path / "mix")], "needs probabilities"),
        (["ngram", "export-arpa", str(sb), str(tmp_path / "sb.arpa")], "no ARPA form"),
        (["ngram", "train", str(train), "--alpha", "0.5", "-o", str(tmp_path / "x")],
         "--alpha goes with --method stupid"),
        (["ngram", "train", str(train), "--method", "stupid", "--alpha", "1.5",
          "-o", str(tmp_path / "x")], "--alpha"),
    ]:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1, err

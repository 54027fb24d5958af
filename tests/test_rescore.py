"""`nnlm rescore`: Moses and plain n-best lists, re-ranked by score + weighted LM
and word penalty; the LM column checked against the model's own sentence scores."""

import math

import pytest

from conftest import toy_text, write
from nnlm import load_model
from nnlm.cli import main


@pytest.fixture(scope="module")
def kn(tmp_path_factory):
    d = tmp_path_factory.mktemp("rs")
    toy_text(d / "toy", 500)
    assert main(["ngram", "train", str(d / "toy/train.txt"), "--discount-fallback",
                 "-o", str(d / "kn")]) == 0
    return d / "kn"


NBEST = [("0", "the cat is sleeping in the kitchen", -10.0),
         ("0", "kitchen the in sleeping is cat the", -9.0),
         ("1", "a dog is running", -5.0),
         ("1", "", -6.0)]


def test_moses_nbest_gets_the_lm_feature_and_is_reranked(kn, tmp_path, capsys):
    text = "".join(f"{i} ||| {h} ||| tm= -1 -2 ||| {s}\n" for i, h, s in NBEST)
    path = write(tmp_path / "nbest.txt", text)
    assert main(["rescore", str(kn), str(path), "--lm-weight", "0.5",
                 "--word-penalty", "-0.1"]) == 0
    rows = [r.split(" ||| ") for r in capsys.readouterr().out.splitlines()]
    model = load_model(kn)
    assert [r[0] for r in rows] == ["0", "0", "1", "1"]  # ids in input order
    for r in rows:
        i, hyp, feats, new = r
        want_lm = model.sentence_logprob(hyp) / math.log(10)
        lm = float(feats.split("nnlm= ")[1])
        assert feats.startswith("tm= -1 -2 nnlm= ") and lm == pytest.approx(want_lm, abs=1e-5)
        old = next(s for j, h, s in NBEST if j == i and h == hyp)
        assert float(new) == pytest.approx(old + 0.5 * lm - 0.1 * len(hyp.split()), abs=1e-5)
    for i in ("0", "1"):  # best first within each id
        scores = [float(r[3]) for r in rows if r[0] == i]
        assert scores == sorted(scores, reverse=True)
    assert rows[0][1] == "the cat is sleeping in the kitchen"  # the LM fixed the word order


def test_plain_nbest_best_only_and_output_file(kn, tmp_path, capsys):
    text = "".join(f"{i}\t{s}\t{h}\n" for i, h, s in NBEST)
    path = write(tmp_path / "nbest.tsv", text)
    assert main(["rescore", str(kn), str(path), "--best", "-o", str(tmp_path / "out")]) == 0
    best = (tmp_path / "out").read_text().splitlines()
    assert best == ["the cat is sleeping in the kitchen", "a dog is running"]


@pytest.mark.parametrize("text, match", [
    ("0 ||| a dog ||| 1.0\n", r"nbest.txt:1: a Moses n-best line needs"),
    ("0 ||| a dog ||| tm= 1 ||| high\n", r"nbest.txt:1: score 'high' is not a number"),
    ("0\t-1\ta dog\n1\t-2\n", r"nbest.txt:2: a plain n-best line needs"),
    ("0\tnan\ta dog\n", r"not a finite number"),
    ("0\t1_000\ta dog\n", r"score '1_000' is not a number"),
    ("0\t\u0661\u0662\ta dog\n", r"is not a number"),  # Arabic-Indic digits
    ("0 ||| a dog ||| tm= 1 ||| \uff11\n", r"is not a number"),  # a fullwidth 1
    ("0\t-1\t<s> a dog\n", r"nbest.txt:1: <s> may not"),
    ("\n\n", r"no hypotheses"),
])
def test_bad_nbest_lines_are_one_line_errors(kn, tmp_path, capsys, text, match):
    import re

    path = write(tmp_path / "nbest.txt", text)
    assert main(["rescore", str(kn), str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(match, err), err


def test_a_fixed_vocabulary_lets_models_of_different_text_be_mixed(kn, tmp_path, capsys):
    """--vocab: a model trained on other text with another model's vocab.txt
    has the same ids, so the two mix; a word list fixes ids in its own order."""
    toy = kn.parent / "toy"
    assert main(["ngram", "train", str(toy / "valid.txt"), "--vocab", str(kn / "vocab.txt"),
                 "--discount-fallback", "-o", str(tmp_path / "other")]) == 0
    assert load_model(tmp_path / "other").vocab == load_model(kn).vocab
    assert main(["mix", str(kn), str(tmp_path / "other"), "--valid", str(toy / "test.txt"),
                 "-o", str(tmp_path / "mix")]) == 0
    write(tmp_path / "words.txt", "zebra\ncat\n\ndog\n</s>\n")
    assert main(["ngram", "train", str(toy / "valid.txt"), "--vocab", str(tmp_path / "words.txt"),
                 "--order", "2", "--discount-fallback", "-o", str(tmp_path / "small")]) == 0
    assert load_model(tmp_path / "small").vocab.words == ["<unk>", "<s>", "</s>", "zebra", "cat",
                                                          "dog"]


def test_rescoring_its_own_output_replaces_the_feature_and_warns(kn, tmp_path, capsys):
    text = "".join(f"{i} ||| {h} ||| tm= -1 ||| {s}\n" for i, h, s in NBEST)
    path = write(tmp_path / "nbest.txt", text)
    assert main(["rescore", str(kn), str(path), "-o", str(tmp_path / "once")]) == 0
    capsys.readouterr()
    assert main(["rescore", str(kn), str(tmp_path / "once"), "-o",
                 str(tmp_path / "twice")]) == 0
    assert "already hold an nnlm= feature" in capsys.readouterr().err
    for line in (tmp_path / "twice").read_text().splitlines():
        assert line.split(" ||| ")[2].count("nnlm=") == 1

"""Subword n-grams: a SentencePiece tokenizer reads the text (nnlm ngram train
--tokenizer), the model keeps it and reads text through it everywhere, and NeMo's
encoding (token i spelled chr(i + 100)) gives the ARPA file NeMo's decoding loads: the
kenlm module reading it, fed NeMo's own encoding of the text, is the oracle."""

from __future__ import annotations

import json

import pytest

from conftest import toy_world
from nnlm.cli import main
from nnlm.models import load_model

spm = pytest.importorskip("sentencepiece", reason="sentencepiece is not installed")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = toy_world(tmp_path_factory.mktemp("subword"))
    spm.SentencePieceTrainer.Train(input=str(w / "toy/train.txt"),
                                   model_prefix=str(w / "spm"), vocab_size=80,
                                   model_type="bpe", minloglevel=2)
    for name, extra in (("bpe", []), ("bpen", ["--nemo-encoding"])):
        assert main(["ngram", "train", str(w / "toy/train.txt"), "--tokenizer",
                     str(w / "spm.model"), *extra, "--order", "4", "--discount-fallback",
                     "-o", str(w / name), "--arpa", str(w / f"{name}.arpa")]) == 0
    return w


def _processor(world):
    sp = spm.SentencePieceProcessor()
    sp.Load(str(world / "spm.model"))
    return sp


def test_the_model_reads_raw_text_through_its_own_tokenizer(world, tmp_path, capsys):
    """Perplexity of raw text through the model's tokenizer equals that of the same model
    read from its ARPA file (no tokenizer) on the text tokenized beforehand."""
    sp = _processor(world)
    lines = (world / "toy/test.txt").read_text().splitlines()[:200]
    raw = tmp_path / "raw.txt"
    raw.write_text("\n".join(lines) + "\n")
    pieces = tmp_path / "pieces.txt"
    pieces.write_text("\n".join(" ".join(sp.EncodeAsPieces(x)) for x in lines) + "\n")
    assert (world / "bpe/tokenizer.model").is_file()
    capsys.readouterr()
    assert main(["eval", str(world / "bpe"), str(raw), "--json"]) == 0
    through = json.loads(capsys.readouterr().out)
    assert main(["eval", str(world / "bpe.arpa"), str(pieces), "--json"]) == 0
    beforehand = json.loads(capsys.readouterr().out)
    assert through["tokens"] == beforehand["tokens"] > len(lines) * 3
    assert through["perplexity"] == pytest.approx(beforehand["perplexity"], rel=1e-6)
    assert main(["score", str(world / "bpe"), str(raw), "--per-token", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [t["word"] for t in first["per_token"]][:-1] == sp.EncodeAsPieces(lines[0])
    model = load_model(world / "bpe")
    assert model.vocab.split(lines[0]) == sp.EncodeAsPieces(lines[0])


def test_nemo_encoding_is_what_kenlm_scores_with_nemos_spelling(world):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    sp = _processor(world)
    theirs = kenlm.Model(str(world / "bpen.arpa"))
    ours = load_model(world / "bpen")
    lines = (world / "toy/test.txt").read_text().splitlines()[:30]
    for line in lines:
        nemo = " ".join(chr(i + 100) for i in sp.EncodeAsIds(line))  # NeMo's train_kenlm
        expected = theirs.score(nemo, bos=True, eos=True)
        assert ours.sentence_logprob(line) / 2.302585092994046 == pytest.approx(expected,
                                                                                  abs=1e-4)
    words = set(load_model(world / "bpen.arpa").vocab.words)
    assert {chr(i + 100) for i in range(sp.GetPieceSize())} >= words - {"<unk>", "<s>",
                                                                         "</s>"}


@pytest.mark.parametrize("argv, message", [
    (["--tokenizer", "missing.model"], "no such tokenizer file"),
    (["--tokenizer", "TEXT"], "not a SentencePiece model"),
    (["--nemo-encoding"], "give --tokenizer"),
    (["--tokenizer", "SPM", "--cluster", "local:1"], "a cluster's workers read words"),
])
def test_tokenizer_errors_are_one_line(world, tmp_path, capsys, argv, message):
    argv = [str(world / "toy/train.txt") if a == "TEXT" else
            str(world / "spm.model") if a == "SPM" else
            str(tmp_path / a) if a.endswith(".model") else a for a in argv]
    code = main(["ngram", "train", str(world / "toy/train.txt"), *argv, "-o",
                 str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_a_vocabulary_nemos_encoding_cannot_hold_is_refused(world, monkeypatch):
    from nnlm.base.errors import NnlmError
    from nnlm.text.tokenizer import SubwordTokenizer

    monkeypatch.setattr(spm.SentencePieceProcessor, "GetPieceSize", lambda self: 60000)
    with pytest.raises(NnlmError, match="NeMo's encoding"):
        SubwordTokenizer(world / "spm.model", "nemo")


@pytest.mark.parametrize("pair", [("bpen", "kn3"), ("bpe", "bpen"), ("kn3", "bpe")])
def test_merge_refuses_models_that_tokenize_differently(world, tmp_path, capsys, pair):
    """A subword model and a word model (or two encodings of one tokenizer) predict
    different units: their union would be one vocabulary of both and no tokenizer."""
    a, b = (str(world / name) for name in pair)
    assert main(["ngram", "merge", a, b, "--weights", "0.5", "0.5",
                 "-o", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "tokeniz" in err[0]
    assert not (tmp_path / "m").exists()


def test_merging_one_tokenization_keeps_its_tokenizer(world, tmp_path, capsys):
    from nnlm.models import load_model

    assert main(["ngram", "merge", str(world / "bpe"), str(world / "bpe"), "--weights",
                 "0.5", "0.5", "-o", str(tmp_path / "m")]) == 0
    merged = load_model(tmp_path / "m")
    assert merged.vocab.tokenizer is not None
    assert merged.vocab.split("the cat") == load_model(world / "bpe").vocab.split("the cat")

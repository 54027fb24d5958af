"""Odd input that used to pass silently or fail with the wrong words: each is now one line
that names the problem (exit 2), or a warning where the input is legal but surely not
what was meant."""

from __future__ import annotations

import argparse
import gzip
import re

import numpy as np
import pytest

from conftest import toy_text, write
from nnlm.cli import main


@pytest.fixture(scope="module")
def texts(tmp_path_factory):
    d = tmp_path_factory.mktemp("texts")
    toy_text(d / "toy", 300)
    return d / "toy"


def one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nnlm: error: "), err
    return err[0]


def warnings_of(capsys) -> list[str]:
    return [x for x in capsys.readouterr().err.splitlines() if x.startswith("nnlm: warning:")]


HUGE = "\\data\\\nngram 1=100000000000\n\n\\1-grams:\n-1.0\t<unk>\n-1.0\t<s>\t-0.5\n" \
       "-1.0\t</s>\n\n\\end\\\n"


@pytest.mark.parametrize("compressed", [False, True])
def test_an_arpa_header_declaring_more_than_the_file_holds_names_the_count(
        texts, tmp_path, capsys, compressed):
    path = tmp_path / ("huge.arpa.gz" if compressed else "huge.arpa")
    path.write_bytes(gzip.compress(HUGE.encode()) if compressed else HUGE.encode())
    assert main(["eval", str(path), str(texts / "test.txt")]) == 2
    line = one_error(capsys)
    assert "100,000,000,000 1-grams" in line and f"{path.name}:2" in line
    assert "out of memory" not in line


@pytest.mark.parametrize("value, match", [("-5M", "a size must be positive"),
                                          ("-5%", "share of memory"),
                                          ("-1e-7", "")])
def test_a_negative_value_with_a_unit_is_the_options_own_error(texts, tmp_path, capsys,
                                                              value, match):
    argv = ["ngram", "train", str(texts / "train.txt"), "-o", str(tmp_path / "m")]
    if match:
        argv += ["--memory", value]
    else:
        argv = ["ngram", "prune", str(tmp_path / "none"), "--threshold", value, "-o",
                str(tmp_path / "m")]
    assert main(argv) == 2
    line = one_error(capsys)
    assert "expected one argument" not in line and match in line


def test_a_vocabulary_of_another_text_is_warned_about(texts, tmp_path, capsys):
    vocab = write(tmp_path / "words.txt", "zebra\nquokka\n")
    assert main(["ngram", "train", str(texts / "train.txt"), "--vocab", str(vocab),
                 "--method", "addk", "--order", "2", "-o", str(tmp_path / "m")]) == 0
    found = warnings_of(capsys)
    assert any("none of its" in w and "--vocab" in w for w in found), found
    assert main(["ngram", "train", str(texts / "train.txt"), "--method", "addk", "--order", "2",
                 "-o", str(tmp_path / "own")]) == 0
    capsys.readouterr()
    assert main(["ngram", "train", str(texts / "train.txt"), "--vocab",
                 str(tmp_path / "own" / "vocab.txt"), "--method", "addk", "--order", "2",
                 "-o", str(tmp_path / "m2")]) == 0
    assert warnings_of(capsys) == []  # its own vocabulary: nothing to say


def test_validating_on_the_training_text_is_warned_about(texts, tmp_path, capsys):
    train = texts / "train.txt"
    assert main(["ngram", "train", str(train), "--method", "interpolated", "--order", "2",
                 "--valid", str(train), "-o", str(tmp_path / "m")]) == 0
    assert any("the training text itself" in w for w in warnings_of(capsys))
    assert main(["train", str(train), "--valid", str(train), "--preset", "tiny",
                 "--max-steps", "2", "--threads", "1", "-o", str(tmp_path / "n")]) == 0
    assert any("the training text itself" in w for w in warnings_of(capsys))


def test_nnlm_train_takes_every_setting_the_command_line_does():
    """The keywords of nnlm.train are the architecture, optimization and objective flags of
    ``nnlm train`` (one list of settings for both), and nothing else."""
    from nnlm.cli.main import build_parser
    from nnlm.neural.settings import ARCH_FIELDS, TRAIN_FIELDS

    parser = build_parser()
    train = next(a for a in parser._subparsers._group_actions[0].choices.items()
                 if a[0] == "train")[1]
    for group in train._action_groups:
        if group.title.startswith(("architecture", "optimization", "objective", "short-list")):
            for action in group._group_actions:
                dest = {"energy_v": "v_per_word"}.get(action.dest, action.dest)
                assert dest in (*ARCH_FIELDS, *TRAIN_FIELDS, "shortlist_backoff"), \
                    action.option_strings


@pytest.mark.parametrize("setting", [{"far_spans": 2, "history": 4, "far": "mean"},
                                     {"word_dropout": 0.1}, {"context": "fofe", "history": 3},
                                     {"fofe_alpha": 0.5, "context": "fofe"}])
def test_nnlm_train_accepts_architecture_keywords(setting):
    import nnlm

    texts = ["the cat sat on the mat", "a dog ran far away"] * 10
    preset = "deep" if "far_spans" in setting or "word_dropout" in setting else "tiny"
    lm = nnlm.train(texts, texts[:4], preset=preset, max_steps=1, threads=1, m=4, h=4,
                    **setting)
    assert all(getattr(lm.model.config, k) == v for k, v in setting.items())


def test_nnlm_train_and_the_cli_refuse_fofe_alpha_without_fofe(texts, tmp_path, capsys):
    import nnlm

    with pytest.raises(nnlm.NnlmError, match="fofe_alpha=0.5 weights FOFE codes only"):
        nnlm.train(["a b c"] * 10, ["a b"], preset="tiny", max_steps=1, fofe_alpha=0.5)
    with pytest.raises(nnlm.NnlmError, match="not a setting"):
        nnlm.train(["a b c"] * 10, ["a b"], preset="tiny", max_steps=1, colour="blue")
    assert main(["train", str(texts / "train.txt"), "--valid", str(texts / "valid.txt"),
                 "--fofe-alpha", "0.5", "-o", str(tmp_path / "m")]) == 2
    assert "--fofe-alpha 0.5 weights FOFE codes only: set --context fofe" in one_error(capsys)


def test_prepare_refuses_a_model_directory(texts, tmp_path, capsys):
    assert main(["ngram", "train", str(texts / "train.txt"), "--method", "addk", "--order",
                 "2", "-o", str(tmp_path / "m")]) == 0
    before = sorted(p.name for p in (tmp_path / "m").iterdir())
    assert main(["prepare", "text", str(texts / "train.txt"), str(tmp_path / "m")]) == 2
    assert "holds a model" in one_error(capsys)
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == before


def test_a_backoff_weight_on_the_highest_order_is_warned_about(tmp_path, capsys):
    arpa = write(tmp_path / "top.arpa", "\\data\\\nngram 1=4\nngram 2=1\n\n\\1-grams:\n"
                 "-1.0\t<unk>\n-1.0\t<s>\t-0.5\n-1.0\t</s>\n-0.5\ta\t-0.2\n\n\\2-grams:\n"
                 "-0.3\t<s> a\t-0.7\n\n\\end\\\n")
    text = write(tmp_path / "t.txt", "a a\n")
    assert main(["eval", str(arpa), str(text)]) == 0
    assert any("top.arpa:12: 1 of its 2-grams (the highest order) carry a back-off" in w
               for w in warnings_of(capsys))


# -- the Python API as strict as the command line ------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(max_steps=-1), "max_steps=-1"), (dict(threads=0), "threads=0"),
    (dict(m=True), "m=True"), (dict(order=10**9), "order=1000000000"),
    (dict(h=8.0), "h=8.0"), (dict(h=-1), "h=-1"), (dict(dropout_x=1.0), "dropout_x=1.0"),
    (dict(m="8"), "m='8'"), (dict(context="nope"), "context='nope'"),
    (dict(epochs=np.float64(1.5)), "epochs="), (dict(lr=float("nan")), "lr=nan")])
def test_nnlm_train_refuses_what_the_cli_refuses_before_training(kwargs, match):
    """Every setting is checked against the declaration the command line's flags are made
    from, before any work: one line naming it."""
    import nnlm

    settings = {"max_steps": 1, "threads": 1, **kwargs}
    with pytest.raises(nnlm.NnlmError, match=re.escape(match)) as e:
        nnlm.train(["a b c"] * 10, ["a b"], preset="tiny", **settings)
    assert "\n" not in str(e.value)


def test_numpy_integers_are_integers(tmp_path):
    import nnlm

    lm = nnlm.train(["a b c", "b c a"] * 10, ["a b"], preset="tiny", h=np.int64(8),
                    m=np.int32(4), epochs=np.int64(1), max_steps=np.int64(1),
                    threads=np.int64(1), output=tmp_path / "m")
    assert lm.model.config.h == 8 and type(lm.model.config.h) is int
    assert nnlm.load_model(tmp_path / "m").model.config.m == 4
    kn = nnlm.train(["a b c", "b c a"] * 10, order=np.int64(2), discount_fallback=True)
    assert kn.order == 2


def test_the_cli_flags_are_the_librarys_declarations():
    from nnlm.cli.main import build_parser
    from nnlm.neural.settings import ARCH_SETTINGS, RUN_SETTINGS

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    flags = {a.dest: a for a in train._actions if a.option_strings}
    for name, setting in {**ARCH_SETTINGS, **RUN_SETTINGS}.items():
        action = flags.get(name)
        if action is None or setting.kind in (bool, str):
            continue
        for value, ok in ((setting.low, not setting.low_open), (setting.high,
                                                                not setting.high_open)):
            if value is None:
                continue
            text = str(int(value) if setting.kind is int else value)
            try:
                action.type(text)
                took = True
            except argparse.ArgumentTypeError:
                took = False
            assert took == ok, (name, value)


@pytest.mark.parametrize("lines", [["the cat is walking in the bedroom"] * 200,
                                   "varied"])
def test_a_short_run_of_a_fresh_network_is_not_called_divergent(lines):
    """A network stopped after two updates scores about a uniform model, a little above
    |V| as often as below: that is not divergence (a diverging run scores far past it)."""
    import random

    import nnlm

    if lines == "varied":
        rng = random.Random(0)
        words = [f"w{i}" for i in range(80)]
        lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(200)]
    lm = nnlm.train(lines, valid=lines[:20], preset="deep", max_steps=2, epochs=1,
                    threads=1)
    assert lm.order > 1

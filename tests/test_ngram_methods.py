"""The count-based methods as one registry (nnlm.ngram.estimate.methods): every entry point (the
library's train_ngram, nnlm.train in memory, the command line) takes its choices, limits
and checks from it, and gives the same model for the same job."""

from __future__ import annotations

import numpy as np
import pytest

import nnlm
from conftest import write
from nnlm import Stream, load_model
from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.ngram import METHODS, NgramJob, train_ngram
from nnlm.ngram.estimate.methods import OWN_SETTINGS

SENTENCES = ["the cat sat on the mat", "the dog sat on the log", "a cat ran far away",
             "the dog ran", "a mat on the log"] * 12
# each method's settings for a job every entry point can run on this small text
SETTINGS = {"kn": {"discount_fallback": True}, "interpolated": {},
            "class": {"n_classes": 3, "discount_fallback": True}, "addk": {"k": 0.5},
            "stupid": {"alpha": 0.3}, "infgram": {"discount_fallback": True, "discount": 0.8}}
FLAGS = {"discount_fallback": ["--discount-fallback"], "n_classes": ["--classes", "3"],
         "k": ["--k", "0.5"], "alpha": ["--alpha", "0.3"], "discount": ["--discount", "0.8"]}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    d = tmp_path_factory.mktemp("methods")
    return write(d / "train.txt", "\n".join(SENTENCES) + "\n"), \
        write(d / "valid.txt", "\n".join(SENTENCES[:5]) + "\n")


def test_the_registry_covers_every_method_and_setting():
    assert set(SETTINGS) == set(METHODS)
    assert set(OWN_SETTINGS) == {name for m in METHODS.values() for name in m.settings}
    import contextlib
    import io

    from nnlm.cli.main import build_parser

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        build_parser().parse_args(["ngram", "train", "--help"])
    for name, method in METHODS.items():  # --help lists each method with its summary
        assert name in out.getvalue() and method.summary[:30] in " ".join(out.getvalue().split())
    from nnlm.cli.ngram import NGRAM_HANDLERS

    assert set(NGRAM_HANDLERS) == {"train", "cluster", "prune", "convert", "verify",
                                   "export-arpa", "merge"}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_entry_point_gives_the_same_model(text, tmp_path, capsys, method):
    if method == "infgram":
        pytest.importorskip("pydivsufsort", reason="the suffix sort is nnlm's index extra")
    train, valid = text
    order = min(3, METHODS[method].max_order)
    settings = SETTINGS[method]
    by_library = train_ngram(train, method, order, valid_path=valid, **settings)
    in_memory = nnlm.train(SENTENCES, SENTENCES[:5], method=method, order=order,
                           **{k: v for k, v in settings.items() if k != "n_classes"}) \
        if method != "class" else by_library
    flags = [f for name in settings for f in FLAGS[name]]
    assert main(["ngram", "train", str(train), "--method", method, "--order", str(order),
                 "--valid", str(valid), *flags, "-o", str(tmp_path / "m")]) == 0, \
        capsys.readouterr().err
    by_cli = load_model(tmp_path / "m")
    lines = [s.split() for s in SENTENCES[:5]] + [["zebra", "cat"]]
    want = by_library.logprobs(Stream.from_lines(lines, by_library.vocab))
    for model, tol in ((in_memory, 1e-9), (by_cli, 1e-6)):  # saved: float32 values
        got = model.logprobs(Stream.from_lines(lines, model.vocab))
        np.testing.assert_allclose(got, want, rtol=0, atol=tol)


@pytest.mark.parametrize("method", list(METHODS))
def test_a_setting_of_another_method_is_refused(method):
    others = [name for name in OWN_SETTINGS if name not in METHODS[method].settings]
    values = {"discount_fallback": True, "prune_counts": [0, 1], "memory": 1 << 20,
              "temp": "/tmp", "n_classes": 7, "clustering_path": "c.tsv", "k": 0.5,
              "alpha": 0.2, "discount": 0.5, "compress": True}
    for name in others:
        job = NgramJob("t.txt", method, 2, valid_path="v.txt", **{name: values[name]})
        with pytest.raises(NnlmError, match=f"{name}= goes with method="):
            job.check()


def test_limits_and_needs_come_from_the_registry(capsys, text):
    with pytest.raises(NnlmError, match="between 1 and 2"):
        NgramJob("t.txt", "addk", 3).check()
    with pytest.raises(NnlmError, match="held-out"):
        NgramJob("t.txt", "interpolated", 3).check()
    with pytest.raises(NnlmError, match="arpa= needs method=kn"):
        NgramJob("t.txt", "stupid", 3, arpa="x.arpa").check()
    with pytest.raises(NnlmError, match="choose from kn, interpolated, class, addk, stupid"):
        NgramJob("t.txt", "witten-bell", 3).check()
    assert main(["ngram", "train", str(text[0]), "--order", "10", "-o", "x"]) == 2
    assert "--order" in capsys.readouterr().err

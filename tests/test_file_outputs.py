"""Every command that writes a file: it replaces only a file of the kind it writes (or any
file with --force), never a user's other file or a folder (nnlm.file_kinds).

The oracle is the user's file itself: byte for byte the same after a refused command,
which exits 2 with one line; and the command's own earlier output, which it replaces."""

from __future__ import annotations

import shutil

import pytest

from conftest import toy_world, write
from nnlm.cli import main


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = toy_world(tmp_path_factory.mktemp("world"))
    write(w / "nbest.txt", "0 ||| the cat ||| f= 1.0 ||| -1.0\n0 ||| a cat ||| f= 2.0 ||| -2.0\n")
    return w


def T(w):  # noqa: N802
    return w / "toy/train.txt"


# every command with a file output: argv with the output at ``out``, and the output's kind
FILE_WRITERS = {
    "ngram export-arpa": (lambda w, out: ["ngram", "export-arpa", w / "kn3", out], "arpa"),
    "ngram train --arpa": (lambda w, out: ["ngram", "train", T(w), "--order", "2",
                                           "--discount-fallback", "-o", out.parent / "m",
                                           "--arpa", out], "arpa"),
    "ngram prune --arpa": (lambda w, out: ["ngram", "prune", w / "kn3", "--threshold", "1e-6",
                                           "-o", out.parent / "m", "--arpa", out], "arpa"),
    "ngram merge --arpa": (lambda w, out: ["ngram", "merge", w / "kn3", w / "kn3", "--weights",
                                           "0.5", "0.5", "-o", out.parent / "m", "--arpa",
                                           out], "arpa"),
    "ngram convert (ARPA)": (lambda w, out: ["ngram", "convert", w / "kn3",
                                             out.with_suffix(".arpa")], "arpa"),
    "ngram convert (one file)": (lambda w, out: ["ngram", "convert", w / "kn3",
                                                 out.with_suffix(".bin")], "model-file"),
    "ngram cluster": (lambda w, out: ["ngram", "cluster", T(w), "--classes", "4",
                                      "--iterations", "1", "-o", out], "classes"),
    "embed": (lambda w, out: ["embed", w / "nplm", T(w), "-o", out], "npy"),
    "plot-embeddings": (lambda w, out: ["plot-embeddings", w / "nplm", "-o", out], "png"),
    "rescore": (lambda w, out: ["rescore", w / "kn3", w / "nbest.txt", "-o", out], "nbest"),
    "filter score --plot": (lambda w, out: ["filter", "score", T(w), "-m", w / "kn3",
                                            "--tokenizer", "none", "-o", out.parent / "m",
                                            "--plot", out], "png"),
}


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err


def _output(argv) -> str:
    """The path the command writes (the argv's file output)."""
    for flag in ("--arpa", "--plot", "-o"):
        if flag in argv and not str(argv[argv.index(flag) + 1]).endswith("/m"):
            return argv[argv.index(flag) + 1]
    return argv[-1]


@pytest.mark.parametrize("name", FILE_WRITERS)
def test_a_users_file_is_never_replaced(world, tmp_path, capsys, name):
    make, _ = FILE_WRITERS[name]
    argv = make(world, tmp_path / "notes.txt")
    out = _output(argv)
    write(out, "my notes\n")
    code, err = _run(argv, capsys)
    lines = [x for x in err.strip().split("\n") if x.startswith("nnlm: error:")]
    assert code == 2 and len(lines) == 1 and str(out) in lines[0] and "--force" in lines[0], err
    assert "Traceback" not in err
    assert out.read_text() == "my notes\n"
    assert not (tmp_path / "m").exists()  # nothing written, the model beside it neither


@pytest.mark.parametrize("name", FILE_WRITERS)
def test_a_folder_is_never_replaced_even_with_force(world, tmp_path, capsys, name):
    make, _ = FILE_WRITERS[name]
    argv = make(world, tmp_path / "notes.txt")
    out = _output(argv)
    (out / "sub").mkdir(parents=True)
    write(out / "sub" / "thesis.tex", "mine\n")
    code, err = _run([*argv, "--force"], capsys)
    assert code == 2 and "is a directory" in err and "Traceback" not in err
    assert (out / "sub" / "thesis.tex").read_text() == "mine\n"


@pytest.mark.parametrize("name", FILE_WRITERS)
def test_an_output_of_its_own_kind_is_replaced_and_force_replaces_any_file(world, tmp_path,
                                                                          capsys, name):
    make, _ = FILE_WRITERS[name]
    argv = make(world, tmp_path / "out.txt")
    out = _output(argv)
    code, err = _run(argv, capsys)
    assert code == 0 and out.is_file(), err
    first = out.read_bytes()
    shutil.rmtree(tmp_path / "m", ignore_errors=True)
    code, err = _run(argv, capsys)  # again, over its own earlier output
    assert code == 0 and out.is_file(), err
    shutil.rmtree(tmp_path / "m", ignore_errors=True)
    write(out, "my notes\n")
    code, err = _run([*argv, "--force"], capsys)
    assert code == 0 and out.read_bytes()[:16] == first[:16], err


def test_the_table_covers_every_file_output():
    """Every command that declares a file output is in FILE_WRITERS, with its kind."""
    from nnlm.cli.main import FILE_OUTPUTS

    declared = {name.split(" (")[0].split(" --")[0] for name in FILE_WRITERS}
    assert set(FILE_OUTPUTS) == declared | {"ngram convert"}
    from nnlm.file_kinds import KINDS

    assert {kind for _, kind in FILE_WRITERS.values()} == set(KINDS)

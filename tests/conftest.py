"""Shared fixtures. Tests never touch the network: NLTK's downloader is switched off."""

import os

import numpy as np
import pytest

os.environ.setdefault("NNLM_NO_DOWNLOAD", "1")
collect_ignore_glob = ["fixtures/*"]  # other projects' files (kenlm's example.py), not tests
# scripts the tests run in a subprocess (some in pyctcdecode's own environment):
# importing one under pytest would run it
collect_ignore = ["pyctcdecode_client.py", "pyctcdecode_side.py", "transformers_client.py"]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test module that cannot import for want of an extra (nnlm's core installed
    alone: its tests on another Python) is skipped with that reason, not an error; any
    other import error stays one."""
    from nnlm.base.extras import EXTRA_OF

    outcome = yield
    report = outcome.get_result()
    if report.failed and isinstance(collector, pytest.Module):
        text = str(report.longrepr)
        missing = next((m for m in EXTRA_OF if f"No module named '{m}'" in text), None)
        if missing is not None:
            report.outcome = "skipped"
            report.longrepr = (str(collector.path), 0, f"Skipped: needs {missing}, part of "
                               f"nnlm's {EXTRA_OF[missing][0]} extra, which is not installed")


def write(path, text: str | bytes):
    """Write a test file (bytes as given, text as UTF-8) and return its path."""
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return path


@pytest.fixture(scope="session")
def brown_dir(tmp_path_factory):
    """Brown prepared with protocol v1 (once per session); skips when Brown is absent."""
    from nnlm.text.corpus import brown_available, prepare_brown, write_splits

    if not brown_available():
        pytest.skip("Brown corpus not found: set NLTK_DATA to a folder holding corpora/brown.zip")
    out = tmp_path_factory.mktemp("brown")
    write_splits(out, prepare_brown(download=False))
    return out


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy world's splits (nnlm.text.toyworld, seed 0) in ``root/data``, a folder of
    each test module's own (the networks' tests train into it)."""
    from nnlm.text.corpus import write_splits
    from nnlm.text.toyworld import toy_world

    root = tmp_path_factory.mktemp("toy")
    write_splits(root / "data", toy_world(seed=0))
    return root


def zipf_corpus(seed=0, n_sentences=300, n_words=40, max_words=11):
    """Lines of w0..w{n_words-1}, Zipf-distributed, each word often followed by a fixed
    successor (so that higher orders matter): the n-gram tests' small corpus."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(n_words)]
    p = 1.0 / np.arange(1, n_words + 1)
    p /= p.sum()
    # a little structure: each word prefers a successor, so higher orders matter
    lines = []
    for _ in range(n_sentences):
        w = rng.choice(n_words, p=p)
        line = []
        for _ in range(rng.integers(1, max_words + 1)):
            line.append(words[w])
            w = (w * 7 + 3) % n_words if rng.random() < 0.5 else rng.choice(n_words, p=p)
        lines.append(line)
    return lines


def run_cli(argv, capsys):
    """``nnlm ARGV`` in this process: (exit code, stdout, stderr)."""
    from nnlm.cli import main

    code = main([str(a) for a in argv])
    return code, *capsys.readouterr()


def toy_text(directory, sentences: int = 600):
    """The toy world's train/valid/test text in ``directory`` (``nnlm prepare toy``)."""
    from nnlm.cli import main

    assert main(["prepare", "toy", str(directory), "--train-sentences", str(sentences)]) == 0
    return directory


def toy_kn(directory, order: int, sentences: int = 400):
    """The toy world's text in ``directory``/toy and a KN model of ``order`` on it, as a
    model directory (``kn<order>``) and ARPA (``kn<order>.arpa``); returns (the ARPA
    path, the test sentences)."""
    from nnlm.cli import main

    toy_text(directory / "toy", sentences)
    name = f"kn{order}"
    assert main(["ngram", "train", str(directory / "toy/train.txt"), "--order", str(order),
                 "--discount-fallback", "-o", str(directory / name), "--arpa",
                 str(directory / f"{name}.arpa")]) == 0
    lines = (directory / "toy/test.txt").read_text().split("\n")
    return directory / f"{name}.arpa", [x for x in lines if x.strip()]


def serve_process(*args: str):
    """``nnlm serve ARGS --port P`` in its own process (a crash there cannot stop the
    tests), once it answers /health: (its base URL, the process)."""
    import contextlib
    import socket
    import subprocess
    import sys
    import time

    import httpx

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "nnlm", "serve", *map(str, args), "--port",
                             str(port), "--log-level", "warning"], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{url}/health").status_code == 200:
                break
        time.sleep(0.2)
    return url, proc


def toy_world(w, neural: bool = True):
    """The toy world's text in ``w/toy`` and three models beside it: ``kn3`` (with
    ``kn3.arpa``) and, with ``neural``, a one-epoch ``nplm`` of the tiny preset; returns
    ``w``. Without the neural extra, the tests that stand on the nplm skip."""
    from nnlm.cli import main

    if neural:
        pytest.importorskip("torch", reason="the toy world's nplm needs nnlm's neural extra")

    toy_text(w / "toy")
    train, valid = w / "toy/train.txt", w / "toy/valid.txt"
    assert main(["ngram", "train", str(train), "--order", "3", "--discount-fallback",
                 "-o", str(w / "kn3"), "--arpa", str(w / "kn3.arpa")]) == 0
    if neural:
        assert main(["train", str(train), "--valid", str(valid), "--preset", "tiny",
                     "--epochs", "1", "--threads", "1", "-o", str(w / "nplm")]) == 0
    return w


def directory_bytes(path) -> dict:
    """Every file of a model directory, name -> bytes: two saves of one model compare
    equal this way."""
    from pathlib import Path

    return {p.name: p.read_bytes() for p in sorted(Path(path).iterdir()) if p.is_file()}


def trie_file_parts(path) -> tuple[dict, bytes]:
    """A trie file's header (its binding, which names one saved model, left out) and the
    bytes of its sections: two files of the same model compare equal this way."""
    from nnlm.ngram.store.trie_layout import read_trie_header

    header, start = read_trie_header(path)
    header.pop("binding", None)
    with open(path, "rb") as f:
        f.seek(start)
        return header, f.read()

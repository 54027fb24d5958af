"""Reliability of what nnlm writes and runs: failing and killed writes, locks, atomic
exchanges, the umask, resumed and stopped training, one rule for text. Every case
ends in exit 0 or one error line, with the old output whole."""

from __future__ import annotations

import errno
import json
import math
import os
import re

import pytest

from conftest import write
from nnlm.cli import main
from nnlm.cli.guards import output_lock
from reliability_world import (
    T,
    V,
    build_world,
    check_outcome,
    copy,
    snapshot,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory)


# -- writes: OS errors, kills, locks -------------------------------------------------------
def _fail_rename(monkeypatch, err=errno.ENOSPC):
    import nnlm.text.fileio as fileio

    def broken(*a, **k):
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(fileio, "_apply_umask", broken)


@pytest.mark.parametrize("err", [errno.ENOSPC, errno.EROFS, errno.EACCES])
def test_a_failing_write_keeps_the_old_output_and_says_one_line(world, tmp_path, capsys,
                                                                monkeypatch, err):
    copy(world / "kn3", tmp_path / "m")
    before = snapshot(tmp_path)
    _fail_rename(monkeypatch, err)
    code = main(["ngram", "train", str(T(world)), "--order", "2", "--discount-fallback",
                 "-o", str(tmp_path / "m")])
    _, stderr = capsys.readouterr()
    check_outcome(code, "", stderr, "error", re.escape(os.strerror(err)[1:]))
    assert str(tmp_path / "m") in stderr
    assert snapshot(tmp_path) == before  # old model whole, no temporaries left


def test_prepare_replaces_all_splits_or_none(world, tmp_path, capsys, monkeypatch):
    import nnlm.text.fileio as fileio

    copy(world / "toy", tmp_path / "d")
    before = snapshot(tmp_path)
    real = fileio._apply_umask
    calls = []

    def third_fails(p):  # the disk fills while writing the third split
        calls.append(p)
        if len(calls) == 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(p)

    monkeypatch.setattr(fileio, "_apply_umask", third_fails)
    code = main(["prepare", "toy", str(tmp_path / "d"), "--seed", "7"])
    check_outcome(code, "", capsys.readouterr().err, "error", "No space|no space")
    assert snapshot(tmp_path) == before


KILL_SCRIPT = """
import sys, time
from nnlm.text.vocab import Vocabulary
real = Vocabulary.save  # save_model writes the vocabulary after the model's own files
def slow(*a, **k):
    real(*a, **k)
    print("written", flush=True)
    time.sleep(60)
Vocabulary.save = slow
from nnlm.cli import main
from nnlm.text.vocab import EOS_ID
main(sys.argv[1:])
"""


def test_a_kill_during_a_save_loses_nothing_and_leaves_nothing(world, tmp_path):
    """SIGKILL in the middle of replacing a model: the old model still loads, bit for bit;
    the next write beside it sweeps the dead process's temporary."""
    import signal
    import subprocess
    import sys

    copy(world / "kn3", tmp_path / "m")
    before = snapshot(tmp_path / "m")
    proc = subprocess.Popen([sys.executable, "-c", KILL_SCRIPT, "ngram", "train",
                             str(T(world)), "--order", "2", "--discount-fallback", "-o",
                             str(tmp_path / "m")], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "written"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert snapshot(tmp_path / "m") == before
    stale = [p for p in tmp_path.iterdir() if p.name.startswith(".m.nnlm-")]
    assert stale  # the killed process's temporary ...
    assert main(["ngram", "train", str(T(world)), "--order", "2", "--discount-fallback",
                 "-o", str(tmp_path / "m")]) == 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # ... is swept
    from nnlm import load_model

    assert load_model(tmp_path / "m").order == 2


def test_two_writers_of_one_output_cannot_both_succeed(world, tmp_path, capsys):
    with output_lock(tmp_path / "m"):  # as another nnlm process would hold it
        code = main(["ngram", "train", str(T(world)), "--discount-fallback",
                     "-o", str(tmp_path / "m")])
    check_outcome(code, "", capsys.readouterr().err, "error", f"pid {os.getpid()}")
    assert not (tmp_path / "m").exists()
    assert main(["ngram", "train", str(T(world)), "--discount-fallback",
                 "-o", str(tmp_path / "m")]) == 0  # the lock is gone with its holder


def test_replacing_a_model_directory_is_one_atomic_exchange(tmp_path):
    from nnlm.text.fileio import _exchange, atomic_path

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a/x", "a")
    write(tmp_path / "b/x", "b")
    assert _exchange(tmp_path / "a", tmp_path / "b")  # renameat2 works here
    assert (tmp_path / "a/x").read_text() == "b" and (tmp_path / "b/x").read_text() == "a"
    with atomic_path(tmp_path / "a") as tmp:
        tmp.mkdir()
        write(tmp / "y", "new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b"]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["y"]


def test_written_files_follow_the_umask(world, tmp_path):
    old = os.umask(0o022)
    try:
        assert main(["train", str(T(world)), "--valid", str(V(world)), "--preset", "tiny",
                     "--epochs", "1", "--threads", "1", "-o", str(tmp_path / "ck")]) == 0
    finally:
        os.umask(old)
    for name in ("model.safetensors", "config.json", "vocab.txt", "state/model.safetensors"):
        assert (tmp_path / "ck" / name).stat().st_mode & 0o777 == 0o644, name
    assert (tmp_path / "ck").stat().st_mode & 0o777 == 0o755


# -- training: resume changes, --max-steps -------------------------------------------------
def test_resume_may_change_the_learning_rate_and_says_so_in_metrics(world, tmp_path, capsys):
    base = ["train", str(T(world)), "--valid", str(V(world)), "--preset", "tiny", "--threads",
            "1", "-o", str(tmp_path / "ck")]
    assert main([*base, "--epochs", "1"]) == 0
    assert main([*base, "--resume", "--epochs", "2", "--lr", "0.005", "--patience", "3"]) == 0
    err = capsys.readouterr().out
    assert "changed on resume: " in err and "lr 0.01 -> 0.005" in err
    rows = (tmp_path / "ck/metrics.csv").read_text().splitlines()
    assert rows[0].endswith(",note") and len(rows) == 3
    assert rows[1].endswith(",") and "lr 0.01 -> 0.005" in rows[2] and "epochs 1 -> 2" in rows[2]
    header = json.loads((tmp_path / "ck/config.json").read_text())
    assert header["train"]["lr"] == 0.005 and header["train"]["epochs"] == 2


def test_max_steps_before_the_first_epoch_ends_still_leaves_a_model(world, tmp_path, capsys):
    ck = tmp_path / "ck"
    assert main(["train", str(T(world)), "--valid", str(V(world)), "--preset", "tiny",
                 "--threads", "1", "--max-steps", "3", "-o", str(ck)]) == 0
    assert "no epoch finished yet" in capsys.readouterr().out
    code = main(["eval", str(ck), str(world / "toy/test.txt"), "--json"])
    got = json.loads(capsys.readouterr().out)
    assert code == 0 and math.isfinite(got["perplexity"]) and got["perplexity"] < 60
    assert main(["generate", str(ck), "-n", "2"]) == 0


def test_train_config_is_checked_for_every_caller():
    from nnlm.base.errors import NnlmError
    from nnlm.neural.training.train import TrainConfig

    for bad in ({"epochs": 0}, {"clip": -1.0}, {"lr": float("nan")}, {"seed": -1},
                {"plateau_decay": 0.0}, {"batch_size": "256"}, {"weight_decay": -0.1}):
        with pytest.raises(NnlmError):
            TrainConfig(**bad)
    assert TrainConfig(lr=1).lr == 1.0  # an int where a float is due is fine


# -- one rule for text -----------------------------------------------------------------------
def test_eval_and_score_agree_on_blank_lines_bom_and_line_ends(world, tmp_path, capsys):
    text = (world / "toy/test.txt").read_text().splitlines()[:50]
    plain = write(tmp_path / "plain.txt", "\n".join(text) + "\n")
    odd = write(tmp_path / "odd.txt", ("\ufeff" + "\r\n\r\n".join(text[:25]) + "\r"
                                       + "\r".join(text[25:]) + "\n\n").encode("utf-8"))
    results = {}
    for f in (plain, odd):
        assert main(["eval", str(world / "kn3"), str(f), "--json"]) == 0
        results[f.name] = json.loads(capsys.readouterr().out)
        assert main(["score", str(world / "kn3"), str(f)]) == 0
        out, err = capsys.readouterr()
        summary = re.search(r"([\d,]+) sentences, ([\d,]+) tokens", err)
        assert int(summary[1]) == results[f.name]["sentences"] == 50
        assert int(summary[2].replace(",", "")) == results[f.name]["tokens"]
    assert results["odd.txt"]["perplexity"] == pytest.approx(results["plain.txt"]["perplexity"])
    assert out.count("\t-\t") == 24 + 1  # a row for every blank line, aligned

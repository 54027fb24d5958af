"""Stopping a long run: Ctrl-C and SIGTERM are noted and raised where stopping is safe."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from nnlm.base.interrupts import StopOnInterrupt, Terminated
from nnlm.text.toyworld import toy_world


def _terminate_when(proc: subprocess.Popen, ready) -> str:
    """Send SIGTERM once ``ready()`` (polled) says the command is mid-work: it must exit
    143 with one line, no traceback. Returns its standard error."""
    try:
        deadline = time.monotonic() + 120
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the command ended before it could be stopped"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, err
    assert "nnlm: terminated" in err and "Traceback" not in err
    return err


def _deliver(signum) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # Python runs the handler in the main thread at its next bytecode


@pytest.mark.skipif(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL,
                    reason="the test runner handles SIGTERM itself")
def test_sigterm_is_noted_then_raised_at_check_and_the_disposition_restored():
    with StopOnInterrupt() as stop:
        _deliver(signal.SIGTERM)
        assert stop.pending == signal.SIGTERM  # noted, not raised where it landed
        with pytest.raises(Terminated):
            stop.check()
        stop.check()  # raised once
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL


def test_an_ignored_sigint_stays_ignored():
    """A run the shell started in the background ignores Ctrl-C's signal: kept so."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with StopOnInterrupt() as stop:
            _deliver(signal.SIGINT)
            stop.check()  # nothing pending
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, previous)


def test_sigterm_stops_a_background_training_run_with_its_checkpoint(tmp_path):
    """`nnlm train ... &` ignores SIGINT; `kill` (SIGTERM) stops it after an update with
    exit 143 and one line, and the run resumes from its checkpoint."""
    train, valid, _ = toy_world(seed=0, n_train=600, n_valid=100, n_test=100)
    (tmp_path / "train.txt").write_text("\n".join(train) + "\n")
    (tmp_path / "valid.txt").write_text("\n".join(valid) + "\n")
    out = tmp_path / "run"
    args = [sys.executable, "-m", "nnlm", "train", str(tmp_path / "train.txt"), "--valid",
            str(tmp_path / "valid.txt"), "--preset", "tiny", "-o", str(out),
            "--checkpoint-every", "5"]
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [*args, "--epochs", "500", "--patience", "500"], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    err = _terminate_when(proc, lambda: "epoch 1:" in proc.stdout.readline())
    said = [x for x in err.splitlines() if x.startswith("nnlm: terminated")]
    assert len(said) == 1 and f"kept in {out}" in said[0] and "--resume" in said[0], err
    resumed = subprocess.run([*args, "--epochs", "500", "--patience", "500", "--resume",
                              "--max-steps", "1"], env=env, capture_output=True, text=True,
                             timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stderr + resumed.stdout


def test_sigterm_mid_build_cleans_up_as_ctrl_c_does(tmp_path):
    """`kill` during `nnlm index build`: exit 143 in one line, and neither the half-built
    index's temporary folder nor the output's lock is left behind."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = np.array([f"w{i}" for i in range(5000)])
    text = tmp_path / "big.txt"
    with text.open("w") as f:
        for _ in range(200):
            ids = rng.zipf(1.3, size=(100, 200)) % len(words)
            f.write("\n".join(" ".join(words[row]) for row in ids) + "\n")
    out = tmp_path / "big.idx"
    proc = subprocess.Popen([sys.executable, "-m", "nnlm", "index", "build", str(text), "-o",
                             str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    _terminate_when(proc, lambda: bool(list(tmp_path.glob(".big.idx.nnlm-*.tmp"))))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt"]

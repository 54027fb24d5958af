"""Progress off a terminal: periodic lines on stderr, none when switched off."""

from nnlm.base.progress import progress_bar


def test_progress_prints_periodic_lines_when_not_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "1e-9")
    clock = iter([0.0, 30.0])  # started, then one update after 30 s
    monkeypatch.setattr("nnlm.base.progress.time.monotonic", lambda: next(clock))
    with progress_bar(4, "epoch 1/2", "batch") as bar:
        bar.set_postfix(loss="5.100")
        bar.update(2)  # half the work in 30 s: 30 s to go
    assert "epoch 1/2: 2/4 batch (50%), 0:30 elapsed, ETA 0:30, loss=5.100" in \
        capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "1e-9")
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "0")
    with progress_bar(4, "epoch 1/2", "batch") as bar:
        bar.update(4)
    assert capsys.readouterr().err == ""


def test_every_command_takes_log_every_and_long_scoring_reports(tmp_path, monkeypatch, capsys):
    """--log-every on any command sets the interval (here: every update), and scoring a
    text longer than one batch reports its progress; a negative interval is one line."""
    import os

    from nnlm.cli import main
    from nnlm.cli.common import is_leaf, walk_parsers
    from nnlm.cli.main import build_parser

    leaves = [p for _, p in walk_parsers(build_parser(), []) if is_leaf(p)]
    assert leaves and all(any(a.dest == "log_every" for a in p._actions) for p in leaves)
    monkeypatch.delenv("NNLM_PROGRESS_SECONDS", raising=False)
    assert main(["prepare", "toy", str(tmp_path / "toy"), "--train-sentences", "200"]) == 0
    assert main(["ngram", "train", str(tmp_path / "toy/train.txt"), "--method", "addk",
                 "--order", "2", "-o", str(tmp_path / "lm")]) == 0
    text = (tmp_path / "toy/train.txt").read_text()
    long = tmp_path / "long.txt"
    long.write_text(text * (70_000 // len(text.split()) + 1))
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "lm"), str(long), "--log-every", "1e-9"]) == 0
    assert "scoring (addk): " in capsys.readouterr().err
    os.environ.pop("NNLM_PROGRESS_SECONDS", None)
    assert main(["eval", str(tmp_path / "lm"), str(long), "--log-every", "-1"]) == 2
    assert "--log-every" in capsys.readouterr().err


def test_training_lines_carry_a_fresh_loss_and_the_epochs_mean(tmp_path, monkeypatch, capsys):
    """Each progress line of training says the loss of the updates since the line before
    (it moves from line to line) beside the epoch's running mean."""
    import re

    from conftest import toy_world
    from nnlm.cli import main
    from nnlm.neural.training.train import Trainer

    w = toy_world(tmp_path)
    monkeypatch.setattr(Trainer, "LOG_EVERY", 2)
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "1e-9")
    capsys.readouterr()
    assert main(["train", str(w / "toy/train.txt"), "--valid", str(w / "toy/valid.txt"),
                 "--preset", "tiny", "--max-steps", "12", "--threads", "1",
                 "-o", str(tmp_path / "m")]) == 0
    pairs = re.findall(r"loss=([\d.]+), mean=([\d.]+)", capsys.readouterr().err)
    fresh = [float(a) for a, _ in pairs]
    assert len(set(fresh)) >= 3, pairs  # a new number as the updates go
    assert any(a != m for a, m in pairs), pairs  # not the running mean under another name


def test_work_run_quietly_shows_nothing_on_its_thread_only(monkeypatch, capsys):
    """A pass that shows its own progress runs work, on several threads, that would show
    its own: inside ``quietly`` that work prints nothing; outside, and on other threads,
    bars print as before."""
    import threading

    from nnlm.base.progress import quietly

    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "1e-9")
    seen = []

    def work(name):
        with progress_bar(2, name, "step") as bar:
            bar.update(2)

    with quietly():
        work("inner")
        other = threading.Thread(target=lambda: work("other thread"))
        other.start()
        other.join()
    work("outer")
    seen = capsys.readouterr().err
    assert "inner" not in seen
    assert "other thread: 2/2 step" in seen and "outer: 2/2 step" in seen

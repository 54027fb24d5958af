"""Progress off a terminal: periodic lines on stderr, none when switched off."""

from nnlm.progress import progress_bar


def test_progress_prints_periodic_lines_when_not_on_a_terminal(monkeypatch, capsys):
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "1e-9")
    with progress_bar(4, "epoch 1/2", "batch") as bar:
        bar.set_postfix(loss="5.100")
        bar.update(2)
    assert "epoch 1/2: 2/4 batch (50%), loss=5.100" in capsys.readouterr().err
    monkeypatch.setenv("NNLM_PROGRESS_SECONDS", "0")
    with progress_bar(4, "epoch 1/2", "batch") as bar:
        bar.update(4)
    assert capsys.readouterr().err == ""

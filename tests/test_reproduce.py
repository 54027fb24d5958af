"""The reproduction pipeline end to end on the toy world (Brown itself is too slow for tests)."""

import json

import pytest

from nnlm.experiments.reproduce import ROWS, dependencies, reproduce
from nnlm.text.corpus import write_splits
from nnlm.text.toyworld import toy_world


def test_dependencies_pull_in_networks_trigram_and_kn5():
    assert dependencies(["mlp2"]) == ["mlp1", "mlp2", "delint3", "kn5"]  # the table's order
    assert dependencies(["class500"]) == ["kn5", "class500"]
    assert dependencies(["deep+modern+kn5"]) == ["kn5", "modern", "deep", "deep+modern+kn5"]
    assert dependencies(["awd+kn5_dynamic_cache"]) == ["kn5", "awd", "awd+kn5",
                                                       "awd+kn5_dynamic_cache"]


def test_every_paper_row_has_the_papers_numbers():
    assert len(ROWS) == 21 and all(r.paper[2] for r in ROWS)
    by = {r.name: r for r in ROWS}
    assert round(by["mlp1"].paper[2] / by["kn5"].paper[2], 3) == 0.835  # the paper's ratio


def test_reproduce_writes_report_results_and_plot_and_resumes(tmp_path):
    write_splits(tmp_path / "data", toy_world(seed=0, n_train=1500))
    logs = []
    results = reproduce(tmp_path, only=["mlp8", "class150"], quick=True, threads=1,
                        log=logs.append)
    assert set(results["rows"]) == {"mlp7", "mlp8", "delint3", "kn5", "class150"}
    report = (tmp_path / "report.md").read_text()
    assert "| mlp8 | 3 |" in report and "paper test" in report
    saved = json.loads((tmp_path / "results.json").read_text())
    r = saved["rows"]
    # the 0.5/0.5 mixture beats at least one of its parts and never both by a wide margin
    assert r["mlp8"]["test"] < max(r["mlp7"]["test"], r["delint3"]["test"])
    assert (tmp_path / "valid_vs_time.png").read_bytes()[:4] == b"\x89PNG"
    # a second call reuses everything: no training, no evaluation
    logs.clear()
    reproduce(tmp_path, only=["mlp8", "class150"], quick=True, threads=1, log=logs.append)
    assert not any(line.startswith(("training", "  ")) for line in logs), logs


@pytest.mark.slow
def test_reproduce_extended_adds_the_deep_and_lstm_networks_and_em_mixtures(tmp_path):
    """--extended on the toy world (2 epochs a network): the rows beyond the paper, in a
    table of their own; each EM mixture beats its parts on the text its weights were
    fitted on."""
    write_splits(tmp_path / "data", toy_world(seed=0, n_train=1500))
    results = reproduce(tmp_path, only=["deep+modern+kn5", "deep+kn5", "deep+lstm+kn5"],
                        quick=True, threads=1, log=lambda s: None)
    r = results["rows"]
    assert set(r) == {"kn5", "modern", "deep", "lstm", "deep+kn5", "deep+modern+kn5",
                      "deep+lstm+kn5"}
    report = (tmp_path / "report.md").read_text()
    assert "## Beyond the paper" in report and "| deep+kn5 | deep + kn5 |" in report
    for name, parts in (("deep+kn5", ["deep", "kn5"]),
                        ("deep+modern+kn5", ["deep", "modern", "kn5"]),
                        ("deep+lstm+kn5", ["deep", "lstm", "kn5"])):
        assert r[name]["valid"] < min(r[p]["valid"] for p in parts), name


@pytest.mark.slow
def test_reproduce_extended_reports_test_time_adaptation_apart(tmp_path):
    """The adapted rows: settings chosen on valid, test numbers in a section of their own,
    reused on a second call."""
    write_splits(tmp_path / "data", toy_world(seed=0, n_train=1500))
    logs = []
    results = reproduce(tmp_path, only=["awd_cache", "awd+kn5_dynamic_cache"], quick=True,
                        threads=1, log=logs.append)
    r = results["rows"]
    assert set(r) == {"kn5", "awd", "awd+kn5", "awd_cache", "awd+kn5_dynamic_cache"}
    assert set(r["awd_cache"]["settings"]) == {"cache"}
    assert set(r["awd+kn5_dynamic_cache"]["settings"]) == {"cache", "dynamic",
                                                           "mixture_weights"}
    report = (tmp_path / "report.md").read_text()
    assert "## Test-time adaptation" in report and "| awd+kn5 | dynamic + cache |" in report
    assert 1 < r["awd_cache"]["test"] < 2 * r["awd"]["test"]
    logs.clear()
    reproduce(tmp_path, only=["awd_cache", "awd+kn5_dynamic_cache"], quick=True, threads=1,
              log=logs.append)
    assert not any(line.startswith(("training", "adapting", "  ")) for line in logs), logs

"""bench/ as a kept suite: one harness that alternates cases and writes a full record,
every bench writing through it, and a README that names every bench. The benches
themselves are never run here (they take minutes to hours)."""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
if not (BENCH / "harness.py").exists():
    pytest.skip("bench/ is not beside the tests (an installed copy)", allow_module_level=True)
sys.path.insert(0, str(BENCH))

import ab  # noqa: E402
import harness  # noqa: E402

SCRIPTS = sorted(p for p in BENCH.glob("*/*") if p.suffix in (".py", ".sh"))


def test_rounds_alternate_the_cases_and_report_medians():
    calls = []
    times = harness.rounds({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                           n=3, warmup=1)
    assert calls == ["a", "b"] * 4  # one warm-up round, then three, each case in turn
    assert all(len(t.seconds) == 3 for t in times.values())
    t = harness.Timing([3.0, 1.0, 2.0])
    assert t.median == 2.0 and t.spread == 1.0
    assert t.summary(per=2)["median_seconds"] == 1.0
    pair = {"x": harness.Timing([2.0, 4.0, 9.0]), "y": harness.Timing([1.0, 1.0, 3.0])}
    assert harness.ratio(pair, "x", "y") == {"median": 3.0, "min": 2.0, "max": 4.0}
    with pytest.raises(ValueError):
        harness.rounds({"a": lambda: None}, n=0)


def test_the_record_says_what_made_the_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench/ngram/query.py", "--data", "data/brown"])
    path = tmp_path / "out" / "q.json"
    harness.write_record(path, {"ratio": 1.5})
    saved = json.loads(path.read_text())
    assert saved["ratio"] == 1.5
    record = saved["record"]
    assert record["command"] == "python bench/ngram/query.py --data data/brown"
    assert re.fullmatch(r"[0-9a-f]{12}(-dirty)?|unknown", record["commit"])
    assert record["date"].endswith("+00:00")
    assert record["machine"]["cores"] >= 1 and "python" in record["machine"]["versions"]
    assert set(record["machine"]["flags"]) <= set(harness.CPU_FLAGS)
    assert record["peak_rss_bytes"] > 1 << 20
    assert [p.name for p in path.parent.iterdir()] == ["q.json"]  # no temporary left


def test_ab_compares_every_number_both_sides_share():
    assert ab.numbers({"a": 1, "b": {"c": 2.5, "d": True, "e": "x"}, "record": {"f": 3}}) == \
        {"a": 1.0, "b.c": 2.5}


def test_every_bench_writes_through_the_harness():
    """A script that takes --out writes it with harness.write_record (so its JSON carries
    the record), and no script times with a helper of its own named like the harness's."""
    wrong = []
    for path in (p for p in SCRIPTS if p.suffix == ".py"):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
               and n.col_offset == 0} & {"timed", "best_of", "rate", "write_record"}
        if own:
            wrong.append(f"{path.name}: defines {sorted(own)}")
        if '"--out"' in text and "harness.write_record(" not in text:
            wrong.append(f"{path.name}: takes --out but does not write it with the harness")
    assert wrong == []


def test_the_readme_names_every_bench():
    readme = (BENCH / "README.md").read_text(encoding="utf-8")
    missing = [p.name for p in SCRIPTS if f"`{p.name}`" not in readme]
    assert missing == []
    assert "harness.py" in readme and "ab.py" in readme


def test_every_path_a_bench_builds_from_its_place_is_the_repository():
    """``ROOT = Path(__file__).resolve().parents[N]`` in a bench is the repository (where
    pyproject.toml is), however deep the bench's folder."""
    found = 0
    for path in BENCH.rglob("*.py"):
        for n in re.findall(r"^ROOT = Path\(__file__\)\.resolve\(\)\.parents\[(\d)\]",
                            path.read_text(encoding="utf-8"), flags=re.M):
            found += 1
            assert (path.resolve().parents[int(n)] / "pyproject.toml").exists(), path
    assert found >= 2

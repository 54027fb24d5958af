"""The documentation: the README's quick start runs as written (on the toy world), the
command-line reference is the parser's, and the site builds with mkdocs --strict."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]


def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def first_look() -> tuple[str, str]:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## A first look", 1)[1].split("\n## ", 1)[0]
    return blocks(section, "sh")[0], blocks(section, "python")[0]


def test_the_readme_quick_start_runs_as_written(tmp_path):
    """Every command of "A first look", in order, in a fresh folder, then its Python block,
    with only these changes so that it fits a test: the toy world instead of Brown (same
    files; its made-up counts need KenLM's --discount-fallback), --max-steps 30 on
    training (the preset's epochs take minutes), and the reproduction left out (it is an
    hour; tests/test_reproduce.py runs it reduced)."""
    commands, python = first_look()
    env = {**os.environ, "NNLM_NO_DOWNLOAD": "1"}
    nnlm = [sys.executable, "-m", "nnlm"]
    ran = 0
    for line in commands.strip().splitlines():
        argv = line.split("#", 1)[0].split()
        assert argv[0] == "nnlm", line
        if argv[1] == "reproduce":
            continue
        if argv[1:3] == ["prepare", "brown"]:
            argv[2] = "toy"
        if argv[1] == "train":
            argv += ["--max-steps", "30", "--threads", "1"]
        if argv[1:3] == ["ngram", "train"]:
            argv.append("--discount-fallback")
        done = subprocess.run(nnlm + argv[1:], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        ran += 1
    assert ran >= 6
    done = subprocess.run([sys.executable, "-c", python], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 0  # a log10 probability


def test_the_command_line_reference_is_the_parsers():
    from nnlm.cli.reference import markdown

    assert (ROOT / "docs/cli.md").read_text() == markdown(), \
        "docs/cli.md is stale: python -m nnlm.cli.reference > docs/cli.md"


@pytest.mark.skipif(shutil.which("mkdocs") is None and not (Path(sys.executable).parent /
                                                             "mkdocs").exists(),
                    reason="mkdocs is not installed (pip install -e '.[dev]')")
def test_the_site_builds_strictly(tmp_path):
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run([str(mkdocs) if mkdocs.exists() else "mkdocs", "build", "--strict",
                           "-d", str(tmp_path / "site")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ,
                                                       "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site/api/index.html").read_text().count("target_logprobs") > 3


def test_the_project_files_agree_on_the_version():
    """LICENSE, CITATION.cff and CHANGELOG.md are there, and the version moves in one
    place (nnlm/base/version.py), which the citation and the changelog follow."""
    import re

    from nnlm.base.version import __version__

    assert "MIT License" in (ROOT / "LICENSE").read_text()
    citation = (ROOT / "CITATION.cff").read_text()
    assert re.search(rf"^version: {re.escape(__version__)}$", citation, re.M)
    assert "A Neural Probabilistic Language Model" in citation
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()

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


def _doc_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _shell_commands(block: str) -> list[str]:
    """The ``nnlm`` command lines of a shell block: continuations joined, comments and
    redirections dropped, each command of a pipeline or ``&&`` chain on its own."""
    text = re.sub(r"\\\n\s*", " ", block)
    out = []
    for line in text.splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:\|\||&&|\||;)\s*", line):
            part = re.split(r"\s[<>]|\s2>", part, maxsplit=1)[0].strip().removeprefix("$ ")
            if part.startswith("nnlm "):
                out.append(part)
    return out


def test_every_command_in_the_docs_parses_as_written():
    """Each ``nnlm ...`` line of every shell block in the README and docs/ (about 80) goes
    through nnlm's own parser: a renamed option, a removed command, a value out of range
    or a choice that no longer exists fails here, with the page and the line. (The first
    look runs for real above; the guides' commands train for minutes or need Brown.)"""
    import contextlib
    import io
    import shlex

    from nnlm.cli.main import build_parser

    parser = build_parser()
    checked, failures = 0, []
    for page in _doc_pages():
        for lang in ("sh", "bash", "console"):
            for block in blocks(page.read_text(), lang):
                for command in _shell_commands(block):
                    argv = shlex.split(command)[1:]
                    err = io.StringIO()
                    try:
                        with contextlib.redirect_stderr(err), \
                                contextlib.redirect_stdout(io.StringIO()):
                            parser.parse_args(argv)
                    except SystemExit as e:
                        if e.code:  # --help exits 0
                            failures.append(f"{page.relative_to(ROOT)}: {command}\n  "
                                            f"{err.getvalue().strip().splitlines()[-1]}")
                    checked += 1
    assert checked >= 60, checked
    assert not failures, "\n".join(failures)


def test_every_python_block_in_the_docs_compiles_and_its_imports_exist():
    """Every Python block of the README and docs/ is valid Python, and every name it
    imports from nnlm exists (a renamed function fails here)."""
    import ast
    import importlib

    checked, failures = 0, []
    for page in _doc_pages():
        for block in blocks(page.read_text(), "python"):
            tree = ast.parse(block, str(page))  # a SyntaxError names the page
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nnlm"):
                    try:
                        module = importlib.import_module(node.module)
                    except ModuleNotFoundError as e:  # an optional client library
                        if (e.name or "").startswith("nnlm"):
                            raise
                        continue
                    for alias in node.names:
                        if not hasattr(module, alias.name):
                            try:
                                importlib.import_module(f"{node.module}.{alias.name}")
                            except ImportError:
                                failures.append(f"{page.relative_to(ROOT)}: "
                                                f"from {node.module} import {alias.name}")
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.startswith("nnlm"):
                            importlib.import_module(alias.name)
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                      and node.value.id == "nnlm"):
                    if not hasattr(importlib.import_module("nnlm"), node.attr):
                        failures.append(f"{page.relative_to(ROOT)}: nnlm.{node.attr}")
            checked += 1
    assert checked >= 8, checked
    assert not failures, "\n".join(failures)


def test_no_user_facing_page_tells_the_development_history():
    """The README and docs/ say what nnlm does and measures, not how it got there: no
    sessions, commits or issues (that history lives in the commit messages)."""
    words = re.compile(r"\b(sessions?|commits?|committed|the issue'?s?|issue #?\d+|"
                       r"since reverted|a later run of the code before)\b", re.I)
    found = [f"{page.relative_to(ROOT)}:{i}: {line.strip()}"
             for page in _doc_pages() if page.name != "cli.md"
             for i, line in enumerate(page.read_text().splitlines(), 1)
             if words.search(line)]
    assert not found, "\n".join(found)


def test_no_docstring_or_comment_tells_the_development_history():
    """Code says why, not which issue or session asked for it: a reader of the
    repository cannot resolve "issue 27" or "session 21" (another project's issue, such
    as numba's or kenlm's, can be looked up and may be named)."""
    history = re.compile(r"(?<!numba )(?<!kenlm )\b(issue #?\d+|session \d+|the issue'?s?\b)",
                         re.I)
    code = [*ROOT.glob("src/nnlm/**/*.py"), *ROOT.glob("src/nnlm/**/*.[ch]"),
            *ROOT.glob("tests/*.py"), *ROOT.glob("bench/**/*.py"), *ROOT.glob("bench/**/*.sh"),
            ROOT / "Makefile", ROOT / ".ci/run"]
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for path in code if path.name != "test_docs.py"
             for i, line in enumerate(path.read_text().splitlines(), 1)
             if history.search(line)]
    assert not found, "\n".join(found)

"""The core without its extras: with every extra's packages made unimportable in a fresh
interpreter, n-gram training, ARPA, scoring and nnlm.kenlm work, and every command that
needs an extra ends in one line naming it; the server's app works without the neural
extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import toy_text
from nnlm.base.extras import EXTRA_OF, NEURAL
from nnlm.cli import main

BLOCK = textwrap.dedent("""
    import sys, importlib.abc
    ABSENT = {absent!r}
    class Absent(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ABSENT:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
    sys.meta_path.insert(0, Absent())
    import nnlm.base.jit_cache as jit
    jit.HAVE_NUMBA = "numba" not in ABSENT
""")


def without(absent, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK.format(absent=tuple(absent)) +
                           textwrap.dedent(code)], capture_output=True, text=True, timeout=300)


def without_neural(code: str) -> subprocess.CompletedProcess:
    return without(NEURAL + ("matplotlib",), code)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = tmp_path_factory.mktemp("extras")
    toy_text(w / "toy", 300)
    assert main(["train", str(w / "toy/train.txt"), "--valid", str(w / "toy/valid.txt"),
                 "--preset", "tiny", "--epochs", "1", "--threads", "1",
                 "-o", str(w / "nplm")]) == 0
    return w


def test_the_core_needs_no_extra(world):
    """Estimation, ARPA out and in, a KenLM-style binary, scoring, nnlm.kenlm and the CTC
    decoder, with no extra's package importable; none of them loaded."""
    run = without(EXTRA_OF, f"""
        from nnlm.cli import main
        w = {str(world)!r}
        assert main(["ngram", "train", w + "/toy/train.txt", "--order", "3",
                     "--discount-fallback", "-o", w + "/kn3c", "--arpa", w + "/kn3c.arpa"]) == 0
        assert main(["eval", w + "/kn3c", w + "/toy/test.txt", "--json"]) == 0
        assert main(["ngram", "convert", w + "/kn3c.arpa", w + "/kn3c.bin"]) == 0
        import nnlm.kenlm as kenlm
        print("score", kenlm.Model(w + "/kn3c.bin").score("the cat is walking"))
        import numpy as np
        from nnlm.pyctcdecode import build_ctcdecoder
        decoder = build_ctcdecoder(["", "a", "b", " "], w + "/kn3c.arpa")
        print("decoded", repr(decoder.decode(np.log(np.full((5, 4), 0.25)))))
        loaded = sorted(m for m in {tuple(EXTRA_OF)!r} if m in sys.modules)
        assert not loaded, loaded
    """)
    assert run.returncode == 0, run.stderr
    assert "score -" in run.stdout and "decoded" in run.stdout


def test_the_server_needs_no_neural_extra(world):
    run = without_neural(f"""
        w = {str(world)!r}
        from nnlm.cli import main
        assert main(["ngram", "train", w + "/toy/train.txt", "--order", "3",
                     "--discount-fallback", "-o", w + "/kn3s"]) == 0
        from fastapi.testclient import TestClient
        from nnlm.serve.app import create_app
        from nnlm.serve.registry import load_models
        with TestClient(create_app(load_models([w + "/kn3s"], 0.002, 1024))) as c:
            print("served", c.post("/v1/score", json={{"model": "kn3s",
                                                      "texts": ["the cat"]}}).status_code)
        assert "torch" not in sys.modules
    """)
    assert run.returncode == 0, run.stderr
    assert "served 200" in run.stdout


@pytest.mark.parametrize("argv", [
    ["train", "{w}/toy/train.txt", "--valid", "{w}/toy/valid.txt", "--preset", "tiny",
     "-o", "{w}/x"],
    ["eval", "{w}/nplm", "{w}/toy/test.txt"],
    ["neighbors", "{w}/nplm", "cat"],
    ["generate", "{w}/nplm"],
])
def test_a_neural_command_without_torch_is_one_line(world, argv):
    argv = [a.format(w=world) for a in argv]
    run = without_neural(f"""
        from nnlm.cli import main
        sys.exit(main({argv!r}))
    """)
    assert run.returncode == 2, run.stderr
    err = run.stderr.strip()
    assert len(err.splitlines()) == 1 and 'pip install "nnlm[neural]"' in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("extra,argv", [
    ("serve", ["serve", "{w}/kn3e", "--port", "8999"]),
    ("index", ["index", "build", "{w}/toy/train.txt", "-o", "{w}/idx"]),
    ("data", ["prepare", "brown", "{w}/brown"]),
    ("filter", ["filter", "score", "{w}/docs.jsonl", "--model", "{w}/kn3e", "-o",
                "{w}/scored"]),
    ("distributed", ["ngram", "train", "{w}/toy/train.txt", "--order", "3",
                     "--discount-fallback", "--cluster", "local:1", "-o", "{w}/kn3d"]),
])
def test_a_command_without_its_extra_is_one_line_naming_it(world, extra, argv):
    """Each extra's own packages made unimportable (the others present): the command that
    needs it ends in one line naming it, exit 2."""
    if not (world / "kn3e").exists():
        assert main(["ngram", "train", str(world / "toy/train.txt"), "--order", "3",
                     "--discount-fallback", "-o", str(world / "kn3e")]) == 0
        (world / "docs.jsonl").write_text('{"text": "the cat"}\n')
    argv = [a.format(w=world) for a in argv]
    absent = tuple(m for m, extras in EXTRA_OF.items() if extra in extras)
    run = without(absent, f"""
        from nnlm.cli import main
        sys.exit(main({argv!r}))
    """)
    err = run.stderr.strip()
    assert run.returncode == 2 and len(err.splitlines()) == 1, err
    assert f'pip install "nnlm[{extra}]"' in err and "Traceback" not in err, err


PLAIN = Path(__file__).parents[1] / ".venv-plain" / "bin"


@pytest.mark.skipif(not (PLAIN / "nnlm").exists(),
                    reason="no .venv-plain (make plain-env: pip install . without torch)")
def test_pip_install_without_the_neural_extra(world, tmp_path):
    """``pip install .`` (not editable) into a fresh environment: no torch, the package's
    data files present, n-gram commands and nnlm.kenlm working, neural ones refused."""
    def run(*argv):
        return subprocess.run([str(PLAIN / "nnlm"), *map(str, argv)], capture_output=True,
                              text=True, timeout=300)
    probe = subprocess.run([str(PLAIN / "python"), "-c", (
        "import importlib.util as u, importlib.resources as r; "
        "print(u.find_spec('torch') is None, "
        "(r.files('nnlm.serve') / 'page.html').is_file(), "
        "(r.files('nnlm') / 'py.typed').is_file())")],
        capture_output=True, text=True)
    assert probe.stdout.split() == ["True", "True", "True"], probe.stderr
    kn = tmp_path / "kn3"
    assert run("ngram", "train", world / "toy/train.txt", "--order", "3", "--discount-fallback",
               "-o", kn).returncode == 0
    done = run("eval", kn, world / "toy/test.txt", "--json")
    assert done.returncode == 0 and '"perplexity"' in done.stdout, done.stderr
    query = subprocess.run([str(PLAIN / "python"), "-c", "import nnlm.kenlm as k; "
                            f"print(k.Model({str(kn)!r}).score('the cat'))"],
                           capture_output=True, text=True)
    assert query.returncode == 0 and float(query.stdout) < 0, query.stderr
    refused = run("eval", world / "nplm", world / "toy/test.txt")
    assert refused.returncode == 2 and 'pip install "nnlm[neural]"' in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_python_m_build_gives_an_sdist_and_a_wheel_with_the_compiled_parts(tmp_path):
    """``python -m build`` over the tracked files (as a fresh clone has them) writes an
    sdist holding the C sources and their headers, and a wheel, built from that sdist,
    holding both compiled extensions and the package data; the wheel's compiled query
    module imports and answers from the wheel alone."""
    import shutil
    import tarfile
    import zipfile

    pytest.importorskip("build", reason="the build package is not installed (dev extra)")
    root = Path(__file__).parents[1]
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True)
    if files.returncode != 0:
        pytest.skip("not a git checkout")
    tree = tmp_path / "tree"
    for rel in files.stdout.splitlines():
        if (root / rel).is_file():
            (tree / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, tree / rel)
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o",
                           str(tmp_path / "dist"), str(tree)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (sdist,) = (tmp_path / "dist").glob("nnlm-*.tar.gz")
    (wheel,) = (tmp_path / "dist").glob("nnlm-*.whl")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"src/nnlm/decoding/_kenlm_query.c", "src/nnlm/ngram/store/_trie.c",
            "src/nnlm/text/_words.c", "src/nnlm/ngram/formats/_arpa_lines.c",
            "src/nnlm/ngram/store/trie_level.h", "src/nnlm/ngram/store/pointers.h",
            "src/nnlm/ngram/formats/kenlm_trie.h", "src/nnlm/ngram/formats/kenlm_probing.h",
            "src/nnlm/decoding/kenlm_api.h", "src/nnlm/decoding/ctc/_prefix_search.c",
            "LICENSE", "README.md"} <= names
    with zipfile.ZipFile(wheel) as z:
        inside = z.namelist()
        z.extractall(tmp_path / "wheel")
    assert any(n.startswith("nnlm/decoding/_kenlm_query.") and n.endswith(".so")
               for n in inside), inside
    assert any(n.startswith("nnlm/ngram/store/_trie.") for n in inside if n.endswith(".so"))
    assert any(n.startswith("nnlm/decoding/ctc/_prefix_search.") for n in inside
               if n.endswith(".so"))
    assert "nnlm/serve/page.html" in inside and "nnlm/py.typed" in inside
    probe = subprocess.run([sys.executable, "-c", (
        "import nnlm, nnlm.decoding._kenlm_query as q; print(nnlm.__file__, q.__file__)")],
        capture_output=True, text=True, cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path / "wheel"), "PATH": "/usr/bin:/bin"})
    assert probe.returncode == 0, probe.stderr
    assert all(p.startswith(str(tmp_path / "wheel")) for p in probe.stdout.split())


def test_a_missing_compiled_part_is_said_once_and_the_switch_silences_it():
    """A compiled part that does not import is one warning a process, at the first one
    missed (the Python path answers); NNLM_NO_C=1, which means it, says nothing."""
    import subprocess
    import sys

    code = ("import warnings; warnings.simplefilter('always')\n"
            "from nnlm.base import compiled\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    a = compiled.extension('nnlm.no_such_part')\n"
            "    b = compiled.extension('nnlm.no_such_part_either')\n"
            "print(a, b, len(caught), compiled.missing())\n"
            "print(caught[0].message if caught else '')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**__import__("os").environ, "NNLM_NO_C": ""})
    lines = done.stdout.splitlines()
    assert lines[0] == "None None 1 ['nnlm.no_such_part', 'nnlm.no_such_part_either']"
    assert "nnlm.no_such_part does not import" in lines[1] and "NNLM_NO_C=1" in lines[1]
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env={**__import__("os").environ, "NNLM_NO_C": "1"})
    assert quiet.stdout.splitlines()[0] == "None None 0 []"


def test_nnlm_doctor_says_what_is_compiled_installed_and_slow(monkeypatch, capsys):
    """``nnlm doctor``: every compiled part with its state (a part that does not import,
    with the reason; all off under the switch), every package with its version or none,
    and the slow paths that follow."""
    import json

    from nnlm.base import doctor

    monkeypatch.setitem(doctor.COMPILED, "nnlm._no_such_part", "a part that was never built")
    assert main(["doctor", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    parts = {p["part"]: p for p in report["compiled"]}
    assert parts["nnlm._no_such_part"]["status"] == "missing"
    assert "nnlm._no_such_part" in parts["nnlm._no_such_part"]["why"]
    assert "a part that was never built" in report["slow_paths"]
    packages = {p["package"]: p["version"] for p in report["optional"]}
    assert packages["numpy" if "numpy" in packages else "nltk"] is not None
    assert report["numpy"] == __import__("numpy").__version__
    monkeypatch.setenv("NNLM_NO_C", "1")
    assert main(["doctor"]) == 0
    text = capsys.readouterr().out
    assert text.count("off ") == len(doctor.COMPILED) and "slow paths:" in text

"""``python -m nnlm.pyctcdecode install-alias`` and ``python -m nnlm.kenlm
install-alias``: code that imports pyctcdecode or kenlm (and finds them by their
metadata, as transformers finds pyctcdecode) runs on nnlm, submodules included; the
alias refuses to go where the real package is, and ``uninstall-alias`` takes away only
what it wrote."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(args: list[str], site: Path, code: str | None = None):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")])}
    argv = [sys.executable, "-c", code] if code else [sys.executable, "-m", *args]
    return subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT,
                          timeout=300)


def test_the_pyctcdecode_alias_serves_its_imports_and_metadata(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    done = run(["nnlm.pyctcdecode", "install-alias", "--site", str(site)], site)
    assert done.returncode == 0, done.stderr
    client = run([], site, code=(
        "import importlib.metadata, numpy as np\n"
        "import pyctcdecode\n"
        "from pyctcdecode.alphabet import Alphabet, _normalize_bpe_alphabet\n"
        "from pyctcdecode.decoder import BeamSearchDecoderCTC\n"
        "from pyctcdecode.language_model import LanguageModel\n"
        "import nnlm.pyctcdecode as n\n"
        "assert BeamSearchDecoderCTC is n.BeamSearchDecoderCTC and Alphabet is n.Alphabet\n"
        "d = pyctcdecode.build_ctcdecoder(['', ' ', 'a', 'b'])\n"
        "x = np.log(np.array([[.1, .1, .7, .1], [.7, .1, .1, .1], [.1, .1, .1, .7]]))\n"
        "print(importlib.metadata.version('pyctcdecode'), d.decode(x))\n"))
    assert client.returncode == 0, client.stderr
    assert client.stdout.split() == ["0.5.0+nnlm", "ab"]
    done = run(["nnlm.pyctcdecode", "uninstall-alias", "--site", str(site)], site)
    assert done.returncode == 0 and list(site.iterdir()) == []
    again = run(["nnlm.pyctcdecode", "uninstall-alias", "--site", str(site)], site)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1


def test_an_alias_never_goes_where_the_real_package_is(tmp_path):
    site = tmp_path / "site"
    real = site / "pyctcdecode-0.5.0.dist-info"
    real.mkdir(parents=True)
    (real / "INSTALLER").write_text("pip\n")
    done = run(["nnlm.pyctcdecode", "install-alias", "--site", str(site)], site)
    assert done.returncode == 2 and "pip uninstall pyctcdecode" in done.stderr
    assert sorted(p.name for p in site.iterdir()) == [real.name]
    try:  # kenlm: refused here where the real module is installed, else put in place
        importlib.metadata.distribution("kenlm")
        installed = True
    except importlib.metadata.PackageNotFoundError:
        installed = False
    other = tmp_path / "other"
    other.mkdir()
    done = run(["nnlm.kenlm", "install-alias", "--site", str(other)], other)
    if installed:
        assert done.returncode == 2 and "the real kenlm" in done.stderr
        assert list(other.iterdir()) == []
    else:
        assert done.returncode == 0 and (other / "kenlm.py").exists()

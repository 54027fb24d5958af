"""Installing nnlm's core from its wheel into a fresh environment, and its first use, as JSON.

    python bench/install/install.py [--wheel dist/nnlm-...-cp311-...whl] [--kenlm] [--rounds 10]

- **install**: a fresh venv (``python -m venv``), then ``pip install WHEEL`` timed
  (numpy and tqdm come from the package index, as a user's would; pip's cache is kept,
  as on a user's machine after a first install of anything); the packages it brought
  besides nnlm and the megabytes they take in site-packages;
- **import**: ``python -c "import nnlm.kenlm"`` against ``python -c pass`` in that
  environment, in alternating rounds, the median difference;
- **first score**: a whole process that opens a KenLM binary through ``nnlm.kenlm`` and
  scores a sentence, against ``python -c pass``: how long after the process starts the
  first score is there (KenLM's test.probing.bin from tests/fixtures, and with ``--model``
  a larger one);
- with ``--kenlm``: ``pip install kenlm`` into another fresh venv without pip's cache
  (kenlm is a source package: it compiles its C++ on every install) for comparison.

The wheel is the one ``make wheels`` wrote for the running Python (dist/). Never run by
the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

ROOT = harness.ROOT
PROBING = ROOT / "tests/fixtures/kenlm/test.probing.bin"
SENTENCE = "looking on a little more loin"


def default_wheel() -> Path:
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    found = sorted((ROOT / "dist").glob(f"nnlm-*-{tag}-{tag}-manylinux*.whl"))
    if not found:
        raise SystemExit(f"no {tag} wheel in dist/: run make wheels first, or give --wheel")
    return found[-1]


def fresh_venv(where: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    return python


def pip(python: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-m", "pip", "install", "--quiet",
                    "--disable-pip-version-check", *args], check=True,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def installed(python: Path) -> tuple[list[dict], dict]:
    """The environment's packages besides pip, and each one's size in site-packages (MB)."""
    listing = json.loads(subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True, text=True, check=True).stdout)
    packages = [p for p in listing if p["name"] not in ("pip", "setuptools")]
    code = ("import importlib.metadata as m, os, sys, json\n"
            "sizes = {}\n"
            "for name in sys.argv[1:]:\n"
            "    sizes[name] = sum(os.path.getsize(f.locate()) for f in m.files(name) or ()\n"
            "                      if os.path.isfile(f.locate())) / 1e6\n"
            "print(json.dumps(sizes))")
    sizes = subprocess.run([str(python), "-c", code, *(p["name"] for p in packages)],
                           capture_output=True, text=True, check=True).stdout
    return packages, json.loads(sizes)


def process_seconds(python: Path, code: str) -> float:
    start = time.perf_counter()
    subprocess.run([str(python), "-c", code], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def over_bare(python: Path, code: str, rounds: int) -> dict:
    """A process running ``code`` against a bare one, alternating: the median excess."""
    for _ in range(2):  # warm the page cache
        process_seconds(python, "pass"), process_seconds(python, code)
    bare, full = [], []
    for _ in range(rounds):
        bare.append(process_seconds(python, "pass"))
        full.append(process_seconds(python, code))
    extra = [f - b for f, b in zip(full, bare)]
    return {"median_ms": statistics.median(extra) * 1e3, "min_ms": min(extra) * 1e3,
            "max_ms": max(extra) * 1e3, "bare_ms": statistics.median(bare) * 1e3,
            "rounds": rounds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheel", type=Path, help="default: dist/'s wheel for this Python")
    parser.add_argument("--model", type=Path, help="a larger KenLM or nnlm binary to open")
    parser.add_argument("--kenlm", action="store_true", help="also time pip install kenlm")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/install.json")
    args = parser.parse_args()
    wheel = args.wheel or default_wheel()
    work = Path(tempfile.mkdtemp(prefix="nnlm-install-"))
    results: dict = {"wheel": wheel.name, "wheel_mb": wheel.stat().st_size / 1e6}
    try:
        python = fresh_venv(work / "core")
        results["install_s"] = pip(python, str(wheel))
        packages, sizes = installed(python)
        results["packages"] = {p["name"]: p["version"] for p in packages}
        results["packages_besides_nnlm"] = len(packages) - 1
        results["installed_mb"] = sum(sizes.values())
        results["installed_mb_each"] = sizes
        results["import_nnlm_kenlm"] = over_bare(python, "import nnlm.kenlm", args.rounds)
        models = [PROBING] + ([args.model] if args.model else [])
        results["first_score"] = {}
        for model in models:
            code = (f"import nnlm.kenlm as k; print(k.Model({str(model)!r})"
                    f".score({SENTENCE!r}))")
            results["first_score"][model.name] = over_bare(python, code, args.rounds)
        if args.kenlm:
            other = fresh_venv(work / "kenlm")
            pip(other, "numpy")  # not part of what kenlm's own install takes
            results["kenlm_install_s"] = pip(other, "--no-cache-dir", "kenlm")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    harness.write_record(args.out, results)
    print(f"{wheel.name}: pip install {results['install_s']:.1f} s, "
          f"{results['packages_besides_nnlm']} packages besides nnlm "
          f"({', '.join(p for p in results['packages'] if p != 'nnlm')}), "
          f"{results['installed_mb']:.1f} MB installed: "
          + ", ".join(f"{k} {v:.1f} MB" for k, v in results["installed_mb_each"].items()))
    print(f"import nnlm.kenlm: +{results['import_nnlm_kenlm']['median_ms']:.1f} ms over a bare "
          f"interpreter ({results['import_nnlm_kenlm']['bare_ms']:.0f} ms)")
    for name, t in results["first_score"].items():
        print(f"first score on {name}: +{t['median_ms']:.1f} ms over a bare interpreter")
    if "kenlm_install_s" in results:
        print(f"pip install kenlm (compiles): {results['kenlm_install_s']:.1f} s")


if __name__ == "__main__":
    main()

"""KN5 estimation at scale: nnlm against KenLM's lmplz on synthetic corpora, as JSON.

    python bench/scale.py --tokens 10000000 50000000 [--lmplz PATH] [--work DIR]

For each size it writes a synthetic corpus with Brown's statistics (bench/synthetic.py:
a random walk on Brown's trigrams; NLTK_DATA must find Brown), then times whole
processes, one at a time, and reads each one's peak resident memory from the kernel:

- ``nnlm ngram train CORPUS --order 5`` (everything in memory);
- the same with ``--memory 500M`` (counting spills to files in --work);
- the same with ``--arpa`` (the model directory and an ARPA file, both streamed);
- ``lmplz -o 5 -S 40% -T WORK`` when lmplz is on the PATH or given with --lmplz.

nnlm writes its model directory; lmplz writes an ARPA file (both are what each tool
produces by default). Ratios are measured in the same run, on the same files; wall
times on a busy machine drift, ratios less so. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import generate  # noqa: E402


def run(command: list[str], stdin: Path | None = None, stdout: Path | None = None) -> dict:
    """Wall time and peak RSS of one child process (from wait4's rusage)."""
    t = time.perf_counter()
    with open(stdin or os.devnull, "rb") as fin, open(stdout or os.devnull, "wb") as fout:
        proc = subprocess.Popen(command, stdin=fin, stdout=fout, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{err[-2000:]}")
    return {"seconds": round(wall, 2), "peak_rss_gb": round(usage.ru_maxrss / 1e6, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[10_000_000, 50_000_000])
    parser.add_argument("--lmplz", type=Path, help="KenLM's lmplz (default: from the PATH)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nnlm-scale"),
                        help="corpora, models and temporary files (default: /tmp/nnlm-scale)")
    parser.add_argument("--memory", default="500M", help="nnlm's --memory (default: 500M)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scale.json"))
    args = parser.parse_args()

    lmplz = args.lmplz or (Path(p) if (p := shutil.which("lmplz")) else None)
    args.work.mkdir(parents=True, exist_ok=True)
    nnlm = [sys.executable, "-m", "nnlm"]
    results = []
    for tokens in args.tokens:
        corpus = args.work / f"synthetic-{tokens}.txt"
        if not corpus.exists():
            generate(None, tokens, corpus)
        row: dict = {"tokens": tokens}
        model = args.work / f"kn5-{tokens}"
        row["nnlm"] = run(nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o",
                                  str(model)])
        row["nnlm_memory"] = run(nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o",
                                         str(model), "--memory", args.memory,
                                         "--temp", str(args.work)])
        row["nnlm_memory"]["limit"] = args.memory
        row["nnlm_arpa"] = run(nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o",
                                       str(model), "--arpa", str(model) + ".nnlm.arpa"])
        Path(str(model) + ".nnlm.arpa").unlink()
        if lmplz is not None:
            arpa = args.work / f"kn5-{tokens}.arpa"
            row["lmplz"] = run([str(lmplz), "-o", "5", "-S", "40%", "-T", str(args.work)],
                               stdin=corpus, stdout=arpa)
            for name in ("nnlm", "nnlm_memory", "nnlm_arpa"):
                row[name]["wall_vs_lmplz"] = round(
                    row[name]["seconds"] / row["lmplz"]["seconds"], 3)
                row[name]["memory_vs_lmplz"] = round(
                    row[name]["peak_rss_gb"] / row["lmplz"]["peak_rss_gb"], 3)
            with open(arpa, encoding="utf-8") as f:
                row["ngrams"] = [int(line.split("=")[1]) for line in
                                 (next(f) for _ in range(8)) if line.startswith("ngram ")]
            arpa.unlink()
        results.append(row)
        print(json.dumps(row), flush=True)
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpus": os.cpu_count(), "corpus": "synthetic (bench/synthetic.py, Brown trigram walk)",
           "lmplz": str(lmplz) if lmplz else None, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

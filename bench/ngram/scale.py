"""KN5 estimation at scale: nnlm against KenLM's lmplz on synthetic corpora, as JSON.

    python bench/ngram/scale.py --tokens 10000000 50000000 [--lmplz PATH] [--work DIR] [--rounds 3]

For each size it writes a synthetic corpus with Brown's statistics (bench/ngram/synthetic.py:
a random walk on Brown's trigrams; NLTK_DATA must find Brown), then times whole
processes, one at a time, and reads each one's peak resident memory from the kernel:

- ``nnlm ngram train CORPUS --order 5`` (everything in memory);
- the same with ``--memory 500M`` (counting spills to files in --work);
- the same with ``--arpa`` (the model directory and an ARPA file, both streamed);
- ``lmplz -o 5 -S 40% -T WORK`` when lmplz is on the PATH or given with --lmplz.

nnlm writes its model directory; lmplz writes an ARPA file (both are what each tool
produces by default). The commands run in --rounds alternating rounds (each round runs
each once) and each figure is the median; ratios are measured in the same run, on the
same files, also round by round. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from statistics import median

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

HERE = Path(__file__).resolve().parent


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


def generate_apart(tokens: int, corpus: Path) -> None:
    """bench/ngram/synthetic.py in a process of its own. A child's peak memory (ru_maxrss)
    starts from its parent's peak, which Linux keeps across fork and exec: generating a
    corpus in this process would put its peak under every figure measured after it."""
    subprocess.run([sys.executable, str(HERE / "synthetic.py"), "--tokens", str(tokens),
                    "-o", str(corpus)], check=True, stdout=subprocess.DEVNULL)


def cpu_name() -> str:
    """The processor's model name (timings differ between machines of one kind)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        flags = open("/proc/cpuinfo", encoding="utf-8").read()
        bf16 = " with AVX-512 bf16" if "avx512_bf16" in flags else ""
        return (names[0] if names else platform.processor()) + bf16
    except OSError:
        return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[10_000_000, 50_000_000])
    parser.add_argument("--lmplz", type=Path, help="KenLM's lmplz (default: from the PATH)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nnlm-scale"),
                        help="corpora, models and temporary files (default: /tmp/nnlm-scale)")
    parser.add_argument("--memory", default="500M", help="nnlm's --memory (default: 500M)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternating rounds; each figure is the median (default: 3)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/scale.json"))
    args = parser.parse_args()

    lmplz = args.lmplz or (Path(p) if (p := shutil.which("lmplz")) else None)
    args.work.mkdir(parents=True, exist_ok=True)
    nnlm = [sys.executable, "-m", "nnlm"]
    results = []
    for tokens in args.tokens:
        corpus = args.work / f"synthetic-{tokens}.txt"
        if not corpus.exists():
            generate_apart(tokens, corpus)
        row: dict = {"tokens": tokens}
        model = args.work / f"kn5-{tokens}"
        arpa = args.work / f"kn5-{tokens}.arpa"
        commands = {
            "nnlm": (nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o", str(model)],
                     None, None),
            "nnlm_memory": (nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o",
                                    str(model), "--memory", args.memory, "--temp",
                                    str(args.work)], None, None),
            "nnlm_arpa": (nnlm + ["ngram", "train", str(corpus), "--order", "5", "-o",
                                  str(model), "--arpa", str(model) + ".nnlm.arpa"], None, None),
        }
        if lmplz is not None:
            commands["lmplz"] = ([str(lmplz), "-o", "5", "-S", "40%", "-T", str(args.work)],
                                 corpus, arpa)
        rounds: dict = {name: [] for name in commands}
        for _ in range(args.rounds):  # alternating: each round runs every command once
            for name, (command, stdin, stdout) in commands.items():
                rounds[name].append(run(command, stdin, stdout))
        Path(str(model) + ".nnlm.arpa").unlink()
        for name, runs in rounds.items():
            row[name] = {"seconds": median([r["seconds"] for r in runs]),
                         "peak_rss_gb": median([r["peak_rss_gb"] for r in runs]),
                         "rounds": runs}
            if name == "nnlm_memory":
                row[name]["limit"] = args.memory
        if lmplz is not None:
            for name in ("nnlm", "nnlm_memory", "nnlm_arpa"):
                row[name]["wall_vs_lmplz"] = round(
                    row[name]["seconds"] / row["lmplz"]["seconds"], 3)
                row[name]["memory_vs_lmplz"] = round(
                    row[name]["peak_rss_gb"] / row["lmplz"]["peak_rss_gb"], 3)
                row[name]["wall_vs_lmplz_each_round"] = [
                    round(a["seconds"] / b["seconds"], 3)
                    for a, b in zip(rounds[name], rounds["lmplz"])]
            with open(arpa, encoding="utf-8") as f:
                row["ngrams"] = [int(line.split("=")[1]) for line in
                                 (next(f) for _ in range(8)) if line.startswith("ngram ")]
            arpa.unlink()
        results.append(row)
        print(json.dumps(row), flush=True)
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "cpu": cpu_name(), "cpus": os.cpu_count(), "rounds": args.rounds,
           # every child's peak is at least this (see generate_apart)
           "bench_peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3),
           "corpus": "synthetic (bench/ngram/synthetic.py, Brown trigram walk)",
           "lmplz": str(lmplz) if lmplz else None, "results": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out, indent=2)


if __name__ == "__main__":
    main()

"""Distributed KN5 estimation (``nnlm ngram train SHARDS --cluster local:W``) against one
process and KenLM's lmplz, on synthetic corpora, as JSON; then a model of where the time
goes at 1B, 100B and 1T tokens.

    python bench/ngram/distributed.py --tokens 10000000 50000000 --workers 1 2 4 \\
        [--shards 4] [--lmplz PATH] [--arpa] [--work DIR] \\
        [--out bench/results/distributed.json]
    python bench/ngram/distributed.py --combine A.json B.json --out bench/results/distributed.json
    python bench/ngram/distributed.py --compare MODEL_A MODEL_B

For each size it writes a synthetic corpus with Brown's statistics (bench/ngram/synthetic.py;
NLTK_DATA must find Brown) cut into --shards files, then runs, one at a time:

- ``nnlm ngram train SHARDS --order 5`` in one process;
- ``lmplz -o 5 -S 40%`` when lmplz is on the PATH or given;
- for each W in --workers: the distributed estimation on ``local:W`` (W worker
  processes on this machine), in a child process that reports each pass's end, the bytes
  each pass's tasks hand to others, and every worker's peak resident memory; its model
  is compared with the one-process model, n-gram by n-gram (equal to the bit).

The projection to 1B, 100B and 1T tokens on 8, 64 and 512 workers takes from these runs
(and bench/ngram/billion.py's, given to --combine): the n-grams per token (a power law through
the smallest and largest measured sizes), the bytes moved between tasks per n-gram and a
worker's peak memory per n-gram it holds and a worker's rate (those bytes it processes a
second), both from the largest run; and assumes a network of
--bandwidth GB/s per worker. A pass is shuffle-bound where moving its bytes
over the network takes longer than processing them. Never run by the tests.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import math
import os
import resource
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

HERE = Path(__file__).resolve().parent
# This file's name is the Dask package's: the child that runs the cluster loads it by path
# (see CHILD), with this folder kept off sys.path, or `import distributed` would find it.
CHILD = ("import importlib.util, sys; "
         "spec = importlib.util.spec_from_file_location('bench_distributed', sys.argv[1]); "
         "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
         "arpa = sys.argv[5] or None; "
         "client, _, partitions = sys.argv[6].partition(':'); "
         "m.worker_run(int(sys.argv[2]), m.Path(sys.argv[3]), m.Path(sys.argv[4]), "
         "sys.argv[7:], arpa and m.Path(arpa), client == 'gather', int(partitions or 0))")


def worker_run(workers: int, out: Path, model_dir: Path, shards: list[str],
               arpa: Path | None = None, gather: bool = False, partitions: int = 0) -> None:
    """The child: estimate on local:W and write what it measured to ``out``. The model
    file is written from the workers' partitions (``gather``: the model gathered into
    this process first, as before the file was streamed, for the comparison).
    ``partitions``: how many (0: the default, one a worker)."""
    from nnlm.models import save_model
    from nnlm.ngram.distributed.cluster import connect
    from nnlm.ngram.distributed.estimate import estimate_kn, shard_vocabulary

    stats: dict = {"client": "gather" if gather else "stream"}
    t = time.perf_counter()
    with connect(f"local:{workers}") as client:
        vocab = shard_vocabulary(client, shards)
        stats["vocabulary_seconds"] = round(time.perf_counter() - t, 3)
        model = estimate_kn(client, shards, 5, vocab, partitions=partitions or None,
                            stats=stats, arpa=arpa,
                            save=None if gather else (lambda m: save_model(m, model_dir)))
        usage = client.run(resource.getrusage, resource.RUSAGE_SELF)  # picklable by name
        peaks = {w: u[2] for w, u in usage.items()}  # ru_maxrss, KB
    if gather:
        save_model(model, model_dir)
    stats["estimate_seconds"] = round(time.perf_counter() - t, 3)
    stats["worker_peak_rss_gb"] = sorted(round(kb / 1e6, 3) for kb in peaks.values())
    stats["client_peak_rss_gb"] = round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 3)
    stats["model_file_gb"] = round(sum(f.stat().st_size for f in model_dir.iterdir()) / 1e9, 3)
    out.write_text(json.dumps(stats))


def same_file(a_dir: Path, b_dir: Path) -> bool:
    """Whether two model directories hold the same trie file, the binding (which names
    one saved model) aside."""
    from nnlm.ngram.store.trie_layout import read_trie_header

    parts = []
    for d in (a_dir, b_dir):
        header, start = read_trie_header(d / "ngrams.trie")
        header.pop("binding", None)
        with open(d / "ngrams.trie", "rb") as f:
            f.seek(start)
            parts.append((header, hashlib.sha256(f.read()).hexdigest()))
    return parts[0] == parts[1]


def compare(a_dir: Path, b_dir: Path) -> dict:
    import numpy as np

    from nnlm import load_model

    a, b = load_model(a_dir), load_model(b_dir)
    if a.vocab != b.vocab or len(a.levels) != len(b.levels):
        return {"same_ngrams": False, "largest_difference": float("inf"), "ngrams": 0}
    same = True
    fin = np.isfinite(b.unigram_logp)
    worst = float(max(np.abs(a.unigram_logp[fin] - b.unigram_logp[fin]).max(),
                      np.abs(a.unigram_log_bow - b.unigram_log_bow).max()))
    for x, y in zip(a.levels, b.levels):
        same &= all(np.array_equal(np.asarray(getattr(x, n)), np.asarray(getattr(y, n)))
                    for n in ("keys", "prefix", "last"))
        worst = max(worst, float(np.abs(np.asarray(x.logp) - np.asarray(y.logp)).max()),
                    float(np.abs(np.asarray(x.log_bow) - np.asarray(y.log_bow)).max()))
    return {"same_ngrams": bool(same), "largest_difference": worst,
            "ngrams": int(len(a.vocab) + sum(len(x.keys) for x in a.levels))}


def compare_apart(a_dir: Path, b_dir: Path) -> dict:
    """:func:`compare` in a child process: loading two models here would raise this
    process's peak memory, which every later child inherits (see scale.generate_apart)."""
    import subprocess

    done = subprocess.run([sys.executable, __file__, "--compare", str(a_dir), str(b_dir)],
                          capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[0])


def cut(corpus: Path, parts: int, folder: Path) -> list[str]:
    """``corpus`` as ``parts`` files of consecutive lines, streamed (this process stays
    small: a child's peak memory starts from its parent's, see scale.generate_apart)."""
    with open(corpus, "rb") as f:
        lines = sum(1 for _ in f)
    step = math.ceil(lines / parts)
    out = []
    with open(corpus, "rb") as f:
        for i in range(parts):
            path = folder / f"shard{i}.txt"
            with open(path, "wb") as shard:
                shard.writelines(line for _, line in zip(range(step), f))
            out.append(str(path))
    return out


def project(sizes: list[dict], bandwidth_gbs: float) -> dict:
    """Time and bytes per pass at 1B and 100B tokens (see the module docstring)."""
    runs = [(s["tokens"], s["ngrams"], r) for s in sizes for r in s["distributed"]
            if r.get("client", "stream") == "stream"]
    if not runs:
        return {}
    pts = sorted({(t, n) for t, n, _ in runs})
    if len(pts) >= 2:
        (t0, n0), (t1, n1) = pts[0], pts[-1]
        exponent = math.log(n1 / n0) / math.log(t1 / t0)
    else:
        exponent = 0.63
    t_ref, n_ref = pts[-1]
    # bytes shuffled per n-gram, by pass, from the largest run
    largest = max(runs, key=lambda x: (x[0], x[2]["workers"]))
    per_pass: dict[str, int] = {}
    for s in largest[2]["shuffles"]:
        per_pass[s["pass"]] = per_pass.get(s["pass"], 0) + s["bytes"]
    per_ngram = {k: v / largest[1] for k, v in per_pass.items()}
    # a worker's processing rate: shuffled bytes per worker-second, from the largest run
    # (the small runs' rates are higher: their pieces fit the caches better)
    r = largest[2]
    rate = sum(x["bytes"] for x in r["shuffles"]) / (r["estimate_seconds"] * r["workers"])
    # a worker's peak per n-gram it holds, from the largest run (W workers share them)
    peak = max(largest[2]["worker_peak_rss_gb"]) * largest[2]["workers"]
    out = {"ngram_exponent": round(exponent, 3), "bytes_per_ngram": {k: round(v, 1) for k, v
                                                                     in per_ngram.items()},
           "worker_rate_mb_s": round(rate / 1e6, 2), "bandwidth_gb_s": bandwidth_gbs,
           "rows": []}
    for tokens in (1_000_000_000, 100_000_000_000, 1_000_000_000_000):
        ngrams = n_ref * (tokens / t_ref) ** exponent
        for w in (8, 64, 512):
            row = {"tokens": tokens, "workers": w, "ngrams": round(ngrams), "passes": {}}
            for name, b in per_ngram.items():
                total = b * ngrams
                compute = total / (rate * w)
                network = (total / w) * (w - 1) / w / (bandwidth_gbs * 1e9)
                row["passes"][name] = {"gb": round(total / 1e9, 2),
                                       "compute_s": round(compute, 1),
                                       "network_s": round(network, 1),
                                       "bound": "shuffle" if network > compute else "compute"}
            total_bytes = sum(b * ngrams for b in per_ngram.values())
            row["disk_per_worker_gb"] = round(total_bytes / w / 1e9, 2)
            row["memory_per_worker_gb"] = round(peak * ngrams / w / largest[1], 2)
            out["rows"].append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[10_000_000, 50_000_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--gather", type=int, nargs="*", default=[], metavar="W",
                        help="also run local:W with the model gathered into the client "
                        "before writing (the client's memory, before and after)")
    parser.add_argument("--lmplz", type=Path)
    parser.add_argument("--bandwidth", type=float, default=1.25,
                        help="network GB/s per worker for the projection (default: 10 GbE)")
    parser.add_argument("--arpa", action="store_true",
                        help="also write the ARPA file (one process: from the model; the "
                        "cluster: streamed from the workers) and compare the two files, byte "
                        "for byte")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nnlm-distributed"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/distributed.json"))
    parser.add_argument("--combine", type=Path, nargs="+", metavar="JSON",
                        help="no runs: merge earlier results (one size each) into --out "
                        "and project from all of them")
    parser.add_argument("--compare", type=Path, nargs=2, metavar="MODEL",
                        help="no runs: compare two models n-gram by n-gram; exit status 1 "
                        "unless equal (bench/ngram/two_hosts_dask.sh uses it)")
    args = parser.parse_args()
    if args.compare:
        same = compare(*args.compare)
        print(json.dumps(same))
        print(f"equal: {same['ngrams']:,} n-grams, largest difference "
              f"{same['largest_difference']:.2e}" if same["same_ngrams"] else
              f"different n-grams: {same}")
        sys.exit(0 if same["same_ngrams"] and same["largest_difference"] == 0 else 1)
    if args.combine:
        parts = [json.loads(p.read_text()) for p in args.combine]
        result = {"machine": parts[0]["machine"],
                  "sizes": sorted((s for p in parts for s in p["sizes"]),
                                  key=lambda s: s["tokens"])}
        result["projection"] = project(result["sizes"], args.bandwidth)
        harness.write_record(args.out, result)
        print(json.dumps(result["projection"], indent=1))
        return
    sys.path.insert(0, str(HERE))
    from scale import generate_apart, run

    lmplz = args.lmplz or (Path(p) if (p := shutil.which("lmplz")) else None)
    nnlm = [sys.executable, "-m", "nnlm"]
    result = {"machine": {"cores": os.cpu_count()}, "sizes": []}
    for tokens in args.tokens:
        work = args.work / f"{tokens}"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        corpus = work / "corpus.txt"
        generate_apart(tokens, corpus)
        shards = cut(corpus, args.shards, work)
        size = {"tokens": tokens, "shards": args.shards}
        size["one_process"] = run([*nnlm, "ngram", "train", *shards, "--order", "5", "-o",
                                   str(work / "one"),
                                   *(["--arpa", str(work / "one.arpa")] if args.arpa else [])])
        print(tokens, "one process", size["one_process"], flush=True)
        if lmplz:
            size["lmplz"] = run([str(lmplz), "-o", "5", "-S", "40%", "-T", str(work)],
                                stdin=corpus, stdout=work / "lmplz.arpa")
            print(tokens, "lmplz", size["lmplz"], flush=True)
        size["distributed"] = []
        runs = [(w, "stream") for w in args.workers] + [(w, "gather") for w in args.gather]
        for w, client in runs:
            out, model = work / f"w{w}-{client}.json", work / f"w{w}-{client}"
            arpa = work / f"w{w}.arpa" if args.arpa else None
            outer = run([sys.executable, "-c", CHILD, __file__, str(w), str(out), str(model),
                         str(arpa or ""), client, *shards])
            stats = json.loads(out.read_text())
            stats.update(workers=w, **outer, **compare_apart(model, work / "one"),
                         file_equal_to_one_process=same_file(model, work / "one"))
            if arpa:
                stats["arpa_equal_to_one_process"] = filecmp.cmp(arpa, work / "one.arpa",
                                                                 shallow=False)
                arpa.unlink()
            stats["vs_one_process"] = round(outer["seconds"] / size["one_process"]["seconds"], 2)
            if lmplz:
                stats["vs_lmplz"] = round(outer["seconds"] / size["lmplz"]["seconds"], 2)
            size["ngrams"] = stats["ngrams"]
            size["distributed"].append(stats)
            print(tokens, f"local:{w}", client, {k: stats[k] for k in (
                "seconds", "worker_peak_rss_gb", "client_peak_rss_gb", "same_ngrams",
                "largest_difference", "file_equal_to_one_process")},
                flush=True)
            shutil.rmtree(model, ignore_errors=True)
        result["sizes"].append(size)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(args.out, result)
    result["projection"] = project(result["sizes"], args.bandwidth)
    result["bench_peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                                        3)
    harness.write_record(args.out, result)
    print(json.dumps(result["projection"], indent=1))


if __name__ == "__main__":
    main()

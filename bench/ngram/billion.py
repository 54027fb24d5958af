"""KN5 at a billion tokens on one machine: nnlm in one process (within --memory), nnlm
on a local Dask cluster (the model file written from the workers' partitions) and
KenLM's lmplz, each with its time, peak memory and temporary disk, and
the models compared. Writes JSON.

    python bench/ngram/billion.py --corpus BIG.txt [--tokens 1000000000] [--shards 20] \\
        [--memory 4G] [--workers 2] [--lmplz PATH] [--work DIR] [--steps one cluster lmplz] \\
        [--same-as MODEL ...] \\
        [--out bench/results/billion.json]

Without --corpus, bench/ngram/synthetic.py writes one of --tokens tokens (NLTK_DATA must find
Brown). Commands run one at a time, each a whole process:

- ``nnlm ngram train CORPUS --order 5 --memory M --temp WORK/tmp-one`` (past what fits
  in M, the cluster's passes a partition at a time with the pieces in WORK/tmp-one);
- ``nnlm ngram train SHARDS --cluster local:W``, through bench/ngram/distributed.py's child
  (which reads each worker's peak memory), the model written from the partitions;
- ``lmplz -o 5 -S 40% -T WORK/tmp-lmplz`` (its docs' settings), its ARPA file to disk.

Temporary disk is the peak growth of the filesystem's used bytes while a command runs,
less its outputs by then, polled every second (lmplz unlinks its temporary files as soon
as it opens them, so its folder looks empty).
The models are compared: nnlm's two files byte for byte (the header's binding aside); and
lmplz's ARPA against nnlm's model entry by entry on a sample (every --every-th line of
each order): the n-gram counts of every order, and each sampled n-gram's log10
probability through ``nnlm.kenlm`` (the n-gram scored in its own context: the stored
probability where the n-gram is stored). Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

HERE = Path(__file__).resolve().parent


def folder_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def disk_used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def run_polled(command: list[str], temp: Path | None, stdin: Path | None = None,
          stdout: Path | None = None, outputs: tuple[Path, ...] = ()) -> dict:
    """:func:`scale.run` with its temporary disk polled beside it: the peak of the
    filesystem's used bytes above where they stood, less what ``outputs`` hold by then
    (lmplz unlinks its temporary files as it opens them, so the folder ``temp`` looks
    empty; the filesystem's count sees them). Nothing else should write to that
    filesystem meanwhile."""
    from scale import run

    peak = [0]
    done = threading.Event()
    base = disk_used(temp.parent) if temp is not None else 0

    def poll():
        while not done.wait(1.0):
            grown = disk_used(temp.parent) - base
            held = sum(folder_bytes(p) if p.is_dir() else p.stat().st_size
                       for p in outputs if p.exists())
            peak[0] = max(peak[0], grown - held)

    if temp is not None:
        temp.mkdir(parents=True, exist_ok=True)
        threading.Thread(target=poll, daemon=True).start()
    try:
        result = run(command, stdin, stdout)
    finally:
        done.set()
    if temp is not None:
        result["temp_disk_peak_gb"] = round(peak[0] / 1e9, 2)
        shutil.rmtree(temp, ignore_errors=True)
    return result


def compare_arpa(model_dir: str, arpa: str, every: int) -> dict:
    """Counts per order, and every ``every``-th n-gram of each order of ``arpa`` scored
    through ``nnlm.kenlm`` on ``model_dir``: the largest difference in log10 p and how
    many matched at their full length."""
    import nnlm.kenlm as kenlm
    from nnlm import load_model

    lm = kenlm.Model(model_dir)
    counts, worst, checked, full, k = {}, 0.0, 0, 0, 0
    with open(arpa, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if line.startswith("ngram "):
                a, b = line[6:].split("=")
                counts[int(a)] = int(b)
            elif line.startswith("\\") and line.rstrip().endswith("-grams:"):
                k = int(line[1:].split("-")[0])
            elif k and i % every == 0 and "\t" in line:
                fields = line.rstrip("\n").split("\t")
                words = fields[1].split(" ")
                if words[-1] == "<s>":
                    continue
                bos, eos = words[0] == "<s>", words[-1] == "</s>"
                text = " ".join(words[int(bos):len(words) - int(eos)])
                prob, length, _ = list(lm.full_scores(text, bos=bos, eos=eos))[-1]
                worst = max(worst, abs(prob - float(fields[0])))
                checked += 1
                full += length == len(words)
    ours = dict(enumerate(load_model(model_dir).num_ngrams(), start=1))
    return {"arpa_counts": counts, "nnlm_counts": ours, "same_counts": ours == counts,
            "sampled": checked, "matched_at_full_length": full,
            "largest_log10_difference": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--tokens", type=int, default=1_000_000_000)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--memory", default="4G", help="nnlm's --memory (default: 4G)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=0,
                        help="the cluster's --partitions (default: one a worker)")
    parser.add_argument("--lmplz", type=Path)
    parser.add_argument("--every", type=int, default=997)
    parser.add_argument("--steps", nargs="+", default=["one", "cluster", "lmplz"],
                        choices=["one", "cluster", "lmplz", "compare", "summary"],
                        help="what to run (summary: nothing, the JSON's summary again)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/nnlm-billion"))
    parser.add_argument("--same-as", type=Path, nargs="*", default=[], metavar="MODEL",
                        help="model directories the one process's file is compared with "
                        "(an earlier run's; the cluster's in --work always is)")
    parser.add_argument("--out", type=Path, default=Path("bench/results/billion.json"))
    parser.add_argument("--compare-child", nargs=3, metavar=("MODEL", "ARPA", "EVERY"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.compare_child:
        model, arpa, every = args.compare_child
        print(json.dumps(compare_arpa(model, arpa, int(every))))
        return
    sys.path.insert(0, str(HERE))
    from distributed import CHILD, cut, same_file
    from scale import cpu_name, generate_apart

    args.work.mkdir(parents=True, exist_ok=True)
    corpus = args.corpus or args.work / "corpus.txt"
    if not corpus.exists():
        generate_apart(args.tokens, corpus)
    result = json.loads(args.out.read_text()) if args.out.exists() else {}
    result.update(cpu=cpu_name(), cores=os.cpu_count(), corpus=str(corpus),
                  corpus_gb=round(corpus.stat().st_size / 1e9, 2))

    def save():
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(args.out, result)

    nnlm = [sys.executable, "-m", "nnlm"]
    one, dist, arpa = args.work / "one", args.work / "cluster", args.work / "lmplz.arpa"
    if "one" in args.steps:
        shutil.rmtree(one, ignore_errors=True)
        result["one_process"] = run_polled(
            [*nnlm, "ngram", "train", str(corpus), "--order", "5", "-o", str(one),
             "--memory", args.memory, "--temp", str(args.work / "tmp-one")],
            args.work / "tmp-one", outputs=(one,))
        result["one_process"]["memory_option"] = args.memory
        for other in [dist, *args.same_as]:  # the same model, however it was estimated
            if other.exists():
                result["one_process"].setdefault("file_equal_to", {})[str(other)] = \
                    same_file(one, other)
        print("one process", result["one_process"], flush=True)
        save()
    if "cluster" in args.steps:
        shard_dir = args.work / "shards"
        shard_dir.mkdir(exist_ok=True)
        shards = sorted(str(p) for p in shard_dir.glob("shard*.txt"))
        if len(shards) != args.shards:
            shutil.rmtree(shard_dir)
            shard_dir.mkdir()
            shards = cut(corpus, args.shards, shard_dir)
        shutil.rmtree(dist, ignore_errors=True)
        stats_path = args.work / "cluster.json"
        outer = run_polled([sys.executable, "-c", CHILD, str(HERE / "distributed.py"),
                       str(args.workers), str(stats_path), str(dist), "",
                       f"stream:{args.partitions}", *shards],
                      args.work / "tmp-cluster", outputs=(dist,))
        outer["temp_disk_note"] = ("the filesystem's growth: Dask's spill, in its default "
                                   "local directory on the same filesystem, and the "
                                   "writer's spilled pointers")
        stats = json.loads(stats_path.read_text())
        result["cluster"] = {"workers": args.workers, "shards": args.shards,
                             "partitions": args.partitions or args.workers, **outer, **stats}
        if one.exists():
            result["cluster"]["file_equal_to_one_process"] = same_file(dist, one)
        print("cluster", {k: result["cluster"][k] for k in (
            "seconds", "worker_peak_rss_gb", "client_peak_rss_gb")}, flush=True)
        save()
    if "lmplz" in args.steps:
        lmplz = args.lmplz or Path(shutil.which("lmplz") or "lmplz")
        result["lmplz"] = run_polled([str(lmplz), "-o", "5", "-S", "40%", "-T",
                                 str(args.work / "tmp-lmplz")], args.work / "tmp-lmplz",
                                stdin=corpus, stdout=arpa, outputs=(arpa,))
        result["lmplz"]["arpa_gb"] = round(arpa.stat().st_size / 1e9, 2)
        print("lmplz", result["lmplz"], flush=True)
        save()
    if "compare" in args.steps or "lmplz" in args.steps:
        model = one if one.exists() else dist
        done = subprocess.run([sys.executable, __file__, "--compare-child", str(model),
                               str(arpa), str(args.every)], capture_output=True, text=True,
                              check=True)
        result["lmplz_against_nnlm"] = {"model": model.name,
                                        **json.loads(done.stdout.splitlines()[-1])}
        print("compared", result["lmplz_against_nnlm"], flush=True)
        save()
    if "cluster" in result:  # bench/ngram/distributed.py's shape, for its --combine
        size = {"tokens": args.tokens, "shards": args.shards,
                "distributed": [{**result["cluster"], "client": "stream"}]}
        size["ngrams"] = sum(result.get("lmplz_against_nnlm", {}).get("nnlm_counts", {})
                             .values()) or None
        size.update({k: result[k] for k in ("one_process", "lmplz") if k in result})
        result["sizes"] = [size]
        result["machine"] = {"cores": os.cpu_count()}
    for name in ("one_process", "cluster"):
        if name in result and "lmplz" in result:
            result[name]["wall_vs_lmplz"] = round(result[name]["seconds"]
                                                  / result["lmplz"]["seconds"], 2)
            result[name]["memory_vs_lmplz"] = round(result[name]["peak_rss_gb"]
                                                    / result["lmplz"]["peak_rss_gb"], 2)
    save()


if __name__ == "__main__":
    main()

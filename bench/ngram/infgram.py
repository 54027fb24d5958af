"""nnlm's suffix-array index beside infini-gram's indexer and engine, on the same token ids.

    python bench/ngram/infgram.py --text data/brown/train.txt --queries data/brown/test.txt \\
        --out bench/results/infgram_brown.json
    python bench/ngram/infgram.py --text big.txt --queries data/brown/test.txt \\
        --out bench/results/infgram_50m.json        # big.txt: bench/ngram/synthetic.py's

1. Build: ``nnlm index build`` (text to index, libdivsufsort's sort), its sort and
   table alone (from the token ids), then infini-gram's own indexer
   (``rust_indexing make-part / merge / concat``, driven as its indexing.py drives it,
   on all CPUs within --memory) over nnlm's tokenized files, shard by shard: the same
   token ids. Wall time
   and peak memory (the sum over the process tree, sampled every 20 ms) of each. The two
   tables must be byte for byte the same.
2. Size: bytes a token of each index (infini-gram's tokenized, table and offset files;
   nnlm's the same files plus its header and vocabulary).
3. Queries, in alternating rounds (the best of --rounds): --count n-grams of 1 to 10
   tokens and --next contexts of 1 to 5 tokens drawn from the query text (those with at
   most 100,000 occurrences: the engine's exact ``ntd`` aborts on millions), counted one
   by one (nnlm's ``count([q])``, the engine's ``count``) and in one batch (nnlm); what
   follows each context, exactly (nnlm's ``next``, the engine's ``ntd`` with
   ``max_support`` at that bound, and with its default 1000, which samples). Every
   answer of nnlm's is checked against the engine's. nnlm's one-by-one and batched
   paths are also timed in rounds of their own, without the engine's calls in between
   (their system calls slow the next few batches of the process), for their ratio.

Ratios are what to compare on a noisy machine. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

HACK = 100000  # infini-gram's overlap between parts, in bytes (its indexing.py)


def run_measured(commands: list[list[str]]) -> tuple[float, int]:
    """Wall seconds and peak memory (bytes; the process trees' summed RSS) of commands
    run at once."""
    start = time.perf_counter()
    procs = [subprocess.Popen(c, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for c in commands]
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            total = 0
            for p in procs:
                try:
                    tree = [psutil.Process(p.pid)] + psutil.Process(p.pid).children(True)
                    total += sum(q.memory_info().rss for q in tree)
                except psutil.Error:
                    pass
            peak = max(peak, total)
            time.sleep(0.02)

    watcher = threading.Thread(target=sample)
    watcher.start()
    errors = [p.communicate()[1] for p in procs]
    done.set()
    watcher.join()
    for p, err in zip(procs, errors):
        if p.returncode:
            raise SystemExit(f"{p.args[:3]}: failed: {err.decode()[-400:]}")
    return time.perf_counter() - start, peak


def build_nnlm(text: Path, out: Path, memory: str) -> dict:
    seconds, peak = run_measured([[sys.executable, "-m", "nnlm", "index", "build", str(text),
                                   "-o", str(out), "--memory", memory]])
    return {"seconds": seconds, "peak_bytes": peak}


SORT_ONLY = r"""
import sys, numpy as np
from pathlib import Path
from nnlm.index.build import _write_one

d = Path(sys.argv[1])
seps = np.fromfile(d / "offset.0", "<u8").astype(np.int64) // 2
_write_one((d, 0, seps, 2))
"""


def sort_nnlm(nnlm_index: Path, out: Path) -> dict:
    """nnlm's suffix sort and table alone, over its tokenized.0: the step infini-gram's
    indexer is measured on (both start from token ids)."""
    out.mkdir()
    shutil.copyfile(nnlm_index / "tokenized.0", out / "tokenized.0")
    shutil.copyfile(nnlm_index / "offset.0", out / "offset.0")
    seconds, peak = run_measured([[sys.executable, "-c", SORT_ONLY, str(out)]])
    shutil.rmtree(out)
    return {"seconds": seconds, "peak_bytes": peak}


def build_infini_gram(nnlm_index: Path, out: Path, memory_gb: int, cpus: int) -> dict:
    """infini-gram's build_sa steps over each of nnlm's shards (tokenized.i: the same
    ids), one shard after another as its indexer does them."""
    out.mkdir()
    seconds = peak = 0
    shards = sorted(nnlm_index.glob("tokenized.*"), key=lambda p: int(p.suffix[1:]))
    for shard in shards:
        number = shard.suffix[1:]
        for name in (f"tokenized.{number}", f"offset.{number}"):
            shutil.copyfile(nnlm_index / name, out / name)
        s, p = _infini_gram_shard(out, number, memory_gb, cpus)
        seconds, peak = seconds + s, max(peak, p)
    return {"seconds": seconds, "peak_bytes": peak, "shards": len(shards)}


def _infini_gram_shard(out: Path, number: str, memory_gb: int, cpus: int):
    import infini_gram

    tool = Path(infini_gram.__file__).parent / "rust_indexing"
    ds = out / f"tokenized.{number}"
    size = ds.stat().st_size
    ratio = int(np.ceil(np.log2(size) / 8))
    batches = 1
    while batches * (memory_gb * 1024**3 // 8) < size:
        batches *= 2
    jobs = batches * cpus
    step = size // jobs + (size // jobs) % 2
    parts, merged = out / "parts", out / "merged"
    parts.mkdir()
    merged.mkdir()
    common = ["--ratio", str(ratio), "--token-width", "2"]
    seconds = peak = 0
    for b in range(0, jobs, cpus):
        cmds = [[str(tool), "make-part", "--data-file", str(ds), "--parts-dir", str(parts),
                 "--start-byte", str(i * step), "--end-byte",
                 str(min((i + 1) * step + HACK, size)), *common]
                for i in range(b, min(b + cpus, jobs))]
        s, p = run_measured(cmds)
        seconds, peak = seconds + s, max(peak, p)
    for cmd in ([str(tool), "merge", "--data-file", str(ds), "--parts-dir", str(parts),
                 "--merged-dir", str(merged), "--num-threads", str(cpus), "--hacksize",
                 str(HACK), *common],
                [str(tool), "concat", "--data-file", str(ds), "--merged-dir", str(merged),
                 "--merged-file", str(out / f"table.{number}"), "--num-threads", str(cpus),
                 *common]):
        s, p = run_measured([cmd])
        seconds, peak = seconds + s, max(peak, p)
    shutil.rmtree(parts)
    shutil.rmtree(merged)
    return seconds, peak


def draw_queries(index, text: Path, count: int, low: int, high: int, seed: int):
    from nnlm.text.corpus import read_stream

    stream = read_stream(text, index.vocab)
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        n = int(rng.integers(low, high + 1))
        line = int(rng.integers(0, stream.num_lines))
        a, b = int(stream.offsets[line]), int(stream.offsets[line + 1]) - 1  # no </s>
        if b - a >= n:
            i = int(rng.integers(a, b - n + 1))
            out.append([int(t) for t in stream.ids[i:i + n]])
    return out


def best(fn, rounds: int) -> float:
    return min(fn() for _ in range(rounds))


EXACT_LIMIT = 100_000  # the engine's exact ntd aborts (a thread it cannot create) on
# contexts with millions of occurrences ("the" at 50M tokens): the exact comparisons take
# the contexts under this count, with max_support at it


def queries(index, engine, counts, contexts, rounds: int) -> dict:
    got = index.count(counts)
    assert [engine.count(q)["count"] for q in counts] == got.tolist(), "counts differ"
    contexts = [q for q, c in zip(contexts, index.count(contexts)) if c <= EXACT_LIMIT]
    for q, nxt in zip(contexts, index.next(contexts)):
        theirs = engine.ntd(q, max_support=EXACT_LIMIT)["result_by_token_id"]
        assert {t: v["cont_cnt"] for t, v in theirs.items()} == \
            dict(zip(nxt.tokens.tolist(), nxt.counts.tolist())), "next-token counts differ"
    cases = {
        "count, nnlm one by one": lambda: [index.count([q]) for q in counts],
        "count, engine one by one": lambda: [engine.count(q) for q in counts],
        "count, nnlm batched": lambda: index.count(counts),
        "next, nnlm one by one": lambda: [index.next([q]) for q in contexts],
        "next, engine exact (ntd)": lambda: [engine.ntd(q, max_support=EXACT_LIMIT)
                                             for q in contexts],
        "next, engine sampled (ntd, max_support 1000)": lambda: [engine.ntd(q)
                                                                for q in contexts],
        "next, nnlm batched": lambda: index.next(contexts),
    }
    out = {}
    # nnlm's two paths in rounds of their own: the engine's calls (0.3 ms of system time
    # a count) leave the next few batches of this process up to 2x slower
    own = {name: fn for name, fn in cases.items() if "nnlm" in name}
    for group, suffix in ((own, " (nnlm's own rounds)"), (cases, "")):
        times = {name: [] for name in group}
        for _ in range(rounds):  # alternating: each round runs every case once
            for name, fn in group.items():
                times[name].append(harness.timed(fn)[1])
        for name, ts in times.items():
            n = len(counts) if name.startswith("count") else len(contexts)
            out[name + suffix] = {"microseconds_a_query": min(ts) / n * 1e6}
    for kind in ("count", "next"):
        out[f"{kind}, batched over one by one (nnlm's own rounds)"] = (
            out[f"{kind}, nnlm one by one (nnlm's own rounds)"]["microseconds_a_query"]
            / out[f"{kind}, nnlm batched (nnlm's own rounds)"]["microseconds_a_query"])
    out["contexts"] = len(contexts)
    return out


def _same(a: Path, b: Path) -> bool:
    """Whether two files hold the same bytes (compared a block at a time)."""
    if a.stat().st_size != b.stat().st_size:
        return False
    with open(a, "rb") as f, open(b, "rb") as g:
        while True:
            x, y = f.read(1 << 24), g.read(1 << 24)
            if x != y:
                return False
            if not x:
                return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", type=Path, required=True)
    ap.add_argument("--queries", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--memory", default="8G")
    ap.add_argument("--work", type=Path, default=None, help="folder for the indexes")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--next", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--index", type=Path,
                    help="only the queries, on this index already built by nnlm (the engine "
                    "reads the same files: the tables are infini-gram's byte for byte); the "
                    "build and size entries already in --out are kept")
    ap.add_argument("--no-sort-alone", action="store_true",
                    help="skip timing nnlm's sort alone (a second sort: minutes at 1B)")
    args = ap.parse_args()
    from infini_gram.engine import InfiniGramEngine

    from nnlm.index import Index

    if args.index:
        result = json.loads(args.out.read_text()) if args.out.exists() else {}
        index = Index.open(args.index)
        engine = InfiniGramEngine(index_dir=str(args.index), eos_token_id=2,
                                  vocab_size=65535)
        counts = draw_queries(index, args.queries, args.count, 1, 10, 0)
        contexts = draw_queries(index, args.queries, args.next, 1, 5, 1)
        result["queries"] = queries(index, engine, counts, contexts, args.rounds)
        result["queries_on"] = {"cpus": os.cpu_count(), "shards": len(index.shards)}
        harness.write_record(args.out, result)
        print(json.dumps(result["queries"], indent=1))
        return
    work = Path(tempfile.mkdtemp(prefix="bench-infgram-", dir=args.work))
    try:
        result = {"machine": platform.processor() or platform.machine(),
                  "cpus": os.cpu_count(), "text": str(args.text)}
        result["build"] = {"nnlm": build_nnlm(args.text, work / "nnlm", args.memory)}
        if not args.no_sort_alone:
            result["build"]["nnlm, suffix sort alone"] = sort_nnlm(work / "nnlm",
                                                                   work / "sort")
        memory_gb = max(1, int(args.memory.rstrip("G")))
        result["build"]["infini-gram"] = build_infini_gram(work / "nnlm", work / "ig",
                                                           memory_gb, os.cpu_count())
        result["tables_identical"] = all(
            _same(f, work / "ig" / f.name) for f in (work / "nnlm").glob("table.*"))
        index = Index.open(work / "nnlm")
        result["tokens"] = index.tokens
        ig_bytes = sum(f.stat().st_size for f in (work / "ig").iterdir())
        result["bytes_a_token"] = {
            "nnlm": sum(f.stat().st_size for f in (work / "nnlm").iterdir()) / index.tokens,
            "infini-gram": ig_bytes / index.tokens}
        engine = InfiniGramEngine(index_dir=str(work / "ig"), eos_token_id=2,
                                  vocab_size=65535)
        counts = draw_queries(index, args.queries, args.count, 1, 10, 0)
        contexts = draw_queries(index, args.queries, args.next, 1, 5, 1)
        result["queries"] = queries(index, engine, counts, contexts, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

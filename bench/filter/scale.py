"""`nnlm filter score` over a corpus of a billion words on a local Dask cluster, as JSON,
with the figures a projection to a Common Crawl dump needs.

    python bench/filter/scale.py --text corpus.txt --model en.arpa.bin --tokenizer en.sp.model
        [--words 1000000000] [--files 64] [--lines 8] [--cluster local:2]
        [--work /tmp/nnlm-filter-scale] [--out bench/results/filter_scale.json]

The corpus: --text's lines (e.g. ``bench/ngram/synthetic.py``'s text with Brown's
statistics), --lines to a document, as JSON Lines (``{"id", "text"}``) in --files files,
read again from its start (each pass shifted by a line, so that documents differ) until
--words words; made once into --work and kept there. Then one timed run of

    nnlm filter score WORK/in/*.jsonl -m MODEL --tokenizer SP --cluster SPEC -o WORK/out --json

(every record scored, written with its perplexity and bucket; ``--restart``, so a second
call times it again), its wall time, the documents and tokens it says it scored, and the
peak resident memory of its largest process. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def make_corpus(text: Path, out: Path, words: int, files: int, lines: int) -> dict:
    """The JSON Lines files (module docstring); what they hold."""
    out.mkdir(parents=True, exist_ok=True)
    handles = [open(out / f"part-{i:03d}.jsonl", "w", encoding="utf-8") for i in range(files)]
    made = {"documents": 0, "words": 0, "bytes": 0}
    shift = 0
    try:
        while made["words"] < words:
            with open(text, encoding="utf-8") as f:
                for _ in range(shift):
                    next(f, None)
                doc: list[str] = []
                for line in f:
                    doc.append(line.rstrip("\n"))
                    if len(doc) < lines:
                        continue
                    body = "\n".join(doc)
                    record = json.dumps({"id": made["documents"], "text": body},
                                        ensure_ascii=False) + "\n"
                    handles[made["documents"] % files].write(record)
                    made["documents"] += 1
                    made["words"] += len(body.split())
                    made["bytes"] += len(record.encode("utf-8"))
                    doc = []
                    if made["words"] >= words:
                        break
            shift += 1
    finally:
        for h in handles:
            h.close()
    (out / "corpus.json").write_text(json.dumps(made) + "\n")
    return made


def timed_run(argv: list[str]) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes of the largest process, stdout)."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"nnlm filter score failed: {err[-2000:]}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # its tree's largest
    return seconds, peak, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text", type=Path, required=True)
    p.add_argument("--model", type=Path, required=True)
    p.add_argument("--tokenizer", type=Path, required=True)
    p.add_argument("--words", type=int, default=1_000_000_000)
    p.add_argument("--files", type=int, default=64)
    p.add_argument("--lines", type=int, default=8)
    p.add_argument("--cluster", default="local:2")
    p.add_argument("--work", type=Path, default=Path("/tmp/nnlm-filter-scale"))
    p.add_argument("--out", type=Path, default=Path("bench/results/filter_scale.json"))
    args = p.parse_args()
    corpus = args.work / "in"
    if (corpus / "corpus.json").is_file():
        made = json.loads((corpus / "corpus.json").read_text())
    else:
        t = time.perf_counter()
        made = make_corpus(args.text, corpus, args.words, args.files, args.lines)
        print(f"corpus: {made} in {time.perf_counter() - t:.0f} s", flush=True)
    inputs = sorted(str(x) for x in corpus.glob("part-*.jsonl"))
    seconds, peak, out = timed_run(
        [sys.executable, "-m", "nnlm", "filter", "score", *inputs, "-m", str(args.model),
         "--tokenizer", str(args.tokenizer), "--cluster", args.cluster, "-o",
         str(args.work / "out"), "--restart", "--json", "--log-every", "60"])
    summary = json.loads(out)
    workers = int(args.cluster.split(":")[1]) if args.cluster.startswith("local:") else None
    tokens = summary.get("tokens")
    results = {"corpus": {**made, "files": len(inputs), "lines_a_document": args.lines},
               "model_bytes": args.model.stat().st_size, "cluster": args.cluster,
               "seconds": seconds, "peak_rss_bytes_largest_process": peak,
               "summary": summary, "machine": harness.machine(),
               "words_per_second": made["words"] / seconds,
               "tokens_per_second": tokens / seconds if tokens else None,
               "tokens_per_second_a_worker": tokens / seconds / workers
               if tokens and workers else None}
    harness.write_record(args.out, results, indent=2)
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=1))


if __name__ == "__main__":
    main()

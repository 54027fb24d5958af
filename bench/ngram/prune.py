"""Size against perplexity for pruned KN5 on Brown: entropy pruning (Stolcke 1998) at
several thresholds and count pruning (lmplz-style thresholds), one run, JSON out.

    python bench/ngram/prune.py --data data/brown --out bench/results/prune.json

Never run by the tests.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from nnlm import Vocabulary, count_words, evaluate, read_stream
from nnlm.ngram import KneserNey
from nnlm.ngram.estimate.prune import prune_entropy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("bench/results/prune.json"))
    args = ap.parse_args()
    vocab = Vocabulary.from_counts(count_words(args.data / "train.txt"))
    train = read_stream(args.data / "train.txt", vocab)
    test = read_stream(args.data / "test.txt", vocab)
    t = time.perf_counter()
    full = KneserNey(vocab, 5).fit(train)
    rows = [{"method": "none", "setting": "-", "ngrams": sum(full.num_ngrams()),
             "test_ppl": evaluate(full, test).perplexity,
             "seconds": time.perf_counter() - t}]
    for theta in (1e-9, 1e-8, 1e-7, 1e-6, 1e-5):
        t = time.perf_counter()
        pruned = prune_entropy(full, theta)
        rows.append({"method": "entropy", "setting": f"{theta:g}",
                     "ngrams": sum(pruned.num_ngrams()), "seconds": time.perf_counter() - t,
                     "test_ppl": evaluate(pruned, test).perplexity})
    for thresholds in ([0, 0, 1], [0, 1, 1], [0, 1, 2]):
        t = time.perf_counter()
        pruned = KneserNey(vocab, 5).fit(train, prune_counts=thresholds)
        rows.append({"method": "counts", "setting": " ".join(map(str, thresholds)),
                     "ngrams": sum(pruned.num_ngrams()), "seconds": time.perf_counter() - t,
                     "test_ppl": evaluate(pruned, test).perplexity})
    for r in rows:
        r["size_ratio"] = r["ngrams"] / rows[0]["ngrams"]
        print(f"{r['method']:8} {r['setting']:8} {r['ngrams']:>10,} n-grams "
              f"({r['size_ratio']:6.1%})  test ppl {r['test_ppl']:8.2f}  {r['seconds']:.1f} s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, {"corpus": "Brown v1", "order": 5, "rows": rows})


if __name__ == "__main__":
    main()

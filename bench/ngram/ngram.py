"""Benchmark of the count-based models on Brown protocol v1: quality and speed, as JSON.

    python bench/ngram/ngram.py --data data/brown --out bench/results/ngram.json [--quick]

Reports test/valid perplexity for KN 3/4/5, deleted interpolation and the class-based
models (alone and interpolated with KN5 by EM on valid), the wall time of
`nnlm ngram train` for the KN 5-gram (a fresh process: start, import, read, fit, save),
and scoring throughput. With `--lmplz PATH` it also times KenLM's lmplz on the same file
in the same run and reports the ratio. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from nnlm import Vocabulary, count_words, evaluate, read_stream
from nnlm.interpolation import fit_bucket_weights
from nnlm.lm import evaluation_from_logprobs
from nnlm.ngram import ClassNgram, DeletedInterpolation, KneserNey, exchange_clustering

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

KENLM_REFERENCE = {  # lmplz (modified KN, defaults) on the same files, measured once
    "kn3": {"test": 190.0, "valid": 199.9}, "kn4": {"test": 189.1, "valid": 199.1},
    "kn5": {"test": 188.7, "valid": 198.8}, "lmplz_kn5_seconds": 2.0,
    "query_tokens_per_second": 3e6,
}


def em_two(a: np.ndarray, b: np.ndarray, iterations: int = 50) -> float:
    """Weight of model a in the mixture of a and b that maximizes the likelihood (EM)."""
    weights, _ = fit_bucket_weights(np.array([[0.5, 0.5]]), np.exp(np.stack([a, b], axis=1)),
                                    np.zeros(len(a), np.int64), iterations)
    return float(weights[0, 0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/ngram.json"))
    parser.add_argument("--quick", action="store_true", help="classes 150 and 500 only")
    parser.add_argument("--lmplz", type=Path, help="path to KenLM's lmplz, to time it here")
    args = parser.parse_args()

    train_path = args.data / "train.txt"
    vocab = Vocabulary.from_counts(count_words(train_path))
    train = read_stream(train_path, vocab)
    valid = read_stream(args.data / "valid.txt", vocab)
    test = read_stream(args.data / "test.txt", vocab)
    results: dict = {"python": platform.python_version(), "machine": platform.machine(),
                     "test_tokens": len(test), "vocab": len(vocab),
                     "kenlm_reference": KENLM_REFERENCE, "models": {}}

    def record(name, model, seconds, **extra):
        valid_ppl = evaluate(model, valid).perplexity  # also builds lazy indexes
        lp_test, score_s = harness.timed(lambda: model.logprobs(test))
        results["models"][name] = {
            "test": evaluation_from_logprobs(test, lp_test).perplexity,
            "valid": valid_ppl,
            "fit_seconds": seconds, "score_tokens_per_second": len(test) / score_s, **extra}
        print(name, json.dumps(results["models"][name]), flush=True)
        return lp_test

    logp = {}
    for n in (3, 4, 5):
        model, s = harness.timed(lambda n=n: KneserNey(vocab, n).fit(train))
        logp[f"kn{n}"] = record(f"kn{n}", model, s)
        if n == 5:
            kn5, kn5_valid = model, model.logprobs(valid)
    model, s = harness.timed(lambda: DeletedInterpolation(vocab, 3).fit(train, valid))
    logp["delint3"] = record("delint3", model, s)

    # scoring throughput on a larger stream (test repeated), KN5
    from nnlm.text.stream import Stream
    big = Stream.concatenate([test] * 6)
    _, s = harness.timed(lambda: kn5.logprobs(big))
    results["kn5_score_tokens_per_second"] = len(big) / s

    # the KN5 training command in a fresh process (start and imports included)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "nnlm", "ngram", "train", str(train_path), "--order", "5",
               "-o", f"{tmp}/kn5"]
        _, s = harness.timed(lambda: subprocess.run(cmd, check=True, capture_output=True))
        results["kn5_train_command_seconds"] = s
        if args.lmplz:
            # lmplz refuses a literal <unk> in its input: rename it (same n-gram counts)
            for part in ("train", "test"):
                text = (args.data / f"{part}.txt").read_text().replace("<unk>", "UNKWORD")
                Path(tmp, f"{part}.txt").write_text(text)
            lm = [str(args.lmplz), "-o", "5", "--text", f"{tmp}/train.txt", "--arpa",
                  f"{tmp}/lmplz.arpa"]
            _, t = harness.timed(lambda: subprocess.run(lm, check=True, capture_output=True))
            results["lmplz_kn5_seconds_same_run"] = t
            results["kn5_train_over_lmplz"] = s / t
            try:
                import kenlm

                lm_model = kenlm.Model(f"{tmp}/lmplz.arpa")
                scores = [x[0] for line in Path(tmp, "test.txt").read_text().splitlines()
                          for x in lm_model.full_scores(line)]
                results["lmplz_kn5_test_perplexity_same_run"] = 10 ** (-sum(scores) / len(scores))
            except ImportError:
                pass
    print("kn5 train command", results["kn5_train_command_seconds"], flush=True)

    classes = [150, 500] if args.quick else [150, 200, 500, 1000, 2000]
    for c in classes:
        word_class, s_cluster = harness.timed(lambda c=c: exchange_clustering(train, vocab, c))
        orders = (3, 4, 5) if c == 500 else (3,)
        for n in orders:
            model, s = harness.timed(lambda n=n, c=c, wc=word_class:
                             ClassNgram(vocab, n, c).fit(train, word_class=wc))
            name = f"class{c}_n{n}"
            lp = record(name, model, s + s_cluster, cluster_seconds=s_cluster)
            lam = em_two(model.logprobs(valid), kn5_valid)
            mixed = np.logaddexp(np.log(lam) + lp, np.log1p(-lam) + logp["kn5"])
            results["models"][name]["mixed_with_kn5"] = {
                "weight": lam, "test": evaluation_from_logprobs(test, mixed).perplexity}
            print(name, "mixed with kn5", results["models"][name]["mixed_with_kn5"], flush=True)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, results, indent=2)


if __name__ == "__main__":
    main()

"""nnlm.nltk against NLTK's nltk.lm on Brown: Kneser-Ney of order 3 fitted and scored,
time and peak memory, each in a fresh process; generate's time.

    python bench/ngram/nltk_lm.py --data data/brown --out bench/results/nltk_lm.json

Each side fits ``KneserNeyInterpolated(3)`` on the training text through its own
``padded_everygram_pipeline`` and computes the perplexity of the test text's padded
trigrams. NLTK's Kneser-Ney rescans every context of the order above for each word it
scores, so it scores the first ``--sample`` trigrams and its time for the whole text is
that time scaled by the text's length (said so in the JSON); nnlm scores the whole text,
and the sample too, whose perplexity must equal NLTK's to the bit. ``generate(20)`` is
timed on nnlm's model after a first call (which builds its tables), median of
``--rounds``. Peak memory is each process's VmHWM, and the model's is that peak above
the resident memory once the texts are read (the same lists on both sides). Takes a few
minutes (NLTK's fit and its sample). Never run by the tests.

``--big TEXT`` adds nnlm's side alone on a large text (NLTK's counter holds about 512
bytes a distinct n-gram): ``KneserNeyInterpolated(order)`` fitted through
``padded_everygram_pipeline(order, TextFile(TEXT))``, which reads the file twice and
never holds it, in a fresh process; its tokens, distinct n-grams, time and peak memory.
bench/ngram/synthetic.py makes such a text (``--seed-text data/brown/train.txt --tokens
100000000``: Brown's trigram walk, its rare words drawn from a Zipf law, about 12 M
distinct trigrams).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def sentences(path: Path) -> list[list[str]]:
    return [line.split() for line in path.read_text(encoding="utf-8").splitlines()
            if line.split()]


def side(name: str, data: Path, order: int, sample: int, rounds: int) -> dict:
    """One side's numbers, in this (fresh) process."""
    if name == "nltk":
        from nltk.lm import KneserNeyInterpolated
        from nltk.lm.preprocessing import padded_everygram_pipeline
    else:
        from nnlm.nltk import KneserNeyInterpolated
        from nnlm.nltk.preprocessing import padded_everygram_pipeline
    from nnlm.nltk.preprocessing import everygrams, pad_both_ends

    train, test = sentences(data / "train.txt"), sentences(data / "test.txt")
    ngrams = [g for s in test for g in everygrams(list(pad_both_ends(s, n=order)),
                                                  min_len=order, max_len=order)]
    loaded = rss_bytes()  # the texts in memory, both sides alike: the model is above it
    model = KneserNeyInterpolated(order)
    text, vocab = padded_everygram_pipeline(order, train)
    _, fit_seconds = harness.timed(model.fit, text, vocab)
    out = {"fit_seconds": fit_seconds, "test_ngrams": len(ngrams), "sample": sample}
    if name == "nnlm":  # the whole text first: its time includes building the tables
        ppl, seconds = harness.timed(model.perplexity, ngrams)
        out.update(perplexity=ppl, score_seconds=seconds)
    ppl, seconds = harness.timed(model.perplexity, ngrams[:sample])
    out.update(sample_perplexity=ppl, sample_seconds=seconds)
    if name == "nnlm":
        model.generate(1, random_seed=0)  # the first call fills generate's tables
        times = [harness.timed(model.generate, 20, random_seed=seed)[1]
                 for seed in range(rounds)]
        out["generate_20_seconds"] = statistics.median(times)
    else:  # its whole text, by the sample's time a trigram
        out["score_seconds_extrapolated"] = seconds * len(ngrams) / sample
    out["peak_rss_bytes"] = harness.peak_rss_bytes()
    out["model_peak_bytes"] = out["peak_rss_bytes"] - loaded
    return out


def big(text: Path, order: int) -> dict:
    """nnlm's fit on a text read from its file, in this (fresh) process."""
    from nnlm.nltk import KneserNeyInterpolated
    from nnlm.nltk.preprocessing import TextFile, padded_everygram_pipeline

    model = KneserNeyInterpolated(order)
    _, seconds = harness.timed(model.fit, *padded_everygram_pipeline(order, TextFile(text)))
    tables = model.counts._tables
    distinct = {str(k): int(len(tables.counted_keys()[k][0])) for k in tables.orders()}
    _, score_seconds = harness.timed(model.score, "the", ["of", "all"])
    return {"text": str(text), "order": order, "padded_tokens": tables.total(1),
            "distinct_ngrams": distinct, "fit_seconds": seconds,
            "first_score_seconds": score_seconds, "peak_rss_bytes": harness.peak_rss_bytes()}


def rss_bytes() -> int:
    """This process's resident memory now (VmRSS)."""
    with open("/proc/self/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--order", type=int, default=3)
    parser.add_argument("--sample", type=int, default=200,
                        help="test trigrams NLTK scores (its time scaled to the text)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--big", type=Path, help="also fit nnlm on this large text file")
    parser.add_argument("--side", choices=["nnlm", "nltk", "big"], help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path("bench/results/nltk_lm.json"))
    args = parser.parse_args()
    if args.side == "big":
        print(json.dumps(big(args.big, args.order)))
        return
    if args.side:
        print(json.dumps(side(args.side, args.data, args.order, args.sample, args.rounds)))
        return
    results = {}
    for name in ("nnlm", "nltk"):  # each in a fresh process: its own peak memory
        done = subprocess.run([sys.executable, __file__, "--side", name, "--data",
                               str(args.data), "--order", str(args.order), "--sample",
                               str(args.sample), "--rounds", str(args.rounds)],
                              check=True, capture_output=True, text=True)
        results[name] = json.loads(done.stdout.strip().splitlines()[-1])
        print(name, results[name], flush=True)
    if args.big is not None:
        done = subprocess.run([sys.executable, __file__, "--side", "big", "--big",
                               str(args.big), "--order", str(args.order)],
                              check=True, capture_output=True, text=True)
        results["big"] = json.loads(done.stdout.strip().splitlines()[-1])
        print("big", results["big"], flush=True)
    ours, theirs = results["nnlm"], results["nltk"]
    nltk_total = theirs["fit_seconds"] + theirs["score_seconds_extrapolated"]
    nnlm_total = ours["fit_seconds"] + ours["score_seconds"]
    results["ratios"] = {
        "fit_and_perplexity_nltk_over_nnlm": nltk_total / nnlm_total,
        "fit_nltk_over_nnlm": theirs["fit_seconds"] / ours["fit_seconds"],
        "peak_rss_nnlm_over_nltk": ours["peak_rss_bytes"] / theirs["peak_rss_bytes"],
        "model_peak_nnlm_over_nltk": ours["model_peak_bytes"] / theirs["model_peak_bytes"],
        "same_sample_perplexity": ours["sample_perplexity"] == theirs["sample_perplexity"]}
    harness.write_record(args.out, results)
    print(json.dumps(results["ratios"], indent=1))


if __name__ == "__main__":
    main()

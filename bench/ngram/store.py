"""n-gram models on disk and in memory: nnlm's mapped trie beside KenLM's build_binary.

    python bench/ngram/store.py --data data/brown --out bench/results/store.json
    python bench/ngram/store.py --data data/brown --tokens 10000000 \\
        --out bench/results/store_10m.json

Estimates KN5 on the training text (Brown's, or a synthetic corpus of --tokens tokens
with Brown's statistics, bench/ngram/synthetic.py), writes it as ARPA, and builds every form
of it: nnlm's trie (float32, --compress: the values as the counts they come from, and
--quantize 8 8), nnlm's previous format (arrays.npz,
read whole, with a hash index built at first use) and, when KenLM's build_binary is on
the PATH, KenLM's probing, trie and ``-q 8 -b 8`` trie (each also through
``nnlm.kenlm``, which reads them where they lie). Then, for each, in a fresh
process, one at a time (the store's goals):

- the file's size, and bytes per n-gram;
- opening: load and the first query, in the process;
- peak memory (the kernel's VmHWM) of a process that loads the model and scores the
  test text (the text repeated 6 times for the synthetic corpora): nnlm's bulk
  ``logprobs``, and (", nnlm.kenlm" rows) the same trie through ``nnlm.kenlm``, scored
  sentence by sentence exactly as the kenlm module's process scores KenLM's files;
- bulk scoring: tokens per second of nnlm's ``logprobs`` on the text encoded once, and
  of the kenlm module's ``score`` per sentence, as its documentation calls it (the best
  of 3 passes in a process);
- the perplexity, so that quantization's cost sits beside KenLM's.

Every form runs once a round, in turn, for --rounds rounds (bench/harness.py's
alternation), and each number is the median of its rounds. Ratios are what to compare
on a noisy machine. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parent))

PROBE = r"""
import json, math, resource, sys, time, warnings

warnings.simplefilter("ignore")
kind, model_path, text = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "kenlm":  # imports before the clock: opening is the model's cost
    import kenlm
elif kind == "nnlm.kenlm":  # nnlm's drop-in for the kenlm module, used as kenlm's is
    import nnlm.kenlm as kenlm
else:
    import numpy as np
    from nnlm import Stream
    from nnlm.text.corpus import read_stream
    from nnlm.models import load_model
per_sentence = kind in ("kenlm", "nnlm.kenlm")
t = time.perf_counter()
if per_sentence:
    m = kenlm.Model(model_path)
    m.score("the", bos=True, eos=True)
else:
    m = load_model(model_path)
    m.logprobs(Stream.from_lines([["the"]], m.vocab))
opened = time.perf_counter() - t
lines = open(text, encoding="utf-8").read().splitlines()
stream = None if per_sentence else read_stream(text, m.vocab)  # encoded once
best, total, n = math.inf, 0.0, 0
for _ in range(3):
    t = time.perf_counter()
    if per_sentence:
        total = sum(m.score(x, bos=True, eos=True) for x in lines) * math.log(10)
    else:  # the sum at once: no pass holds the previous pass's array while it runs
        total = float(m.logprobs(stream).sum())
    best = min(best, time.perf_counter() - t)
n = sum(len(x.split()) + 1 for x in lines)
# the peak of this process since exec (VmHWM), not ru_maxrss, which counts the parent's
# memory at fork
peak = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(json.dumps({"open_seconds": opened, "tokens": n, "tokens_per_second": n / best,
                  "perplexity": math.exp(-total / n), "peak_rss_mb": peak / 1024}))
"""


def probe(kind: str, model: Path, text: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, kind, str(model), str(text)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def size_of(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*")) if path.is_dir() \
        else path.stat().st_size


def build(work: Path, train: Path, build_binary: str | None) -> tuple[dict, int]:
    """Every form of the KN5 model: name -> (kind, path)."""
    from nnlm.lm import LanguageModel
    from nnlm.models import save_model
    from nnlm.ngram import BackoffNgram, KneserNey, write_arpa
    from nnlm.text.corpus import read_corpus

    vocab, stream = read_corpus(train)
    model = KneserNey(vocab, 5).fit(stream, keep_counts=True)  # (--compress's counts)
    n_grams = sum(model.num_ngrams())
    forms = {}
    save_model(model, work / "nnlm")
    forms["nnlm trie"] = ("nnlm", work / "nnlm")
    forms["nnlm trie, nnlm.kenlm"] = ("nnlm.kenlm", work / "nnlm")
    model.store_compress = True  # the values as the counts they come from, lossless
    save_model(model, work / "nnlm_compress")
    model.store_compress, model.value_inputs = False, None
    forms["nnlm trie --compress"] = ("nnlm", work / "nnlm_compress")
    forms["nnlm trie --compress, nnlm.kenlm"] = ("nnlm.kenlm", work / "nnlm_compress")
    model.store_quantize = (8, 8)
    save_model(model, work / "nnlm_q8")
    forms["nnlm trie -q 8 -b 8"] = ("nnlm", work / "nnlm_q8")
    forms["nnlm trie -q 8 -b 8, nnlm.kenlm"] = ("nnlm.kenlm", work / "nnlm_q8")
    model.store_quantize = None
    BackoffNgram.save_files = LanguageModel.save_files  # the format before the trie
    save_model(model, work / "npz")
    del BackoffNgram.save_files
    forms["nnlm arrays.npz (before)"] = ("nnlm", work / "npz")
    write_arpa(model, work / "kn5.arpa")
    if build_binary:
        for name, args in [("KenLM probing", ["probing"]), ("KenLM trie", ["trie"]),
                           ("KenLM trie -q 8 -b 8", ["-q", "8", "-b", "8", "trie"])]:
            out = work / (name.replace(" ", "_") + ".bin")
            subprocess.run([build_binary, *args[:-1], args[-1], work / "kn5.arpa", out],
                           check=True, capture_output=True)
            forms[name] = ("kenlm", out)
            forms[f"{name}, nnlm.kenlm"] = ("nnlm.kenlm", out)  # KenLM's file, nnlm's reader
    return forms, n_grams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--tokens", type=int, help="a synthetic corpus of this many tokens "
                        "instead of Brown's training text")
    parser.add_argument("--build-binary", default=shutil.which("build_binary"))
    parser.add_argument("--work", type=Path)
    parser.add_argument("--out", type=Path, default=Path("bench/results/store.json"))
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of every "
                        "form, each a fresh process; the median counts")
    args = parser.parse_args()
    work = Path(args.work or tempfile.mkdtemp(prefix="nnlm-store-"))
    work.mkdir(parents=True, exist_ok=True)
    train, text = args.data / "train.txt", args.data / "test.txt"
    corpus = "Brown train"
    if args.tokens:
        from synthetic import generate

        train = work / "synthetic.txt"
        generate(None, args.tokens, train)  # as bench/ngram/scale.py: NLTK_DATA must find Brown
        corpus = f"synthetic {args.tokens:,} tokens (bench/ngram/synthetic.py)"
        lines = text.read_text(encoding="utf-8").splitlines()
        text = work / "test6.txt"
        text.write_text("\n".join(lines * 6) + "\n", encoding="utf-8")
    forms, n_grams = build(work, train, args.build_binary)
    try:
        import kenlm  # noqa: F401
    except ImportError:  # KenLM's files need the kenlm module
        forms = {name: form for name, form in forms.items() if form[0] != "kenlm"}
    # alternating rounds: each round opens and scores every form once, in turn, in a
    # fresh process, so that a slow spell of the machine falls on all of them
    probes = {name: [] for name in forms}
    for _ in range(args.rounds):
        for name, (kind, path) in forms.items():
            probes[name].append(probe(kind, path, text))
    rows = {}
    for name, (_, path) in forms.items():
        runs = probes[name]
        rows[name] = {"bytes": size_of(path), "bytes_per_ngram": size_of(path) / n_grams,
                      "open_seconds": statistics.median(r["open_seconds"] for r in runs),
                      "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in runs),
                      "tokens_per_second": statistics.median(r["tokens_per_second"]
                                                             for r in runs),
                      "tokens_per_second_range": [min(r["tokens_per_second"] for r in runs),
                                                  max(r["tokens_per_second"] for r in runs)],
                      "perplexity": runs[0]["perplexity"]}
        print(f"{name:28s} {rows[name]['bytes'] / 1e6:8.1f} MB "
              f"{rows[name]['bytes_per_ngram']:6.2f} B/ngram  open "
              f"{rows[name]['open_seconds']:.3f}s  peak {rows[name]['peak_rss_mb']:7.1f} MB  "
              f"{rows[name]['tokens_per_second'] / 1e6:5.2f}M tok/s  "
              f"ppl {rows[name]['perplexity']:.2f}", flush=True)
    result = {"corpus": corpus, "order": 5, "ngrams": n_grams, "test_text": str(text),
              "rounds": args.rounds, "forms": rows}
    if "nnlm trie" in rows and "KenLM trie" in rows:
        result["ratios"] = {
            "size_vs_kenlm_trie": rows["nnlm trie"]["bytes"] / rows["KenLM trie"]["bytes"],
            "q8_size_vs_kenlm_q8": rows["nnlm trie -q 8 -b 8"]["bytes"]
            / rows["KenLM trie -q 8 -b 8"]["bytes"],
            "peak_rss_vs_kenlm_trie": rows["nnlm trie"]["peak_rss_mb"]
            / rows["KenLM trie"]["peak_rss_mb"],
            "bulk_vs_before": rows["nnlm trie"]["tokens_per_second"]
            / rows["nnlm arrays.npz (before)"]["tokens_per_second"],
            "bulk_vs_kenlm_score": rows["nnlm trie"]["tokens_per_second"]
            / rows["KenLM trie"]["tokens_per_second"],
            # the same process as kenlm's: nnlm.kenlm's Model and score per sentence
            "kenlm_api_peak_vs_kenlm_trie": rows["nnlm trie, nnlm.kenlm"]["peak_rss_mb"]
            / rows["KenLM trie"]["peak_rss_mb"],
            "kenlm_api_q8_peak_vs_kenlm_q8":
                rows["nnlm trie -q 8 -b 8, nnlm.kenlm"]["peak_rss_mb"]
                / rows["KenLM trie -q 8 -b 8"]["peak_rss_mb"],
            "kenlm_api_score_vs_kenlm": rows["nnlm trie, nnlm.kenlm"]["tokens_per_second"]
            / rows["KenLM trie"]["tokens_per_second"],
            # --compress: its size against KenLM's trie, its time against the float32 trie's
            "compress_size_vs_kenlm_trie": rows["nnlm trie --compress"]["bytes"]
            / rows["KenLM trie"]["bytes"],
            "compress_bulk_time_vs_trie": rows["nnlm trie"]["tokens_per_second"]
            / rows["nnlm trie --compress"]["tokens_per_second"],
            "compress_kenlm_api_time_vs_trie":
                rows["nnlm trie, nnlm.kenlm"]["tokens_per_second"]
                / rows["nnlm trie --compress, nnlm.kenlm"]["tokens_per_second"],
            "compress_same_perplexity": rows["nnlm trie --compress"]["perplexity"]
            == rows["nnlm trie"]["perplexity"]}
        for name in ("KenLM probing", "KenLM trie", "KenLM trie -q 8 -b 8"):
            ours, theirs = rows.get(f"{name}, nnlm.kenlm"), rows.get(name)
            if ours and theirs:  # KenLM's own file through nnlm.kenlm: time a token, opening
                key = name.lower().replace("kenlm ", "kenlm_").replace(" -q 8 -b 8", "_q8")
                result["ratios"][f"nnlm_kenlm_on_{key}_time_vs_kenlm"] = \
                    theirs["tokens_per_second"] / ours["tokens_per_second"]
                result["ratios"][f"nnlm_kenlm_on_{key}_open_seconds"] = ours["open_seconds"]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, result)
    print(json.dumps(result.get("ratios", {}), indent=1))
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

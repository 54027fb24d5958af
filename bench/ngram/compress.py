"""The trie with its values coded as counts (``nnlm ngram train --compress``) against the
float32 trie of the same estimate, in alternating rounds, and against KenLM's trie.

    python bench/ngram/compress.py --data data/brown --out bench/results/compress.json
    python bench/ngram/compress.py --tokens 10000000 --rounds 6 --out bench/results/compress.json

Estimates KN5 once (Brown's training text, or bench/ngram/synthetic.py's corpus of --tokens
tokens), saves it as the float32 trie and as the coded one, and (with KenLM's
build_binary on the PATH or given) KenLM's trie from the ARPA file. Then, in --rounds
rounds, each a fresh process per form in alternating order (bench/ngram/store.py's probe: open
and first query, then the test text scored three times, the best pass kept):

- bulk scoring: nnlm's ``logprobs`` over the encoded text;
- per call: ``nnlm.kenlm``'s ``score`` per sentence, as the kenlm module's users call it.

Reports the files' sizes (bytes per n-gram, and against KenLM's trie), the medians of the
rounds' paired time ratios (coded over float32), the opening times, and that both give
one perplexity. Writes the name's row into --out. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from store import probe, size_of  # noqa: E402  (the same probe process as bench/ngram/store.py)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def build(work: Path, train: Path, build_binary: str | None) -> tuple[dict, int]:
    from nnlm.models import save_model
    from nnlm.ngram import KneserNey, write_arpa
    from nnlm.text.corpus import read_corpus

    vocab, stream = read_corpus(train)
    model = KneserNey(vocab, 5).fit(stream, keep_counts=True)
    paths = {"float32": work / "float32", "coded": work / "coded"}
    save_model(model, paths["float32"])
    model.store_compress = True
    t = time.perf_counter()
    save_model(model, paths["coded"])
    print(f"coded file written in {time.perf_counter() - t:.1f} s", flush=True)
    n_grams = sum(model.num_ngrams())
    if build_binary:
        write_arpa(model, work / "kn5.arpa")
        paths["kenlm trie"] = work / "kenlm.trie"
        subprocess.run([build_binary, "trie", work / "kn5.arpa", paths["kenlm trie"]],
                       check=True, capture_output=True)
    return paths, n_grams


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("data/brown"),
                    help="folder with train.txt and test.txt (default: data/brown)")
    ap.add_argument("--tokens", type=int, help="a synthetic corpus of this many tokens "
                    "(bench/ngram/synthetic.py) instead of the training text")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (default 5)")
    ap.add_argument("--build-binary", default=shutil.which("build_binary"),
                    help="KenLM's build_binary (default: the one on the PATH)")
    ap.add_argument("--name", help="the row's name (default: brown or synthetic-N)")
    ap.add_argument("--out", type=Path, help="JSON file to add the row to")
    args = ap.parse_args()
    if args.rounds < 1 or (args.tokens is not None and args.tokens < 1000):
        ap.error("--rounds must be >= 1 and --tokens >= 1000")
    work = Path(tempfile.mkdtemp(prefix="nnlm-compress-"))
    train, text = args.data / "train.txt", args.data / "test.txt"
    name = args.name or "brown"
    if args.tokens:
        from synthetic import generate

        train = work / "synthetic.txt"
        generate(None, args.tokens, train)
        name = args.name or f"synthetic-{args.tokens // 1_000_000}M"
        lines = text.read_text(encoding="utf-8").splitlines()
        text = work / "test6.txt"  # as bench/ngram/store.py: the test text 6 times over
        text.write_text("\n".join(lines * 6) + "\n", encoding="utf-8")
    paths, n_grams = build(work, train, args.build_binary)
    runs = {(form, kind): [] for form in ("float32", "coded") for kind in ("nnlm", "nnlm.kenlm")}
    for r in range(args.rounds):
        order = list(runs) if r % 2 == 0 else list(runs)[::-1]
        for form, kind in order:
            runs[form, kind].append(probe(kind, paths[form], text))
        print(f"round {r + 1}: " + "  ".join(
            f"{f} {k} {runs[f, k][-1]['tokens_per_second'] / 1e6:.2f}M tok/s"
            for f, k in runs), flush=True)

    def paired(kind: str) -> list[float]:
        return [f["tokens_per_second"] / c["tokens_per_second"]
                for f, c in zip(runs["float32", kind], runs["coded", kind])]

    sizes = {form: size_of(path / "ngrams.trie" if path.is_dir() else path)
             for form, path in paths.items()}
    row = {
        "corpus": str(train) if not args.tokens else f"synthetic, {args.tokens:,} tokens",
        "ngrams": n_grams, "rounds": args.rounds, "machine": platform.processor()
        or platform.machine(), "date": time.strftime("%Y-%m-%d"),
        "bytes": sizes, "bytes_per_ngram": {f: s / n_grams for f, s in sizes.items()},
        "same_perplexity": all(
            f["perplexity"] == c["perplexity"] for kind in ("nnlm", "nnlm.kenlm")
            for f, c in zip(runs["float32", kind], runs["coded", kind])),
        "perplexity": runs["coded", "nnlm"][0]["perplexity"],
        # time a token, coded over float32: the median of the rounds' paired ratios
        "bulk_time_vs_float32": statistics.median(paired("nnlm")),
        "kenlm_api_time_vs_float32": statistics.median(paired("nnlm.kenlm")),
        "open_seconds": {f"{f}, {k}": min(x["open_seconds"] for x in v)
                         for (f, k), v in runs.items()},
        "tokens_per_second": {f"{f}, {k}": statistics.median(x["tokens_per_second"]
                                                             for x in v)
                              for (f, k), v in runs.items()},
        "command": "python bench/ngram/compress.py " + " ".join(sys.argv[1:]),
    }
    if "kenlm trie" in sizes:
        row["size_vs_kenlm_trie"] = sizes["coded"] / sizes["kenlm trie"]
        row["float32_size_vs_kenlm_trie"] = sizes["float32"] / sizes["kenlm trie"]
    print(json.dumps({k: v for k, v in row.items() if k != "open_seconds"}, indent=1))
    if args.out:
        data = json.loads(args.out.read_text()) if args.out.exists() else {}
        data[name] = row
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(args.out, data)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

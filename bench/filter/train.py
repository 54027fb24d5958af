"""`nnlm filter train` against cc_net's recipe run by hand (SentencePiece's trainer,
spm_encode, KenLM's lmplz and build_binary) on the same text, as JSON.

    python bench/filter/train.py --text corpus.txt [--tokens 50000000] [--lmplz PATH]
        [--build-binary PATH] [--vocab-size 65536] [--work /tmp/nnlm-filter-train]

Both sides start from the same text and end with a reference pair a perplexity filter
loads:

- **nnlm**: ``nnlm filter train TEXT -o DIR`` (cc_net's normalization, SentencePiece,
  KN 5-gram on the pieces, written as ARPA and as KenLM's probing file), one process;
- **cc_net's recipe**: the same normalization (nnlm's, the same function, so that it
  costs both sides alike), ``SentencePieceTrainer.train`` with the same settings, the
  text encoded into pieces, ``lmplz -o 5 --discount_fallback`` on them and
  ``build_binary`` on its ARPA file (cc_net's ``LANG.arpa.bin``).

Each side runs as its own process(es), one after the other; each step's wall time is
kept, and each side's peak resident memory (its largest process). ``--tokens`` cuts the
text to its first lines holding that many words. Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

REFERENCE = """
import sys, time
import sentencepiece as spm
from nnlm.filter.normalize import NORMALIZERS
text, work, vocab_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
norm, t = NORMALIZERS["ccnet"], time.perf_counter()
with open(text, encoding="utf-8") as f, open(work + "/norm.txt", "w", encoding="utf-8") as out:
    for line in f:
        line = norm(line)
        if line.strip():
            out.write(line.replace("\\n", " ") + "\\n")
print("normalize", time.perf_counter() - t, flush=True)
t = time.perf_counter()
spm.SentencePieceTrainer.train(input=work + "/norm.txt", model_prefix=work + "/en",
                               vocab_size=vocab_size, hard_vocab_limit=False,
                               model_type="unigram", character_coverage=0.9995,
                               minloglevel=2)
print("sentencepiece", time.perf_counter() - t, flush=True)
t = time.perf_counter()
sp = spm.SentencePieceProcessor(model_file=work + "/en.model")
with open(work + "/norm.txt", encoding="utf-8") as f, \\
        open(work + "/pieces.txt", "w", encoding="utf-8") as out:
    for line in f:
        out.write(" ".join(sp.encode_as_pieces(line.rstrip("\\n"))) + "\\n")
print("encode", time.perf_counter() - t, flush=True)
"""


def timed_process(argv: list[str], stdin=None, stdout=None) -> tuple[float, int, str]:
    """(wall seconds, peak resident bytes, what it printed) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=stdin, stdout=stdout or subprocess.PIPE,
                            stderr=subprocess.PIPE, text=stdout is None)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    out = proc.stdout.read() if stdout is None else ""
    err = proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[0]} failed: {err[-2000:]}")
    return seconds, usage.ru_maxrss * 1024, out


def cut(text: Path, tokens: int, out: Path) -> int:
    """The first lines of ``text`` holding ``tokens`` words, into ``out``; how many words."""
    n = 0
    with open(text, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as o:
        for line in f:
            o.write(line)
            n += len(line.split())
            if n >= tokens:
                break
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--text", type=Path, required=True)
    parser.add_argument("--tokens", type=int, default=50_000_000)
    parser.add_argument("--lmplz", default=shutil.which("lmplz"))
    parser.add_argument("--build-binary", default=shutil.which("build_binary"))
    parser.add_argument("--vocab-size", type=int, default=65536)
    parser.add_argument("--work", type=Path, default=Path("/tmp/nnlm-filter-train"))
    parser.add_argument("--out", type=Path,
                        default=harness.ROOT / "bench/results/filter_train.json")
    args = parser.parse_args()
    if not args.lmplz or not args.build_binary:
        raise SystemExit("lmplz and build_binary are needed (KenLM built from source; "
                         "--lmplz, --build-binary)")
    shutil.rmtree(args.work, ignore_errors=True)
    (args.work / "ref").mkdir(parents=True)
    text = args.work / "text.txt"
    words = cut(args.text, args.tokens, text)
    results: dict = {"words": words, "vocab_size": args.vocab_size}

    seconds, peak, _ = timed_process([sys.executable, "-m", "nnlm", "filter", "train",
                                      str(text), "-o", str(args.work / "nnlm"),
                                      "--vocab-size", str(args.vocab_size)])
    results["nnlm"] = {"seconds": seconds, "peak_bytes": peak}
    print(f"nnlm filter train: {seconds:.1f} s, peak {peak / 1e9:.2f} GB", flush=True)

    ref = args.work / "ref"
    steps, peaks = {}, []
    seconds, peak, out = timed_process([sys.executable, "-c", REFERENCE, str(text), str(ref),
                                        str(args.vocab_size)])
    steps.update({line.split()[0]: float(line.split()[1]) for line in out.splitlines()})
    peaks.append(peak)
    with open(ref / "pieces.txt", "rb") as f, open(ref / "en.arpa", "wb") as arpa:
        seconds, peak, _ = timed_process([args.lmplz, "-o", "5", "--discount_fallback",
                                          "-S", "40%", "-T", str(ref)], stdin=f, stdout=arpa)
    steps["lmplz"] = seconds
    peaks.append(peak)
    seconds, peak, _ = timed_process([args.build_binary, str(ref / "en.arpa"),
                                      str(ref / "en.arpa.bin")])
    steps["build_binary"] = seconds
    peaks.append(peak)
    total = sum(steps.values())
    results["cc_net_recipe"] = {"seconds": total, "steps": steps, "peak_bytes": max(peaks)}
    results["nnlm_over_recipe"] = results["nnlm"]["seconds"] / total
    print(f"cc_net's recipe: {total:.1f} s ({', '.join(f'{k} {v:.1f}' for k, v in steps.items())}),"
          f" peak {max(peaks) / 1e9:.2f} GB", flush=True)
    print(f"nnlm / recipe: {results['nnlm_over_recipe']:.2f}x")
    harness.write_record(args.out, results)


if __name__ == "__main__":
    main()

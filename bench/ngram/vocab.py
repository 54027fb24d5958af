"""Opening an n-gram model with a large vocabulary: the trie's mapped vocabulary against
the same model with its vocabulary read from vocab.txt, and KenLM's trie beside them.

    python bench/ngram/vocab.py [--words 1200000] [--tokens 5000000] \\
        [--out bench/results/vocab.json]

A speech recognizer's vocabulary has 200k to a million words; Brown's has 14k. This
draws a Zipf text (exponent 1.1) over ``--words`` random lowercase words (a 5M-token
text uses about 350k of them), fits KN3 on it with nnlm, and opens the model in fresh
processes, one at a time, three times each:

- ``mapped``: as nnlm opens it (nnlm.ngram.store.vocab_table);
- ``vocab.txt``: the same directory with the vocabulary read into Python objects, as
  nnlm did before the trie held it;
- ``KenLM trie``: build_binary's trie of the model's ARPA file and the kenlm module,
  when both are installed.

Each reports the time to open and answer one query, the memory that opening added
(VmRSS, and VmHWM over the process before it), and the process's peak after scoring a
held-out text of 50k tokens (kenlm: ``score`` per sentence). Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

PROBE = r"""
import json, sys, time

def status():
    s = {l.split(':')[0]: int(l.split()[1]) for l in open('/proc/self/status')
         if l.startswith(('VmRSS', 'VmHWM'))}
    return s['VmRSS'] / 1024, s['VmHWM'] / 1024
kind, model_path, text = sys.argv[1:4]
if kind == "KenLM trie":
    import kenlm
else:
    from nnlm import Stream
    from nnlm.text.corpus import read_stream
    from nnlm.models import load_model
    from nnlm.ngram.backoff import BackoffNgram
    if kind == "vocab.txt":  # the directory read as before its trie held the vocabulary
        BackoffNgram.load_dir_mapped = classmethod(lambda cls, path, header: None)
before = status()
t = time.perf_counter()
if kind == "KenLM trie":
    m = kenlm.Model(model_path)
    m.score("the", bos=True, eos=True)
else:
    m = load_model(model_path)
    m.logprobs(Stream.from_lines([["the"]], m.vocab))
opened = time.perf_counter() - t
after = status()
if kind == "KenLM trie":
    total = sum(m.score(line) for line in open(text, encoding="utf-8"))
else:
    total = float(m.logprobs(read_stream(text, m.vocab)).sum())
print(json.dumps({"open_seconds": opened, "open_rss_mb": after[0] - before[0],
                  "open_peak_mb": after[1] - before[1], "peak_rss_mb": status()[1]}))
"""


def corpus(directory: Path, words: int, tokens: int) -> tuple[Path, Path]:
    import numpy as np

    rng = np.random.default_rng(0)
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", np.uint8)
    lexicon = [bytes(letters[rng.integers(0, 26, n)]).decode()
               for n in rng.integers(4, 12, words)]
    paths = []
    for name, n in (("train.txt", tokens), ("test.txt", 50_000)):
        ranks = np.minimum(rng.zipf(1.1, n), words) - 1
        path = directory / name
        with open(path, "w", encoding="utf-8") as f:
            for i in range(0, n, 12):
                f.write(" ".join(lexicon[j] for j in ranks[i:i + 12]) + "\n")
        paths.append(path)
    return paths[0], paths[1]


def probe(kind: str, model: Path, text: Path) -> dict:
    runs = [json.loads(subprocess.run([sys.executable, "-c", PROBE, kind, str(model),
                                       str(text)], check=True, capture_output=True,
                                      text=True).stdout) for _ in range(3)]
    return {key: min(r[key] for r in runs) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--words", type=int, default=1_200_000)
    parser.add_argument("--tokens", type=int, default=5_000_000)
    parser.add_argument("--out", type=Path, default=Path("bench/results/vocab.json"))
    args = parser.parse_args()
    from nnlm import save_model
    from nnlm.ngram import KneserNey, write_arpa
    from nnlm.text.corpus import read_corpus

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        train, test = corpus(tmp, args.words, args.tokens)
        vocab, stream = read_corpus(train)
        model = KneserNey(vocab, 3).fit(stream)
        del stream
        save_model(model, tmp / "kn3")
        rows = {"mapped": probe("mapped", tmp / "kn3", test),
                "vocab.txt": probe("vocab.txt", tmp / "kn3", test)}
        build_binary = shutil.which("build_binary")
        try:
            import kenlm  # noqa: F401
        except ImportError:
            build_binary = None
        if build_binary:
            write_arpa(model, tmp / "kn3.arpa")
            subprocess.run([build_binary, "trie", str(tmp / "kn3.arpa"), str(tmp / "kn3.bin")],
                           check=True, capture_output=True)
            rows["KenLM trie"] = probe("KenLM trie", tmp / "kn3.bin", test)
            rows["KenLM trie"]["file_bytes"] = (tmp / "kn3.bin").stat().st_size
        result = {"words": len(vocab), "tokens": args.tokens, "ngrams": model.num_ngrams(),
                  "trie_bytes": (tmp / "kn3" / "ngrams.trie").stat().st_size,
                  "vocab_txt_bytes": (tmp / "kn3" / "vocab.txt").stat().st_size,
                  "forms": rows}
    for name, r in rows.items():
        print(f"{name:12s} open {r['open_seconds']:.3f} s  +{r['open_rss_mb']:.1f} MB "
              f"(peak +{r['open_peak_mb']:.1f})  process peak {r['peak_rss_mb']:.1f} MB")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, result)


if __name__ == "__main__":
    main()

"""What a language model buys in decoding: word error rate, time a sentence and peak
memory with no LM and with each model, through pyctcdecode, flashlight-text and nnlm's
batched CTC beam search.

    make pyctcdecode-env      # pyctcdecode pins numpy below 2: it runs in its own venv
    python bench/decoding/decoders.py --lm KN5=runs/kn5 --lm NPLM=runs/mlp1q \\
        --lm awd=runs/awd --lm awd+KN5=runs/mix_awd_kn5 \\
        --out bench/results/decoders.json --plot docs/decoders.png

The speech is synthetic and seeded, so every decoder hears the same thing:

* **Letters** (pyctcdecode; nnlm-ctc, nnlm's own decoder with pyctcdecode's API, as
  ``build_ctcdecoder(labels, kenlm_model_path=MODEL)`` makes it, and nnlm-ctc-lexicon,
  the same held to the model's words with ``unk_score_offset=-inf``; their ``-viterbi``
  twins, built with ``log_add=False``: merged beams keep the best alignment's score,
  not the sum; flashlight-text's lexicon decoder, whose lexicon is the same words): each
  Brown sentence (4 to 20 tokens, every token in the vocabulary, as the models were
  trained: case and punctuation kept) is spelled as CTC frames, each letter then a
  blank, a word separator after each word. Every frame's logits are Gaussian noise of
  scale ``--noise``, the right label's +3. pyctcdecode and nnlm-ctc read the same
  matrices with the separator as their space.
* **Words** (nnlm's beam search, whose labels are the model's tokens, as a subword CTC
  model's are its LM's): each token a frame then a blank frame; each frame's right label
  gets 3 + noise, and on a token's frame ``--confusions`` other tokens drawn by their
  training frequency get noise of the same scale (``--word-noise``); everything else
  -8 + noise of scale 0.1.

Each (decoder, LM) runs in a process of its own (pyctcdecode's in its venv), so that its
peak memory is its own: it tunes the LM weight and word score on ``--tune`` valid
sentences over a grid (3 x 4 points; 4 x 5 for nnlm's fast search), then decodes
``--sentences`` test sentences, timed. With no LM only the word score is tuned.
Reported per row: WER, its change against no LM and against KN5, seconds a sentence,
peak RSS (MB, the whole process), the chosen weights.
Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

ROOT = Path(__file__).resolve().parents[2]  # the repository: bench/decoding/ is two below
PYCTC = ROOT / ".venv-pyctcdecode" / "bin" / "python"
DECODERS = ("pyctcdecode", "nnlm-ctc", "nnlm-ctc-lexicon", "nnlm-ctc-viterbi",
            "nnlm-ctc-lexicon-viterbi", "flashlight", "nnlm")
BLANK, SEP = "<blank>", "|"
# (LM weight, word score) points, each decoder's LM weight on its own log scale; the
# first point of the lowest WER wins, so each list starts from the plainest settings
# (word score 0, then small ones) and a tie never picks an extreme
SCORES = (0.0, -1.0, 1.0, -2.0)
GRIDS = {
    "pyctcdecode": [(a, b) for b in SCORES for a in (0.25, 0.1, 0.5)],
    "nnlm-ctc": [(a, b) for b in SCORES for a in (0.25, 0.1, 0.5)],  # pyctcdecode's search
    "nnlm-ctc-lexicon": [(a, b) for b in SCORES for a in (0.25, 0.1, 0.5)],
    "nnlm-ctc-viterbi": [(a, b) for b in SCORES for a in (0.25, 0.1, 0.5)],
    "nnlm-ctc-lexicon-viterbi": [(a, b) for b in SCORES for a in (0.25, 0.1, 0.5)],
    "flashlight": [(a, b) for b in SCORES for a in (0.5, 0.25, 1.0)],
    "nnlm": [(a, b) for b in (0.0, -1.0, -2.0, -3.0, -4.0) for a in (0.25, 0.125, 0.5,
                                                                      0.0625)],
}
NO_LM_SCORES = (0.0, -1.0, 1.0)


# -- the synthetic speech --------------------------------------------------------------
def sentences(path: Path, vocab: set[str], count: int) -> list[list[str]]:
    """The first ``count`` sentences of ``path`` (its lines cut after . ! ?) of 4 to 20
    tokens, every one in ``vocab``."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        sentence = []
        for token in line.split():
            sentence.append(token)
            if token in (".", "!", "?"):
                if 4 <= len(sentence) <= 20 and all(t in vocab for t in sentence):
                    out.append(sentence)
                    if len(out) == count:
                        return out
                sentence = []
    return out


def letter_labels(words) -> list[str]:
    """The CTC labels of the letter-level speech: blank, the word separator, then every
    character of the vocabulary's words (sorted)."""
    return [BLANK, SEP] + sorted({c for w in words if not w.startswith("<") for c in w})


def letter_emissions(sentence: list[str], labels: list[str], seed: int,
                     noise: float) -> np.ndarray:
    """log-softmax frames [T, len(labels)] float32 spelling ``sentence``."""
    rng = np.random.default_rng(seed)
    index = {c: i for i, c in enumerate(labels)}
    frames = []
    for w in sentence:
        for c in w:
            frames += [index[c], index[BLANK]]
        frames.append(index[SEP])
    logits = rng.normal(scale=noise, size=(len(frames), len(labels)))
    logits[np.arange(len(frames)), frames] += 3.0
    logits -= np.log(np.exp(logits).sum(1, keepdims=True))
    return np.ascontiguousarray(logits, np.float32)


def word_emissions(ids: list[int], V: int, frequency: np.ndarray, seed: int, noise: float,
                   confusions: int) -> np.ndarray:
    """log-softmax frames [2 len(ids), V + 1] float64 (blank last): each token, then a
    blank; each token's frame with ``confusions`` tokens drawn by ``frequency`` as its
    rivals (substitutions, which the LM is there to settle; a blank frame has none, so
    there are no insertions for a word score to hold back)."""
    rng = np.random.default_rng(seed)
    labels = [x for i in ids for x in (i, V)]
    logits = -8.0 + rng.normal(scale=0.1, size=(len(labels), V + 1))
    for t, label in enumerate(labels):
        if label != V:  # a word's frame; a blank frame is blank + 3 over the floor alone
            rivals = rng.choice(V, size=confusions, p=frequency)
            logits[t, rivals] = rng.normal(scale=noise, size=confusions)
        logits[t, label] = 3.0 + rng.normal(scale=noise)
    logits -= np.log(np.exp(logits).sum(1, keepdims=True))
    return logits


def errors(ref: list[str], hyp: list[str]) -> int:
    """Word-level Levenshtein distance."""
    d = np.arange(len(hyp) + 1)
    for i, r in enumerate(ref, 1):
        prev, d[0] = d.copy(), i
        for j, h in enumerate(hyp, 1):
            d[j] = min(prev[j] + 1, d[j - 1] + 1, prev[j - 1] + (r != h))
    return int(d[-1])


# -- one decoder with one LM, in a process of its own -----------------------------------
def _decoder_factory(kind: str, lm_path: str | None, words: list[str], labels: list[str]):
    """A function (weight, score) -> decode(sentence index, emissions) -> token list."""
    if kind == "pyctcdecode":
        from pyctcdecode import Alphabet, BeamSearchDecoderCTC

        alphabet = Alphabet.build_alphabet(["" if c == BLANK else " " if c == SEP else c
                                            for c in labels])
        lm = None
        if lm_path:
            from nnlm.decoding.pyctcdecode_lm import PyctcdecodeLM

            lm = PyctcdecodeLM(lm_path)
        decoder = BeamSearchDecoderCTC(alphabet, language_model=lm)

        def make(weight, score):
            if lm is not None:
                decoder.reset_params(alpha=weight, beta=score)
            return lambda em: decoder.decode(em, beam_width=ARGS.beam).split()
        return make
    if kind.startswith("nnlm-ctc"):  # nnlm's own decoder, pyctcdecode's API, as clients build it
        import logging

        from nnlm.model_files import read_header
        from nnlm.pyctcdecode import build_ctcdecoder

        logging.getLogger("nnlm").setLevel(logging.ERROR)  # "labels and unigrams differ"
        # the lexicon: the model's words (its unigrams), every other word forbidden
        lexicon = {"unk_score_offset": float("-inf")} \
            if kind.startswith("nnlm-ctc-lexicon") else {}
        model, bf16 = lm_path, False
        if ARGS.bf16 and lm_path and Path(lm_path, "config.json").exists() and \
                read_header(lm_path)["nnlm_model"] in ("nplm", "mixture"):
            from nnlm.models import load_model  # a network's products in bf16: loaded,
            from nnlm.neural.runtime import configure_for_scoring  # set, handed over

            loaded = load_model(lm_path)
            if loaded.neural_parts():  # any other model goes by its path, mapped as ever
                configure_for_scoring(loaded, bf16=True)
                model, bf16 = loaded, True
        decoder = build_ctcdecoder(["" if c == BLANK else " " if c == SEP else c
                                    for c in labels], kenlm_model_path=model, **lexicon,
                                   log_add=not kind.endswith("-viterbi"))

        def make(weight, score, hotwords=None):
            if lm_path:
                decoder.reset_params(alpha=weight, beta=score)
            return lambda em: decoder.decode(em, beam_width=ARGS.beam,
                                             hotwords=hotwords).split()
        make.bf16 = bf16
        return make
    if kind == "flashlight":
        from flashlight.lib.text import decoder as fl
        from flashlight.lib.text.dictionary import Dictionary

        tokens = Dictionary(labels)
        sil, blank = tokens.get_index(SEP), tokens.get_index(BLANK)
        if lm_path:
            from nnlm.decoding.flashlight import FlashlightLM

            lm = FlashlightLM(lm_path, Dictionary(words))
        else:
            lm = fl.ZeroLM()

        def make(weight, score):
            trie = fl.Trie(tokens.index_size(), sil)
            start = lm.start(False)
            for i, w in enumerate(words):
                if not w.startswith("<"):
                    trie.insert([tokens.get_index(c) for c in w] + [sil], i,
                                lm.score(start, i)[1])
            trie.smear(fl.SmearingMode.MAX)
            options = fl.LexiconDecoderOptions(
                beam_size=ARGS.beam, beam_size_token=len(labels), beam_threshold=25.0,
                lm_weight=weight, word_score=score, unk_score=float("-inf"), sil_score=0.0,
                log_add=False, criterion_type=fl.CriterionType.CTC)
            decoder = fl.LexiconDecoder(options, trie, lm, sil, blank, words.index("<unk>"),
                                        [], False)
            return lambda em: [words[i] for i in
                               decoder.decode(em.ctypes.data, *em.shape)[0].words if i >= 0]
        return make
    import torch

    from nnlm.decoding.ctc import beam_search
    from nnlm.decoding.dense import tensor_lm
    from nnlm.models import load_model

    torch.set_num_threads(ARGS.threads)
    step = tensor_lm(load_model(lm_path or ARGS.vocab_model))

    def make(weight, score):
        w = weight if lm_path else 0.0
        return lambda em: [words[i] for i in
                           beam_search(torch.from_numpy(em), step, ARGS.nnlm_beam, w,
                                       score)[0].words]
    return make


def worker(kind: str, name: str, lm_path: str | None) -> dict:
    from nnlm.models import load_model

    words = list(load_model(ARGS.vocab_model).vocab.words)
    vocab = {w for w in words if not w.startswith("<")}
    labels = letter_labels(words)
    tune = sentences(ARGS.data / "valid.txt", vocab, ARGS.tune)
    test = sentences(ARGS.data / "test.txt", vocab, ARGS.sentences)
    if kind == "nnlm":
        index = {w: i for i, w in enumerate(words)}
        counts = Counter(index[t] for ln in (ARGS.data / "train.txt").open(encoding="utf-8")
                         for t in ln.split() if t in vocab)
        frequency = np.zeros(len(words))
        frequency[list(counts)] = list(counts.values())
        frequency /= frequency.sum()

        def speech(s, seed):
            return word_emissions([index[t] for t in s], len(words), frequency, seed,
                                  ARGS.word_noise, ARGS.confusions)
    else:
        def speech(s, seed):
            return letter_emissions(s, labels, seed, ARGS.noise)
    tune_em = [speech(s, 10_000 + i) for i, s in enumerate(tune)]
    test_em = [speech(s, i) for i, s in enumerate(test)]
    make = _decoder_factory(kind, lm_path, words, labels)
    grid = GRIDS[kind] if lm_path else [(0.0, b) for b in NO_LM_SCORES]

    def rate(decode, lines, ems) -> float:
        return sum(errors(s, decode(em)) for s, em in zip(lines, ems)) / sum(map(len, lines))

    tuned = min(grid, key=lambda ws: rate(make(*ws), tune, tune_em))
    decode = make(*tuned)
    decode(test_em[0])  # first-use costs out of the timing
    started = time.perf_counter()
    hyps = [decode(em) for em in test_em]
    seconds = (time.perf_counter() - started) / len(test)
    wrong = sum(errors(s, h) for s, h in zip(test, hyps))
    row = {"decoder": kind, "lm": name, "model": lm_path, "wer": wrong / sum(map(len, test)),
           "errors": wrong, "words": sum(map(len, test)), "sentences": len(test),
           "tuned_on": len(tune), "lm_weight": tuned[0], "word_score": tuned[1],
           "seconds_a_sentence": seconds,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if getattr(make, "bf16", False):
        row["bf16"] = True
    if ARGS.hotwords and kind == "nnlm-ctc":  # made-up words: what the list itself costs
        hot = make(*tuned, hotwords=[f"zq{i}x" for i in range(ARGS.hotwords)])
        hot(test_em[0])
        started = time.perf_counter()
        for em in test_em:
            hot(em)
        row["hotwords"] = ARGS.hotwords
        row["seconds_a_sentence_hotwords"] = (time.perf_counter() - started) / len(test)
    return row


# -- the table ------------------------------------------------------------------------
def plot(rows: list[dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    marks = {"pyctcdecode": "o", "nnlm-ctc": "D", "nnlm-ctc-lexicon": "P",
             "nnlm-ctc-viterbi": "d", "nnlm-ctc-lexicon-viterbi": "X", "flashlight": "s",
             "nnlm": "^"}
    lms = list(dict.fromkeys(r["lm"] for r in rows))
    colors = {lm: plt.cm.tab10(i) for i, lm in enumerate(lms)}
    top = 30.0  # a WER above it (a lexicon-free decoder with no LM) is drawn at the top
    for r in rows:
        x, y = r["seconds_a_sentence"] * 1000, r["wer"] * 100
        ax.scatter(x, min(y, top), marker=marks[r["decoder"]], color=colors[r["lm"]], s=50)
        if y > top:
            ax.annotate(f"{r['decoder']}, {r['lm']}: {y:.0f}%", (x, top), fontsize=8,
                        xytext=(-4, -12), textcoords="offset points", ha="right")
    for d, m in marks.items():
        ax.scatter([], [], marker=m, color="gray", label=d)
    for lm, c in colors.items():
        ax.scatter([], [], marker="o", color=c, label=lm)
    ax.set_xscale("log")
    ax.set_ylim(0, top + 1)
    ax.set_xlabel("milliseconds a sentence (log scale)")
    ax.set_ylabel("word error rate (%)")
    ax.set_title("Synthetic CTC speech of Brown test sentences: what each LM buys")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)


def table(rows: list[dict]) -> str:
    out = ["| decoder | LM | WER | against no LM | against KN5 | ms a sentence | peak MB |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        base = {x["lm"]: x["wer"] for x in rows if x["decoder"] == r["decoder"]}
        rel = [f"{r['wer'] / base[k]:.2f}x" if base.get(k) and r["lm"] != k else ""
               for k in ("none", "KN5")]
        out.append(f"| {r['decoder']} | {r['lm']} | {100 * r['wer']:.1f}% | {rel[0]} | "
                   f"{rel[1]} | {1000 * r['seconds_a_sentence']:.1f} | "
                   f"{r['peak_rss_mb']:.0f} |")
    return "\n".join(out)


def main() -> None:
    rows = []
    lms = [("none", None)] + [tuple(spec.split("=", 1)) for spec in ARGS.lm]
    for kind in ARGS.decoders:
        python = str(PYCTC) if kind == "pyctcdecode" else sys.executable
        if kind == "pyctcdecode" and not PYCTC.exists():
            sys.exit("no pyctcdecode environment: run `make pyctcdecode-env` first")
        for name, path in lms:
            if kind.startswith("nnlm-ctc-lexicon") and path is None:
                continue  # pyctcdecode's API holds a word list only beside a model
            cmd = [python, __file__, "--worker", kind, name, path or "", *sys.argv[1:]]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode:
                sys.exit(f"{kind} with {name}: {done.stderr.strip()[-800:]}")
            rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
            r = rows[-1]
            print(f"{kind:12s} {name:10s} WER {100 * r['wer']:5.1f}%  "
                  f"{1000 * r['seconds_a_sentence']:8.1f} ms  {r['peak_rss_mb']:6.0f} MB  "
                  f"(weight {r['lm_weight']}, score {r['word_score']})", flush=True)
    command = "python bench/decoding/decoders.py " + " ".join(sys.argv[1:])
    machine = harness.machine()
    out = {"command": command, "machine": machine,
           "noise": ARGS.noise, "word_noise": ARGS.word_noise, "confusions": ARGS.confusions,
           "beam": ARGS.beam, "nnlm_beam": ARGS.nnlm_beam, "rows": rows}
    if ARGS.update and ARGS.out.exists():  # this run's rows in place of their old ones
        old = json.loads(ARGS.out.read_text())
        for r in rows:
            r.update(command=command, machine=machine)
        new = {(r["decoder"], r["lm"]): r for r in rows}
        kept = [r for r in old["rows"] if (r["decoder"], r["lm"]) not in new]
        out = {**old, "rows": kept + rows}
        rows = out["rows"]
    print(table(rows))
    ARGS.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(ARGS.out, out)
    if ARGS.plot:
        plot(rows, ARGS.plot)


def parse(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", action="append", default=[], metavar="NAME=MODEL",
                   help="a language model to decode with (repeatable); no LM always runs")
    p.add_argument("--decoders", nargs="+", choices=DECODERS, default=list(DECODERS))
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--vocab-model", default="runs/kn5",
                   help="the model whose vocabulary is the lexicon (default: runs/kn5)")
    p.add_argument("--sentences", type=int, default=40, help="test sentences (default: 40)")
    p.add_argument("--tune", type=int, default=15, help="valid sentences (default: 15)")
    p.add_argument("--noise", type=float, default=1.0, help="logit noise (default: 1.0)")
    p.add_argument("--word-noise", type=float, default=1.25,
                   help="logit noise of the word-level speech (default: 1.25)")
    p.add_argument("--confusions", type=int, default=4,
                   help="rival tokens a frame in the word-level speech (default: 4)")
    p.add_argument("--beam", type=int, default=50, help="pyctcdecode's and flashlight's")
    p.add_argument("--nnlm-beam", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--bf16", action="store_true",
                   help="nnlm-ctc: a network LM's products in bfloat16")
    p.add_argument("--hotwords", type=int, default=0, metavar="N",
                   help="also time nnlm-ctc with N made-up hotwords (default: none)")
    p.add_argument("--update", action="store_true",
                   help="replace only this run's rows (decoder, LM) in --out, each with its "
                   "own command and machine, and keep the others")
    p.add_argument("--out", type=Path, default=Path("bench/results/decoders.json"))
    p.add_argument("--plot", type=Path)
    p.add_argument("--worker", nargs=3, metavar=("DECODER", "NAME", "MODEL"),
                   help=argparse.SUPPRESS)
    return p.parse_args(argv)


if __name__ == "__main__":
    ARGS = parse()
    if ARGS.worker:
        # bench/decoding/pyctcdecode.py would shadow the package of that name
        here = Path(__file__).resolve().parent
        sys.path = [p for p in sys.path if Path(p or ".").resolve() != here]
        kind, name, path = ARGS.worker
        print(json.dumps(worker(kind, name, path or None)))
    else:
        main()

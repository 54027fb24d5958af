"""flashlight-text's lexicon decoder with nnlm's KN5 against flashlight's own KenLM class
on the same model, in one process, rounds alternating.

    python bench/decoding/flashlight_lm.py --model runs/kn5 --data data/brown [--sentences 40]

Brown test sentences are spelled as letter-level CTC emissions (seeded Gaussian noise on
the logits, the right letter +3: ambiguous enough that the LM decides); both decoders get
the same emissions, options and lexicon (Brown's vocabulary, spelled by its letters).
Reported: whether every hypothesis (words and scores) is the same, each decoder's time a
sentence, the ratio, and the letter-to-word error rate of the best hypothesis. JSON to
``--out``. Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from decoders import errors  # bench/decoding/decoders.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", type=Path, default=Path("runs/kn5"))
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--sentences", type=int, default=40)
    p.add_argument("--beam", type=int, default=50)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--wer-lm", action="append", default=[], metavar="NAME=PATH",
                   help="also the word error rate with this model through FlashlightLM "
                   "(besides none and the KN5), its weights tuned on valid sentences")
    p.add_argument("--wer-sentences", type=int, default=30)
    p.add_argument("--noise", type=float, default=1.0, help="for the word error rates")
    p.add_argument("--out", type=Path, default=Path("bench/results/flashlight.json"))
    args = p.parse_args()

    from flashlight.lib.text import decoder as fl
    from flashlight.lib.text.decoder.kenlm import KenLM
    from flashlight.lib.text.dictionary import Dictionary

    from nnlm.decoding.flashlight import FlashlightLM
    from nnlm.models import load_model

    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from test_flashlight import spelled_emissions

    words = list(load_model(args.model).vocab.words)
    letters = sorted({c for w in words if not w.startswith("<") for c in w}) + ["|", "<blank>"]
    tmp = Path(tempfile.mkdtemp())
    arpa = tmp / "model.arpa"
    subprocess.run([sys.executable, "-m", "nnlm", "ngram", "export-arpa", str(args.model),
                    str(arpa)], check=True)
    theirs = KenLM(str(arpa), Dictionary(words))
    ours = FlashlightLM(args.model, Dictionary(words))
    tokens = Dictionary(letters)
    sil, blank = tokens.get_index("|"), tokens.get_index("<blank>")

    def build(lm, lm_weight=1.5, word_score=0.5):
        trie = fl.Trie(tokens.index_size(), sil)
        start = lm.start(False)
        for i, w in enumerate(words):
            if w.startswith("<"):
                continue
            _, score = lm.score(start, i)
            trie.insert([tokens.get_index(c) for c in w] + [sil], i, score)
        trie.smear(fl.SmearingMode.MAX)
        options = fl.LexiconDecoderOptions(
            beam_size=args.beam, beam_size_token=len(letters), beam_threshold=25.0,
            lm_weight=lm_weight, word_score=word_score, unk_score=float("-inf"), sil_score=0.0,
            log_add=False, criterion_type=fl.CriterionType.CTC)
        return fl.LexiconDecoder(options, trie, lm, sil, blank, words.index("<unk>"), [],
                                 False)

    decoders = {"kenlm": build(theirs), "nnlm": build(ours)}
    lines = [ln.split() for ln in (args.data / "test.txt").read_text().splitlines()]
    lines = [ln for ln in lines if 4 <= len(ln) <= 20
             and all(c in letters for w in ln for c in w)][: args.sentences]
    emissions = [spelled_emissions(ln, letters, i) for i, ln in enumerate(lines)]
    seconds = {name: [] for name in decoders}
    results = {}
    for _ in range(args.rounds):
        for name, dec in decoders.items():
            t0 = time.perf_counter()
            results[name] = [dec.decode(em.ctypes.data, *em.shape) for em in emissions]
            seconds[name].append((time.perf_counter() - t0) / len(lines))
    same = all([list(r.words) for r in a] == [list(r.words) for r in b]
               for a, b in zip(results["nnlm"], results["kenlm"]))
    score_diff = max(abs(x.score - y.score) for a, b in zip(results["nnlm"], results["kenlm"])
                     for x, y in zip(a, b))
    wrong = sum(errors(ln, [words[i] for i in res[0].words if i >= 0])
                for ln, res in zip(lines, results["nnlm"]))
    total = sum(map(len, lines))
    best = {name: min(s) for name, s in seconds.items()}
    out = {"python": platform.python_version(), "machine": platform.machine(),
           "model": str(args.model), "sentences": len(lines), "beam": args.beam,
           "rounds": args.rounds, "same_hypotheses": same, "max_score_difference": score_diff,
           "seconds_a_sentence": seconds, "best_nnlm_over_kenlm": best["nnlm"] / best["kenlm"],
           "wer_best_hypothesis": wrong / total}
    out["wer"] = word_error_rates(args, build, words, letters, ours, spelled_emissions)
    print(json.dumps(out, indent=1))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)


def word_error_rates(args, build, words, letters, kn5, spelled_emissions) -> dict:
    """WER of the best hypothesis with no LM, KN5 and each --wer-lm, through
    FlashlightLM, on test sentences; each LM's weight and word score tuned on valid
    sentences (a small grid)."""
    from flashlight.lib.text.decoder import ZeroLM
    from flashlight.lib.text.dictionary import Dictionary

    from nnlm.decoding.flashlight import FlashlightLM

    def sentences(path, n):
        lines = [ln.split() for ln in path.read_text().splitlines()]
        return [ln for ln in lines if 4 <= len(ln) <= 20
                and all(c in letters for w in ln for c in w)][:n]

    dev = sentences(args.data / "valid.txt", max(10, args.wer_sentences // 3))
    test = sentences(args.data / "test.txt", args.wer_sentences)
    lms = {"none": ZeroLM(), "KN5": kn5}
    for spec in args.wer_lm:
        name, _, path = spec.partition("=")
        lms[name] = FlashlightLM(path, Dictionary(words))

    def rate(decoder, lines, offset):
        wrong = total = 0
        t0 = time.perf_counter()
        for i, ln in enumerate(lines):
            em = spelled_emissions(ln, letters, offset + i, args.noise)
            best = decoder.decode(em.ctypes.data, *em.shape)[0]
            wrong += errors(ln, [words[w] for w in best.words if w >= 0])
            total += len(ln)
        return wrong / total, (time.perf_counter() - t0) / len(lines)

    out = {"noise": args.noise, "tuned_on": len(dev), "sentences": len(test), "beam": args.beam}
    for name, lm in lms.items():
        grid = [(0.0, s) for s in (-1.0, 0.0, 1.0)] if name == "none" else \
            [(w, s) for w in (0.5, 1.0, 2.0) for s in (0.0, 1.0, 2.0)]
        tuned = min(grid, key=lambda ws: rate(build(lm, *ws), dev, 10_000)[0])
        wer, seconds = rate(build(lm, *tuned), test, 0)
        out[name] = {"wer": wer, "seconds_a_sentence": seconds, "lm_weight": tuned[0],
                     "word_score": tuned[1]}
        print(name, out[name], flush=True)
    return out


if __name__ == "__main__":
    main()

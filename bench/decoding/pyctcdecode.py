"""pyctcdecode with the kenlm module against pyctcdecode with nnlm.kenlm, in one run.

    make pyctcdecode-env
    python bench/decoding/pyctcdecode.py --data data/brown --out bench/results/pyctcdecode.json

Estimates Brown's KN 5-gram as ARPA (or takes --arpa; with --binary, each module gets
its own binary of it: KenLM's trie, nnlm's one-file model), then runs
tests/pyctcdecode_client.py in pyctcdecode's environment for each kenlm module in turn,
--rounds times, alternating: the same synthetic CTC outputs for the first --sentences
test lines, beam --beam. Reports each side's best decode time, its peak memory (the
whole process: interpreter, pyctcdecode, the model), whether the beams are the same,
and the ratios. With --network MODEL: that network through nnlm's PyctcdecodeLM against
nnlm.kenlm under kenlm's name without its batching. With --own: pyctcdecode with the
kenlm module against nnlm's own decoder (nnlm.pyctcdecode, in nnlm's environment with
numpy 2), with no hotwords and with --hotwords made-up ones; nnlm's side runs with
NNLM_PYCTCDECODE_EXACT=1, so that the beams compared are pyctcdecode's to the bit (an
utterance that ends on the word separator is otherwise scored as a sentence's end).
Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

ROOT = Path(__file__).resolve().parents[2]  # the repository: bench/decoding/ is two below
PYCTC = ROOT / ".venv-pyctcdecode" / "bin" / "python"
CLIENT = ROOT / "tests" / "pyctcdecode_client.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--arpa", type=Path, help="an ARPA file (default: KN5 on --data)")
    parser.add_argument("--sentences", type=int, default=40)
    parser.add_argument("--beam", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--binary", action="store_true",
                        help="each module gets its own one-file binary of the model: kenlm "
                        "a trie from build_binary (on the PATH), nnlm its one-file model "
                        "(nnlm ngram convert IN OUT.bin); pyctcdecode copies either")
    parser.add_argument("--network", type=Path, metavar="MODEL",
                        help="instead: a network through nnlm's PyctcdecodeLM (batched) "
                        "against nnlm.kenlm under kenlm's name without batching (one pass "
                        "per distinct State)")
    parser.add_argument("--own", action="store_true",
                        help="instead: pyctcdecode + kenlm against nnlm.pyctcdecode")
    parser.add_argument("--hotwords", type=int, default=1000,
                        help="with --own: also decode with this many hotwords")
    parser.add_argument("--out", type=Path, default=Path("bench/results/pyctcdecode.json"))
    args = parser.parse_args()
    if not PYCTC.exists():
        sys.exit("no pyctcdecode environment: run `make pyctcdecode-env` first")
    with tempfile.TemporaryDirectory() as tmp:
        arpa = args.arpa
        if arpa is None:
            arpa = Path(tmp) / "kn5.arpa"
            subprocess.run([sys.executable, "-m", "nnlm", "ngram", "train",
                            str(args.data / "train.txt"), "--order", "5", "-o",
                            str(Path(tmp) / "kn5"), "--arpa", str(arpa)], check=True)
        models = {"kenlm": arpa, "nnlm": arpa}
        if args.binary:
            import shutil

            build_binary = shutil.which("build_binary")
            if build_binary is None:
                sys.exit("--binary needs KenLM's build_binary on the PATH")
            models = {"kenlm": Path(tmp) / "kenlm.bin", "nnlm": Path(tmp) / "nnlm.bin"}
            subprocess.run([build_binary, "trie", str(arpa), str(models["kenlm"])], check=True,
                           capture_output=True)
            subprocess.run([sys.executable, "-m", "nnlm", "ngram", "convert", str(arpa),
                            str(models["nnlm"])], check=True, capture_output=True)
        runs: dict[str, list[dict]] = {"kenlm": [], "nnlm": []}
        if args.network:
            models = {"shim0": args.network, "class": args.network}
            runs = {"shim0": [], "class": []}
        sides = [(w, 0) for w in runs]
        if args.own:
            sides = [(w, h) for h in (0, args.hotwords) for w in ("kenlm", "own")]
            runs = {f"{w}/{h}": [] for w, h in sides}
            models = {"kenlm": arpa, "own": arpa}
        for _ in range(args.rounds):
            for which, hot in sides:
                python = sys.executable if which == "own" else str(PYCTC)
                done = subprocess.run(
                    [python, str(CLIENT), which, str(models[which]),
                     str((args.data / "test.txt").resolve()), str(args.sentences), str(args.beam),
                     str(hot)], capture_output=True, text=True, check=True,
                    cwd=CLIENT.parent, env={**os.environ, "NNLM_PYCTCDECODE_EXACT": "1"})
                key = f"{which}/{hot}" if args.own else which
                runs[key].append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(key, runs[key][-1]["decode_seconds"], flush=True)
    best = {w: min(r, key=lambda x: x["decode_seconds"]) for w, r in runs.items()}
    if args.own:
        out = own_record(args, best)
        print(json.dumps(out, indent=2))
        harness.write_record(args.out, out, indent=2)
        return
    if args.network:
        a, b = best["shim0"], best["class"]
        out = {"model": str(args.network), "sentences": args.sentences,
               "beam_width": args.beam, "rounds": args.rounds,
               "same_beams": a["texts"] == b["texts"],
               "max_lm_score_difference": max(abs(x - y) for x, y in
                                              zip(a["lm_scores"], b["lm_scores"])),
               "unbatched_shim_decode_seconds": a["decode_seconds"],
               "pyctcdecode_lm_decode_seconds": b["decode_seconds"],
               "speedup": a["decode_seconds"] / b["decode_seconds"],
               "save_load_round_trip": b["save_load_round_trip"]}
        print(json.dumps(out, indent=2))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(args.out, out, indent=2)
        return
    k, n = best["kenlm"], best["nnlm"]
    out = {"model": str(args.arpa or "KN5 on Brown train"),
           "form": "one-file binaries (KenLM trie, nnlm .bin)" if args.binary else "ARPA",
           "sentences": args.sentences,
           "beam_width": args.beam, "rounds": args.rounds,
           "same_beams": k["texts"] == n["texts"],
           "max_lm_score_difference": max(abs(a - b) for a, b in
                                          zip(k["lm_scores"], n["lm_scores"])),
           "kenlm_decode_seconds": k["decode_seconds"],
           "nnlm_decode_seconds": n["decode_seconds"],
           "decode_time_nnlm_over_kenlm": n["decode_seconds"] / k["decode_seconds"],
           "kenlm_peak_rss_mb": k["peak_rss_mb"], "nnlm_peak_rss_mb": n["peak_rss_mb"],
           "save_load_round_trip": n["save_load_round_trip"]}
    print(json.dumps(out, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out, indent=2)


def own_record(args, best: dict) -> dict:
    """pyctcdecode + kenlm against nnlm.pyctcdecode, without and with hotwords."""
    out = {"model": str(args.arpa or "KN5 on Brown train"), "sentences": args.sentences,
           "beam_width": args.beam, "rounds": args.rounds, "hotwords": args.hotwords,
           "machine": harness.machine()}
    for hot in (0, args.hotwords):
        k, o = best[f"kenlm/{hot}"], best[f"own/{hot}"]
        out[f"hotwords_{hot}"] = {
            "same_texts": k["texts"] == o["texts"],
            "max_lm_score_difference": max(abs(a - b) for a, b in
                                           zip(k["lm_scores"], o["lm_scores"])),
            "pyctcdecode_ms_per_sentence": 1000 * k["decode_seconds"] / args.sentences,
            "nnlm_ms_per_sentence": 1000 * o["decode_seconds"] / args.sentences,
            "speedup": k["decode_seconds"] / o["decode_seconds"],
            "pyctcdecode_peak_rss_mb": k["peak_rss_mb"], "nnlm_peak_rss_mb": o["peak_rss_mb"],
            "save_load_round_trip": o["save_load_round_trip"]}
    for side in ("kenlm", "own"):
        out[f"{side}_hotword_cost"] = (best[f"{side}/{args.hotwords}"]["decode_seconds"]
                                       / best[f"{side}/0"]["decode_seconds"])
    return out


if __name__ == "__main__":
    main()

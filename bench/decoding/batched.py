"""A batch of utterances decoded at once on tensors (``build_batch_decoder``, CPU or
CUDA) against nnlm's compiled CTC decoder one utterance at a time on one CPU core: time
a sentence, WER, and how often the two give the same text.

    python bench/decoding/batched.py --lm runs/kn5 --sentences 64 --beam 64 \\
        --out bench/results/batched.json            # add --device cuda on a GPU machine

The speech is decoders.py's: each Brown test sentence spelled as letter frames with
Gaussian logit noise (``--noise``), the right label +3. Both decoders get the same
labels, model and weights (``--alpha``, ``--beta``: pyctcdecode's defaults) at beam
``--beam``. The compiled decoder runs in this process on one core (its search is one
thread); the batched one with ``--threads`` torch threads on the CPU, and on
``--device`` where given (or CUDA where there is one). Cases alternate over
``--rounds`` (bench/harness.py); each is the whole batch. ``--hotwords N`` adds the
batch with N made-up hotwords (what the list itself costs). Never run by the tests.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import decoders  # noqa: E402 - the speech and the scoring of decoders.py
import harness  # noqa: E402


def main() -> None:
    args = parse()
    import torch

    from nnlm.decoding.ctc.batch_decoder import build_batch_decoder
    from nnlm.models import load_model
    from nnlm.pyctcdecode import build_ctcdecoder

    logging.getLogger("nnlm").setLevel(logging.ERROR)  # "labels and unigrams differ"
    torch.set_num_threads(args.threads)
    words = list(load_model(args.lm).vocab.words)
    labels = decoders.letter_labels(words)
    vocab = {w for w in words if not w.startswith("<")}
    test = decoders.sentences(args.data / "test.txt", vocab, args.sentences)
    ems = [decoders.letter_emissions(s, labels, i, args.noise) for i, s in enumerate(test)]
    names = ["" if c == decoders.BLANK else " " if c == decoders.SEP else c for c in labels]
    weights = {"alpha": args.alpha, "beta": args.beta}
    compiled = build_ctcdecoder(names, args.lm, **weights)
    devices = ["cpu"] + ([args.device] if args.device != "cpu" else [])
    batch = {d: build_batch_decoder(names, args.lm, device=d, **weights) for d in devices}
    out: dict = {}

    def run_compiled():
        out["compiled"] = [compiled.decode(e, beam_width=args.beam) for e in ems]

    def run_batched(device, hotwords=None):
        name = f"batched_{device}" + ("_hotwords" if hotwords else "")

        def run():
            on = [torch.from_numpy(e).to(device) for e in ems]
            out[name] = batch[device].decode_batch(on, beam_width=args.beam, hotwords=hotwords)
        return name, run

    cases = {"compiled": run_compiled, **dict(run_batched(d) for d in devices)}
    if args.hotwords:  # made-up words: what the list itself costs
        hot = [f"zq{i}x" for i in range(args.hotwords)]
        cases.update(dict(run_batched(d, hot) for d in devices))
    times = harness.rounds(cases, n=args.rounds)
    words_total = sum(map(len, test))
    rows = {}
    for name, timing in times.items():
        wrong = sum(decoders.errors(s, h.split()) for s, h in zip(test, out[name]))
        rows[name] = {**timing.summary(len(test), "seconds_a_sentence"),
                      "wer": wrong / words_total, "errors": wrong,
                      "same_text_as_compiled": sum(a.split() == b.split() for a, b in
                                                   zip(out[name], out["compiled"]))}
    results = {"sentences": len(test), "words": words_total, "beam": args.beam,
               "threads": args.threads, "lm": args.lm, **weights, "cases": rows,
               "compiled_one_core_over": {
                   name: harness.ratio(times, "compiled", name) for name in times
                   if name != "compiled"},
               "hotwords": args.hotwords,
               "hotwords_over_none": {d: harness.ratio(times, f"batched_{d}_hotwords",
                                                       f"batched_{d}")
                                      for d in devices if args.hotwords}}
    harness.write_record(args.out, results)
    for name, row in rows.items():
        quality = ("(made-up hotwords, decoded where the audio nearly spells them: the "
                   "time only)" if name.endswith("_hotwords") else
                   f"WER {row['wer']:.1%}, same text as compiled "
                   f"{row['same_text_as_compiled']}/{len(test)}")
        print(f"{name:>22}: {1000 * row['median_seconds_a_sentence']:7.2f} ms a sentence, "
              + quality)
    for name, r in results["compiled_one_core_over"].items():
        print(f"compiled on one core / {name}: {r['median']:.2f}x")
    for device, r in results["hotwords_over_none"].items():
        print(f"{args.hotwords} hotwords / none, {device}: {r['median']:.2f}x")


def parse(argv=None) -> argparse.Namespace:
    import torch

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", default="runs/kn5", help="the model (default: runs/kn5)")
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--sentences", type=int, default=64, help="the batch (default: 64)")
    p.add_argument("--beam", type=int, default=64, help="beam width (default: 64)")
    p.add_argument("--noise", type=float, default=1.0, help="logit noise (default: 1.0)")
    p.add_argument("--alpha", type=float, default=0.5)
    p.add_argument("--beta", type=float, default=1.5)
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads of the batched search on the CPU (default: 1)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="where the batched search also runs (default: cuda if present)")
    p.add_argument("--hotwords", type=int, default=0, metavar="N",
                   help="also decode with N made-up hotwords (default: none)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=Path("bench/results/batched.json"))
    return p.parse_args(argv)


if __name__ == "__main__":
    main()

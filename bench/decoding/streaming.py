"""nnlm.pyctcdecode streamed (partial_decode_beams, chunk by chunk) against the whole
utterance, and against the same search in Python, in one run.

    python bench/decoding/streaming.py --lm runs/kn5 --out bench/results/streaming.json

The letter-level synthetic speech of bench/decoding/decoders.py (--sentences Brown test
sentences, noise 1.0, beam 50, LM weight 0.25), decoded by ``build_ctcdecoder(labels,
kenlm_model_path=LM)``: whole (``decode_beams``), streamed in chunks of --chunk frames
with the compiled search carried from chunk to chunk, and streamed on the Python search
(the compiled one switched off). Reports milliseconds a sentence each and whether the
streamed texts are the whole utterances'. Never run by the tests.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # decoders.py's speech
import decoders  # noqa: E402


def streamed(decoder, x, chunk: int, beam: int) -> str:
    beams, cache, partial = decoder.get_starting_state()
    for lo in range(0, len(x), chunk):
        last = lo + chunk >= len(x)
        beams = decoder.partial_decode_beams(x[lo:lo + chunk], cache, partial, beams, lo,
                                             beam_width=beam, is_end=last,
                                             force_next_word=last)
    return beams[0][0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lm", default="runs/kn5", help="the LM (default: runs/kn5)")
    p.add_argument("--data", type=Path, default=Path("data/brown"))
    p.add_argument("--sentences", type=int, default=20)
    p.add_argument("--chunk", type=int, default=20, help="frames a chunk (default: 20)")
    p.add_argument("--beam", type=int, default=50)
    p.add_argument("--bf16", action="store_true",
                   help="a network's products in bfloat16 (the model loaded, set so, and "
                   "handed to build_ctcdecoder)")
    p.add_argument("--out", type=Path, default=Path("bench/results/streaming.json"))
    args = p.parse_args()
    logging.getLogger("nnlm").setLevel(logging.ERROR)
    from nnlm.decoding.ctc import compiled
    from nnlm.models import load_model
    from nnlm.pyctcdecode import build_ctcdecoder

    decoders.ARGS = decoders.parse(["--vocab-model", args.lm])
    words = list(load_model(args.lm).vocab.words)
    labels = decoders.letter_labels(words)
    vocab = {w for w in words if not w.startswith("<")}
    test = decoders.sentences(args.data / "test.txt", vocab, args.sentences)
    ems = [decoders.letter_emissions(s, labels, i, 1.0) for i, s in enumerate(test)]
    model = args.lm
    if args.bf16:
        from nnlm.neural.runtime import configure_for_scoring

        model = load_model(args.lm)
        configure_for_scoring(model, bf16=True)
    decoder = build_ctcdecoder(["" if c == decoders.BLANK else " " if c == decoders.SEP else c
                                for c in labels], kenlm_model_path=model)
    decoder.reset_params(alpha=0.25, beta=0.0)
    decoder.decode(ems[0], beam_width=args.beam)  # first-use costs out of the timing

    def timed(fn) -> tuple[float, list[str]]:
        started = time.perf_counter()
        texts = [fn(x) for x in ems]
        return 1000 * (time.perf_counter() - started) / len(ems), texts

    whole_ms, whole = timed(lambda x: decoder.decode_beams(x, beam_width=args.beam)[0].text)
    stream_ms, stream = timed(lambda x: streamed(decoder, x, args.chunk, args.beam))
    saved, compiled._c = compiled._c, None  # the Python search
    try:
        python_ms, python = timed(lambda x: streamed(decoder, x, args.chunk, args.beam))
    finally:
        compiled._c = saved
    out = {"lm": args.lm, "bf16": args.bf16, "sentences": len(ems), "chunk_frames": args.chunk,
           "beam": args.beam, "machine": harness.machine(),
           "whole_ms_a_sentence": whole_ms, "streamed_ms_a_sentence": stream_ms,
           "streamed_python_ms_a_sentence": python_ms,
           "streamed_texts_are_whole_texts": stream == whole,
           "python_texts_are_compiled_texts": python == stream}
    harness.write_record(args.out, out, indent=2)
    print(out)


if __name__ == "__main__":
    main()

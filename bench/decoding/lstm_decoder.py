"""The LSTM in a decoder and in bulk: what its state cache buys.

    python bench/decoding/lstm_decoder.py runs/lstm --data data/brown \\
        --out bench/results/lstm_decoder.json

In one run, on the first ``--sentences`` lines of the test text (Brown's lines are
paragraphs; a decoder's sentences are shorter, so lines are cut to ``--words`` words):

* ``BaseScore`` word by word through ``nnlm.Decoder`` (what a kenlm client does), with the
  state cache (each word one LSTM step from its prefix's state) and without it (each word
  a read of its whole prefix): microseconds a call, and the ratio;
* ``advance`` on a beam of ``--beam`` hypotheses a step (one batched call);
* bulk: ``logprobs`` on the whole test text (each line read once), tokens/s.

The cached and uncached scores are checked equal (1e-6 in log10). Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def chain(model, sentences) -> tuple[float, list[float], int]:
    """Seconds, scores and calls for BaseScore word by word through ``sentences``."""
    from nnlm.decoding import DecoderState

    scores, calls = [], 0
    t = time.perf_counter()
    for words in sentences:
        state = DecoderState()
        model.BeginSentenceWrite(state)
        for w in [*words, "</s>"]:
            out = DecoderState()
            scores.append(model.BaseScore(state, w, out))
            state = out
            calls += 1
    return time.perf_counter() - t, scores, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("--data", type=Path, default=Path("data/brown"))
    ap.add_argument("--sentences", type=int, default=40)
    ap.add_argument("--words", type=int, default=25)
    ap.add_argument("--beam", type=int, default=16)
    ap.add_argument("--out", type=Path, default=Path("bench/results/lstm_decoder.json"))
    args = ap.parse_args()

    import torch

    from nnlm import evaluate, load_model, read_stream
    from nnlm.decoding import Decoder, DecoderState

    lm = load_model(args.model)
    lines = (args.data / "test.txt").read_text().splitlines()
    sentences = [line.split()[: args.words] for line in lines if line.strip()][: args.sentences]
    model = Decoder(lm)
    chain(model, sentences[:2])  # warm up
    cached, with_cache, calls = chain(model, sentences)
    lm._hidden = lm.model.hidden_input  # every call reads its prefix whole
    try:
        whole, without_cache, _ = chain(Decoder(lm), sentences)
    finally:
        del lm._hidden
    gap = float(np.max(np.abs(np.array(with_cache) - np.array(without_cache))))

    # a beam: B hypotheses extended by the same word list (as a decoder's step would)
    start = DecoderState()
    model.BeginSentenceWrite(start)
    beams, steps = [start] * args.beam, 0
    vocab = lm.vocab.words[3:3 + args.beam]
    t = time.perf_counter()
    for _ in range(args.words):
        out = model.advance(beams, vocab)
        beams, steps = out.states, steps + 1
    beam_s = (time.perf_counter() - t) / steps

    test = read_stream(args.data / "test.txt", lm.vocab)
    t = time.perf_counter()
    ppl = evaluate(lm, test).perplexity
    bulk = time.perf_counter() - t
    result = {
        "command": f"python bench/decoding/lstm_decoder.py {args.model} --data {args.data}",
        "machine": f"{platform.processor() or platform.machine()}, "
                   f"{torch.get_num_threads()} torch threads",
        "network": lm.model.config.to_dict(),
        "sentences": len(sentences), "calls": calls,
        "basescore_us_cached": 1e6 * cached / calls,
        "basescore_us_uncached": 1e6 * whole / calls,
        "speedup": whole / cached,
        "max_log10_gap": gap,
        "beam": args.beam, "advance_ms_per_step": 1e3 * beam_s,
        "bulk_tokens_per_s": len(test) / bulk, "test_perplexity": ppl,
    }
    harness.write_record(args.out, result)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

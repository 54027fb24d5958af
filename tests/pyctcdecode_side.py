"""One side of the pyctcdecode comparison: the same calls, in pyctcdecode's own
environment (``make pyctcdecode-env``: pyctcdecode 0.5 and the kenlm module) or in
nnlm's (``nnlm.pyctcdecode`` under pyctcdecode's name, no kenlm module).

    python tests/pyctcdecode_side.py {pyctcdecode,nnlm} CASES.json LOGITS.npz

CASES.json: a list of cases, each {"labels", "model" (an ARPA path or null), "unigrams"
(null: the decoder's default), "build" (build_ctcdecoder's weights), "decode"
(decode_beams' settings, hotwords included), "utterances" (keys of LOGITS.npz),
"stream" (chunk length, or 0)}. Prints one JSON list: per case and utterance, every
beam as [text, word frames, logit score, combined score], ``decode``'s text, and, for a
streamed case, the beams of the chunked decode.
"""

from __future__ import annotations

import json
import logging
import sys
import warnings

import numpy as np

which, cases_path, logits_path = sys.argv[1], sys.argv[2], sys.argv[3]
if which == "nnlm":
    import nnlm.pyctcdecode

    sys.modules["pyctcdecode"] = nnlm.pyctcdecode
warnings.simplefilter("ignore")  # the fixtures' odd sums: said once per load, not here
logging.disable(logging.WARNING)

from pyctcdecode import build_ctcdecoder  # noqa: E402 - after the module is chosen


def beams_of(beams) -> list:
    return [[b[0], [[w, list(f)] for w, f in b[2]], float(b[3]), float(b[4])] for b in beams]


def streamed(decoder, logits, chunk: int, settings: dict) -> list:
    beams, cache, partial = decoder.get_starting_state()
    for lo in range(0, len(logits), chunk):
        part = logits[lo:lo + chunk]
        last = lo + chunk >= len(logits)
        beams = decoder.partial_decode_beams(part, cache, partial, beams, lo,
                                             is_end=last, force_next_word=last, **settings)
    return [[b[0], list(map(list, b[4])), float(b[6]), float(b[7])] for b in beams]


def main() -> None:
    cases = json.load(open(cases_path, encoding="utf-8"))
    logits = np.load(logits_path)
    out = []
    for case in cases:
        decoder = build_ctcdecoder(case["labels"], case["model"], case["unigrams"],
                                   **case["build"])
        settings = case["decode"]
        result = []
        for key in case["utterances"]:
            x = logits[key]
            entry = {"beams": beams_of(decoder.decode_beams(x, **settings))}
            kwargs = {k: v for k, v in settings.items() if k != "prune_history"}
            entry["text"] = decoder.decode(x, **kwargs)
            if case.get("stream") and hasattr(decoder, "partial_decode_beams"):
                plain = {k: v for k, v in settings.items()
                         if k not in ("hotwords", "hotword_weight")}
                entry["stream"] = streamed(decoder, x, case["stream"], plain)
            result.append(entry)
        batch = decoder.decode_beams_batch(None, [logits[k] for k in case["utterances"]],
                                           **settings)
        out.append({"utterances": result,
                    "batch": [[[b[0], [[w, list(f)] for w, f in b[1]], float(b[2]),
                                float(b[3])] for b in beams] for beams in batch]})
    print(json.dumps(out))


main()

"""pyctcdecode as a client of a kenlm module: run in pyctcdecode's own environment
(``make pyctcdecode-env``: it pins numpy below 2), once with the real kenlm module and
once with ``nnlm.kenlm`` installed under its name, on the same synthetic CTC outputs.

    python tests/pyctcdecode_client.py {kenlm,nnlm,own} MODEL.arpa TEXT.txt N [BEAM [HOT]]

Prints one JSON object: for each of the first N lines of TEXT, the best beam's text and
its LM score; the decode time; the peak memory of the process; and whether the
decoder's save/load round trip (which reads ``Model.path`` as bytes) kept the text.
Logits: per character of the line, 2-3 frames peaked on it (blanks between repeats),
over a seeded noise floor, so both runs decode the same matrices.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time

import numpy as np

which, arpa, text, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# which: kenlm (the kenlm module), nnlm (nnlm.kenlm under kenlm's name), class (nnlm's
# PyctcdecodeLM, no kenlm module at all), shim0 (nnlm.kenlm under kenlm's name with no
# batching of the States a step writes: one network pass per distinct State), own
# (nnlm.pyctcdecode under pyctcdecode's name: nnlm's decoder, no pyctcdecode at all)
beam = int(sys.argv[5]) if len(sys.argv) > 5 else 50
hot = int(sys.argv[6]) if len(sys.argv) > 6 else 0  # hotwords: that many made-up words
hotwords = [f"zq{i}x" for i in range(hot)] or None
if which == "own":
    import warnings

    import nnlm.pyctcdecode

    warnings.simplefilter("ignore")
    sys.modules["pyctcdecode"] = nnlm.pyctcdecode
if which in ("nnlm", "shim0"):
    import warnings

    import nnlm.kenlm

    warnings.simplefilter("ignore")  # the fixture's odd sums: said once, not per load
    sys.modules["kenlm"] = nnlm.kenlm
    if which == "shim0":
        import nnlm.decoding.kenlm

        nnlm.decoding.kenlm.PENDING_ROWS = 0

from pyctcdecode import build_ctcdecoder  # noqa: E402 - after the kenlm module is chosen

from ctc_logits import LABELS, logits_for  # noqa: E402 - beside this script

lines = [x.strip().lower() for x in open(text, encoding="utf-8") if x.strip()][:n]
rng = np.random.default_rng(0)
matrices = [logits_for(line, rng) for line in lines]
if which == "class":
    from pyctcdecode import Alphabet, BeamSearchDecoderCTC

    from nnlm.decoding.pyctcdecode_lm import PyctcdecodeLM

    decoder = BeamSearchDecoderCTC(Alphabet.build_alphabet(LABELS),
                                   language_model=PyctcdecodeLM(arpa))
elif which == "shim0":  # the same unigrams as PyctcdecodeLM takes by default
    from nnlm.models import load_model

    unigrams = [w for w in load_model(arpa).vocab.words if w not in ("<s>", "</s>", "<unk>")]
    decoder = build_ctcdecoder(LABELS, kenlm_model_path=arpa, unigrams=unigrams)
else:
    decoder = build_ctcdecoder(LABELS, kenlm_model_path=arpa)
decoder.decode_beams(matrices[0], beam_width=beam)  # warm-up: first-use costs
started = time.perf_counter()
beams = [decoder.decode_beams(m, beam_width=beam, hotwords=hotwords)[0] for m in matrices]
seconds = time.perf_counter() - started
round_trip = None  # pyctcdecode saves by copying one model file: a directory has none
if not os.path.isdir(arpa) or which == "class":
    with tempfile.TemporaryDirectory() as tmp:
        decoder.save_to_dir(tmp)
        if which == "class":
            reloaded = BeamSearchDecoderCTC(Alphabet.build_alphabet(LABELS),
                                            PyctcdecodeLM.load_from_dir(tmp + "/language_model"))
        else:
            reloaded = type(decoder).load_from_dir(tmp)
        round_trip = (reloaded.decode(matrices[0], beam_width=beam)
                      == decoder.decode(matrices[0], beam_width=beam))
print(json.dumps({
    "kenlm": which, "beam_width": beam, "hotwords": hot, "sentences": len(lines),
    "texts": [b[0] for b in beams], "lm_scores": [float(b[-1]) for b in beams],
    "decode_seconds": seconds, "peak_rss_mb": resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024, "save_load_round_trip": round_trip}))

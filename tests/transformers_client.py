"""transformers' Wav2Vec2ProcessorWithLM as a client of pyctcdecode: run once in
pyctcdecode's own environment and once with nnlm.pyctcdecode in its place (the alias),
on the same synthetic logits, with a processor made from a local vocabulary (no
download).

    python tests/transformers_client.py MODEL.arpa TEXT.txt N

Prints one JSON object: ``batch_decode``'s texts and LM scores for the first N lines of
TEXT, and whether ``save_pretrained`` / ``from_pretrained`` kept the decoder's text.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import warnings

import numpy as np

warnings.simplefilter("ignore")
from transformers import (  # noqa: E402 - after the warnings are silenced
    Wav2Vec2CTCTokenizer,
    Wav2Vec2FeatureExtractor,
    Wav2Vec2ProcessorWithLM,
)

from ctc_logits import LABELS, logits_for  # noqa: E402 - beside this script

arpa, text, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
folder = tempfile.mkdtemp()
letters = "abcdefghijklmnopqrstuvwxyz"
vocab = {"<pad>": 0, "|": 1, "'": 2, **{c: i + 3 for i, c in enumerate(letters)}}
with open(os.path.join(folder, "vocab.json"), "w") as f:
    json.dump(vocab, f)
tokenizer = Wav2Vec2CTCTokenizer(os.path.join(folder, "vocab.json"), unk_token="<unk>",
                                 pad_token="<pad>", word_delimiter_token="|")
labels = [k for k, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
import pyctcdecode  # noqa: E402 - the real one, or nnlm's in its place

decoder = pyctcdecode.build_ctcdecoder(labels, arpa)
processor = Wav2Vec2ProcessorWithLM(feature_extractor=Wav2Vec2FeatureExtractor(),
                                    tokenizer=tokenizer, decoder=decoder)
lines = [x.strip().lower() for x in open(text, encoding="utf-8") if x.strip()][:n]
rng = np.random.default_rng(0)
extra = len(labels) - len(LABELS)  # the tokenizer's own specials: never heard
matrices = [np.pad(logits_for(line, rng), ((0, 0), (0, extra)), constant_values=-30)
            for line in lines]
frames = max(len(m) for m in matrices)
batch = np.stack([np.pad(m, ((0, frames - len(m)), (0, 0)), constant_values=-30)
                  for m in matrices])
out = processor.batch_decode(batch)
processor.save_pretrained(os.path.join(folder, "saved"))
again = Wav2Vec2ProcessorWithLM.from_pretrained(os.path.join(folder, "saved"))
print(json.dumps({"texts": list(out.text), "lm_scores": [float(x) for x in out.lm_score],
                  "round_trip": again.decoder.decode(matrices[0]) == decoder.decode(matrices[0]),
                  "pyctcdecode": pyctcdecode.__name__}))

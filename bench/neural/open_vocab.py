"""Out-of-vocabulary feature vectors against ``<unk>``, on Brown test.

A model trained with a small vocabulary (``--min-count 10``: words seen at least 10 times
in train) meets many words it does not know. Scored two ways, token by token:

- ``<unk>`` mapping: every unknown word is ``<unk>``, as context and as target;
- open vocabulary (``nnlm eval --open-vocab``): each new word gets C(j) = sum_i C(i)
  q(i | context) at its first occurrence (scored as ``<unk>``), joins the vocabulary, and
  is read and predicted through its own rows afterwards, which a gradient step after each
  scored stretch refines (``--lr``; ``--prior`` picks q, see ``nnlm.neural.open_vocab``).
  ``--variants`` also scores the paper's rule alone (tokens prior, no step) and each
  change by itself.

Two sets of tokens are compared:

1. in-vocabulary targets whose context holds an unknown word;
2. later occurrences of unknown words (``<unk>`` mapping: log p(<unk>); open: log p(j)).
   p(<unk>) is the probability of the whole class of unknown words, so the table also
   gives it spread evenly over the word types ``<unk>`` stands for in train, and the
   perplexity of both with every new-word token scored as ``<unk>`` spread that way.

    NLTK_DATA=... python bench/neural/open_vocab.py runs/mlp1-v10 data/brown/test.txt \\
        --train data/brown/train.txt [--variants] [--out JSON]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nnlm.models import load_model
from nnlm.neural.open_vocab import DEFAULT_LR, score_open_vocab
from nnlm.text.corpus import count_words, read_stream

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def summary(base: np.ndarray, open_: np.ndarray) -> dict:
    return {"tokens": int(len(base)), "unk_mean_logprob": float(base.mean()),
            "open_mean_logprob": float(open_.mean()),
            "gain_nats_per_token": float((open_ - base).mean()),
            "share_improved": float(np.mean(open_ > base))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", type=Path)
    ap.add_argument("text", type=Path)
    ap.add_argument("--train", type=Path, required=True,
                    help="the training text (to count the types <unk> stands for)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/open_vocab.json"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=DEFAULT_LR)
    ap.add_argument("--prior", choices=("types", "tokens"), default="types")
    ap.add_argument("--variants", action="store_true",
                    help="also the paper's rule alone and each change by itself")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    t = time.perf_counter()
    base = lm.logprobs(read_stream(args.text, lm.vocab))
    base_s = time.perf_counter() - t
    counts = count_words(args.train)
    unk_types = sum(1 for w, c in counts.items() if w not in lm.vocab.index and w != "<unk>")
    runs = [(args.prior, args.lr)]
    if args.variants:
        runs += [r for r in [("tokens", 0.0), ("types", 0.0), ("tokens", args.lr)]
                 if r not in runs]
    results = []
    for prior, lr in runs:
        t = time.perf_counter()
        res = score_open_vocab(load_model(args.model), args.text, lr, prior)
        seconds = time.perf_counter() - t
        assert len(base) == len(res.logprobs)
        ctx, later = res.oov_in_context, res.later_oov
        untouched = ~(ctx | later | res.first_oov)
        later_summary = summary(base[later], res.logprobs[later])
        later_summary["unk_spread_mean_logprob"] = float(base[later].mean()
                                                         - math.log(unk_types))
        later_summary["gain_over_spread"] = float(res.logprobs[later].mean()
                                                  - later_summary["unk_spread_mean_logprob"])
        # like for like: every token of a new word that is scored as <unk> (all of them
        # under the <unk> mapping, the first occurrences in the open vocabulary) gets
        # p(<unk>) shared evenly by the types <unk> stands for
        new_word = res.first_oov | later
        spread = math.log(unk_types)
        results.append({
            "prior": prior, "lr": lr, "words_added": len(res.added),
            "first_occurrences": int(res.first_oov.sum()), "perplexity_open": res.perplexity,
            "perplexity_unk_spread": float(np.exp(-(base.sum() - spread * new_word.sum())
                                                  / len(base))),
            "perplexity_open_spread": float(np.exp(-(res.logprobs.sum()
                                                     - spread * res.first_oov.sum())
                                                   / len(base))),
            "in_vocabulary_targets_with_new_word_in_context": summary(base[ctx],
                                                                       res.logprobs[ctx]),
            "later_occurrences_of_new_words": later_summary,
            "first_occurrences_summary": summary(base[res.first_oov],
                                                 res.logprobs[res.first_oov]),
            "other_tokens": summary(base[untouched], res.logprobs[untouched]),
            "seconds": seconds})
        print(f"prior={prior} lr={lr}: context "
              f"{results[-1]['in_vocabulary_targets_with_new_word_in_context']['gain_nats_per_token']:+.4f}"
              f" later {later_summary['gain_over_spread']:+.3f} over the spread, perplexity "
              f"{results[-1]['perplexity_open_spread']:.1f} against "
              f"{results[-1]['perplexity_unk_spread']:.1f} (unknown words spread)",
              file=sys.stderr)
    out = {"model": str(args.model), "text": str(args.text), "vocabulary": len(lm.vocab),
           "unk_types_in_train": unk_types, "tokens": int(len(base)),
           "perplexity_unk": float(np.exp(-base.mean())), "unk_seconds": base_s,
           **results[0], "variants": results[1:]}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

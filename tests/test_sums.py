"""One sums-to-1 test over every model kind nnlm loads, through the same door a user
uses (``load_model`` on what the CLI wrote): for seen and unseen contexts, including the
start of a sentence and the null context where a model has one, every next-word
distribution sums to 1 in float64, gives <s> probability 0, and agrees with the model's
own per-token scores."""

from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import toy_text
from nnlm.cli import main
from nnlm.models import load_model
from nnlm.text.vocab import BOS_ID, NO_WORD

KINDS = ["kn", "addk", "interpolated", "class", "pruned", "arpa", "one-file", "nplm",
         "lbl", "energy", "mixture"]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    w = tmp_path_factory.mktemp("sums")
    toy_text(w / "toy", 400)
    train, valid = str(w / "toy/train.txt"), str(w / "toy/valid.txt")
    ng = ["ngram", "train", train, "--discount-fallback"]
    steps = [
        [*ng, "--order", "3", "-o", str(w / "kn"), "--arpa", str(w / "kn.arpa")],
        ["ngram", "train", train, "--method", "addk", "--order", "2", "-o", str(w / "addk")],
        ["ngram", "train", train, "--method", "interpolated", "--order", "3", "--valid", valid,
         "-o", str(w / "interpolated")],
        [*ng, "--method", "class", "--classes", "8", "--order", "3", "-o", str(w / "class")],
        ["ngram", "prune", str(w / "kn"), "--threshold", "1e-5", "-o", str(w / "pruned")],
        ["ngram", "convert", str(w / "kn.arpa"), str(w / "kn.nnlm")],
    ]
    for preset, name in (("tiny", "nplm"), ("lbl", "lbl"), ("energy", "energy")):
        steps.append(["train", train, "--valid", valid, "--preset", preset, "--max-steps", "20",
                      "--threads", "1", "-o", str(w / name)])
    steps.append(["mix", str(w / "kn"), str(w / "nplm"), "--valid", valid,
                  "-o", str(w / "mixture")])
    for argv in steps:
        assert main(argv) == 0, argv
    paths = {k: w / k for k in KINDS}
    paths["arpa"], paths["one-file"] = w / "kn.arpa", w / "kn.nnlm"
    return paths


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_sums_to_one_seen_and_unseen(models, kind):
    lm = load_model(models[kind])
    k, V = lm.order - 1, len(lm.vocab)
    index = lm.vocab.index
    seen = [index[w] for w in "the cat is".split()]
    rows = [[BOS_ID] * k, (([BOS_ID] * k) + seen)[-k:],  # the start; a seen context
            [index.get("<unk>", 0)] * k,                  # unknown words
            list(range(V - k, V))]                        # the rarest words, in a row
    if getattr(lm, "null_context", False):
        rows.append([NO_WORD] * k)                        # KenLM's null context
    contexts = np.array(rows, np.int64).reshape(len(rows), k)
    dist = lm.next_logprobs(contexts)
    assert dist.dtype == np.float64 and dist.shape == (len(rows), V)
    for row in dist:
        assert row[BOS_ID] == -np.inf
        assert math.fsum(np.exp(row[np.isfinite(row)])) == pytest.approx(1.0, abs=1e-6)
    targets = np.array([index["the"], index["cat"], 2, 3, 4][: len(rows)], np.int64)
    direct = lm.target_logprobs(contexts, targets)
    assert np.allclose(direct, dist[np.arange(len(rows)), targets], atol=1e-5)

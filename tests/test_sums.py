"""One sums-to-1 test over every model kind nnlm loads, through the same door a user
uses (``load_model`` on what the CLI wrote): for seen and unseen contexts, including the
start of a sentence and the null context where a model has one, every next-word
distribution sums to 1 in float64, gives <s> probability 0, and agrees with the model's
own per-token scores (an nnlm.nltk model, written from Python, too)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from conftest import toy_text
from nnlm.cli import main
from nnlm.models import MODEL_KINDS, load_model
from nnlm.neural.networks.registry import NETWORKS
from nnlm.neural.presets import PRESETS
from nnlm.ngram.estimate.methods import METHODS
from nnlm.text.vocab import BOS_ID, NO_WORD

# derived from the registries, so that a new method, network or kind is covered without
# anyone remembering; what is left out says why
NOT_DISTRIBUTIONS = {"stupid": "Stupid Backoff gives scores, not probabilities"}
METHOD_CASES = [m for m in METHODS if m not in NOT_DISTRIBUTIONS]
NETWORK_CASES = list(NETWORKS)
FORM_CASES = ["pruned", "merged", "arpa", "one-file", "mixture"]  # other forms of a model
NLTK_CASES = ["nltk"]  # an nnlm.nltk model saved from Python
KINDS = METHOD_CASES + NETWORK_CASES + FORM_CASES + NLTK_CASES
SMALL = {"deep": ["--m", "16", "--h", "16"], "lstm": ["--m", "16", "--h", "16"]}


def _preset_of(network: str) -> str:
    return next(name for name, p in PRESETS.items()
                if p["model"].get("network", "nplm") == network)


def save_nltk_model(train: Path, path: Path) -> None:
    """Kneser-Ney as nltk.lm defines it, with rare words counted as <UNK>."""
    from nnlm.nltk import KneserNeyInterpolated, Vocabulary
    from nnlm.nltk.preprocessing import padded_everygram_pipeline

    sentences = [line.split() for line in train.read_text().splitlines()]
    model = KneserNeyInterpolated(3, vocabulary=Vocabulary(unk_cutoff=2))
    model.fit(*padded_everygram_pipeline(3, sentences))
    model.save(path)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    w = tmp_path_factory.mktemp("sums")
    toy_text(w / "toy", 400)
    train, valid = str(w / "toy/train.txt"), str(w / "toy/valid.txt")
    method_flags = {"addk": ["--order", "2"], "interpolated": ["--valid", valid],
                    "class": ["--classes", "8", "--discount-fallback"],
                    "kn": ["--discount-fallback", "--arpa", str(w / "kn.arpa")],
                    "infgram": ["--discount-fallback"]}
    steps = [["ngram", "train", train, "--method", m, "--order", "3",
              *method_flags.get(m, []), "-o", str(w / m)] for m in METHOD_CASES]
    steps += [["ngram", "prune", str(w / "kn"), "--threshold", "1e-5", "-o", str(w / "pruned")],
              ["ngram", "merge", str(w / "kn"), str(w / "pruned"), "--weights", "0.3", "0.7",
               "-o", str(w / "merged")],
              ["ngram", "convert", str(w / "kn.arpa"), str(w / "kn.nnlm")]]
    for net in NETWORK_CASES:
        steps.append(["train", train, "--valid", valid, "--preset", _preset_of(net),
                      *SMALL.get(net, []), "--max-steps", "20", "--threads", "1",
                      "-o", str(w / net)])
    steps.append(["mix", str(w / "kn"), str(w / "nplm"), "--valid", valid,
                  "-o", str(w / "mixture")])
    for argv in steps:
        assert main(argv) == 0, argv
    save_nltk_model(w / "toy/train.txt", w / "nltk")
    paths = {k: w / k for k in KINDS}
    paths["arpa"], paths["one-file"] = w / "kn.arpa", w / "kn.nnlm"
    return paths


def test_every_kind_nnlm_saves_is_covered(models):
    """Every model kind the registry reads is among the cases (or said not to be a
    distribution), and every network of the family is."""
    import json

    saved = {json.loads((p / "config.json").read_text())["nnlm_model"]
             for p in models.values() if p.is_dir()}
    assert set(MODEL_KINDS) - set(NOT_DISTRIBUTIONS) <= saved, \
        set(MODEL_KINDS) - set(NOT_DISTRIBUTIONS) - saved


@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_sums_to_one_seen_and_unseen(models, kind):
    lm = load_model(models[kind])
    k, V = lm.order - 1, len(lm.vocab)
    index = lm.vocab.index
    seen = [index[w] for w in "the cat is".split()]
    rows = [[BOS_ID] * k, (([BOS_ID] * k) + seen)[-k:],  # the start; a seen context
            [index.get("<unk>", 0)] * k,                  # unknown words
            [V - 1 - i % (V - 4) for i in range(k)]]      # the rarest words, in a row
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

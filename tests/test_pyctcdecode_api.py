"""nnlm.pyctcdecode against pyctcdecode 0.5 itself, side by side (its own environment,
``make pyctcdecode-env``, with the kenlm module): on character and subword alphabets,
peaked and noisy logits, with and without a language model and hotwords (1, 10 and
1,000), pruned history or not, every beam's text, word frames and scores are
pyctcdecode's; so are ``decode``'s text and ``decode_beams_batch``'s beams. Streamed
decoding (chunk by chunk) gives the whole utterance's beams. Bad input is one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import toy_kn
from ctc_logits import LABELS, logits_for

ROOT = Path(__file__).resolve().parents[1]
PYCTC = ROOT / ".venv-pyctcdecode" / "bin" / "python"
SIDE = Path(__file__).parent / "pyctcdecode_side.py"
SAMPLE = ROOT / ".venv-pyctcdecode" / "lib" / "python3.11" / "site-packages" / \
    "pyctcdecode" / "tests" / "sample_data"
LIBRI_LABELS = [" ", *"abcdefghijklmnopqrstuvwxyz", "'"]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A KN 3-gram of the toy world as ARPA, its test sentences, and their logits."""
    d = tmp_path_factory.mktemp("ctc")
    arpa, lines = toy_kn(d, 3)
    return d, arpa, [x.lower() for x in lines]


def noisy(rng, frames: int, width: int) -> np.ndarray:
    """Log-softmax of Gaussian noise: every label competes, beams merge and prune."""
    x = rng.normal(size=(frames, width)) * 2
    return (x - np.log(np.exp(x).sum(axis=1, keepdims=True))).astype(np.float32)


def bpe_labels(lines: list[str]) -> list[str]:
    """Subword labels of the toy words: a word start (▁ and its first two letters), the
    letters, the unknown piece, the blank."""
    words = sorted({w for line in lines for w in line.split()})
    starts = sorted({"▁" + w[:2] for w in words})
    letters = sorted({c for w in words for c in w[2:]})
    return ["", *starts, *letters, "▁⁇▁"]


def cases_and_logits(world) -> tuple[list, dict]:
    d, arpa, lines = world
    rng = np.random.default_rng(0)
    logits = {f"peaked{i}": logits_for(line, rng) for i, line in enumerate(lines[:6])}
    logits.update({f"noise{i}": noisy(rng, 40, len(LABELS)) for i in range(3)})
    bpe = bpe_labels(lines)
    logits.update({f"bpe{i}": noisy(rng, 30, len(bpe)) for i in range(3)})
    vocab = sorted({w for line in lines for w in line.split()})
    hot1, hot10 = ["zebra"], vocab[:8] + ["zebra", "the cat"]
    hot1000 = [f"w{i}" for i in range(990)] + vocab[:10]
    chars = [f"peaked{i}" for i in range(6)] + [f"noise{i}" for i in range(3)]
    base = {"alpha": 0.5, "beta": 1.0}
    cases = [
        dict(labels=LABELS, model=None, unigrams=None, build={},
             decode={"beam_width": 16}, utterances=chars[:5], stream=7),
        dict(labels=LABELS, model=str(arpa), unigrams=None, build=base,
             decode={"beam_width": 16}, utterances=chars, stream=9),
        dict(labels=LABELS, model=str(arpa), unigrams=vocab[:20], build={**base,
             "lm_score_boundary": False, "unk_score_offset": -4.0},
             decode={"beam_width": 8, "prune_history": True}, utterances=chars[:6]),
        dict(labels=LABELS, model=str(arpa), unigrams=None, build=base,
             decode={"beam_width": 16, "hotwords": hot1}, utterances=chars[:5]),
        dict(labels=LABELS, model=str(arpa), unigrams=None, build=base,
             decode={"beam_width": 16, "hotwords": hot10, "hotword_weight": 3.0},
             utterances=chars),
        dict(labels=LABELS, model=str(arpa), unigrams=None, build=base,
             decode={"beam_width": 16, "hotwords": hot1000}, utterances=chars[:4]),
        dict(labels=bpe, model=str(arpa), unigrams=None, build=base,
             decode={"beam_width": 16, "token_min_logp": -3.0},
             utterances=["bpe0", "bpe1", "bpe2"], stream=11),
        dict(labels=bpe, model=None, unigrams=None, build={},
             decode={"beam_width": 12, "hotwords": hot10}, utterances=["bpe0", "bpe1"]),
    ]
    if (SAMPLE / "libri_logits.json").exists():
        logits["libri"] = np.array(json.loads((SAMPLE / "libri_logits.json").read_text()),
                                   np.float32)
        cases.append(dict(labels=LIBRI_LABELS, model=str(SAMPLE / "bugs_bunny_kenlm.arpa"),
                          unigrams=None, build={}, decode={"beam_width": 20},
                          utterances=["libri"], stream=50))
    return cases, logits


# nnlm's side keeps pyctcdecode's scoring of an empty last word (an utterance that ends on
# the word separator), which it otherwise fixes (decoding/ctc/fusion.py): its beams are
# then pyctcdecode's to the bit; test_ctc_prefix_search.py tests the fix
EXACT = {**os.environ, "NNLM_PYCTCDECODE_EXACT": "1"}


def run_side(which: str, python: Path, cases: list, logits: dict, tmp: Path) -> list:
    (tmp / "cases.json").write_text(json.dumps(cases))
    np.savez(tmp / "logits.npz", **logits)
    done = subprocess.run([str(python), str(SIDE), which, str(tmp / "cases.json"),
                           str(tmp / "logits.npz")], capture_output=True, text=True,
                          cwd=Path(__file__).parent, timeout=900, env=EXACT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def same_beams(mine: list, theirs: list, where: str) -> None:
    assert [b[0] for b in mine] == [b[0] for b in theirs], where
    for a, b in zip(mine, theirs):
        assert a[1] == b[1], where
        assert a[2] == pytest.approx(b[2], abs=1e-6) and a[3] == pytest.approx(b[3], abs=1e-6), \
            where


@pytest.mark.slow
def test_every_beam_is_pyctcdecodes(world, tmp_path):
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    cases, logits = cases_and_logits(world)
    theirs = run_side("pyctcdecode", PYCTC, cases, logits, tmp_path)
    mine = run_side("nnlm", Path(sys.executable), cases, logits, tmp_path)
    for n, (case, a, b) in enumerate(zip(cases, mine, theirs)):
        for key, x, y in zip(case["utterances"], a["utterances"], b["utterances"]):
            where = f"case {n} ({case['decode']}), {key}"
            same_beams(x["beams"], y["beams"], where)
            assert x["text"] == y["text"], where
            if case.get("stream") and not case["labels"][1].startswith("▁"):
                streamed = x["stream"]
                assert [" ".join(s[0].split()) for s in streamed] == \
                    [w[0] for w in x["beams"]], where
                assert [s[3] for s in streamed] == pytest.approx(
                    [w[3] for w in x["beams"]], abs=1e-9), where
        for x, y in zip(a["batch"], b["batch"]):
            same_beams(x, y, f"case {n}, batch")


@pytest.mark.slow
def test_transformers_decodes_through_nnlm_as_through_pyctcdecode(world, tmp_path):
    """transformers' Wav2Vec2ProcessorWithLM, with nnlm.pyctcdecode put in pyctcdecode's
    place by its install-alias (transformers finds pyctcdecode by its metadata), gives
    the texts and LM scores it gives with pyctcdecode itself; save_pretrained and
    from_pretrained keep the decoder."""
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    client = Path(__file__).parent / "transformers_client.py"
    for python in (PYCTC, Path(sys.executable)):
        if subprocess.run([str(python), "-c", "import transformers"],
                          capture_output=True).returncode != 0:
            pytest.skip(f"transformers is not installed for {python}")
    d, arpa, _ = world
    text = d / "toy" / "test.txt"
    site = tmp_path / "site"
    site.mkdir()
    env = {**EXACT, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT / "src")])}
    subprocess.run([sys.executable, "-m", "nnlm.pyctcdecode", "install-alias", "--site",
                    str(site)], env=env, check=True, capture_output=True)
    results = []
    for python, environ in ((PYCTC, None), (Path(sys.executable), env)):
        done = subprocess.run([str(python), str(client), str(arpa), str(text), "6"],
                              capture_output=True, text=True, env=environ,
                              cwd=Path(__file__).parent, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    theirs, mine = results
    assert theirs["pyctcdecode"] == "pyctcdecode" and mine["pyctcdecode"] == "nnlm.pyctcdecode"
    assert mine["texts"] == theirs["texts"] and mine["round_trip"] and theirs["round_trip"]
    assert mine["lm_scores"] == pytest.approx(theirs["lm_scores"], abs=1e-6)

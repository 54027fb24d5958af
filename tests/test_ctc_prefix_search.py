"""nnlm.pyctcdecode on its own (pyctcdecode itself is the oracle of
tests/test_pyctcdecode_api.py): bad input is one ValueError naming the argument, a
hotword the LM does not know is decoded where the audio supports it and nowhere else,
streamed chunks give the whole utterance's beams, any nnlm model is the LM with its own
word list, and a decoder saves and loads without replacing anything."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

from conftest import toy_kn
from ctc_logits import LABELS, logits_for
from nnlm.pyctcdecode import BeamSearchDecoderCTC, build_ctcdecoder
from nnlm.pyctcdecode.alphabet import Alphabet


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctc")
    _, lines = toy_kn(d, 3, 300)
    return d, [x.lower() for x in lines]


def test_bad_input_is_one_value_error_naming_it(world):
    d, lines = world
    decoder = build_ctcdecoder(LABELS, str(d / "kn3.arpa"))
    x = logits_for(lines[0], np.random.default_rng(0))
    for bad, match in [(x[0], "dimensions"), (x[:, :5], "vocabulary is size"),
                       (x.astype(object), "numbers"), ("abc", "numpy array")]:
        with pytest.raises(ValueError, match=match):
            decoder.decode(bad)
    for value in (np.nan, np.inf):
        y = x.copy()
        y[3, 4] = value
        with pytest.raises(ValueError, match="NaN or \\+inf"):
            decoder.decode(y)
    y = x.copy()
    y[:, 5] = -np.inf  # a masked label is allowed: it is never read
    assert decoder.decode(y) == decoder.decode(np.where(np.isinf(y), -1e9, y))
    with pytest.raises(ValueError, match="hotword_weight=nan"):
        decoder.decode(x, hotwords=["cat"], hotword_weight=float("nan"))
    with pytest.raises(ValueError, match="beam_width=0"):
        decoder.decode(x, beam_width=0)
    with pytest.raises(ValueError, match="one string"):
        decoder.decode(x, hotwords="cat")
    with pytest.raises(ValueError, match="alpha=nan"):
        build_ctcdecoder(LABELS, str(d / "kn3.arpa"), alpha=float("nan"))
    with pytest.raises(ValueError, match="duplicate"):
        build_ctcdecoder(["", "a", "a"])
    with pytest.raises(ValueError, match="Space token"):
        build_ctcdecoder(["", "▁a", "b c"])
    with pytest.raises(OSError):
        build_ctcdecoder(LABELS, str(d / "toy/train.txt"))
    pool = mp.get_context("fork").Pool(1)
    pool.close()
    with pytest.raises(ValueError):
        decoder.decode_batch(pool, [x, x])
    # blank hotwords are ignored and an empty utterance is "", as pyctcdecode does
    assert decoder.decode(x, hotwords=["", "  "]) == decoder.decode(x)
    assert decoder.decode(x[:0]) == ""


def test_a_hotword_the_lm_lacks_is_decoded_where_it_is_spoken_only(world):
    d, lines = world
    decoder = build_ctcdecoder(LABELS, str(d / "kn3.arpa"), alpha=0.5, beta=1.0)
    rng = np.random.default_rng(1)
    spoken = "the zebra is sleeping"
    x = logits_for(spoken, rng)
    plain = decoder.decode(x, beam_width=32)  # the LM alone prefers a word it knows
    assert "zebra" not in plain.split()
    boosted = decoder.decode(x, beam_width=32, hotwords=["zebra"], hotword_weight=10.0)
    assert "zebra" in boosted.split()
    other = logits_for(lines[0], rng)
    assert "zebra" not in decoder.decode(other, beam_width=32,
                                         hotwords=["zebra"]).split()
    assert plain.split()[0] == boosted.split()[0] == "the"


def test_streamed_chunks_give_the_whole_utterances_beams(world):
    d, lines = world
    decoder = build_ctcdecoder(LABELS, str(d / "kn3.arpa"), alpha=0.5, beta=1.0)
    rng = np.random.default_rng(2)
    for line in lines[:4]:
        x = logits_for(line, rng)
        whole = decoder.decode_beams(x, beam_width=16)
        for chunk in (1, 7, 30):
            beams, cache, partial = decoder.get_starting_state()
            for lo in range(0, len(x), chunk):
                last = lo + chunk >= len(x)
                beams = decoder.partial_decode_beams(x[lo:lo + chunk], cache, partial, beams,
                                                     lo, beam_width=16, is_end=last,
                                                     force_next_word=last)
            assert [" ".join(b.text.split()) for b in beams] == [b.text for b in whole]
            assert [b.lm_score for b in beams] == pytest.approx(
                [b.lm_score for b in whole], abs=1e-9)


def test_any_nnlm_model_is_the_lm_with_its_own_word_list(world, tmp_path):
    d, lines = world
    decoder = build_ctcdecoder(LABELS, str(d / "kn3"))  # a model directory: no ARPA
    lm = decoder.model_container[decoder._model_key]
    vocab = (d / "kn3" / "vocab.txt").read_text().split("\n")[1:]
    words = {line.split("\t")[1] for line in vocab if line} - {"<s>", "</s>", "<unk>"}
    assert lm._unigram_set == words
    arpa = build_ctcdecoder(LABELS, str(d / "kn3.arpa"))
    x = logits_for(lines[1], np.random.default_rng(3))
    assert decoder.decode_beams(x)[0].text == arpa.decode_beams(x)[0].text
    decoder.save_to_dir(str(tmp_path))
    with pytest.raises(FileExistsError):
        decoder.save_to_dir(str(tmp_path))  # nothing of the first save is replaced
    again = BeamSearchDecoderCTC.load_from_dir(str(tmp_path))
    assert again.decode(x) == decoder.decode(x)
    assert Alphabet.loads((tmp_path / "alphabet.json").read_text()).labels == LABELS


def test_hotword_counts_are_pyctcdecodes_expression_counts():
    """A text's hotword count by set lookups equals the matches of pyctcdecode's regular
    expression (every hotword word between whitespace, longest first), on random texts
    and hotwords full of the characters an expression could trip on."""
    import random

    from nnlm.decoding.ctc.hotwords import HotwordScorer, _pattern

    rng = random.Random(0)
    chars = "ab.-*'c+?"
    for _ in range(2000):
        hotwords = [" ".join("".join(rng.choice(chars) for _ in range(rng.randint(1, 3)))
                             for _ in range(rng.randint(1, 2)))
                    for _ in range(rng.randint(1, 6))]
        text = "".join(rng.choice(chars + " \t\n") for _ in range(rng.randint(0, 24)))
        scorer = HotwordScorer.build_scorer(hotwords, weight=2.0)
        words = {w for h in hotwords for w in h.split()}
        assert scorer.score(text) == 2.0 * len(_pattern(words).findall(text)), (hotwords, text)

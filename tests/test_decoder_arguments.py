"""Every argument of the decoders checked in one line naming it: sizes against memory
before anything is allocated, numbers finite, types as documented, States of either
face (``nnlm.Decoder``'s and ``nnlm.kenlm``'s) holding only the model's ids."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import nnlm
from conftest import toy_world
from nnlm.base import sysmem
from nnlm.base.errors import NnlmError
from nnlm.decoding.ctc import beam_search, reference_beam_search
from nnlm.decoding.whole_line import History, WholeLine
from nnlm.generate import generate
from nnlm.models import load_model


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return toy_world(tmp_path_factory.mktemp("decoder_arguments"))


@pytest.fixture(scope="module")
def kn3(world):
    return load_model(world / "kn3")


def frames(lm, t=4, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(t, len(lm.vocab) + 1))
    return torch.log_softmax(torch.from_numpy(x), dim=1)


# -- sizes ---------------------------------------------------------------------------------
def test_a_beam_past_memory_is_refused_before_allocating(kn3, monkeypatch):
    monkeypatch.setattr(sysmem, "available_memory", lambda: 1 << 30)
    with pytest.raises(NnlmError, match=r"beam=1000000 .* needs .* of memory") as e:
        beam_search(frames(kn3, 50), kn3, beam=10**6)
    assert "\n" not in str(e.value)
    beam_search(frames(kn3, 50), kn3, beam=64)  # what fits still runs


def test_the_beams_merge_needs_no_square_of_the_beam(kn3, monkeypatch):
    """Prefixes are merged through sorted hashes: a wide beam costs its width, not its
    square (a B x B comparison of 10^6 hypotheses took a terabyte), and still decodes
    what the one-at-a-time reference does."""
    lp = frames(kn3, 3, seed=4)
    fast = beam_search(lp, kn3, beam=200)
    slow = reference_beam_search(lp.numpy(), nnlm.Decoder(kn3), beam=200)
    assert [h.words for h in fast[:20]] == [h.words for h in slow[:20]]
    assert [h.score for h in fast[:20]] == pytest.approx([h.score for h in slow[:20]])


def test_generate_checks_its_sizes(kn3, monkeypatch):
    monkeypatch.setattr(sysmem, "available_memory", lambda: 1 << 30)
    with pytest.raises(NnlmError, match="n=1000000000"):
        generate(kn3, n=10**9)
    assert len(generate(kn3, n=np.int64(2), seed=np.int64(1))) == 2


def test_a_dynamic_evaluation_segment_past_memory_is_refused(world, monkeypatch):
    from nnlm.neural.adaptation.dynamic import DynamicSettings, dynamic_logprobs
    from nnlm.text.stream import Stream

    lm = load_model(world / "nplm")
    stream = Stream.from_lines([["the", "cat"]] * 5, lm.vocab)
    monkeypatch.setattr(sysmem, "available_memory", lambda: 1 << 30)
    with pytest.raises(NnlmError, match="segment=1000000000"):
        dynamic_logprobs(lm, stream, DynamicSettings(lr=0.1, decay=0.0, segment=10**9))
    scores, _ = dynamic_logprobs(lm, stream, DynamicSettings(lr=0.1, decay=0.0, segment=4))
    assert np.isfinite(scores).all()


# -- numbers and types ---------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(lm_weight=math.nan), "lm_weight=nan"), (dict(lm_weight=math.inf), "lm_weight=inf"),
    (dict(lm_weight=-1.0), "lm_weight=-1.0"), (dict(word_bonus=math.nan), "word_bonus=nan"),
    (dict(word_bonus=-math.inf), "word_bonus=-inf"), (dict(beam=0), "beam=0"),
    (dict(beam=2.5), "beam=2.5"), (dict(beam=True), "beam=True"),
    (dict(lm_weight="0.5"), "lm_weight='0.5'")])
def test_beam_search_arguments_are_one_line(kn3, kwargs, match):
    for search in (beam_search, lambda lp, lm, **kw: reference_beam_search(
            lp, nnlm.Decoder(lm), **kw)):
        with pytest.raises(NnlmError, match=match) as e:
            search(frames(kn3), kn3, **kwargs)
        assert "\n" not in str(e.value)


def test_beam_search_log_probs(kn3):
    lp = frames(kn3)
    for bad, match in ((torch.full_like(lp, math.nan), "NaN"),
                       (lp.clone().fill_(math.inf), r"\+inf"),
                       ([[0.0] * lp.shape[1]], "a tensor"),
                       (lp.to(torch.int64), "floating-point")):
        with pytest.raises(NnlmError, match=match):
            beam_search(bad, kn3)
    as_numpy = beam_search(lp.numpy(), kn3)  # numpy's arrays are taken as tensors
    assert [h.words for h in as_numpy] == [h.words for h in beam_search(lp, kn3)]


# -- hand-made States, on both faces -------------------------------------------------------
@pytest.mark.parametrize("words", [(10**6, 10**6), (-5, -5), (0, 10**9)])
def test_a_hand_made_state_outside_the_vocabulary_is_refused(kn3, words):
    model = nnlm.Decoder(kn3)
    for call in (lambda: model.advance([nnlm.DecoderState(words)]),
                 lambda: model.advance([nnlm.DecoderState(words)], ["the"]),
                 lambda: model.BaseScore(nnlm.DecoderState(words), "the", nnlm.DecoderState())):
        with pytest.raises(NnlmError, match="not in the vocabulary") as e:
            call()
        assert isinstance(e.value, ValueError)


def test_state_words_are_ids(kn3):
    for words in (("the", "cat"), (1.5, 2.0), (True, 1)):
        with pytest.raises(NnlmError, match="State words"):
            nnlm.DecoderState(words)
    assert nnlm.DecoderState((np.int64(1), 2)).words == (1, 2)


def test_next_words_state_checks_row_and_word(kn3):
    model = nnlm.Decoder(kn3)
    start = nnlm.DecoderState()
    model.BeginSentenceWrite(start)
    rows = model.advance([start])
    for row, word, match in ((0, 10**9, "word="), (5, 3, "row="), (-1, 3, "row="),
                             (0, 1, "<s>"), (0.0, 3, "row=")):
        with pytest.raises(NnlmError, match=match):
            rows.state(row, word)
    after = rows.state(np.int64(0), np.int64(3))
    assert model.advance([after], ["the"]).log10[0] <= 0


# -- the adapters ---------------------------------------------------------------------------
def test_whole_line_checks_words_and_histories(world):
    lm = load_model(world / "nplm")
    whole = WholeLine(lm)
    start, out = History(), History()
    whole.BeginSentenceWrite(start)
    assert whole.BaseScore(start, "the", out) <= 0
    for word in (None, 5, b"the"):
        with pytest.raises(NnlmError, match="'word'") as e:
            whole.BaseScore(start, word, History())
        assert isinstance(e.value, TypeError)
    for bad in (History((10**6,)), History(("the",)), History((-3,))):
        with pytest.raises(NnlmError, match="not ids of the model"):
            whole.BaseScore(bad, "the", History())
    with pytest.raises(NnlmError, match="'state'"):
        whole.BaseScore(nnlm.DecoderState(), "the", History())


@pytest.mark.parametrize("name", ["kn3", "nplm"])
def test_flashlight_refuses_a_foreign_state_in_one_line(world, name):
    pytest.importorskip("flashlight.lib.text.decoder",
                        reason="flashlight-text is not installed")
    from flashlight.lib.text.decoder import LMState
    from flashlight.lib.text.dictionary import Dictionary

    from nnlm.decoding.flashlight import FlashlightLM

    lm = load_model(world / name)
    fl = FlashlightLM(lm, Dictionary(list(lm.vocab.words)))
    fl.start(False)
    for call in (lambda: fl.finish(LMState()), lambda: fl.score(LMState(), 0)):
        with pytest.raises(ValueError, match="did not return since its last start"):
            call()

"""The decoder API: KenLM's Python conventions over every model kind, checked
against the kenlm module itself and against nnlm's own whole-sentence scores."""

import math
import warnings

import numpy as np
import pytest

import nnlm
from conftest import write
from nnlm import Stream
from nnlm.base.errors import NnlmError
from nnlm.ngram import KneserNey, write_arpa
from test_ngram import stream_and_vocab, zipf_corpus

SENTENCES = ["w1 w2 w3", "w5 zebra w1", "", "w2 w2 w2 w2 w2 w9"]


@pytest.fixture(scope="module")
def kn(tmp_path_factory):
    stream, vocab = stream_and_vocab(zipf_corpus())
    model = KneserNey(vocab, 4, discount_fallback=True).fit(stream)
    arpa = write_arpa(model, tmp_path_factory.mktemp("kn") / "m.arpa")
    return model, arpa


def test_full_scores_score_and_perplexity_equal_kenlms(kn):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    model, arpa = kn
    theirs, ours = kenlm.Model(str(arpa)), nnlm.Decoder(arpa)
    for s in SENTENCES:
        for bos, eos in ((True, True), (False, True), (True, False), (False, False)):
            a = list(theirs.full_scores(s, bos=bos, eos=eos))
            b = list(ours.full_scores(s, bos=bos, eos=eos))
            assert [(n, o) for _, n, o in a] == [(n, o) for _, n, o in b], (s, bos, eos)
            assert np.allclose([p for p, _, _ in a], [p for p, _, _ in b], atol=1e-5)
            assert ours.score(s, bos, eos) == pytest.approx(theirs.score(s, bos, eos), abs=1e-4)
        assert ours.perplexity(s) == pytest.approx(theirs.perplexity(s), rel=1e-4)
    assert ("w1" in ours) == ("w1" in theirs) and ("zebra" in ours) == ("zebra" in theirs)


def test_state_api_walks_a_sentence_like_kenlm(kn):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    model, arpa = kn
    for state, m in ((kenlm.State, kenlm.Model(str(arpa))),
                     (nnlm.DecoderState, nnlm.Decoder(arpa))):
        a, b = state(), state()
        m.BeginSentenceWrite(a)
        total = 0.0
        for w in ["w1", "w2", "zebra", "w3", "</s>"]:
            total += m.BaseScore(a, w, b)
            a, b = b, a
        if state is kenlm.State:
            want = total
        else:
            assert total == pytest.approx(want, abs=1e-4)
    # null context: the unigram level
    m = nnlm.Decoder(arpa)
    s, out = nnlm.DecoderState(), nnlm.DecoderState()
    m.NullContextWrite(s)
    assert m.BaseScore(s, "w1", out) == pytest.approx(model.unigram_logp[model.vocab.index["w1"]]
                                                      / math.log(10))


def test_states_recombine_and_advance_is_batched_and_exact():
    """Every kind: advance over many hypotheses equals scoring each sentence whole."""
    from nnlm.mixture import Mixture
    from nnlm.neural.nplm_lm import NPLM

    stream, vocab = stream_and_vocab(zipf_corpus())
    kn = KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    net = NPLM.new(vocab, order=4, m=6, h=5, direct=True)
    for lm in (kn, net, Mixture([kn, net])):
        m = nnlm.Decoder(lm)
        sentences = [s.split() for s in SENTENCES if s]
        states = []
        for _ in sentences:
            st = nnlm.DecoderState()
            m.BeginSentenceWrite(st)
            states.append(st)
        totals = np.zeros(len(sentences))
        longest = max(len(s) for s in sentences) + 1
        for t in range(longest):  # a beam that advances every live hypothesis at once
            live = [i for i, s in enumerate(sentences) if t <= len(s)]
            words = [(sentences[i] + ["</s>"])[t] for i in live]
            step = m.advance([states[i] for i in live], words)
            totals[live] += step.log10
            for j, i in enumerate(live):
                states[i] = step.states[j]
        want = [lm.logprobs(Stream.from_lines([s], vocab)).sum() / math.log(10)
                for s in sentences]
        assert np.allclose(totals, want, atol=1e-6)
        a, b = nnlm.DecoderState(), nnlm.DecoderState()
        m.BeginSentenceWrite(a)
        m.BeginSentenceWrite(b)
        assert a == b and hash(a) == hash(b) and len({a, b}) == 1


def test_decoder_api_bad_input(kn):
    from nnlm.neural.nplm_lm import NPLM

    model, arpa = kn
    m = nnlm.Decoder(arpa)
    with pytest.raises(NnlmError, match="<s> may not"):
        m.score("<s> w1")
    with pytest.raises(NnlmError, match="context only"):
        m.BaseScore(nnlm.DecoderState(), "<s>", nnlm.DecoderState())
    neural = nnlm.Decoder(NPLM.new(model.vocab, order=3, m=4, h=3))
    with pytest.raises(NnlmError, match="no null context"):
        neural.score("w1", bos=False)
    with pytest.raises(NnlmError, match="states but"):
        m.advance([nnlm.DecoderState()], ["w1", "w2"])
    with pytest.raises(NnlmError, match="no such"):
        nnlm.Decoder(write(arpa.parent / "x", "").parent / "nothing")


# -- one decoder API, one set of checks: nnlm.Decoder and both paths of nnlm.kenlm ---------
def _apis(lm, arpa):
    """(name, model, State type) for each face a decoder may use over ``lm``."""
    import nnlm.kenlm as nk

    out = [("nnlm.Decoder", nnlm.Decoder(lm), nnlm.DecoderState),
           ("nnlm.kenlm python", nk.Model(lm), nk.State)]
    out[1][1]._fast = None  # its Python path (networks, probing files): the shared core
    for name in ("BaseScore", "BaseFullScore", "BeginSentenceWrite", "NullContextWrite",
                 "score"):
        out[1][1].__dict__.pop(name, None)
    if nk._fast is not None:
        out.append(("nnlm.kenlm compiled", nk.Model(str(arpa)), nk.State))
    return out


def test_every_decoder_api_refuses_the_same_bad_input_in_one_line(kn):
    model, arpa = kn
    for name, m, state_type in _apis(model, arpa):
        a, b = state_type(), state_type()
        m.BeginSentenceWrite(a)
        for bad in (None, 3, 2.5, ["w1"]):
            with pytest.raises(TypeError):
                m.score(bad)
            with pytest.raises(TypeError):
                m.BaseScore(a, bad, b)
            with pytest.raises(TypeError):
                m.BaseScore(bad, "w1", b)
        if name == "nnlm.Decoder":  # nnlm's face predicts no <s>
            with pytest.raises(ValueError, match="context only|may not"):
                m.BaseScore(a, "<s>", b)
        else:  # kenlm's scores it as a word: its stored -99 (tests/test_kenlm_module.py)
            assert m.BaseScore(a, "<s>", b) <= -99
        with pytest.raises(UnicodeEncodeError):  # a lone surrogate is no UTF-8
            m.score("w1 \ud800 w2")
        other = nnlm.Decoder(model) if name == "nnlm.Decoder" else type(m)(model)
        s = state_type()
        other.BeginSentenceWrite(s)
        with pytest.raises(ValueError, match="another model"):
            m.BaseScore(s, "w1", b)
        if name == "nnlm.Decoder":  # the errors are nnlm's too: one line for a CLI
            with pytest.raises(NnlmError):
                m.score(None)
            for bad_id in (-1, len(model.vocab), True):
                with pytest.raises((ValueError, TypeError)):
                    m.advance([nnlm.DecoderState()], [bad_id])
            assert m.advance([nnlm.DecoderState()], [model.vocab.index["w1"]]).log10[0] == \
                pytest.approx(m.advance([nnlm.DecoderState()], ["w1"]).log10[0])


def test_every_decoder_api_splits_as_kenlm_and_takes_utf8_bytes(kn):
    model, arpa = kn
    odd = "w1\u00a0w2 w3\u2028w1 w2\x0bw3\x0cw1\tw2"
    words = [w.decode() for w in odd.encode().split()]  # kenlm splits the UTF-8 bytes
    assert len(words) == 6
    for name, m, _ in _apis(model, arpa):
        want = m.score(" ".join(words))
        assert m.score(odd) == pytest.approx(want, abs=1e-6), name
        assert m.score(odd.encode()) == pytest.approx(want, abs=1e-6), name
        assert m.score(b"w1 w2 w3") == pytest.approx(m.score("w1 w2 w3"), abs=1e-6), name
        assert m.score(b"w1 w2 w3") > -8, name  # known words, not every one unknown
        assert m.perplexity(odd) == pytest.approx(10 ** (-want / 7), rel=1e-5), name


def test_a_fresh_state_is_the_start_of_a_sentence_on_every_model_kind():
    """nnlm.Decoder: a fresh State() is <s> on every kind; nnlm.kenlm (kenlm's rule): the
    null context on back-off models, and <s> on a network, which has no null context."""
    import nnlm.kenlm as nk
    from nnlm.neural.nplm_lm import NPLM

    stream, vocab = stream_and_vocab(zipf_corpus())
    kn3 = KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    net = NPLM.new(vocab, order=3, m=4, h=3)
    for lm in (kn3, net):
        m = nnlm.Decoder(lm)
        begun, out = nnlm.DecoderState(), nnlm.DecoderState()
        m.BeginSentenceWrite(begun)
        assert m.BaseScore(nnlm.DecoderState(), "w1", out) == m.BaseScore(begun, "w1", out)
        k = nk.Model(lm)
        fresh, begun, null, out = nk.State(), nk.State(), nk.State(), nk.State()
        k.BeginSentenceWrite(begun)
        k.NullContextWrite(null)
        want = k.BaseScore(begun if lm is net else null, "w1", out)
        assert k.BaseScore(fresh, "w1", out) == want


def test_the_old_names_are_the_new_classes_with_a_warning_at_the_callers_line():
    """nnlm.Model and nnlm.State, this face's names before nnlm.kenlm's Model and State
    stood beside it, are the renamed classes for one release, each access warned where the
    caller wrote it."""
    import nnlm.decoding
    import nnlm.decoding.api as api

    for module in (nnlm, nnlm.decoding, api):
        for old, new in (("Model", nnlm.Decoder), ("State", nnlm.DecoderState)):
            with pytest.warns(DeprecationWarning, match=f"nnlm.{old} is now nnlm.{new.__name__}"
                              ) as caught:
                assert getattr(module, old) is new
            assert caught[0].filename == __file__
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from nnlm.decoding.api import Decoder, DecoderState  # noqa: F401 - no warning

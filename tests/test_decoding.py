"""The decoder API (issue 13): KenLM's Python conventions over every model kind, checked
against the kenlm module itself and against nnlm's own whole-sentence scores."""

import math

import numpy as np
import pytest

import nnlm
from conftest import write
from nnlm import Stream
from nnlm.errors import NnlmError
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
    theirs, ours = kenlm.Model(str(arpa)), nnlm.Model(arpa)
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
    for mod, m in ((kenlm, kenlm.Model(str(arpa))), (nnlm, nnlm.Model(arpa))):
        a, b = mod.State(), mod.State()
        m.BeginSentenceWrite(a)
        total = 0.0
        for w in ["w1", "w2", "zebra", "w3", "</s>"]:
            total += m.BaseScore(a, w, b)
            a, b = b, a
        if mod is kenlm:
            want = total
        else:
            assert total == pytest.approx(want, abs=1e-4)
    # null context: the unigram level
    m = nnlm.Model(arpa)
    s, out = nnlm.State(), nnlm.State()
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
        m = nnlm.Model(lm)
        sentences = [s.split() for s in SENTENCES if s]
        states = []
        for _ in sentences:
            st = nnlm.State()
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
        a, b = nnlm.State(), nnlm.State()
        m.BeginSentenceWrite(a)
        m.BeginSentenceWrite(b)
        assert a == b and hash(a) == hash(b) and len({a, b}) == 1


def test_decoder_api_bad_input(kn):
    from nnlm.neural.nplm_lm import NPLM

    model, arpa = kn
    m = nnlm.Model(arpa)
    with pytest.raises(NnlmError, match="<s> may not"):
        m.score("<s> w1")
    with pytest.raises(NnlmError, match="context only"):
        m.BaseScore(nnlm.State(), "<s>", nnlm.State())
    neural = nnlm.Model(NPLM.new(model.vocab, order=3, m=4, h=3))
    with pytest.raises(NnlmError, match="no null context"):
        neural.score("w1", bos=False)
    with pytest.raises(NnlmError, match="states but"):
        m.advance([nnlm.State()], ["w1", "w2"])
    with pytest.raises(NnlmError, match="no such"):
        nnlm.Model(write(arpa.parent / "x", "").parent / "nothing")

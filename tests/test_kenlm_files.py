"""Every ARPA file the kenlm module loads loads here, with KenLM's numbers.

Oracles: the scores KenLM's own C++ tests expect on its lm/test.arpa (lm/model_test.cc,
``Continuation`` and ``Blanks``), and the kenlm module itself where it is installed.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from nnlm import Decoder
from nnlm.base.errors import NnlmError
from nnlm.ngram import read_arpa

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
FILES = sorted(FIXTURES.glob("*.arpa"))
SENTENCES = ["looking on a little the biarritz not_found more .", "looking on a little more loin",
             "also would consider higher looking", "bugs bunny", "bunny bugs", "", "the the the",
             "a sentence", "language modeling is fun ."]


def _load(path, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = Decoder(read_arpa(path, **kwargs))
    return model, [str(w.message) for w in caught]


def test_kenlm_files_load_and_say_what_is_odd():
    for path in FILES:
        _, said = _load(path)
        assert any("more than 1" in s and "loaded as KenLM loads it" in s for s in said), said
        with pytest.raises(NnlmError, match="more than 1"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_arpa(path, strict=True)


def test_the_scores_of_kenlms_own_tests():
    """lm/model_test.cc's Continuation: log10 p and n-gram length word by word after <s>."""
    model, _ = _load(FIXTURES / "test.arpa")
    expected = [(2, -0.484652), (3, -0.348837), (4, -0.0155266), (5, -0.00306122),
                (1, -4.04005), (1, -1.9889), (1, -2.29666), (1, -1.20632 - 20.0), (2, -0.51363),
                (3, -0.0191651)]
    got = list(model.full_scores(SENTENCES[0]))
    assert [n for _, n, _ in got] == [n for n, _ in expected]
    assert [p for p, _, _ in got] == pytest.approx([p for _, p in expected], abs=2e-5)
    assert [oov for *_, oov in got] == [False] * 6 + [True] + [False] * 3
    tail = list(model.full_scores("looking on a little more loin", eos=False))[-2:]
    assert [(n, round(p, 5)) for p, n, _ in tail] == [(5, -0.00181), (5, -0.04326)]
    # Blanks: from the null context
    blanks = list(model.full_scores("also would consider higher looking", bos=False, eos=False))
    assert [p for p, _, _ in blanks] == pytest.approx([-1.687872, -2, -3, -4, -5], abs=1e-5)


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_per_token_scores_equal_the_kenlm_modules(path):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    model, _ = _load(path)
    reference = kenlm.Model(str(path))
    for sentence in SENTENCES:
        for bos in (True, False):
            for eos in (True, False):
                ours = list(model.full_scores(sentence, bos=bos, eos=eos))
                theirs = list(reference.full_scores(sentence, bos=bos, eos=eos))
                assert [n for _, n, _ in ours] == [n for _, n, _ in theirs], sentence
                assert [o for *_, o in ours] == [o for *_, o in theirs], sentence
                assert [p for p, _, _ in ours] == pytest.approx([p for p, _, _ in theirs],
                                                                abs=1e-5), sentence

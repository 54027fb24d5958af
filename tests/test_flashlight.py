"""nnlm models inside flashlight-text's lexicon decoder (the beam search behind torchaudio's
ctc_decoder), with flashlight's own KenLM class on the same ARPA file as the oracle: the
same hypotheses, words and scores."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import toy_world

decoder = pytest.importorskip("flashlight.lib.text.decoder",
                              reason="flashlight-text is not installed (pip install "
                              "flashlight-text)")
from flashlight.lib.text.dictionary import Dictionary  # noqa: E402

from nnlm.decoding.flashlight import FlashlightLM  # noqa: E402
from nnlm.models import load_model  # noqa: E402


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return toy_world(tmp_path_factory.mktemp("flashlight"))


def lexicon_decoder(lm, words: list[str], letters: list[str], beam: int = 20,
                    lm_weight: float = 1.5):
    """A CTC lexicon decoder over ``letters`` (blank last but one, "|" the word
    boundary), spelling ``words``, with ``lm`` fused; built as torchaudio builds it."""
    tokens = Dictionary(letters)
    word_dict = Dictionary(words)
    sil, blank = tokens.get_index("|"), tokens.get_index("<blank>")
    trie = decoder.Trie(tokens.index_size(), sil)
    start = lm.start(False)
    for i, w in enumerate(words):
        if w in ("<s>", "</s>", "<unk>"):
            continue
        _, score = lm.score(start, i)
        trie.insert([tokens.get_index(c) for c in w] + [sil], i, score)
    trie.smear(decoder.SmearingMode.MAX)
    options = decoder.LexiconDecoderOptions(
        beam_size=beam, beam_size_token=len(letters), beam_threshold=25.0,
        lm_weight=lm_weight, word_score=0.5, unk_score=float("-inf"), sil_score=0.0,
        log_add=False, criterion_type=decoder.CriterionType.CTC)
    return decoder.LexiconDecoder(options, trie, lm, sil, blank,
                                  word_dict.get_index("<unk>"), [], False)


def spelled_emissions(sentence: list[str], letters: list[str], seed: int,
                      scale: float = 1.5) -> np.ndarray:
    """Letter-level CTC frames spelling ``sentence`` (a blank between letters, "|" between
    words), with noise (Gaussian, of ``scale`` on the logits; the right letter's +3) that
    leaves the spelling ambiguous."""
    rng = np.random.default_rng(seed)
    index = {c: i for i, c in enumerate(letters)}
    frames = []
    for w in sentence:
        for c in w:
            frames += [index[c], index["<blank>"]]
        frames.append(index["|"])
    logits = rng.normal(scale=scale, size=(len(frames), len(letters)))
    logits[np.arange(len(frames)), frames] += 3.0
    logits -= np.log(np.exp(logits).sum(1, keepdims=True))
    return np.ascontiguousarray(logits, np.float32)


@pytest.mark.parametrize("name", ["kn3", "nplm"])
def test_nnlms_lm_decodes_what_flashlights_kenlm_decodes(world, name):
    """kn3 through the adapter against flashlight's KenLM on kn3.arpa: the same words and
    scores in every hypothesis. The network (nplm) is checked against its own scores:
    the adapter's log10 numbers are the model's."""
    from flashlight.lib.text.decoder.kenlm import KenLM

    vocab = load_model(world / "kn3").vocab.words
    words = list(vocab)
    letters = sorted({c for w in words if not w.startswith("<") for c in w}) + ["|", "<blank>"]
    ours = FlashlightLM(world / name, Dictionary(words))
    lines = (world / "toy/valid.txt").read_text().splitlines()[:8]
    if name == "kn3":
        theirs = KenLM(str(world / "kn3.arpa"), Dictionary(words))
        for seed, line in enumerate(lines):
            em = spelled_emissions(line.split(), letters, seed)
            a = lexicon_decoder(ours, words, letters).decode(em.ctypes.data, *em.shape)
            b = lexicon_decoder(theirs, words, letters).decode(em.ctypes.data, *em.shape)
            assert [list(r.words) for r in a] == [list(r.words) for r in b]
            np.testing.assert_allclose([r.score for r in a], [r.score for r in b], atol=1e-3)
            np.testing.assert_allclose([r.lmScore for r in a], [r.lmScore for r in b],
                                       atol=1e-3)
        return
    import nnlm

    model = nnlm.Decoder(world / name)
    for seed, line in enumerate(lines[:4]):
        em = spelled_emissions(line.split(), letters, seed)
        best = lexicon_decoder(ours, words, letters, lm_weight=1.0).decode(
            em.ctypes.data, *em.shape)[0]
        said = [words[i] for i in best.words if i >= 0]
        assert said, "the network's decoder found no words"
        expected = model.score(" ".join(said), bos=True, eos=True)
        assert best.lmScore == pytest.approx(expected, abs=1e-3)


def test_the_adapters_scores_are_the_models(world):
    """start / score / finish give nnlm's log10 numbers and flashlight's state identity
    (the same token path, the same state object)."""
    import functools

    import nnlm
    import nnlm.kenlm

    words = list(load_model(world / "kn3").vocab.words)
    lm = FlashlightLM(world / "kn3", Dictionary(words))
    if nnlm.kenlm._fast is not None:  # the back-off score runs in C (no Python frame)
        assert isinstance(lm.score, functools.partial)
    model = nnlm.Decoder(world / "kn3")
    state = lm.start(False)
    total = 0.0
    sentence = (world / "toy/valid.txt").read_text().split("\n")[0].split()
    for w in sentence:
        nxt, s = lm.score(state, words.index(w))
        again, _ = lm.score(state, words.index(w))
        assert again.compare(nxt) == 0
        total += s
        state = nxt
    _, s = lm.finish(state)
    total += s
    assert total == pytest.approx(model.score(" ".join(sentence)), abs=1e-4)

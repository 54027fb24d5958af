"""The batched CTC search on tensors (nnlm.decoding.ctc.batch_decoder): against the sum
over every alignment with pyctcdecode's fusion scored word by word (brute force, beams
wide enough to hold every text), for letters and subwords; against the compiled decoder
(pyctcdecode's beams) with pruning at work; a batch against its utterances one at a
time; the point query of the back-off step against its whole rows and kenlm; CUDA
against the CPU; bad input."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the batched CTC search runs on torch")

import nnlm.kenlm as kenlm  # noqa: E402
from conftest import toy_world  # noqa: E402 - after the skip
from nnlm.base.errors import NnlmError  # noqa: E402
from nnlm.cli import main  # noqa: E402
from nnlm.decoding.ctc import fusion  # noqa: E402
from nnlm.decoding.ctc.batch_decoder import build_batch_decoder  # noqa: E402
from nnlm.decoding.dense import TensorBackoff  # noqa: E402
from nnlm.models import load_model  # noqa: E402
from nnlm.text.specials import NO_WORD  # noqa: E402

WIDE = {"beam_width": 2_000, "beam_prune_logp": -1e9, "token_min_logp": -1e9}
AB_TEXT = ["a b ab", "ab ba a", "b a ba ab", "a a b", "ba ab b a", "ab ab"] * 5


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    """A bigram KN model over the words a, b, ab, ba (ARPA)."""
    w = tmp_path_factory.mktemp("ab")
    (w / "train.txt").write_text("\n".join(AB_TEXT) + "\n")
    assert main(["ngram", "train", str(w / "train.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(w / "kn2"), "--arpa",
                 str(w / "kn2.arpa")]) == 0
    return w / "kn2.arpa"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return toy_world(tmp_path_factory.mktemp("batched"), neural=False)


def log_softmax(x: np.ndarray) -> np.ndarray:
    return x - np.logaddexp.reduce(x, axis=-1, keepdims=True)


def collapse(path, blank: int) -> tuple[int, ...]:
    out, prev = [], None
    for c in path:
        if c != prev and c != blank:
            out.append(c)
        prev = c
    return tuple(out)


def fused(lm: fusion.LanguageModel, text: str) -> float:
    """pyctcdecode's fused LM score of a finished utterance's text, word by word: each
    word, the last with </s> (or </s> after <s> where there is no word)."""
    words = text.split()
    state, total = lm.get_start_state(), 0.0
    for w in words[:-1]:
        score, state = lm.score(state, w)
        total += score
    score, _ = lm.score(state, words[-1] if words else "", is_last_word=True)
    return total + score


def brute(lp: np.ndarray, labels: list[str], spell, lm=None, log_add: bool = True) -> dict:
    """Every text -> log of the sum over the alignments that spell it (``spell``: label
    strings -> text; ``log_add`` False: the best alignment's), plus its fused LM score
    when ``lm``: what pyctcdecode's search computes when no beam is pruned."""
    blank = labels.index("")
    sums: dict = {}
    add = np.logaddexp if log_add else max
    for path in itertools.product(range(len(labels)), repeat=len(lp)):
        text = " ".join(spell([labels[c] for c in collapse(path, blank)]).split())
        s = float(sum(lp[t, c] for t, c in enumerate(path)))
        sums[text] = add(sums.get(text, -np.inf), s)
    if lm is None:
        return sums
    return {text: s + fused(lm, text) for text, s in sums.items()}


def letters(pieces: list[str]) -> str:
    return "".join(pieces)


def subwords(pieces: list[str]) -> str:
    return "".join(pieces).replace("▁", " ")


def assert_same(beams, expected: dict, score: str) -> None:
    got = {b.text: getattr(b, score) for b in beams}
    assert len(got) == len(beams) == len(expected)
    assert set(got) == set(expected)
    np.testing.assert_allclose([got[t] for t in expected], list(expected.values()),
                               atol=1e-6)


@pytest.mark.parametrize("seed", range(4))
def test_without_a_model_every_text_scores_the_sum_over_its_alignments(seed):
    labels = ["", " ", "a", "b"]
    lp = log_softmax(np.random.default_rng(seed).normal(size=(5, 4)) * 2)
    beams = build_batch_decoder(labels).decode_beams_batch([lp], **WIDE)[0]
    assert_same(beams, brute(lp, labels, letters), "logit_score")


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("alpha,beta", [(0.5, 1.5), (1.2, -0.5)])
def test_with_a_model_every_text_scores_the_sum_and_pyctcdecodes_fusion(ab, seed, alpha, beta):
    """Letters: each beam's lm_score is its text's sum over alignments plus the fused
    score pyctcdecode's LanguageModel gives its words (unknown words, </s> and all); the
    best beam is the brute-force best."""
    labels = ["", " ", "a", "b"]
    lp = log_softmax(np.random.default_rng(10 + seed).normal(size=(5, 4)) * 2)
    lm = fusion.LanguageModel(kenlm.Model(str(ab)), ["a", "b", "ab"], alpha, beta)
    expected = brute(lp, labels, letters, lm)
    decoder = build_batch_decoder(labels, ab, unigrams=["a", "b", "ab"], alpha=alpha,
                                  beta=beta)
    beams = decoder.decode_beams_batch([lp], **WIDE)[0]
    assert_same(beams, expected, "lm_score")
    assert beams[0].text == max(expected, key=expected.get)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("labels,spell", [(["", " ", "a", "b"], letters),
                                          (["", "▁a", "▁b", "a", "b"], subwords)])
def test_log_add_false_scores_each_text_by_its_best_alignment(ab, seed, labels, spell):
    """log_add=False (flashlight's name): merged beams keep the larger score, so each
    text's logit score is its best alignment's (brute force: the max over every
    alignment), in the batch and the compiled decoder alike, with a model and without."""
    from nnlm.pyctcdecode import build_ctcdecoder

    lp = log_softmax(np.random.default_rng(30 + seed).normal(size=(5, len(labels))) * 2)
    words = ["a", "b", "ab", "ba"]
    lm = fusion.LanguageModel(kenlm.Model(str(ab)), words, 0.7, 0.5)
    for path, expected in ((None, brute(lp, labels, spell, log_add=False)),
                           (ab, brute(lp, labels, spell, lm, log_add=False))):
        unigrams = None if path is None else words
        batch = build_batch_decoder(labels, path, unigrams=unigrams, alpha=0.7, beta=0.5,
                                    log_add=False)
        assert_same(batch.decode_beams_batch([lp], **WIDE)[0], expected, "lm_score")
        one = build_ctcdecoder(labels, None if path is None else str(path), unigrams,
                               alpha=0.7, beta=0.5, log_add=False)
        got = {b[0]: b[4] for b in one.decode_beams(lp, **WIDE)}
        assert set(got) == set(expected)
        np.testing.assert_allclose([got[t] for t in expected], list(expected.values()),
                                   atol=1e-6)
    # the sums differ: the test tells the two apart
    assert brute(lp, labels, spell) != brute(lp, labels, spell, log_add=False)


@pytest.mark.parametrize("seed", range(3))
def test_subword_labels_start_words_at_their_mark(ab, seed):
    labels = ["", "▁a", "▁b", "a", "b"]
    lp = log_softmax(np.random.default_rng(20 + seed).normal(size=(4, 5)) * 2)
    lm = fusion.LanguageModel(kenlm.Model(str(ab)), ["a", "b", "ab", "ba"], 0.7, 0.5)
    decoder = build_batch_decoder(labels, ab, unigrams=["a", "b", "ab", "ba"], alpha=0.7,
                                  beta=0.5)
    beams = decoder.decode_beams_batch([lp], **WIDE)[0]
    assert_same(beams, brute(lp, labels, subwords, lm), "lm_score")


def test_a_label_ending_in_the_mark_makes_the_next_start_a_word():
    labels = ["", "▁⁇▁", "▁a", "b"]
    lp = np.full((3, 4), -20.0)
    lp[0, 2], lp[1, 1], lp[2, 3] = 0.0, 0.0, 0.0  # ▁a ▁⁇▁ b
    assert build_batch_decoder(labels).decode_batch([lp]) == ["a ⁇ b"]


def spelled(words: list[str], labels: list[str], rng, noise: float = 1.0) -> np.ndarray:
    """Letters then a blank, a separator after each word; Gaussian logits, the right
    label's +3."""
    frames = []
    for w in words:
        for ch in list(w) + [" "]:
            frames += [labels.index(ch), labels.index("")]
    x = rng.normal(size=(len(frames), len(labels))) * noise
    x[np.arange(len(frames)), frames] += 3
    return x.astype(np.float32)


def toy_batch(world, count: int = 6, seed: int = 0):
    lines = (world / "toy/valid.txt").read_text().splitlines()[:count]
    labels = [""] + sorted(set("".join(lines)) - {" "}) + [" "]
    rng = np.random.default_rng(seed)
    return lines, labels, [spelled(x.split(), labels, rng) for x in lines]


def test_a_batch_decodes_as_its_utterances_one_at_a_time(world):
    """Ragged utterances padded into one batch: each decodes as it does alone (the
    frames past its end leave it as it is)."""
    lines, labels, ems = toy_batch(world)
    decoder = build_batch_decoder(labels, world / "kn3")
    together = decoder.decode_beams_batch(ems, beam_width=12)
    alone = [decoder.decode_beams_batch([e], beam_width=12)[0] for e in ems]
    assert len({len(e) for e in ems}) > 1
    for a, b in zip(together, alone):
        assert [x.text for x in a] == [x.text for x in b]
        np.testing.assert_allclose([x.lm_score for x in a], [x.lm_score for x in b],
                                   atol=1e-9)
    assert sum(b[0].text == x for b, x in zip(together, lines)) >= len(lines) // 2


@pytest.mark.parametrize("beam,token_min_logp,weights", [
    (4, -5.0, {}), (12, -5.0, {}), (8, -0.3, {}),
    (8, -5.0, {"lm_score_boundary": False}),
    (8, -5.0, {"unk_score_offset": -math.inf}),  # a lexicon: the prefixes' look-ahead
    (8, -5.0, {"prune_history": True}),
    (8, -5.0, {"log_add": False}),  # merged beams keep the larger score
])
def test_the_beams_are_the_compiled_decoders(world, beam, token_min_logp, weights):
    """With pruning at work (the beam, beam_prune_logp, token_min_logp: -0.3 leaves
    many frames only their best label), every utterance's beams are those of nnlm's
    compiled decoder, which gives pyctcdecode's to the bit: the same texts in the same
    order, scores to 1e-4 (float32 LM values summed in another order)."""
    from nnlm.pyctcdecode import build_ctcdecoder

    lines, labels, ems = toy_batch(world, count=8, seed=7)
    settings = {"beam_width": beam, "token_min_logp": token_min_logp,
                "prune_history": weights.pop("prune_history", False)}
    weights = {"alpha": 0.6, "beta": 1.0, **weights}
    compiled = build_ctcdecoder(labels, str(world / "kn3"), **weights)
    batch = build_batch_decoder(labels, world / "kn3", **weights)
    for em, beams in zip(ems, batch.decode_beams_batch(ems, **settings)):
        theirs = compiled.decode_beams(em, **settings)
        assert [b.text for b in beams] == [b[0] for b in theirs]
        assert [b.text_frames for b in beams] == [b[2] for b in theirs]
        np.testing.assert_allclose([b.lm_score for b in beams], [b[4] for b in theirs],
                                   atol=1e-4)
        np.testing.assert_allclose([b.logit_score for b in beams], [b[3] for b in theirs],
                                   atol=1e-6)
    del settings["prune_history"]  # decode prunes the history, as pyctcdecode's does
    assert batch.decode_batch(ems, **settings) == [compiled.decode(e, **settings).strip()
                                                   for e in ems]


@pytest.mark.parametrize("seed", range(3))
def test_history_pruning_keeps_the_compiled_decoders_beams(ab, seed):
    """A bigram: beams that agree on their last word, partial word and last label are
    one (the best) with ``prune_history``, as in the compiled decoder; without it they
    stay, so the two lists differ."""
    from nnlm.pyctcdecode import build_ctcdecoder

    labels = ["", " ", "a", "b"]
    lp = log_softmax(np.random.default_rng(40 + seed).normal(size=(16, 4)) * 1.5)
    compiled = build_ctcdecoder(labels, str(ab), unigrams=["a", "b", "ab", "ba"])
    batch = build_batch_decoder(labels, ab, unigrams=["a", "b", "ab", "ba"])
    lists = {}
    for prune in (True, False):
        theirs = compiled.decode_beams(lp, beam_width=10, prune_history=prune)
        ours = batch.decode_beams_batch([lp], beam_width=10, prune_history=prune)[0]
        assert [b.text for b in ours] == [b[0] for b in theirs]
        assert [b.text_frames for b in ours] == [b[2] for b in theirs]
        np.testing.assert_allclose([b.lm_score for b in ours], [b[4] for b in theirs],
                                   atol=1e-4)
        lists[prune] = [b.text for b in ours]
    assert lists[True] != lists[False]


@pytest.mark.parametrize("count", [1, 10, 1000])
def test_hotwords_give_the_compiled_decoders_beams(world, count):
    """Hotwords (words of the utterances, a phrase, and made-up ones up to ``count``):
    the beams and texts of the compiled decoder, which gives pyctcdecode's; a made-up
    hotword the audio does not hold is not decoded."""
    from nnlm.pyctcdecode import build_ctcdecoder

    lines, labels, ems = toy_batch(world, count=6, seed=11)
    spoken = sorted({w for x in lines for w in x.split()})
    hot = ([spoken[0], " ".join(spoken[1:3])] + [f"zq{i}x" for i in range(count)])[:count]
    for model in (None, world / "kn3"):  # without a model the hotwords score alone
        compiled = build_ctcdecoder(labels, None if model is None else str(model))
        batch = build_batch_decoder(labels, model)
        same_beams_with_hotwords(compiled, batch, ems, hot)
    assert not any("zq" in t for t in batch.decode_batch(ems, hotwords=hot))
    with pytest.raises(ValueError, match="one string"):
        batch.decode_batch(ems, hotwords="zebra")
    with pytest.raises(ValueError, match="hotword_weight"):
        batch.decode_batch(ems, hotwords=["a"], hotword_weight=float("nan"))


def same_beams_with_hotwords(compiled, batch, ems, hot) -> None:
    for weight in (10.0, 2.5):
        ours = batch.decode_beams_batch(ems, beam_width=8, hotwords=hot, hotword_weight=weight)
        for em, beams in zip(ems, ours):
            theirs = compiled.decode_beams(em, beam_width=8, hotwords=hot,
                                           hotword_weight=weight)
            assert [b.text for b in beams] == [b[0] for b in theirs]
            assert [b.text_frames for b in beams] == [b[2] for b in theirs]
            np.testing.assert_allclose([b.lm_score for b in beams], [b[4] for b in theirs],
                                       atol=1e-4)


def test_a_pyctcdecode_decoder_gives_its_batch_decoder(world):
    """from_decoder: the labels, model file, word list and weights of a decoder built
    with build_ctcdecoder (as transformers' processor holds one): the same beams."""
    from nnlm.decoding.ctc.batch_decoder import BatchDecoderCTC
    from nnlm.pyctcdecode import build_ctcdecoder

    lines, labels, ems = toy_batch(world, count=4, seed=3)
    words = sorted(set((world / "toy/train.txt").read_text().split()))[:40]
    compiled = build_ctcdecoder(labels, str(world / "kn3.arpa"), unigrams=words,
                                alpha=0.7, beta=0.5, unk_score_offset=-6.0)
    batch = BatchDecoderCTC.from_decoder(compiled)
    for em, beams in zip(ems, batch.decode_beams_batch(ems, beam_width=8)):
        theirs = compiled.decode_beams(em, beam_width=8)
        assert [b.text for b in beams] == [b[0] for b in theirs]
        assert [b.text_frames for b in beams] == [b[2] for b in theirs]
        np.testing.assert_allclose([b.lm_score for b in beams], [b[4] for b in theirs],
                                   atol=1e-4)
    no_lm = BatchDecoderCTC.from_decoder(build_ctcdecoder(labels))
    assert no_lm.decode_batch(ems) == [build_ctcdecoder(labels).decode(e).strip()
                                       for e in ems]
    best = build_ctcdecoder(labels, str(world / "kn3.arpa"), log_add=False)
    assert BatchDecoderCTC.from_decoder(best).log_add is False  # its merge too
    loaded = load_model(world / "kn3")
    loaded.loaded_from = None  # a model object with no file behind it
    with pytest.raises(ValueError, match="no file to load"):
        BatchDecoderCTC.from_decoder(build_ctcdecoder(labels, loaded))


def test_a_network_decodes_as_in_the_compiled_decoder(tmp_path_factory):
    """An NPLM (a fixed window, its whole rows read a word at a time) gives the compiled
    decoder's beams; a network that reads the whole line is refused in one line."""
    from nnlm.pyctcdecode import build_ctcdecoder

    w = toy_world(tmp_path_factory.mktemp("batched_nplm"))
    lines, labels, ems = toy_batch(w, count=4, seed=2)
    compiled = build_ctcdecoder(labels, str(w / "nplm"))
    for em, beams in zip(ems, build_batch_decoder(labels, w / "nplm").decode_beams_batch(
            ems, beam_width=6)):
        theirs = compiled.decode_beams(em, beam_width=6)
        assert [b.text for b in beams] == [b[0] for b in theirs]
        assert [b.text_frames for b in beams] == [b[2] for b in theirs]
        np.testing.assert_allclose([b.lm_score for b in beams], [b[4] for b in theirs],
                                   atol=1e-4)
    lm = load_model(w / "nplm")
    lm.order = 2000  # as an lstm's
    with pytest.raises(ValueError, match="reads the whole line"):
        build_batch_decoder(labels, lm)


@pytest.mark.parametrize("chunk", [1, 7])
def test_a_stream_fed_in_chunks_decodes_as_the_whole_batch(world, chunk):
    """Ragged utterances fed ``chunk`` frames at a time (the shorter ones run out and get
    empty chunks): the beams are the whole batch's; a look at the beams midway leaves the
    stream as it was."""
    lines, labels, ems = toy_batch(world, count=5, seed=4)
    decoder = build_batch_decoder(labels, world / "kn3")
    whole = decoder.decode_beams_batch(ems, beam_width=8, hotwords=["zebra"])
    stream = decoder.stream(len(ems), beam_width=8, hotwords=["zebra"])
    for lo in range(0, max(map(len, ems)), chunk):
        stream.feed([e[lo:lo + chunk] for e in ems])
        if lo == chunk * 3:
            assert len(stream.decode_beams()) == len(ems)
    assert stream.decode_beams() == whole
    assert stream.decode() == [b[0].text for b in whole]
    with pytest.raises(ValueError, match="a chunk of 2 utterances for a stream of 5"):
        stream.feed(ems[:2])


def test_probabilities_and_logits_decode_alike(world):
    lines, labels, ems = toy_batch(world, count=3)
    decoder = build_batch_decoder(labels, world / "kn3")
    probs = [np.exp(log_softmax(e.astype(np.float64))) for e in ems]
    assert decoder.decode_batch(probs, beam_width=8) == decoder.decode_batch(ems, beam_width=8)
    padded = np.zeros((2, max(map(len, ems[:2])), len(labels)), np.float32)
    assert decoder.decode_batch(padded[:0]) == []
    assert decoder.decode_batch([ems[0][:0]]) == [""]


def test_probabilities_are_told_from_logits_as_decode_tells_them(world):
    """pyctcdecode's rule, per utterance: the mean row sum in the caller's dtype within
    1e-9 of 1. Softmax outputs made in float32 and handed over as float64 miss it by
    about 1e-8, so decode (as pyctcdecode) takes them for logits; so does the batch
    decoder, for arrays, tensors and lists alike."""
    import torch

    from nnlm.pyctcdecode import build_ctcdecoder

    lines, labels, ems = toy_batch(world, count=4, seed=3)
    ems = [e[:min(map(len, ems))] for e in ems]
    exact = [np.exp(log_softmax(e.astype(np.float64))) for e in ems]
    near = [np.exp(log_softmax(e.astype(np.float64)) + 3e-8) for e in ems]  # off by 1e-8 x L
    compiled = build_ctcdecoder(labels, str(world / "kn3"))
    batch = build_batch_decoder(labels, world / "kn3")
    for probs in (exact, near, [x.astype(np.float32) for x in near]):
        want = [compiled.decode(x, beam_width=8) for x in probs]
        assert batch.decode_batch(probs, beam_width=8) == want
        assert batch.decode_batch(np.stack(probs), beam_width=8) == want
        assert batch.decode_batch(torch.from_numpy(np.stack(probs)), beam_width=8) == want
    # the two readings differ here, so the test tells them apart
    assert [compiled.decode(x, beam_width=8) for x in exact] != \
        [compiled.decode(x, beam_width=8) for x in near]


def test_a_lexicon_keeps_every_word_listed(world):
    lines, labels, ems = toy_batch(world, count=6, seed=5)
    words = set((world / "toy/train.txt").read_text().split())
    decoder = build_batch_decoder(labels, world / "kn3", unk_score_offset=-math.inf)
    for beams in decoder.decode_beams_batch(ems, beam_width=8):
        assert beams[0].lm_score > -math.inf
        assert all(set(b.text.split()) <= words for b in beams if b.lm_score > -math.inf)


def test_the_point_query_is_the_rows_entry(world):
    lm = load_model(world / "kn3")
    step = TensorBackoff(lm, dtype=torch.float64)
    rng = np.random.default_rng(0)
    words = torch.from_numpy(rng.integers(3, len(lm.vocab), 300))
    contexts = torch.from_numpy(rng.integers(3, len(lm.vocab), (300, 2)))
    contexts[:20] = 1
    contexts[20:40, 0] = NO_WORD
    rows = step.advance(contexts)
    assert torch.equal(step.score(contexts, words), rows.gather(1, words[:, None])[:, 0])
    with pytest.raises(NnlmError, match="a word id is outside"):
        step.score(contexts[:2], torch.tensor([0, len(lm.vocab)]))
    with pytest.raises(NnlmError, match="one word per context"):
        step.score(contexts[:2], words[:3])
    model = kenlm.Model(str(world / "kn3"))
    out = kenlm.State()
    for b in range(0, 300, 37):
        state = kenlm.State()
        model.NullContextWrite(state)
        for w in contexts[b].tolist():
            if w != NO_WORD:
                nxt = kenlm.State()
                model.BaseScore(state, lm.vocab.words[w], nxt)
                state = nxt
        expected = model.BaseScore(state, lm.vocab.words[int(words[b])], out)
        assert abs(float(step.score(contexts[b:b + 1], words[b:b + 1], log10=True)) -
                   expected) < 1e-5


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")
def test_cuda_decodes_what_the_cpu_decodes(world):
    lines, labels, ems = toy_batch(world, count=8)
    cpu = build_batch_decoder(labels, world / "kn3").decode_beams_batch(ems, beam_width=16)
    gpu = build_batch_decoder(labels, world / "kn3", device="cuda").decode_beams_batch(
        [torch.from_numpy(e).cuda() for e in ems], beam_width=16)
    assert [b[0].text for b in gpu] == [b[0].text for b in cpu]
    np.testing.assert_allclose([b[0].lm_score for b in gpu], [b[0].lm_score for b in cpu],
                               atol=1e-6)


@pytest.mark.parametrize("call,message", [
    (lambda d: d.decode_batch(np.zeros((2, 3))), "needs 3"),
    (lambda d: d.decode_batch(np.zeros((1, 3, 5))), "alphabet has 4"),
    (lambda d: d.decode_batch([np.full((3, 4), np.nan)]), "NaN"),
    (lambda d: d.decode_batch([np.full((3, 4), np.inf)]), r"NaN or \+inf"),
    (lambda d: d.decode_batch([np.full((3, 4), "a", dtype=object)]), "numbers"),
    (lambda d: d.decode_batch("logits"), "tensor or numpy array"),
    (lambda d: d.decode_batch([np.zeros((3, 4))], beam_width=0), "beam_width"),
    (lambda d: d.decode_batch([np.zeros((3, 4))], token_min_logp=1.0), "token_min_logp"),
    (lambda d: d.reset_params(alpha=float("nan")), "alpha=nan"),
])
def test_bad_input_is_one_line_naming_the_argument(ab, call, message):
    decoder = build_batch_decoder(["", " ", "a", "b"], ab)
    with pytest.raises(ValueError, match=message) as caught:
        call(decoder)
    assert "\n" not in str(caught.value)


def test_the_batch_decoder_is_reached_from_nnlm_pyctcdecode(ab):
    import nnlm.pyctcdecode

    decoder = nnlm.pyctcdecode.build_batch_decoder(["", " ", "a", "b"], str(ab))
    assert decoder.decode_batch([np.log(np.full((2, 4), 0.25))]) in (["a"], ["b"], [""])


def test_the_guides_batch_recipe_decodes_as_decode_does(world, tmp_path, monkeypatch):
    """docs/guide/decoders.md's batch recipes, run as written (the model at the path they
    name): the batch gives what the compiled decoder's ``decode`` gives each utterance,
    its streams what the batch gives whole."""
    from ctc_logits import LABELS, logits_for
    from nnlm.pyctcdecode import build_ctcdecoder

    page = Path(__file__).parents[1] / "docs" / "guide" / "decoders.md"
    blocks = [b.split("```")[0] for b in page.read_text().split("```python\n")[1:]
              if "build_batch_decoder" in b.split("```")[0] or "batch.stream(" in b]
    assert len(blocks) == 2  # the batch, then its streams
    (tmp_path / "runs").mkdir()
    assert main(["ngram", "convert", str(world / "kn3"), str(tmp_path / "runs/kn5")]) == 0
    lines = [x.strip().lower() for x in (world / "toy/test.txt").read_text().splitlines()
             if x.strip()][:6]
    rng = np.random.default_rng(0)
    matrices = [logits_for(line, rng) for line in lines]
    monkeypatch.chdir(tmp_path)
    compiled = build_ctcdecoder(LABELS, "runs/kn5")
    names = {"labels": LABELS, "matrices": matrices}
    exec(blocks[0], names)
    assert names["texts"] == [compiled.decode(m).strip() for m in matrices]
    assert names["text"] == names["texts"][0]
    whole = names["beams"]
    exec(blocks[1], names)
    assert names["beams"] == whole


def test_a_batch_over_memory_is_refused_before_the_first_frame(ab, monkeypatch):
    import nnlm.base.sysmem as sysmem

    decoder = build_batch_decoder(["", " ", "a", "b"], ab)
    monkeypatch.setattr(sysmem, "available_memory", lambda: 1000)
    with pytest.raises(Exception, match="decode fewer utterances at a time") as caught:
        decoder.decode_batch(np.zeros((8, 50, 4), np.float32))
    assert "\n" not in str(caught.value)


def test_bad_labels_and_models_are_one_line(ab, tmp_path):
    with pytest.raises(ValueError, match="duplicate"):
        build_batch_decoder(["", "a", "a"])
    (tmp_path / "not_a_model").write_text("hello\n")
    with pytest.raises(Exception, match="not_a_model") as caught:
        build_batch_decoder(["", " ", "a"], tmp_path / "not_a_model")
    assert "\n" not in str(caught.value)

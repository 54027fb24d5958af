"""The LanguageModel interface and evaluation, checked against hand and brute-force sums."""

import math

import numpy as np
import pytest

from nnlm import AddK, NnlmError, Stream, Vocabulary, evaluate, load_model, save_model
from nnlm.text.vocab import BOS_ID, EOS_ID

LINES = [["a", "b"], ["a", "a"], ["b", "c", "a"]]
VOCAB = Vocabulary.from_counts({"a": 4, "b": 2, "c": 1, "d": 1})  # d is never in train
TRAIN = Stream.from_lines(LINES, VOCAB)


@pytest.mark.parametrize("order,k", [(1, 1.0), (2, 1.0), (2, 0.01)])
def test_every_next_word_distribution_sums_to_one(order, k):
    model = AddK(VOCAB, order=order, k=k).fit(TRAIN)
    rng = np.random.default_rng(0)
    contexts = rng.integers(0, len(VOCAB), size=(50, order - 1)).astype(np.int32)
    dist = model.next_logprobs(contexts)
    assert dist.dtype == np.float64 and dist.shape == (50, len(VOCAB))
    assert np.allclose(np.exp(dist).sum(axis=1), 1.0, rtol=0, atol=1e-9)
    assert np.all(dist[:, BOS_ID] == -np.inf)  # <s> is never predicted


def test_add_one_bigram_by_hand():
    model = AddK(VOCAB, order=2, k=1.0).fit(TRAIN)
    V1 = len(VOCAB) - 1  # 6 predictable words: <unk> </s> a b c d
    # c(<s>, a) = 2 of c(<s>) = 3 line starts; c(a, b) = 1 of c(a) = 4 (a b, a a, a a, a </s>)
    assert model.target_logprobs(np.array([[BOS_ID]]), np.array([VOCAB.id("a")]))[0] == \
        pytest.approx(math.log((2 + 1) / (3 + V1)))
    assert model.target_logprobs(np.array([[VOCAB.id("a")]]), np.array([VOCAB.id("b")]))[0] == \
        pytest.approx(math.log((1 + 1) / (4 + V1)))
    assert model.target_logprobs(np.array([[VOCAB.id("a")]]), np.array([EOS_ID]))[0] == \
        pytest.approx(math.log((2 + 1) / (4 + V1)))


def test_target_logprobs_agree_with_the_full_distribution():
    model = AddK(VOCAB, order=2, k=0.5).fit(TRAIN)
    contexts, targets = TRAIN.contexts(2), TRAIN.ids
    full = model.next_logprobs(contexts)[np.arange(len(targets)), targets]
    assert np.allclose(model.target_logprobs(contexts, targets), full, atol=1e-12)
    # and the interface's generic gather (the default implementation) agrees too
    assert np.allclose(super(AddK, model).target_logprobs(contexts, targets), full, atol=1e-12)


def test_evaluation_follows_the_documented_convention():
    model = AddK(VOCAB, order=2).fit(TRAIN)
    test = Stream.from_lines([["a", "d"], ["zebra", "c"]], VOCAB)  # "zebra" is out of vocabulary
    result = evaluate(model, test)
    assert result.tokens == 6 and result.sentences == 2 and result.unk == 1  # 4 words + 2 </s>
    by_sentence = model.sentence_logprob("a d") + model.sentence_logprob(["zebra", "c"])
    assert result.nll == pytest.approx(-by_sentence)
    assert result.perplexity == pytest.approx(math.exp(-by_sentence / 6))
    lp = model.logprobs(test)
    unk_lp = lp[1 + 3 - 1]  # slot of "zebra": a d </s> | zebra
    assert test.ids[3] == VOCAB.id("<unk>")
    assert result.perplexity_without_unk == pytest.approx(math.exp(-(lp.sum() - unk_lp) / 5))
    assert result.log10_prob == pytest.approx(by_sentence / math.log(10))


def test_untrained_like_uniform_perplexity_is_vocabulary_size():
    model = AddK(VOCAB, order=1, k=1e9).fit(TRAIN)  # k huge: uniform over the predictable words
    assert evaluate(model, TRAIN).perplexity == pytest.approx(len(VOCAB) - 1, rel=1e-6)


def test_save_load_round_trip_and_foreign_vocabulary(tmp_path):
    model = AddK(VOCAB, order=2, k=0.5).fit(TRAIN)
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert np.array_equal(loaded.logprobs(TRAIN), model.logprobs(TRAIN))
    Vocabulary.from_counts({"x": 1, "y": 1, "z": 1, "w": 1}).save(tmp_path / "m" / "vocab.txt")
    with pytest.raises(NnlmError, match=r"vocab\.txt: does not match the model"):
        load_model(tmp_path / "m")


def test_damaged_model_directories_give_clear_errors(tmp_path):
    save_model(AddK(VOCAB).fit(TRAIN), tmp_path / "m")
    data = (tmp_path / "m" / "arrays.npz").read_bytes()
    (tmp_path / "m" / "arrays.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(NnlmError, match=r"arrays\.npz: unreadable"):
        load_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").write_text('{"nnlm_model": "addk", ')
    with pytest.raises(NnlmError, match=r"config\.json: not valid JSON"):
        load_model(tmp_path / "m")
    (tmp_path / "m" / "config.json").unlink()
    with pytest.raises(NnlmError, match=r"config\.json: missing"):
        load_model(tmp_path / "m")
    with pytest.raises(NnlmError, match="no such model directory"):
        load_model(tmp_path / "absent")


def test_empty_sentence_is_just_end_of_sentence():
    model = AddK(VOCAB, order=2).fit(TRAIN)
    want = model.target_logprobs(np.array([[BOS_ID]]), np.array([EOS_ID]))[0]
    assert model.sentence_logprob("") == pytest.approx(want) and want < 0


def test_train_in_memory_and_nltk_style_scores(tmp_path):
    """nnlm.train writes nothing unless asked; score/logscore are p and log2 p of one word
    (nltk.lm's convention): over the vocabulary they sum to 1, and along a sentence
    (context from <s>) they add up to sentence_logprob; errors name keyword arguments."""
    import math
    import os

    import nnlm

    texts = ["the cat sat", "the dog sat on a mat", "a cat ran"] * 10
    before = set(os.listdir(tmp_path))
    for kw in ({"method": "kn", "order": 3, "discount_fallback": True},
               {"method": "addk", "order": 2},
               {"method": "interpolated", "order": 3, "valid": texts[:6]}):
        lm = nnlm.train(texts, **kw)
        for context in (["the", "cat"], ["<s>"], [], ["zebra", "unicorn"]):
            total = math.fsum(lm.score(w, context) for w in lm.vocab.words if w != "<s>")
            assert total == pytest.approx(1.0, abs=1e-9), (kw, context)
        words = "the dog sat".split()
        steps = [lm.logscore(w, ["<s>", *words[:i]]) for i, w in enumerate([*words, "</s>"])]
        assert sum(steps) == pytest.approx(lm.sentence_logprob("the dog sat") / math.log(2))
    assert set(os.listdir(tmp_path)) == before
    saved = nnlm.train(texts, method="addk", order=2, output=tmp_path / "lm")
    assert nnlm.load_model(tmp_path / "lm").score("cat", "the") == \
        pytest.approx(saved.score("cat", "the"))
    with pytest.raises(nnlm.NnlmError, match="discount_fallback=True"):
        nnlm.train(texts, method="kn", order=3)
    with pytest.raises(nnlm.NnlmError, match="valid"):
        nnlm.train(texts, preset="tiny")
    with pytest.raises(nnlm.NnlmError, match="preset="):
        nnlm.train(texts, epochs=3)


def test_train_a_network_in_memory(tmp_path):
    import nnlm

    texts = ["the cat sat", "the dog sat on a mat", "a cat ran"] * 30
    lm = nnlm.train(texts, valid=texts[:9], preset="tiny", epochs=1, threads=1)
    assert lm.kind == "nplm" and 0 < lm.score("sat", "the cat") < 1

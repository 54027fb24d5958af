"""Feature vectors for out-of-vocabulary words: C(j) = sum_i C(i) q(i | context), every
per-word row the same convex combination (q the paper's P(i | context), or that over
P(i)), distributions over the grown vocabulary summing to 1, online scoring's first and
later occurrences, the online step on the added rows, save and load."""

import numpy as np
import pytest
import torch

from conftest import write
from nnlm import Vocabulary, load_model, save_model
from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.neural.networks.energy import EnergyConfig, EnergyNetwork
from nnlm.neural.networks.network import LBLConfig, LBLNetwork, NPLMConfig, NPLMNetwork
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.open_vocab import score_open_vocab
from nnlm.text.vocab import BOS_ID, EOS_ID, UNK_ID

COUNTS = {"the": 9, "cat": 8, "sat": 7, "on": 6, "mat": 5, "dog": 4}


def networks():
    V = len(Vocabulary.from_counts(COUNTS))
    return {"nplm": NPLMNetwork(NPLMConfig(vocab_size=V, order=3, m=3, h=4)),
            "tied": NPLMNetwork(NPLMConfig(vocab_size=V, order=3, m=4, h=4, direct=False,
                                           tied=True)),
            "lbl": LBLNetwork(LBLConfig(vocab_size=V, order=3, m=3)),
            "energy": EnergyNetwork(EnergyConfig(vocab_size=V, order=3, m=3, h=4,
                                                 v_per_word=True))}


def model(kind: str) -> NeuralLM:
    net = networks()[kind]
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g))
    return NeuralLM(Vocabulary.from_counts(COUNTS), net.eval())


def brute_weights(lm, p: np.ndarray, prior: str) -> np.ndarray:
    """q(. | context) by hand: P(i | context), over P(i) = count / total for "types";
    nothing for <s>, </s> and words without a count."""
    q = p.copy()
    if prior == "types":
        counts = np.array([COUNTS.get(w, 0) for w in lm.vocab.words[: len(p)]], float)
        q = np.where(counts > 0, q / np.maximum(counts, 1) * counts.sum(), 0.0)
    q[BOS_ID] = q[EOS_ID] = 0
    return q / q.sum()


@pytest.mark.parametrize("prior", ["types", "tokens"])
@pytest.mark.parametrize("kind", ["nplm", "tied", "lbl", "energy"])
def test_a_new_word_gets_the_convex_combination_and_distributions_sum_to_one(kind, prior):
    lm = model(kind)
    V = len(lm.vocab)
    before = {k: t.detach().clone() for k, t in lm.model.named_tensors().items()}
    ctx1, ctx2 = ["the", "cat"], ["on", "the"]
    p1 = np.exp(lm.next_logprobs(np.array([[lm.vocab.index[w] for w in ctx1]]))[0])
    p2 = np.exp(lm.next_logprobs(np.array([[lm.vocab.index[w] for w in ctx2]]))[0])
    lm.add_words(["zebra"], [[ctx1, ctx2]], prior=prior)  # two occurrences: their mean
    assert lm.vocab.words[V] == "zebra" and len(lm.vocab) == V + 1
    # brute force: the mean of the two occurrences' weights
    w = (brute_weights(lm, p1, prior) + brute_weights(lm, p2, prior)) / 2
    assert w[UNK_ID] == 0 if prior == "types" else w[UNK_ID] > 0  # <unk> has no count here
    after = lm.model.named_tensors()
    grown = lm.model.word_tensor_names()
    assert "C" in grown and "b" in grown
    for name, t in before.items():
        if name in grown:
            want = np.tensordot(w, t.double().numpy(), axes=(0, 0))
            assert np.allclose(after[name][V].detach().double().numpy(), want, atol=1e-5), name
            assert torch.equal(after[name][:V], t), name  # the old rows are untouched
        else:
            assert torch.equal(after[name], t), name
    ctx = np.array([[lm.vocab.index["the"], V], [V, V], [1, 3]])  # the new word as context
    lp = lm.next_logprobs(ctx)
    assert lp.shape == (3, V + 1)
    assert np.allclose(np.exp(lp).sum(1), 1, atol=1e-9)
    assert np.all(np.isfinite(lp[:, V]))  # the new word is predictable


def test_online_scoring_first_occurrence_is_unk_later_its_row(tmp_path):
    lm = model("nplm")
    base = model("nplm")
    text = write(tmp_path / "t.txt", "the zebra sat\n\nzebra on the mat\n")
    res = score_open_vocab(lm, text, lr=0, prior="tokens")
    assert res.added == ["zebra"]
    # tokens: the zebra sat </s> | zebra on the mat </s>
    assert np.flatnonzero(res.first_oov).tolist() == [1]
    assert np.flatnonzero(res.later_oov).tolist() == [4]
    # the first occurrence: the base model's <unk>
    the = lm.vocab.index["the"]
    want = base.target_logprobs(np.array([[1, the]]), np.array([UNK_ID]))[0]
    assert res.logprobs[1] == pytest.approx(want, abs=1e-5)
    # "sat" after "zebra": the zebra row (from its first context) as context
    grown = model("nplm").add_words(["zebra"], [["<s>", "the"]], prior="tokens")
    z = grown.vocab.index["zebra"]
    sat = grown.vocab.index["sat"]
    assert res.logprobs[2] == pytest.approx(grown.target_logprobs(
        np.array([[the, z]]), np.array([sat]))[0], abs=1e-6)
    assert res.oov_in_context[2] and res.oov_in_context[3]
    # the second line's zebra: its own row, predicted by the model grown so far
    assert res.logprobs[4] == pytest.approx(grown.target_logprobs(
        np.array([[1, 1]]), np.array([z]))[0], abs=1e-6)
    # save and load with the grown vocabulary
    save_model(lm, tmp_path / "grown")
    again = load_model(tmp_path / "grown")
    assert again.vocab.words == lm.vocab.words
    ctx = np.array([[1, z], [z, sat]])
    assert np.allclose(again.next_logprobs(ctx), lm.next_logprobs(ctx), atol=1e-12)


@pytest.mark.parametrize("kind", ["nplm", "tied", "lbl", "energy"])
def test_the_online_step_scores_before_learning_and_moves_only_the_added_rows(kind, tmp_path):
    text = write(tmp_path / "t.txt", "the zebra sat\nzebra on the mat\n")
    fixed = score_open_vocab(model(kind), text, lr=0)
    lm = model(kind)
    learned = score_open_vocab(lm, text, lr=0.5)
    # tokens: the zebra sat </s> | zebra on the mat </s>; nothing is learned before "sat"
    # is scored (no word has been added), and "sat" and </s> are scored before their
    # stretch is learned from
    assert np.array_equal(learned.logprobs[:4], fixed.logprobs[:4])
    assert learned.logprobs[4] != pytest.approx(fixed.logprobs[4], abs=1e-4)
    # the trained model's tensors and rows are untouched
    base = model(kind)
    V = len(base.vocab)
    for name, t in base.model.named_tensors().items():
        after = lm.model.named_tensors()[name]
        assert torch.equal(after[:V] if name in lm.model.word_tensor_names() else after, t)


def test_the_online_step_is_the_gradient_of_the_log_likelihood():
    """lr times d/d(row) sum log p(target | context), against central differences in
    float64."""
    from nnlm.neural.open_vocab import adapt

    lm = model("nplm")
    lm.model.double()
    lm.add_words(["zebra"], [["the", "cat"]])
    z = lm.vocab.index["zebra"]
    ctx = np.array([[z, lm.vocab.index["sat"]], [lm.vocab.index["the"], z], [1, 1]])
    tgt = np.array([lm.vocab.index["on"], z, z])

    def loglik():  # in float64 throughout (the scoring kernels run the product in float32)
        with torch.no_grad():
            lp = torch.log_softmax(lm.model.scores(torch.as_tensor(ctx)), 1)
            return lp.gather(1, torch.as_tensor(tgt)[:, None]).sum().item()

    params = lm.model.word_parameters()
    assert [tuple(p.shape) for p in params] == [(len(lm.vocab), 3), (len(lm.vocab),),
                                               (len(lm.vocab), 6 + 4)]
    eps, want = 1e-6, []
    for p in params:
        row = p.data[z].view(-1)
        g = np.empty(len(row))
        for i in range(len(row)):
            keep = row[i].item()
            row[i] = keep + eps
            up = loglik()
            row[i] = keep - eps
            g[i] = (up - loglik()) / (2 * eps)
            row[i] = keep
        want.append(g)
    before = [p.detach().clone() for p in params]
    start = loglik()
    adapt(lm, ctx, tgt, lr=0.01)
    for p, b, g in zip(params, before, want):
        p = p.detach()
        assert torch.equal(p[:z], b[:z])  # the base rows do not move
        assert np.allclose((p[z] - b[z]).view(-1).numpy(), 0.01 * g, atol=1e-8)
    assert loglik() > start  # a small step up the gradient raises the likelihood


def test_open_vocab_refuses_models_that_cannot_grow(tmp_path, capsys):
    from nnlm.ngram import KneserNey
    from nnlm.text.stream import Stream

    vocab = Vocabulary.from_counts(COUNTS)
    kn = KneserNey(vocab, 2, discount_fallback=True).fit(
        Stream.from_lines([["the", "cat", "sat"]], vocab))
    save_model(kn, tmp_path / "kn")
    from nnlm.mixture import Mixture

    save_model(Mixture([kn, model("nplm")], weights=[0.5, 0.5]), tmp_path / "mix")
    text = write(tmp_path / "t.txt", "the zebra\n")
    for name in ("kn", "mix"):
        assert main(["eval", str(tmp_path / name), str(text), "--open-vocab"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "cannot" in err[0], err


def test_one_prior_for_all_the_words_a_model_adds():
    lm = model("nplm").add_words(["zebra"], [["the", "cat"]], prior="tokens")
    with pytest.raises(NnlmError, match="prior 'tokens'.*cannot add more with 'types'"):
        lm.add_words(["gnu"], [["the", "cat"]])
    lm.add_words(["gnu"], [["the", "cat"]], prior="tokens")
    assert lm.vocab.words[-2:] == ["zebra", "gnu"]

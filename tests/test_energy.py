"""The energy-minimization variant (Bengio et al. 2003, "Alternative variant"): its
blocked scoring against the formula written out, gradients against finite differences
in float64, distributions summing to 1, every objective, and the family's commands."""

import numpy as np
import pytest
import torch

from nnlm import Vocabulary
from nnlm.neural.networks import energy
from nnlm.neural.networks.energy import EnergyConfig, EnergyNetwork, energy_logits
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.objectives import NCE, FullSoftmax, SelfNormalized
from nnlm.text.vocab import BOS_ID

WORDS = ["a", "b", "c", "d", "e", "f"]


def tiny(per_word: bool, order: int = 3, seed: int = 0) -> EnergyNetwork:
    vocab = Vocabulary.from_counts({w: 10 - i for i, w in enumerate(WORDS)})
    net = EnergyNetwork(EnergyConfig(vocab_size=len(vocab), order=order, m=4, h=3,
                                     v_per_word=per_word)).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # non-zero everywhere, so every path carries gradient
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * 0.5)
    return net


def energy_by_formula(net: EnergyNetwork, context: list[int], target: int) -> float:
    """E = v . tanh(d + H x) + sum_i b_{w_{t-i}}, x = (C(w_t), C(w_{t-1}), ...)."""
    with torch.no_grad():
        words = [target, *reversed(context)]
        x = torch.cat([net.C[w] for w in words])
        v = net.v[target] if net.config.v_per_word else net.v
        return float(v @ torch.tanh(net.d + net.H @ x) + sum(net.b[w] for w in words))


@pytest.mark.parametrize("per_word", [False, True])
def test_scores_are_minus_the_energy_of_the_formula(per_word, monkeypatch):
    monkeypatch.setattr(energy, "BLOCK_ELEMENTS", 7)  # several blocks of candidates
    net = tiny(per_word)
    ctx = torch.tensor([[BOS_ID, 3], [4, 5], [6, 7]])
    V = net.config.vocab_size
    with torch.no_grad():
        full = net.scores(ctx)
        shared = net.scores(ctx, torch.tensor([3, 5, 5]))
        per_row = net.scores(ctx, torch.tensor([[2, 3], [4, 0], [7, 7]]))
    for b, c in enumerate(ctx.tolist()):
        for j in range(V):
            want = -np.inf if j == BOS_ID else -energy_by_formula(net, c, j)
            assert float(full[b, j]) == pytest.approx(want, abs=1e-12)
        for k, j in enumerate([3, 5, 5]):
            assert float(shared[b, k]) == pytest.approx(-energy_by_formula(net, c, j), abs=1e-12)
    for b, row in enumerate([[2, 3], [4, 0], [7, 7]]):
        for k, j in enumerate(row):
            want = -energy_by_formula(net, ctx[b].tolist(), j)
            assert float(per_row[b, k]) == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("scale", [1.0, 30.0])
@pytest.mark.parametrize("per_word", [False, True])
def test_the_exponential_form_is_tanh(per_word, scale, monkeypatch):
    """tanh(a + G) = 1 - 2 / (1 + exp(2a) exp(2G)); beyond EXP_SAFE the block takes tanh."""
    monkeypatch.setattr(energy, "BLOCK_ELEMENTS", 64)
    g = torch.Generator().manual_seed(2)
    a = torch.randn(5, 8, generator=g) * scale
    G = torch.randn(9, 8, generator=g) * scale
    v = torch.randn(*((9, 8) if per_word else (8,)), generator=g)
    T = torch.tanh(a[:, None, :].double() + G[None].double())
    want = -(T * v.double()).sum(-1)
    assert torch.allclose(energy_logits(a, G, v).double(), want, atol=2e-5)


@pytest.mark.parametrize("per_word", [False, True])
def test_blocked_energy_gradients_match_finite_differences(per_word, monkeypatch):
    monkeypatch.setattr(energy, "BLOCK_ELEMENTS", 5)
    g = torch.Generator().manual_seed(1)
    a = torch.randn(3, 4, dtype=torch.float64, generator=g, requires_grad=True)
    G = torch.randn(7, 4, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(*((7, 4) if per_word else (4,)), dtype=torch.float64, generator=g,
                    requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, G, v: energy_logits(a, G, v), (a, G, v))


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("objective", ["softmax", "selfnorm", "nce"])
@pytest.mark.parametrize("per_word", [False, True])
def test_every_objective_differentiates_exactly(objective, per_word, sparse, monkeypatch):
    """The loss's gradient for every parameter against central differences (float64)."""
    monkeypatch.setattr(energy, "BLOCK_ELEMENTS", 11)
    net = tiny(per_word)
    ctx = torch.tensor([[BOS_ID, 3], [4, 5], [6, 7], [3, 3]])
    tgt = torch.tensor([3, 6, 2, 7])
    if objective == "softmax":
        obj, kw = FullSoftmax(), {}
    elif objective == "selfnorm":
        obj, kw = SelfNormalized(0.3), {}
    else:
        obj = NCE(np.arange(1, 9, dtype=float), samples=3)
        obj.log_kq = obj.log_kq.double()
        kw = {"noise": torch.tensor([2, 5, 7])}
    params = list(net.parameters())

    def loss():
        return obj.loss(net, ctx, tgt, sparse=sparse, **kw)

    net.zero_grad()
    loss().backward()
    for p in params:
        num = torch.zeros_like(p)
        flat, nf = p.data.view(-1), num.view(-1)
        for i in range(len(flat)):
            old = float(flat[i])
            flat[i] = old + 1e-6
            up = float(loss())
            flat[i] = old - 1e-6
            down = float(loss())
            flat[i] = old
            nf[i] = (up - down) / 2e-6
        grad = p.grad.to_dense() if p.grad is not None else torch.zeros_like(p)
        assert torch.allclose(grad, num, atol=1e-6), (objective, p.shape)


@pytest.mark.parametrize("per_word", [False, True])
def test_distributions_sum_to_one_and_match_target_scores(per_word):
    net = tiny(per_word, order=4).float()
    vocab = Vocabulary.from_counts({w: 10 - i for i, w in enumerate(WORDS)})
    lm = NeuralLM(vocab, net)
    ctx = np.array([[BOS_ID, BOS_ID, 3], [4, 5, 6], [7, 7, 0]])
    lp = lm.next_logprobs(ctx)
    assert np.allclose(np.exp(lp).sum(1), 1, atol=1e-9)
    assert np.all(np.isneginf(lp[:, BOS_ID]))
    tgt = np.array([3, 2, 7])
    assert np.allclose(lm.target_logprobs(ctx, tgt), lp[np.arange(3), tgt], atol=1e-5)
    lm.bf16 = True
    assert np.allclose(lm.target_logprobs(ctx, tgt), lp[np.arange(3), tgt], atol=0.05)

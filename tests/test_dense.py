"""The batched whole-vocabulary step: ``nnlm.Model.advance(states)`` and the tensor forms
of :mod:`nnlm.decoding.dense`, each against ``BaseScore`` word by word (the per-call
path, an independent implementation of the back-off rule), on every state along
held-out lines; rows that sum to 1; CUDA against the CPU where a GPU is present."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import nnlm
from conftest import toy_world
from nnlm.base.errors import NnlmError
from nnlm.decoding.dense import TensorBackoff, TensorNetwork, next_contexts, tensor_lm
from nnlm.models import load_model
from nnlm.text.specials import NO_WORD


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return toy_world(tmp_path_factory.mktemp("dense"))


def states_along(model: nnlm.Model, lines: list[str]) -> list[nnlm.State]:
    """Every state a left-to-right decoder meets on ``lines``: the start, then the state
    after each word."""
    out = []
    for line in lines:
        state = nnlm.State()
        model.BeginSentenceWrite(state)
        out.append(state)
        for word in line.split():
            nxt = nnlm.State()
            model.BaseScore(state, word, nxt)
            out.append(nxt)
            state = nxt
    return out


@pytest.mark.parametrize("name", ["kn3", "kn3.arpa", "nplm"])
def test_every_word_at_every_state_equals_base_score(world, name):
    model = nnlm.Model(world / name)
    lines = (world / "toy/valid.txt").read_text().splitlines()[:6]
    states = states_along(model, lines)
    step = model.advance(states)
    words = model.vocab.words
    assert step.log10.shape == (len(states), len(words))
    for b, state in enumerate(states):
        expected = [model.BaseScore(state, w, nnlm.State()) if w != "<s>" else -np.inf
                    for w in words]
        np.testing.assert_allclose(step.log10[b], expected, atol=1e-5, rtol=0)
    total = np.exp(np.logaddexp.reduce(step.log10 * np.log(10), axis=1))
    np.testing.assert_allclose(total, 1.0, atol=1e-6)
    # the state after a kept (row, word) is the per-call path's
    b, w = len(states) // 2, int(np.argmax(step.log10[len(states) // 2]))
    out = nnlm.State()
    model.BaseScore(states[b], words[w], out)
    assert step.state(b, w) == out


@pytest.mark.parametrize("name", ["kn3", "kn3.arpa"])
def test_the_tensor_back_off_step_equals_the_numpy_rows(world, name):
    """float64 tensors give the numpy rows to 1e-12 (same arithmetic), float32 to 1e-5;
    a null-context row (KenLM's NullContext) is the unigram row."""
    lm = load_model(world / name)
    model = nnlm.Model(lm)
    states = states_along(model, (world / "toy/valid.txt").read_text().splitlines()[:10])
    contexts = np.array([s.words for s in states], np.int64)
    contexts = np.vstack([contexts, np.full((1, lm.order - 1), NO_WORD)])
    ref = lm.next_logprobs(contexts)
    for dtype, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        got = TensorBackoff(lm, dtype=dtype).advance(torch.from_numpy(contexts)).double().numpy()
        assert np.array_equal(np.isfinite(got), np.isfinite(ref))
        fin = np.isfinite(ref)
        assert np.abs(got[fin] - ref[fin]).max() < tol
    np.testing.assert_allclose(ref[-1], lm.unigram_logp)


def test_the_tensor_network_step_equals_the_numpy_rows(world):
    lm = load_model(world / "nplm")
    contexts = np.array([[1, 5], [7, 8], [1, 1]], np.int64)[:, -(lm.order - 1):]
    step = tensor_lm(lm)
    assert isinstance(step, TensorNetwork)
    got = step.advance(torch.from_numpy(contexts)).double().numpy()
    np.testing.assert_allclose(got, lm.next_logprobs(contexts), atol=1e-5)


def test_next_contexts_shift_in_the_kept_word():
    ctx = torch.tensor([[1, 2], [3, 4]])
    out = next_contexts(ctx, torch.tensor([1, 0, 1]), torch.tensor([9, 8, 7]))
    assert out.tolist() == [[4, 9], [2, 8], [4, 7]]


def test_bad_input_is_one_line(world):
    lm = load_model(world / "kn3")
    step = TensorBackoff(lm)
    with pytest.raises(NnlmError, match=r"shape \[B, 2\]"):
        step.advance(torch.zeros((3, 4), dtype=torch.int64))
    with pytest.raises(NnlmError, match="outside"):
        step.advance(torch.tensor([[1, len(lm.vocab)]]))
    with pytest.raises(NnlmError, match="not a back-off"):
        TensorBackoff(load_model(world / "nplm"))
    other = nnlm.Model(world / "kn3.arpa")
    state = nnlm.State()
    other.BeginSentenceWrite(state)
    with pytest.raises(NnlmError, match="another model"):
        nnlm.Model(lm).advance([state])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", ["kn3", "nplm"])
def test_cuda_rows_equal_the_cpus(world, name):
    lm = load_model(world / name)
    contexts = torch.tensor([[1, 5], [7, 8], [1, 1], [NO_WORD, NO_WORD]])
    if name == "nplm":
        contexts = contexts[:3]
    cpu = tensor_lm(lm, "cpu").advance(contexts).double()
    cuda = tensor_lm(lm, "cuda").advance(contexts.cuda())
    assert cuda.device.type == "cuda"
    fin = torch.isfinite(cpu)
    assert torch.equal(fin, torch.isfinite(cuda.cpu()))
    assert (cpu[fin] - cuda.cpu().double()[fin]).abs().max() < 1e-4

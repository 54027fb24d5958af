"""The batched whole-vocabulary step: ``nnlm.Decoder.advance(states)`` and the tensor forms
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


def states_along(model: nnlm.Decoder, lines: list[str]) -> list[nnlm.DecoderState]:
    """Every state a left-to-right decoder meets on ``lines``: the start, then the state
    after each word."""
    out = []
    for line in lines:
        state = nnlm.DecoderState()
        model.BeginSentenceWrite(state)
        out.append(state)
        for word in line.split():
            nxt = nnlm.DecoderState()
            model.BaseScore(state, word, nxt)
            out.append(nxt)
            state = nxt
    return out


@pytest.mark.parametrize("name", ["kn3", "kn3.arpa", "nplm"])
def test_every_word_at_every_state_equals_base_score(world, name):
    model = nnlm.Decoder(world / name)
    lines = (world / "toy/valid.txt").read_text().splitlines()[:6]
    states = states_along(model, lines)
    step = model.advance(states)
    words = model.vocab.words
    assert step.log10.shape == (len(states), len(words))
    for b, state in enumerate(states):
        expected = [model.BaseScore(state, w, nnlm.DecoderState()) if w != "<s>" else -np.inf
                    for w in words]
        np.testing.assert_allclose(step.log10[b], expected, atol=1e-5, rtol=0)
    total = np.exp(np.logaddexp.reduce(step.log10 * np.log(10), axis=1))
    np.testing.assert_allclose(total, 1.0, atol=1e-6)
    # the state after a kept (row, word) is the per-call path's
    b, w = len(states) // 2, int(np.argmax(step.log10[len(states) // 2]))
    out = nnlm.DecoderState()
    model.BaseScore(states[b], words[w], out)
    assert step.state(b, w) == out


@pytest.mark.parametrize("name", ["kn3", "kn3.arpa"])
def test_the_tensor_back_off_step_equals_the_numpy_rows(world, name):
    """float64 tensors give the numpy rows to 1e-12 (same arithmetic), float32 to 1e-5;
    a null-context row (KenLM's NullContext) is the unigram row."""
    lm = load_model(world / name)
    model = nnlm.Decoder(lm)
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
    other = nnlm.Decoder(world / "kn3.arpa")
    state = nnlm.DecoderState()
    other.BeginSentenceWrite(state)
    with pytest.raises(NnlmError, match="another model"):
        nnlm.Decoder(lm).advance([state])


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


# -- CTC beam search with shallow fusion on the whole-vocabulary step -------------------
def _emissions(V: int, T: int, seed: int) -> torch.Tensor:
    """Noisy frames over |V| words and a blank (last), repeats included: what exercises
    CTC's merges (a label held over frames, an extension that lands on a kept prefix)."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, V + 1)) * 2
    logits[:, -1] += 1.5
    held = rng.integers(4, V)
    logits[2:4, held] += 6  # one word held two frames
    return torch.log_softmax(torch.from_numpy(logits), 1)


@pytest.mark.parametrize("name", ["kn3", "kn3.arpa", "nplm"])
def test_the_batched_beam_search_decodes_what_the_per_call_search_decodes(world, name):
    from nnlm.decoding.ctc import beam_search, reference_beam_search

    lm = load_model(world / name)
    model = nnlm.Decoder(lm)
    step = tensor_lm(lm) if name == "nplm" else TensorBackoff(lm, dtype=torch.float64)
    for seed in range(4):
        lp = _emissions(len(lm.vocab), 10, seed)
        fast = beam_search(lp, step, beam=4, lm_weight=0.7, word_bonus=0.3)
        slow = reference_beam_search(lp.numpy(), model, beam=4, lm_weight=0.7, word_bonus=0.3)
        assert [h.words for h in fast] == [h.words for h in slow]
        np.testing.assert_allclose([h.score for h in fast], [h.score for h in slow], atol=1e-4)
        np.testing.assert_allclose([h.lm for h in fast], [h.lm for h in slow], atol=1e-4)


def test_the_language_model_changes_what_is_decoded(world):
    """With the frames ambiguous between two words, the LM's weight decides: with no LM
    the acoustically better word wins; with a strong one, the likelier sentence."""
    from nnlm.decoding.ctc import beam_search

    lm = load_model(world / "kn3")
    V = len(lm.vocab)
    step = TensorBackoff(lm, dtype=torch.float64)
    lp = _emissions(V, 8, 0)
    plain = beam_search(lp, step, beam=1, lm_weight=0.0)[0]
    greedy = lp.argmax(1).tolist()  # greedy CTC: collapse repeats, drop blanks
    collapsed = [w for i, w in enumerate(greedy) if w != V and (i == 0 or w != greedy[i - 1])]
    assert plain.words == collapsed
    fused = beam_search(lp, step, beam=8, lm_weight=2.0)[0]
    model = nnlm.Decoder(lm)

    def lm_score(words):
        return model.score(" ".join(lm.vocab.words[w] for w in words)) * np.log(10)

    assert fused.words != plain.words
    assert fused.lm == pytest.approx(lm_score(fused.words), abs=1e-6)
    assert fused.lm > lm_score(plain.words)


def test_beam_search_bad_input_is_one_line(world):
    from nnlm.decoding.ctc import beam_search

    lm = load_model(world / "kn3")
    with pytest.raises(NnlmError, match="blank"):
        beam_search(torch.zeros((3, len(lm.vocab))), lm)
    with pytest.raises(NnlmError, match="beam=0"):
        beam_search(torch.zeros((3, len(lm.vocab) + 1)), lm, beam=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_the_beam_search_on_cuda_decodes_what_the_cpu_decodes(world):
    from nnlm.decoding.ctc import beam_search

    lm = load_model(world / "kn3")
    for seed in range(3):
        lp = _emissions(len(lm.vocab), 12, seed)
        cpu = beam_search(lp, TensorBackoff(lm, dtype=torch.float64), beam=6, lm_weight=0.7)
        cuda = beam_search(lp.cuda(), TensorBackoff(lm, "cuda", torch.float64), beam=6,
                           lm_weight=0.7)
        assert [h.words for h in cpu] == [h.words for h in cuda]


def test_the_tensor_mixture_step_equals_the_mixtures_rows(world, tmp_path):
    """A mixture of the KN trigram and the network, bucketed weights included."""
    from nnlm.cli import main as cli
    from nnlm.decoding.dense import TensorMixture

    assert cli(["mix", str(world / "kn3"), str(world / "nplm"), "--valid",
                str(world / "toy/valid.txt"), "--per-bucket", str(world / "toy/train.txt"),
                "-o", str(tmp_path / "mix")]) == 0
    mix = load_model(tmp_path / "mix")
    assert mix.buckets is not None
    model = nnlm.Decoder(mix)
    states = states_along(model, (world / "toy/valid.txt").read_text().splitlines()[:4])
    contexts = np.array([s.words for s in states], np.int64)
    step = tensor_lm(mix)
    assert isinstance(step, TensorMixture)
    got = step.advance(torch.from_numpy(contexts)).double().numpy()
    np.testing.assert_allclose(got, mix.next_logprobs(contexts), atol=1e-5)


def test_a_batch_over_memory_is_refused_before_allocating(world, monkeypatch):
    """advance over more states than memory holds: one line naming the sizes, before any
    [B, |V|] array exists."""
    import nnlm.base.sysmem as sysmem

    lm, net = load_model(world / "kn3"), tensor_lm(load_model(world / "nplm"))
    monkeypatch.setattr(sysmem, "available_memory", lambda: 1000)
    contexts = torch.ones((64, 2), dtype=torch.int64)
    with pytest.raises(NnlmError, match=r"advance over 64 states x 51 words needs"):
        TensorBackoff(lm).advance(contexts)
    with pytest.raises(NnlmError, match="advance fewer states at a time"):
        net.advance(contexts)
    model = nnlm.Decoder(lm)
    state = nnlm.DecoderState()
    model.BeginSentenceWrite(state)
    with pytest.raises(NnlmError, match="advance over 64 states"):
        model.advance([state] * 64)

"""The AWD-LSTM regularizers of the lstm network (``--preset awd``): each piece against
an independent computation, gradients against finite differences with the dropout masks
fixed, scoring untouched by them, saving and resuming."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nnlm import Stream, load_model, save_model
from nnlm.neural.networks.lstm import LSTMConfig, LSTMNetwork
from nnlm.neural.networks.spans import Spans
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.presets import resolved
from test_deep import VOCAB, V
from test_family import (
    assert_gradients_match_finite_differences,
    assert_resume_is_exact,
    randomized,
)
from test_lstm import LSTM_TOY, LSTM_TRAIN, TEXT, numpy_logprobs

AWD = {"dropout_x": 0.3, "dropout_h": 0.4, "dropout_e": 0.2, "dropout_w": 0.5,
       "dropout_l": 0.25, "locked": True, "ar": 2.0, "tar": 1.0}


def awd(**kw):
    cfg = LSTMConfig(vocab_size=V, **{"order": 1025, "m": 3, "h": 4, **AWD, **kw})
    return randomized(LSTMNetwork(cfg), 0.4)


def batch():
    inputs = torch.tensor([[1, 3, 4, 5, 3, 6], [1, 7, 3, 0, 0, 0], [1, 8, 8, 8, 2, 0]])
    return Spans(inputs, torch.tensor([6, 3, 5]))


def penalized_loss(net, spans, targets, seed):
    """The training loss with every mask drawn from ``seed``: the NLL plus the AR/TAR
    penalty per target word, as the trainer adds it."""
    torch.manual_seed(seed)
    z = net.hidden_input(spans)
    nll = F.cross_entropy(net.output_logits(z).double(), targets, reduction="sum")
    return nll + net.take_penalty() * len(targets)


@pytest.mark.parametrize("layers", [1, 2])
def test_awd_gradients_match_finite_differences_with_the_masks_fixed(layers):
    net = awd(layers=layers).double().train()
    spans = batch()
    targets = torch.tensor([3, 4, 5, 3, 6, 2, 7, 3, 2, 8, 8, 8, 2, 2])[: len(spans)]
    assert_gradients_match_finite_differences(
        net, lambda: penalized_loss(net, spans, targets, seed=5))
    # the masks did something: another seed gives another loss
    assert penalized_loss(net, spans, targets, 5) != penalized_loss(net, spans, targets, 6)


@pytest.mark.parametrize("layers", [1, 2])
def test_training_reads_layer_by_layer_as_the_fused_lstm_when_nothing_drops(layers):
    net = awd(layers=layers, **dict.fromkeys(
        ("dropout_x", "dropout_h", "dropout_e", "dropout_w", "dropout_l"), 0.0)).double()
    inputs = batch().inputs
    net.eval()
    fused = net.rnn(F.embedding(inputs, net.C))[0]
    net.train()
    assert torch.allclose(net.read(inputs), fused, atol=1e-12)


def test_locked_dropout_keeps_one_mask_over_a_rows_positions():
    net = awd(m=50, locked=True).train()
    x = torch.ones(4, 9, 50)
    out = net._drop(x, 0.5)
    assert torch.equal(out, out[:, :1].expand_as(out))  # the same at every position
    assert not torch.equal(out[0], out[1])  # a row of its own
    assert set(out.unique().tolist()) == {0.0, 2.0}
    free = awd(m=50, locked=False).train()._drop(x, 0.5)
    assert not torch.equal(free, free[:, :1].expand_as(free))


def test_embedding_dropout_drops_a_words_whole_vector_at_all_its_positions():
    net = awd(m=6, dropout_x=0.0, dropout_e=0.5).train()
    torch.manual_seed(3)
    inputs = torch.tensor([[3, 4, 3, 4, 5, 3, 6, 5]])
    x = net._embed(inputs)
    for word in (3, 4, 5, 6):
        rows = x[0, inputs[0] == word]
        assert torch.equal(rows, rows[:1].expand_as(rows))
        dropped = bool((rows[0] == 0).all())
        expected = torch.zeros(6) if dropped else net.C[word].detach() * 2
        assert torch.allclose(rows[0], expected)
    # over many draws each word is dropped about half the time
    drops = [(net._embed(inputs)[0, 0] == 0).all().item() for _ in range(400)]
    assert 0.4 < np.mean(drops) < 0.6


def test_ar_and_tar_are_the_papers_means_over_the_positions_read():
    net = awd(**dict.fromkeys(("dropout_x", "dropout_h", "dropout_e", "dropout_w",
                               "dropout_l"), 0.0), ar=0.7, tar=0.3).double().train()
    spans = batch()
    net.hidden_input(spans)
    penalty = float(net.take_penalty().detach())
    assert net.take_penalty() is None  # taken once
    net.eval()
    a = net.rnn(F.embedding(spans.inputs, net.C))[0].detach().numpy()
    read = [a[r, : int(n)] for r, n in enumerate(spans.lengths)]
    ar = np.mean(np.concatenate([r ** 2 for r in read]))
    tar = np.mean(np.concatenate([(r[1:] - r[:-1]) ** 2 for r in read]))
    assert penalty == pytest.approx(0.7 * ar + 0.3 * tar, rel=1e-10)


def test_scoring_ignores_the_regularizers_and_saves_and_loads(tmp_path):
    """In evaluation the network is the LSTM written out; its config round-trips, and a
    config written before these settings existed loads with them off."""
    net = awd(layers=2)
    lm = NeuralLM(VOCAB, net)
    stream = Stream.from_lines([line.split() for line in TEXT], VOCAB)
    whole = lm.logprobs(stream)
    lo, hi = stream.offsets[0], stream.offsets[1]
    expected = [numpy_logprobs(net, [1, *stream.ids[lo:pos].tolist()], int(stream.ids[pos]))
                for pos in range(lo, hi)]
    assert np.allclose(whole[lo:hi], expected, atol=1e-5)
    save_model(lm, tmp_path / "awd")
    back = load_model(tmp_path / "awd")
    assert back.model.config == net.config and back.model.config.locked
    assert np.array_equal(back.logprobs(stream), whole)
    from nnlm.decoding import Decoder

    decoder = Decoder(tmp_path / "awd")  # the decoder API's states: whole-text numbers
    scores = [p for line in TEXT for p, _, _ in decoder.full_scores(line)]
    assert np.allclose(np.array(scores) * np.log(10), whole, atol=1e-5)
    old = {k: v for k, v in net.config.to_dict().items()
           if k not in ("dropout_e", "dropout_w", "dropout_l", "locked", "ar", "tar")}
    from nnlm.neural.networks.registry import network_config

    cfg = network_config(old)
    assert (cfg.dropout_w, cfg.locked, cfg.ar, cfg.between) == (0.0, False, 0.0, cfg.dropout_h)


@pytest.mark.parametrize("bad", [dict(dropout_w=1.0), dict(dropout_e=-0.1), dict(ar=-1.0),
                                 dict(tar=float("nan")), dict(dropout_l=1.5)])
def test_bad_regularizer_settings_are_refused(bad):
    with pytest.raises(ValueError):
        LSTMConfig(vocab_size=V, **{**AWD, **bad})


def test_the_awd_preset_turns_every_regularizer_on():
    model, train = resolved("awd")
    assert model["network"] == "lstm" and model["locked"] and model["tied"]
    assert all(model[k] > 0 for k in ("dropout_e", "dropout_w", "ar", "tar", "dropout_x"))
    assert train["average"] > 0


def test_awd_resume_reaches_the_same_parameters_as_an_uninterrupted_run(toy, tmp_path):  # noqa: F811
    assert_resume_is_exact(toy / "data", tmp_path, 7, preset="awd", arch=LSTM_TOY,
                           train=LSTM_TRAIN)

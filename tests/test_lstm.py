"""The recurrent g: an LSTM over the line. Checked against finite differences,
an LSTM written out in numpy (the oracle for every scoring path: whole lines, windows of
contexts, lines longer than the window, training pieces), distributions that sum to one,
nnlm.Decoder's states, save/load, exact resumption, mixtures and the command line."""

import math

import numpy as np
import pytest
import torch

from nnlm import Stream, evaluate, load_model, read_stream, save_model
from nnlm.cli import main
from nnlm.decoding import Decoder, DecoderState
from nnlm.neural.networks.lstm import LSTMConfig, LSTMNetwork
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.segments import SpanPlan, pieces, spans
from nnlm.neural.training.run import train_from_files
from nnlm.text.vocab import BOS_ID
from test_deep import VOCAB, V, contexts
from test_family import (
    assert_gradients_match_finite_differences,
    assert_resume_is_exact,
    randomized,
)

TEXT = ["a b c d e f a b c", "f e", "a", "a b c d e f a b c d e f a b", "c d e f"]


def lstm(**kw):
    cfg = LSTMConfig(vocab_size=V, **{"order": 1025, "m": 3, "h": 4, "dropout_x": 0.0,
                                      "dropout_h": 0.0, **kw})
    return randomized(LSTMNetwork(cfg), 0.4)


def numpy_logprobs(net: LSTMNetwork, history: list[int], target: int) -> float:
    """log p(target | history) written out: read the history (its words, oldest first)
    from a zero state through the LSTM equations, z = P a (or a), y = b + U z."""
    t = {k: v.detach().double().numpy() for k, v in net.named_tensors().items()}
    cfg = net.config
    h_state = [np.zeros(cfg.h) for _ in range(cfg.layers)]
    c_state = [np.zeros(cfg.h) for _ in range(cfg.layers)]
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    for w in history:
        x = t["C"][w]
        for layer in range(cfg.layers):
            gates = (t[f"W_ih.{layer}"] @ x + t[f"b_ih.{layer}"] + t[f"W_hh.{layer}"]
                     @ h_state[layer] + t[f"b_hh.{layer}"])
            i, f, g, o = np.split(gates, 4)
            c_state[layer] = sig(f) * c_state[layer] + sig(i) * np.tanh(g)
            h_state[layer] = sig(o) * np.tanh(c_state[layer])
            x = h_state[layer]
    z = t["P"] @ x if cfg.tied else x
    y = t["b"] + (t["C"] if cfg.tied else t["U"]) @ z
    y[BOS_ID] = -np.inf
    return float(y[target] - np.log(np.exp(y - y.max()).sum()) - y.max())


def oracle(net: LSTMNetwork, stream: Stream) -> np.ndarray:
    """Every slot's log-probability from its history: the line's <s> and words before
    it, the last n - 1 of them."""
    out = []
    for line in range(len(stream.offsets) - 1):
        lo, hi = stream.offsets[line], stream.offsets[line + 1]
        for pos in range(lo, hi):
            history = [BOS_ID, *stream.ids[lo:pos].tolist()][-(net.config.order - 1):]
            out.append(numpy_logprobs(net, history, int(stream.ids[pos])))
    return np.array(out)


@pytest.mark.parametrize("kw", [dict(), dict(layers=2), dict(tied=False, h=5)])
def test_lstm_gradients_match_finite_differences(kw):
    net = lstm(**kw).double()
    ctx, tgt = contexts(6), torch.tensor([3, 4, 5, 6, 7, 8])
    assert_gradients_match_finite_differences(
        net, lambda: -torch.log_softmax(net(ctx).double(), 1)[torch.arange(6), tgt].sum())


@pytest.mark.parametrize("order", [1025, 5, 2])
@pytest.mark.parametrize("layers", [1, 2])
def test_every_scoring_path_equals_the_lstm_written_out(order, layers):
    """Whole lines (NeuralLM.logprobs), windows of contexts (target_logprobs) and the
    numpy LSTM agree on every slot, lines longer than the window included (order 5 and 2:
    later slots read the last n - 1 words from a zero state)."""
    net = lstm(order=order, layers=layers)
    lm = NeuralLM(VOCAB, net)
    stream = Stream.from_lines([line.split() for line in TEXT], VOCAB)
    want = oracle(net, stream)
    assert np.allclose(lm.logprobs(stream), want, atol=1e-5)
    assert np.allclose(lm.target_logprobs(stream.contexts(lm.order), stream.ids), want,
                       atol=1e-5)


def test_training_pieces_read_what_the_model_reads():
    """A training piece's z at each position is the z of that slot's window: from the
    line's <s> in the first piece; a later piece from a zero state at the word before it
    (the model's reading of a window that does not reach the line's start)."""
    net = lstm(order=4).eval()
    stream = Stream.from_lines([line.split() for line in TEXT], VOCAB)
    starts, lengths = pieces(stream, 3)
    assert lengths.sum() == len(stream) and lengths.max() == 3
    batch, targets = spans(stream, starts, lengths)
    assert np.array_equal(np.sort(np.concatenate([np.arange(s, s + n) for s, n in
                                                  zip(starts, lengths)])), np.arange(len(stream)))
    z = net.hidden_input(batch)
    at = np.concatenate([np.arange(s, s + n) for s, n in zip(starts, lengths)])
    assert np.array_equal(targets, stream.ids[at])
    ctx = torch.from_numpy(stream.contexts(4, at).astype(np.int64))
    first = np.isin(starts, stream.offsets[:-1])
    piece_of = np.repeat(np.arange(len(starts)), lengths)
    offset_in_piece = np.arange(len(at)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    # a first piece's slot reads its whole window; a later one's the words since its start
    exact = first[piece_of] | (offset_in_piece == 2)
    assert torch.allclose(z[exact], net.hidden_input(ctx[exact]), atol=1e-6)


def test_lstm_distributions_sum_to_one_with_added_words_too():
    lm = NeuralLM(VOCAB, lstm(layers=2))
    lp = lm.next_logprobs(contexts(7, rows=20).numpy())
    assert np.allclose(np.exp(lp).sum(1), 1.0, atol=1e-9)
    assert np.all(lp[:, BOS_ID] == -np.inf)
    # the open vocabulary: a new word's row of C (also its output row) from its context
    lm.add_words(["zzz"], [["a", "b", "c"]])
    stream = Stream.from_lines([["a", "zzz", "b"]], lm.vocab)
    assert len(lm.vocab) == V + 1 and lm.model.C.shape[0] == V + 1
    lp = lm.next_logprobs(stream.contexts(lm.order))
    assert np.allclose(np.exp(lp).sum(1), 1.0, atol=1e-9)
    assert np.allclose(lm.logprobs(stream), lp[np.arange(len(stream)), stream.ids])


def test_an_epoch_plan_visits_every_slot_once_in_batches_within_the_budget():
    rng = np.random.default_rng(0)
    lines = [["a"] * int(n) for n in rng.integers(1, 40, 200)]
    stream = Stream.from_lines(lines, VOCAB)
    plan = SpanPlan(stream, span=16, tokens=64, rng=np.random.default_rng(1))
    seen = np.concatenate([np.arange(s, s + n) for b in plan.batches
                           for s, n in zip(plan.starts[b], plan.lengths[b])])
    assert np.array_equal(np.sort(seen), np.arange(len(stream)))
    assert all(len(b) * plan.lengths[b].max() <= 64 for b in plan.batches)
    assert plan.words(plan.steps) == len(stream)
    again = SpanPlan(stream, span=16, tokens=64, rng=np.random.default_rng(1))
    assert all(np.array_equal(a, b) for a, b in zip(plan.batches, again.batches))


def test_lstm_saves_loads_and_scores_as_the_decoder_api(tmp_path):
    """Save/load round trip; nnlm.Decoder's full_scores and a chain of BaseScore calls give
    the numbers of scoring whole lines; the n-gram length is the words seen plus one."""
    lm = NeuralLM(VOCAB, lstm(layers=2))
    save_model(lm, tmp_path / "lstm")
    back = load_model(tmp_path / "lstm")
    assert back.order == 1025 and back.model.config == lm.model.config
    stream = Stream.from_lines([line.split() for line in TEXT], VOCAB)
    whole = lm.logprobs(stream)
    assert np.array_equal(back.logprobs(stream), whole)
    model = Decoder(tmp_path / "lstm")
    scores = [s for line in TEXT for s in model.full_scores(line)]
    assert np.allclose(np.array([p for p, _, _ in scores]) / math.log10(math.e), whole,
                       atol=1e-5)
    assert [n for _, n, _ in model.full_scores(TEXT[0])] == list(range(2, 12))
    state, out, total = DecoderState(), DecoderState(), 0.0
    model.BeginSentenceWrite(state)
    for word in [*TEXT[3].split(), "</s>"]:
        total += model.BaseScore(state, word, out)
        state, out = out, DecoderState()
    lo, hi = stream.offsets[3], stream.offsets[4]
    assert math.isclose(total, whole[lo:hi].sum() * math.log10(math.e), abs_tol=1e-5)
    import nnlm.kenlm  # kenlm's DecoderState holds a few words: it points to nnlm.Decoder

    with pytest.raises(ValueError, match="use nnlm.Decoder"):
        nnlm.kenlm.Model(tmp_path / "lstm")


def test_whole_line_scores_for_kenlm_api_decoders_are_the_lines_scores():
    """pyctcdecode's class over an LSTM scores through WholeLine (kenlm's States cannot
    hold its context): a chain of BaseScore calls gives whole-line scoring's numbers,
    each history's row sums to one, rows are computed once a history, those BaseScore
    writes in one batched pass with the next one missing, and a null context is
    refused in one line."""
    from nnlm.base.errors import NnlmError
    from nnlm.decoding.whole_line import History, WholeLine

    lm = NeuralLM(VOCAB, lstm(layers=2))
    passes = []  # rows computed by each network pass
    next_logprobs = lm.next_logprobs
    lm.next_logprobs = lambda contexts: passes.append(len(contexts)) or next_logprobs(contexts)
    scorer = WholeLine(lm)
    stream = Stream.from_lines([line.split() for line in TEXT], VOCAB)
    whole = lm.logprobs(stream) * math.log10(math.e)
    for i, line in enumerate(TEXT):
        state, got = History(), []
        scorer.BeginSentenceWrite(state)
        for word in [*line.split(), "</s>"]:
            out = History()
            got.append(scorer.BaseScore(state, word, out))
            state = out
        lo, hi = stream.offsets[i], stream.offsets[i + 1]
        assert np.allclose(got, whole[lo:hi], atol=1e-5)
    for row in scorer.rows.values():
        assert math.isclose(float((10.0 ** row.astype(np.float64)).sum()), 1.0, abs_tol=1e-4)
    histories = {(*line.split()[:j],) for line in TEXT for j in range(len(line.split()) + 1)}
    assert len(scorer.rows) == sum(passes) >= len(histories)  # each once
    scorer.new_utterance()
    passes.clear()
    start, written = History(), []
    scorer.BeginSentenceWrite(start)
    for word in ("b", "d", "e"):  # three histories no line starts with
        written.append(History())
        scorer.BaseScore(start, word, written[-1])
    rows = [scorer.BaseScore(state, "a", History()) for state in written]
    assert passes == [1, 3]  # <s>'s row; the histories written, in one pass at the first read
    assert np.allclose(rows, [scorer.lm.logprobs(Stream.from_lines([[w, "a"]], VOCAB))[1]
                              * math.log10(math.e) for w in ("b", "d", "e")], atol=1e-5)
    assert scorer.order == 1025 and "a" in scorer and "zebra" not in scorer
    with pytest.raises(NnlmError, match="no null context"):
        scorer.NullContextWrite(History())


LSTM_TOY = {"m": 8, "h": 16, "span": 8}
LSTM_TRAIN = {"epochs": 2, "batch_size": 96, "bf16": False}


def test_lstm_resume_reaches_the_same_parameters_as_an_uninterrupted_run(toy, tmp_path):
    assert_resume_is_exact(toy / "data", tmp_path, 7, preset="lstm", arch=LSTM_TOY,
                           train=LSTM_TRAIN)


def test_lstm_trains_on_the_toy_world_mixes_and_generates(toy, tmp_path):
    from nnlm.mixture import Mixture
    from nnlm.ngram import KneserNey

    data = toy / "data"
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "lstm", preset="lstm",
                     arch=LSTM_TOY, train={**LSTM_TRAIN, "epochs": 4, "lr": 1e-2},
                     threads=1, log=lambda s: None)
    lm = load_model(tmp_path / "lstm")
    test = read_stream(data / "test.txt", lm.vocab)
    assert evaluate(lm, test).perplexity < 0.5 * len(lm.vocab)  # learned something
    kn = KneserNey(lm.vocab, 3, discount_fallback=True).fit(read_stream(data / "train.txt",
                                                                        lm.vocab))
    valid = read_stream(data / "valid.txt", lm.vocab)
    mix = Mixture([lm, kn])
    history = mix.fit_weights(valid)
    assert np.all(np.diff(history) >= -1e-12)
    # the mixture scores the stream through each component's own path, as per token
    per_token = mix.target_logprobs(valid.contexts(mix.order)[:300], valid.ids[:300])
    assert np.allclose(mix.logprobs(valid)[:300], per_token, atol=1e-9)
    assert np.allclose(np.exp(mix.next_logprobs(valid.contexts(mix.order)[:20])).sum(1), 1)
    sentences = lm.generate(3, seed=0, max_words=12)
    assert len(sentences) == 3 and all(len(s.split()) <= 12 for s in sentences)


def test_lstm_refusals_are_one_line(toy, tmp_path, capsys):
    data = toy / "data"
    base = ["train", data / "train.txt", "--valid", data / "valid.txt", "-o", tmp_path / "x",
            "--preset", "lstm"]
    for extra, message in [
        (["--objective", "nce"], "trains with the full softmax"),
        (["--workers", "2"], "trains in one process"),
        (["--layers", "0"], "layers >= 1"),
    ]:
        assert main([str(a) for a in base + extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)
        assert len(err.strip().splitlines()) <= 2, err
    with pytest.raises(ValueError, match="no short-list"):
        LSTMConfig(vocab_size=V, tied=False, output_size=5)


def test_a_decoder_continues_each_hypothesis_from_its_parents_state():
    """nnlm.Decoder's hypotheses that grow by a word are one LSTM step each (the state cache
    holds one entry per prefix), give the numbers of reading each prefix whole, and a
    change of the weights drops the cached states."""
    lm = NeuralLM(VOCAB, lstm(layers=2))
    model = Decoder(lm)
    widths = []  # words read by each call into the LSTM (a step from a state: 1)
    read, step = lm.model.read_states, lm.model.step
    lm.model.read_states = lambda inputs, *a: (widths.append(inputs.shape[1]), read(inputs, *a))[1]
    lm.model.step = lambda words, *a: (widths.append(1), step(words, *a))[1]
    words = TEXT[3].split()
    start = DecoderState()
    model.BeginSentenceWrite(start)
    beams = [start, start]
    for w in words[:6]:
        out = model.advance(beams, [w, "f"])
        ctx = torch.from_numpy(np.array([s.words for s in beams]))
        want = lm.model.eval().hidden_input(ctx)
        assert torch.allclose(lm._states.hidden_input(lm.model, ctx), want, atol=1e-6)
        beams = [out.states[0], out.states[1]]
    assert widths == [1] * 6  # <s>, then one step a word from the parents' states
    assert len(lm._states.states) == 11  # <s>, then the two hypotheses' prefixes
    whole = lm.logprobs(Stream.from_lines([words[:6]], VOCAB))[:6].sum() * math.log10(math.e)
    state, total = start, 0.0
    for w in words[:6]:
        out = DecoderState()
        total += model.BaseScore(state, w, out)
        state = out
    assert math.isclose(total, whole, abs_tol=1e-5)
    with torch.no_grad():
        lm.model.C.mul_(2.0)  # new weights: the cached states no longer apply
    after = Decoder(lm).score(" ".join(words[:6]), eos=False)
    assert math.isclose(after, lm.logprobs(Stream.from_lines([words[:6]], VOCAB))[:6].sum()
                        * math.log10(math.e), abs_tol=1e-5)


@pytest.mark.parametrize("layers", [1, 2])
def test_a_decoders_step_is_read_states_of_one_word(layers):
    """LSTMNetwork.step (each layer's gates in one product, what a decoder's cached
    states continue with) gives read_states' numbers for one word from the same state,
    to float32's rounding; in bf16 products to bf16's (about 1e-2), and a decoder's rows
    still sum to one."""
    net = lstm(layers=layers).eval()
    g = torch.Generator().manual_seed(layers)
    B, h = 5, net.config.h
    state = (torch.randn(layers, B, h, generator=g) * 0.5,
             torch.randn(layers, B, h, generator=g) * 0.5)
    words = torch.randint(3, V, (B,), generator=g)
    with torch.no_grad():
        top, (a, c) = net.read_states(words[:, None], torch.ones(B, dtype=torch.int64), state)
    for bf16, tol in ((False, 1e-6), (True, 2e-2)):
        top2, (a2, c2) = net.step(words, state, bf16)
        for got, want in ((top2, top), (a2, a), (c2, c)):
            assert got.shape == want.shape and torch.allclose(got, want, atol=tol)
    lm = NeuralLM(VOCAB, net, bf16=True)
    ctx = np.full((3, lm.order - 1), BOS_ID, np.int64)
    ctx[:, -1] = [3, 4, 5]
    rows = lm.next_logprobs(ctx)
    assert np.allclose(np.exp(rows).sum(1), 1.0, atol=1e-9)
    exact = NeuralLM(VOCAB, net).next_logprobs(ctx)
    assert np.array_equal(np.isinf(rows), np.isinf(exact))  # <s>: never predicted
    finite = np.isfinite(exact)
    assert 0 < np.abs(rows - exact)[finite].max() < 5e-2

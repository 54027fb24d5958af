"""The long-context feed-forward networks: the deep network of Sun & Iyyer (2021)
and FOFE contexts (Zhang et al. 2015), against finite differences, brute-force encodings
of the history, distributions that sum to one, save/load, exact resumption, the decoder
API and the command line."""

import math

import numpy as np
import pytest
import torch

from nnlm import Stream, Vocabulary, evaluate, load_model, read_stream, save_model
from nnlm.cli import main
from nnlm.decoding import Decoder
from nnlm.neural.networks.context import fofe_codes, present
from nnlm.neural.networks.deep import DeepConfig, DeepNetwork
from nnlm.neural.networks.network import NPLMConfig, NPLMNetwork
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.training.run import train_from_files
from nnlm.text.vocab import BOS_ID, UNK_ID
from test_family import (
    assert_gradients_match_finite_differences,
    assert_resume_is_exact,
    randomized,
)

WORDS = ["a", "b", "c", "d", "e", "f"]
VOCAB = Vocabulary.from_counts({w: 7 - i for i, w in enumerate(WORDS)})  # 9 with specials
V = len(VOCAB)


def contexts(K, rows=6, seed=0):
    """Random context rows of K ids, some starting inside the window (padded with <s>)."""
    g = np.random.default_rng(seed)
    out = g.integers(3, V, (rows, K))
    for r in range(rows):
        start = g.integers(0, K + 1)  # the line's <s> at start - 1; padding before it
        out[r, :start] = BOS_ID
    return torch.from_numpy(out)


DEEP_VARIANTS = [
    dict(order=3, m=3, history=4, h=5, layers=2),
    dict(order=3, m=3, history=4, h=5, layers=1, far="mean", tied=False),
    dict(order=2, m=3, history=5, h=4, layers=1, far="fofe", fofe_alpha=0.6),
    dict(order=3, m=3, history=5, h=4, layers=1, far_spans=2),
    dict(order=2, m=3, history=6, h=4, layers=1, far="mean", far_spans=3, tied=False),
    dict(order=3, m=3, history=0, far="none", h=4, layers=2, residual=False, layer_norm=False),
]


def deep(**kw):
    cfg = DeepConfig(vocab_size=V, **{"dropout_x": 0.0, "dropout_h": 0.0, **kw})
    return randomized(DeepNetwork(cfg).double(), 0.3)


@pytest.mark.parametrize("kw", DEEP_VARIANTS)
def test_deep_gradients_match_finite_differences(kw):
    net = deep(**kw)
    ctx, tgt = contexts(net.config.context_size), torch.tensor([3, 4, 5, 6, 7, 8])

    def loss():
        return -torch.log_softmax(net(ctx).double(), 1)[torch.arange(6), tgt].sum()

    assert_gradients_match_finite_differences(net, loss)


def test_fofe_nplm_gradients_match_finite_differences():
    net = randomized(NPLMNetwork(NPLMConfig(vocab_size=V, order=3, m=3, h=4, context="fofe",
                                            history=3, fofe_alpha=0.5)).double(), 0.3)
    ctx, tgt = contexts(5), torch.tensor([3, 4, 5, 6, 7, 8])
    assert_gradients_match_finite_differences(
        net, lambda: -torch.log_softmax(net(ctx).double(), 1)[torch.arange(6), tgt].sum())


@pytest.mark.parametrize("kw", DEEP_VARIANTS)
def test_deep_distributions_sum_to_one(kw):
    lm = NeuralLM(VOCAB, deep(**kw).float())
    lp = lm.next_logprobs(contexts(lm.order - 1, rows=20).numpy())
    assert np.allclose(np.exp(lp).sum(1), 1.0, atol=1e-9)
    assert np.all(lp[:, BOS_ID] == -np.inf)


def test_padding_is_every_bos_before_the_lines_own():
    ctx = torch.tensor([[1, 1, 1, 5, 6], [4, 5, 6, 7, 8], [1, 1, 1, 1, 1]])
    assert BOS_ID == 1
    assert present(ctx).tolist() == [[False, False, True, True, True], [True] * 5,
                                     [False] * 4 + [True]]


def test_fofe_codes_are_the_recursive_encoding_of_each_prefix():
    """z_t = alpha z_{t-1} + e(w_t) from the line's <s> on, brute force, against the
    matrix form; the codes are those ending at each of the last slots, newest first."""
    g = torch.Generator().manual_seed(1)
    C = torch.randn(V, 4, dtype=torch.float64, generator=g)
    ctx = contexts(7, rows=5, seed=3)
    alpha, slots = 0.7, 3
    got = fofe_codes(C[ctx], present(ctx), alpha, slots)
    for r, row in enumerate(ctx.tolist()):
        start = max(i for i, w in enumerate(row) if w == BOS_ID) if BOS_ID in row else 0
        z, codes = torch.zeros(4, dtype=torch.float64), []
        for w in row[start:]:
            z = alpha * z + C[w]
            codes.append(z.clone())
        codes = ([torch.zeros(4, dtype=torch.float64)] * (len(row) - len(codes)) + codes)
        want = torch.stack(codes[::-1][:slots])
        assert torch.allclose(got[r], want, atol=1e-12), r


def test_deep_far_context_is_the_average_of_the_lines_earlier_words():
    """far = mean: the vector after the window is the plain mean of C over the words of the
    line (its <s> included) before the window, computed here from a real stream."""
    net = deep(order=3, m=3, history=6, h=4, layers=1, far="mean")
    stream = Stream.from_lines([line.split() for line in
                                ["a b c d e f a b c", "f e", "a b c d e f a b c d e f a"]], VOCAB)
    ctx = torch.from_numpy(stream.contexts(net.config.context_size + 1).astype(np.int64))
    x = net.features(ctx)
    m, n1 = 3, 2
    C = net.C.detach()
    for pos in range(len(stream.ids)):
        line = int(stream.line_of(np.array([pos]))[0])
        start = int(stream.offsets[line])
        words = [BOS_ID] + stream.ids[start:pos].tolist()  # the history of this slot
        far = words[: max(0, len(words) - n1)][-6:]
        want = C[far].mean(0) if far else torch.zeros(m, dtype=C.dtype)
        assert torch.allclose(x[pos, n1 * m:], want, atol=1e-12), pos


def test_deep_far_spans_are_the_averages_of_their_words():
    """far = mean with K = 2 spans of S = 6 words: [the 2 nearest], [the 4 before them],
    each the plain mean of the line's words in it (0 where it holds none)."""
    net = deep(order=3, m=3, history=6, h=4, layers=1, far="mean", far_spans=2)
    ctx = contexts(net.config.context_size, rows=12, seed=4)
    x = net.features(ctx)
    C, keep = net.C.detach(), present(ctx)
    for r in range(len(ctx)):
        for i, (lo, hi) in enumerate([(4, 6), (0, 4)]):
            words = [int(w) for w, k in zip(ctx[r, lo:hi], keep[r, lo:hi]) if k]
            want = C[words].mean(0) if words else torch.zeros(3, dtype=C.dtype)
            assert torch.allclose(x[r, (2 + i) * 3:(3 + i) * 3], want, atol=1e-12), (r, i)


def test_word_dropout_blanks_context_words_in_training_only():
    """Training: each word becomes <unk> (chance near 1: all of them), <s> and padding stay;
    evaluation: the contexts as given."""
    net = deep(order=3, m=3, history=4, h=5, layers=1, word_dropout=0.999999)
    ctx = contexts(net.config.context_size, rows=8, seed=2)
    blanked = torch.where(ctx == BOS_ID, ctx, torch.full_like(ctx, UNK_ID))
    plain = deep(order=3, m=3, history=4, h=5, layers=1)
    plain.load_state_dict(net.state_dict())
    net.train()
    assert torch.equal(net.hidden_input(ctx), plain.hidden_input(blanked))
    net.eval()
    assert torch.equal(net.hidden_input(ctx), plain.hidden_input(ctx))
    assert not torch.equal(plain.hidden_input(ctx), plain.hidden_input(blanked))


def test_deep_and_fofe_models_save_load_and_score_as_the_decoder_api(tmp_path):
    """Save/load round trip, and nnlm.Decoder's states (the last n - 1 + S words) giving the
    same numbers as scoring the whole text at once."""
    text = ["a b c d e f a b c", "f e", "a b c d e f a b c d e f a"]
    stream = Stream.from_lines([line.split() for line in text], VOCAB)
    for name, lm in {"deep": NeuralLM(VOCAB, deep(order=3, m=3, history=6, h=4).float()),
                     "fofe": NeuralLM(VOCAB, randomized(NPLMNetwork(NPLMConfig(
                         vocab_size=V, order=3, m=3, h=4, context="fofe", history=5)), 0.3))
                     }.items():
        save_model(lm, tmp_path / name)
        back = load_model(tmp_path / name)
        assert back.order == lm.order and back.model.config == lm.model.config
        whole = lm.logprobs(stream)
        assert np.array_equal(back.logprobs(stream), whole)
        model = Decoder(tmp_path / name)
        scores = [s for line in text for s in model.full_scores(line)]
        assert np.allclose(np.array([p for p, _, _ in scores]) / math.log10(math.e), whole,
                           atol=1e-5), name
        # the n-gram length is the words of the line seen (<s> included), plus one
        lengths = [n for _, n, _ in model.full_scores(text[0])]
        assert lengths == [min(i + 2, lm.order) for i in range(len(text[0].split()) + 1)]


DEEP_TOY = {"order": 3, "m": 8, "h": 16, "history": 6, "layers": 1}


def test_deep_resume_reaches_the_same_parameters_as_an_uninterrupted_run(toy, tmp_path):
    assert_resume_is_exact(toy / "data", tmp_path, 30, preset="deep", arch=DEEP_TOY,
                           train={"epochs": 2, "batch_size": 64, "bf16": False})


def test_averaged_weights_resume_exactly(toy, tmp_path):
    """--average: the saved model is the average, which a stopped run carries in its
    state and resumes bit for bit."""
    assert_resume_is_exact(toy / "data", tmp_path, 30, preset="deep", arch=DEEP_TOY,
                           train={"epochs": 2, "batch_size": 64, "bf16": False,
                                  "average": 0.9})


def test_the_average_is_the_moving_average_of_each_updates_weights(toy, tmp_path):
    """Brute force: runs stopped after 1..N updates save the weights theta_k of one and
    the same trajectory; A_1 = theta_1, A_k = a_k A_{k-1} + (1 - a_k) theta_k with
    a_k = min(average, k / (9 + k)); a run averaged over N updates saves A_N."""
    from safetensors.torch import load_file

    data, N, a = toy / "data", 5, 0.2
    kw = dict(threads=1, log=lambda s: None, preset="deep", arch=DEEP_TOY,
              train={"epochs": 1, "batch_size": 64, "bf16": False})
    thetas = []
    for k in range(1, N + 1):
        train_from_files(data / "train.txt", data / "valid.txt", tmp_path / f"s{k}",
                         max_steps=k, **kw)
        thetas.append(load_file(str(tmp_path / f"s{k}/state/model.safetensors")))
    kw["train"] = {**kw["train"], "average": a}
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "avg", max_steps=N, **kw)
    got = load_file(str(tmp_path / "avg/model.safetensors"))
    raw = load_file(str(tmp_path / "avg/state/model.safetensors"))
    want = {name: t.clone() for name, t in thetas[0].items()}
    for k in range(2, N + 1):
        decay = min(a, k / (9 + k))
        for name in want:
            want[name] = decay * want[name] + (1 - decay) * thetas[k - 1][name]
    assert all(torch.equal(raw[name], thetas[-1][name]) for name in raw)  # training as before
    assert all(torch.allclose(got[name], want[name], atol=1e-6) for name in want)
    assert not torch.allclose(got["H"], raw["H"], atol=1e-6)


def test_deep_trains_on_the_toy_world_and_mixes_with_an_ngram_model(toy, tmp_path):
    from nnlm.mixture import Mixture
    from nnlm.ngram import KneserNey

    data = toy / "data"
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "deep", preset="deep",
                     arch=DEEP_TOY, train={"epochs": 3, "batch_size": 64, "lr": 3e-3,
                                           "bf16": False},
                     threads=1, log=lambda s: None)
    lm = load_model(tmp_path / "deep")
    test = read_stream(data / "test.txt", lm.vocab)
    ppl = evaluate(lm, test).perplexity
    assert ppl < 0.5 * len(lm.vocab), ppl  # learned something
    kn = KneserNey(lm.vocab, 3, discount_fallback=True).fit(read_stream(data / "train.txt",
                                                                        lm.vocab))
    valid = read_stream(data / "valid.txt", lm.vocab)
    equal = evaluate(Mixture([lm, kn]), valid).perplexity
    mix = Mixture([lm, kn])
    history = mix.fit_weights(valid)
    assert mix.order == lm.order
    assert np.all(np.diff(history) >= -1e-12)  # EM never lowers the likelihood
    assert evaluate(mix, valid).perplexity < min(equal, evaluate(lm, valid).perplexity)
    assert np.allclose(np.exp(mix.next_logprobs(valid.contexts(mix.order)[:50])).sum(1), 1)


def test_bad_long_context_settings_are_one_line(toy, tmp_path, capsys):
    data = toy / "data"
    base = ["train", data / "train.txt", "--valid", data / "valid.txt", "-o", tmp_path / "x"]
    for extra, message in [
        (["--history", "5"], "reaches past the window only through FOFE codes"),
        (["--preset", "deep", "--far", "none"], "--far none goes with --history 0"),
        (["--fofe-alpha", "1"], "--fofe-alpha"),
        (["--preset", "deep", "--layers", "-1"], "--layers"),
        (["--preset", "deep", "--far", "fofe", "--far-spans", "2"], "--far-spans 2"),
        (["--preset", "deep", "--history", "2", "--far-spans", "3"], "--far-spans 3"),
        (["--preset", "deep", "--average", "1"], "--average"),
        (["--preset", "deep", "--average", "0.9", "--workers", "2"], "--average needs"),
    ]:
        assert main([str(a) for a in base + extra]) == 2, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (extra, err)
        assert len(err.strip().splitlines()) <= 2, err


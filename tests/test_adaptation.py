"""The neural cache and dynamic evaluation (``nnlm eval --cache --dynamic``): against
brute force, distributions that sum to 1, the model left as it was, exact repeats."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from nnlm import Stream, save_model
from nnlm.base.errors import NnlmWarning
from nnlm.cli import main
from nnlm.neural.adaptation import (
    CacheSettings,
    DynamicSettings,
    adapted_logprobs,
    cache_logprobs,
    dynamic_logprobs,
    with_cache,
)
from nnlm.neural.adaptation.dynamic import (
    EPS,
    _Rule,
    gradient_rms,
    learning_copy,
    line_slots,
    segments,
)
from nnlm.neural.adaptation.hidden import stream_hidden
from nnlm.neural.nplm_lm import NeuralLM
from test_awd import awd
from test_deep import VOCAB
from test_family import nplm
from test_lstm import TEXT

LINES = TEXT * 3


def stream():
    return Stream.from_lines([line.split() for line in LINES], VOCAB)


def networks():
    return {"lstm": NeuralLM(VOCAB, awd(order=6, m=4, h=5).eval()),
            "nplm": NeuralLM(VOCAB, nplm().float().eval())}


def brute_cache(z: np.ndarray, targets: np.ndarray, theta: float, size: int, t: int,
                word: int) -> float:
    """p_cache(word) at position t, one position at a time."""
    kept = range(max(0, t - size), t)
    weights = {i: math.exp(theta * float(z[t] @ z[i])) for i in kept}
    return sum(w for i, w in weights.items() if targets[i] == word) / sum(weights.values())


@pytest.mark.parametrize("kind", ["lstm", "nplm"])
def test_the_cache_is_grave_et_als_formula_and_its_mixture_sums_to_one(kind):
    lm, s = networks()[kind], stream()
    z = stream_hidden(lm, s).double()
    theta, size = 0.7, 9
    got = cache_logprobs(z, s.ids, theta, size)
    assert np.isnan(got[0])  # the first position has an empty cache
    zn = z.numpy()
    for t in (1, 5, 17, 40, len(s) - 1):
        assert got[t] == pytest.approx(math.log(brute_cache(zn, s.ids, theta, size, t,
                                                            int(s.ids[t]))) if brute_cache(
            zn, s.ids, theta, size, t, int(s.ids[t])) > 0 else -math.inf)
    # the mixed distribution over every word at a position sums to 1: ask for each word
    t, lam = 23, 0.25
    model_row = lm.next_logprobs(s.contexts(lm.order, np.array([t])))[0]
    total = 0.0
    for word in range(len(VOCAB)):
        targets = s.ids.copy()
        targets[t] = word
        cache = cache_logprobs(z, targets, theta, size)[t : t + 1]
        total += math.exp(with_cache(model_row[word : word + 1], cache, lam)[0])
    assert total == pytest.approx(1.0, abs=1e-9)


def test_the_hidden_vectors_are_the_ones_scoring_uses():
    """z from stream_hidden gives each slot the log-probability the model scores."""
    for lm in networks().values():
        s = stream()
        z = stream_hidden(lm, s)
        y = lm.model.output_logits(z).detach().double()
        lp = (y.gather(1, torch.from_numpy(s.ids.astype(np.int64))[:, None]).squeeze(1)
              - torch.logsumexp(y, 1)).numpy()
        assert np.allclose(lp, lm.logprobs(s), atol=1e-5)


def test_a_cache_of_weight_zero_or_an_empty_cache_leaves_the_model():
    lm, s = networks()["lstm"], stream()
    static = lm.logprobs(s)
    got, _ = adapted_logprobs(lm, s, cache={"theta": 1.0, "lam": 0.0, "size": 50})
    assert np.array_equal(got, static)
    got, _ = adapted_logprobs(lm, s, cache={"theta": 1.0, "lam": 0.3, "size": 50})
    assert got[0] == static[0] and not np.allclose(got, static)


def test_dynamic_evaluation_scores_before_it_learns_and_leaves_the_model_unchanged():
    lm, s = networks()["lstm"], stream()
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    static = lm.logprobs(s)
    still, _ = dynamic_logprobs(lm, s, DynamicSettings(0.0, 0.0, 5))
    assert np.allclose(still, static, atol=1e-6)
    a, za = dynamic_logprobs(lm, s, DynamicSettings(0.5, 0.01, 5), keep_hidden=True)
    b, zb = dynamic_logprobs(lm, s, DynamicSettings(0.5, 0.01, 5), keep_hidden=True)
    assert np.array_equal(a, b) and torch.equal(za, zb)  # repeats exactly
    assert all(torch.equal(before[k], v) for k, v in lm.model.state_dict().items())
    first = segments(s, 5)[0]
    head = slice(0, int(s.offsets[first[-1] + 1]))
    assert np.allclose(a[head], static[head], atol=1e-6)  # the first segment: before any step
    # the text repeats itself three times: learning from it helps its later copies
    later = slice(len(s) // 3, None)
    assert a[later].mean() > static[later].mean() + 0.01


def test_the_rms_rule_scores_before_it_learns_repeats_and_leaves_the_model():
    lm, s = networks()["lstm"], stream()
    before = {k: v.clone() for k, v in lm.model.state_dict().items()}
    static = lm.logprobs(s)
    ms = gradient_rms(lm, s, 5)
    a, _ = dynamic_logprobs(lm, s, DynamicSettings(0.01, 0.01, 5, "rms", ms))
    b, _ = dynamic_logprobs(lm, s, DynamicSettings(0.01, 0.01, 5, "rms", ms))
    assert np.array_equal(a, b)
    assert all(torch.equal(before[k], v) for k, v in lm.model.state_dict().items())
    first = segments(s, 5)[0]
    head = slice(0, int(s.offsets[first[-1] + 1]))
    assert np.allclose(a[head], static[head], atol=1e-6)
    later = slice(len(s) // 3, None)
    assert a[later].mean() > static[later].mean() + 0.01
    with pytest.raises(ValueError, match="needs MS"):
        dynamic_logprobs(lm, s, DynamicSettings(0.01, 0.01, 5, "rms"))


def test_gradient_rms_is_the_root_mean_square_of_each_segments_gradient():
    """Each segment's mean-NLL gradient taken apart, through the network's own forward
    pass, with the trained weights; then the root of the mean of their squares."""
    lm, s = networks()["nplm"], stream()
    got = gradient_rms(lm, s, 7)
    net = learning_copy(lm.model)
    params = [p for p in net.parameters() if p.requires_grad]
    squares = [torch.zeros_like(p) for p in params]
    parts = segments(s, 7)
    for lines in parts:
        slots = line_slots(s, lines)
        z = net.hidden_input(lm._tensor(lm._net_contexts(s.contexts(lm.order, slots))))
        y = net.output_logits(z).log_softmax(1)
        nll = -y.gather(1, torch.from_numpy(s.ids[slots].astype(np.int64))[:, None]).mean()
        for acc, g in zip(squares, torch.autograd.grad(nll, params, allow_unused=True)):
            if g is not None:
                acc += g.square()
    for g, acc in zip(got, squares):
        assert torch.allclose(g, (acc / len(parts)).sqrt(), rtol=1e-4, atol=1e-7)


def test_the_rms_rule_is_krauses_formula():
    """theta - eta g / (MS + eps) + decay min(MS / mean MS, 1 / decay) (theta_0 - theta)."""
    torch.manual_seed(0)
    p = torch.nn.Parameter(torch.randn(6))
    q = torch.nn.Parameter(torch.randn(3))
    ms = [torch.tensor([0.0, 0.1, 0.2, 5.0, 0.05, 0.3]), torch.tensor([0.2, 0.2, 0.01])]
    lr, decay = 0.3, 0.4
    rule = _Rule(DynamicSettings(lr, decay, 1, "rms", ms), [p, q])
    theta0 = [p.detach().clone(), q.detach().clone()]
    with torch.no_grad():  # the weights moved since training: the pull has work to do
        p.add_(1.0)
        q.sub_(0.5)
    moved = [p.detach().clone(), q.detach().clone()]
    grads = [torch.randn(6), torch.randn(3)]
    p.grad, q.grad = grads
    rule.step([p, q])
    mean = float(np.mean([m.mean().item() for m in ms]))
    for now, t, t0, g, m in zip([p, q], moved, theta0, grads, ms):
        stepped = t.numpy() - lr * g.numpy() / (m.numpy() + EPS * mean)
        pull = np.minimum(m.numpy() / mean, 1 / decay)
        want = stepped + decay * pull * (t0.numpy() - t.numpy())
        assert np.allclose(now.detach().numpy(), want, atol=1e-6)


def test_a_step_that_overflows_the_softmax_is_undone():
    lm, s = networks()["lstm"], stream()
    with pytest.warns(NnlmWarning, match="undone"):
        got, _ = dynamic_logprobs(lm, s, DynamicSettings(1e38, 0.0, 5))
    assert np.isfinite(got).all()


def test_the_learning_copy_scores_as_evaluation_does_with_dropout_between_layers():
    """cuDNN takes an RNN's gradient only in training mode: the copy's LSTM runs in it, so
    its between-layer dropout must be off for the copy to score as the model does."""
    lm = NeuralLM(VOCAB, awd(order=6, m=4, h=5, layers=2, dropout_h=0.5).eval())
    assert lm.model.rnn.dropout == 0.5
    net = learning_copy(lm.model)
    assert net.rnn.training and not net.training and net.rnn.dropout == 0.0
    s = stream()
    still, _ = dynamic_logprobs(lm, s, DynamicSettings(0.0, 0.0, 5))
    assert np.allclose(still, lm.logprobs(s), atol=1e-6)
    assert lm.model.rnn.dropout == 0.5 and not lm.model.rnn.training  # the model untouched


def test_segments_cover_every_line_once_in_order():
    s = stream()
    parts = segments(s, 7)
    assert np.array_equal(np.concatenate(parts), np.arange(s.num_lines))
    sizes = [int(s.offsets[p[-1] + 1] - s.offsets[p[0]]) for p in parts]
    assert all(n >= 7 for n in sizes[:-1])


def test_bad_settings_are_refused():
    for bad in (dict(theta=-1, lam=0.1, size=3), dict(theta=1, lam=1.0, size=3),
                dict(theta=1, lam=0.1, size=0)):
        with pytest.raises(ValueError):
            CacheSettings(**bad)
    with pytest.raises(ValueError):
        DynamicSettings(-0.1, 0.0)


@pytest.fixture
def files(tmp_path):
    save_model(networks()["lstm"], tmp_path / "lstm")
    for name, lines in (("valid", LINES[:8]), ("test", LINES)):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    return tmp_path


def test_eval_chooses_on_valid_and_says_what_it_used(files, capsys):
    main(["eval", str(files / "lstm"), str(files / "test.txt"), "--cache", "--dynamic",
          "--dynamic-segment", "5", "--valid", str(files / "valid.txt"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert set(out["cache"]) == {"theta", "lambda", "size"} and out["dynamic"]["segment"] == 5
    assert out["cache_search"]["table"] and out["dynamic_search"]["table"]
    best = min(r["valid_ppl"] for r in out["cache_search"]["table"])
    assert best == min(r["valid_ppl"] for r in out["cache_search"]["table"]
                       if r["lambda"] == out["cache"]["lambda"])
    assert out["perplexity"] < out["static_perplexity"]


def test_eval_takes_given_settings_without_valid(files, capsys):
    main(["eval", str(files / "lstm"), str(files / "test.txt"), "--cache", "--cache-theta",
          "0.5", "--cache-lambda", "0.2", "--cache-size", "30"])
    out = capsys.readouterr().out
    assert "theta 0.5, lambda 0.2, size 30 (as given)" in out


@pytest.mark.parametrize("args, message", [
    (["--cache"], "choose their settings on --valid"),
    (["--cache-size", "3"], "--cache-size applies only with --cache"),
    (["--valid", "VALID"], "--valid chooses the settings"),
    (["--dynamic", "--dynamic-lr", "0.1", "--dynamic-decay", "0", "--open-vocab"],
     "drop --open-vocab"),
    (["--cache", "--cache-lambda", "1"], "1 is not in [0, 1)"),
    (["--dynamic", "--dynamic-lr", "0.1", "--dynamic-decay", "0"], "--dynamic-rule sgd"),
    (["--dynamic-rule", "sgd"], "--dynamic-rule applies only with --dynamic"),
])
def test_eval_refusals_are_one_line(files, capsys, args, message):
    args = [a.replace("VALID", str(files / "valid.txt")) for a in args]
    assert main(["eval", str(files / "lstm"), str(files / "test.txt"), *args]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) <= 2 and "Traceback" not in err


def test_eval_refuses_a_model_it_cannot_adapt(files, capsys, tmp_path):
    from nnlm.ngram import KneserNey

    kn = KneserNey(VOCAB, 2, discount_fallback=True).fit(stream())
    save_model(kn, tmp_path / "kn")
    assert main(["eval", str(tmp_path / "kn"), str(files / "test.txt"), "--cache",
                 "--cache-theta", "1", "--cache-lambda", "0.1", "--cache-size", "9"]) == 2
    assert "adapt a network" in capsys.readouterr().err


def test_a_mixtures_network_is_adapted_and_its_weights_fitted_again(files, capsys, tmp_path):
    """The adapted mixture is the EM mixture of the adapted network's numbers with the
    other components' (computed here by hand from the parts)."""
    from nnlm.interpolation import em_mixture_weights
    from nnlm.lm import logsumexp
    from nnlm.mixture import Mixture
    from nnlm.ngram import KneserNey
    from nnlm.text.corpus import read_stream

    kn = KneserNey(VOCAB, 2, discount_fallback=True).fit(stream())
    save_model(kn, tmp_path / "kn")
    lm = networks()["lstm"]
    Mixture([lm, kn], [0.5, 0.5]).save(tmp_path / "mix", [files / "lstm", tmp_path / "kn"])
    settings = ["--cache", "--cache-theta", "0.5", "--cache-lambda", "0.2", "--cache-size",
                "30"]
    assert main(["eval", str(tmp_path / "mix"), str(files / "test.txt"), *settings]) == 2
    assert "give it" in capsys.readouterr().err
    main(["eval", str(tmp_path / "mix"), str(files / "test.txt"), *settings, "--valid",
          str(files / "valid.txt"), "--json"])
    out = json.loads(capsys.readouterr().out)
    valid, test = (read_stream(files / f"{n}.txt", VOCAB) for n in ("valid", "test"))
    fixed = {"theta": 0.5, "lam": 0.2, "size": 30}
    parts = [np.stack([adapted_logprobs(lm, s, cache=fixed)[0], kn.logprobs(s)])
             for s in (valid, test)]
    w = em_mixture_weights(parts[0].T)
    assert np.allclose(out["mixture_weights"], w, atol=1e-6)
    expected = logsumexp(parts[1] + np.log(w)[:, None], axis=0)
    assert out["perplexity"] == pytest.approx(math.exp(-expected.mean()), rel=1e-6)


def test_a_diverged_setting_is_null_in_the_report_and_never_chosen(monkeypatch):
    """A run whose perplexity overflows (finite log-probabilities below -700 a token)."""
    from nnlm.neural.adaptation import choose

    monkeypatch.setitem(choose.DYNAMIC_GRIDS, "sgd", ((0.1, 5.0), (0.0,)))
    nll = {0.1: 4.0, 5.0: 800.0}
    monkeypatch.setattr(choose, "dynamic_logprobs",
                        lambda lm, s, settings, **kw: (np.full(10, -nll[settings.lr]), None))
    best, table = choose.choose_dynamic(None, None, {}, 5, lambda m: None, "sgd")
    assert best.lr == 0.1
    assert [r["valid_ppl"] for r in table] == [pytest.approx(math.exp(4.0)), None]
    json.dumps(table, allow_nan=False)

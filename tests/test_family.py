"""The neural family: objectives (NCE, self-normalization) against finite differences and
maximum likelihood, short-lists that sum to one, the log-bilinear model, lazy Adam
against torch's, save/load of every model kind, the toy world under every objective,
the layering of the packages, and the bad input of the new options."""

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import run_cli, write
from nnlm import Stream, Vocabulary, evaluate, load_model, read_stream, save_model
from nnlm.cli import main
from nnlm.mixture import Mixture
from nnlm.neural.networks.network import LBLConfig, LBLNetwork, NPLMConfig, NPLMNetwork
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.objectives import NCE, FullSoftmax, SelfNormalized
from nnlm.neural.optim.optimizers import LazyAdam
from nnlm.neural.training.run import train_from_files
from nnlm.ngram import AddK, KneserNey
from nnlm.text.vocab import BOS_ID

WORDS = ["a", "b", "c", "d", "e", "f"]
VOCAB = Vocabulary.from_counts({w: 7 - i for i, w in enumerate(WORDS)})  # 9 with specials
CTX = torch.tensor([[1, 3], [4, 5], [1, 1], [6, 3], [8, 7]])
TGT = torch.tensor([3, 2, 5, 4, 8])


def randomized(net, scale=0.5):
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, scale, generator=torch.Generator().manual_seed(p.numel()))
    return net


def nplm(**kw):
    cfg = NPLMConfig(vocab_size=len(VOCAB), order=3, **{"m": 3, "h": 4, **kw})
    return randomized(NPLMNetwork(cfg).double())


def lbl(**kw):
    return randomized(LBLNetwork(LBLConfig(vocab_size=len(VOCAB), order=3, m=3, **kw)).double())


def assert_gradients_match_finite_differences(net, loss_fn):
    net.zero_grad()
    loss_fn().backward()
    eps = 1e-6
    for name, p in net.named_parameters():
        grad = p.grad.to_dense() if p.grad.is_sparse else p.grad
        numeric = torch.zeros_like(p)
        flat = p.data.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + eps
            up = loss_fn().item()
            flat[i] = old - eps
            down = loss_fn().item()
            flat[i] = old
            numeric.view(-1)[i] = (up - down) / (2 * eps)
        assert torch.allclose(grad, numeric, atol=1e-6, rtol=1e-5), name


def unigram_nce(samples=4, **kw):
    # q > 0 on every predictable word (<unk> too): NCE learns nothing where q = 0
    return NCE(np.array([1, 0, 5, 9, 7, 6, 4, 3, 2], np.float64), samples, **kw)


# -- objectives ------------------------------------------------------------------------
@pytest.mark.parametrize("shared", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_nce_gradients_match_finite_differences_in_float64(shared, sparse):
    net, nce = nplm(), unigram_nce()
    noise = torch.tensor([2, 5, 5, 8]) if shared else torch.randint(2, 9, (5, 4),
                                                                      generator=torch.Generator().manual_seed(0))
    nce.log_kq = nce.log_kq.double()
    assert_gradients_match_finite_differences(
        net, lambda: nce.loss(net, CTX, TGT, sparse=sparse, noise=noise))


@pytest.mark.parametrize("make", [nplm, lbl])
def test_selfnormalized_gradients_match_finite_differences_in_float64(make):
    net = make()
    objective = SelfNormalized(alpha=0.3)
    assert_gradients_match_finite_differences(net, lambda: objective.loss(net, CTX, TGT))


def test_selfnormalized_loss_is_nll_plus_alpha_log_z_squared():
    net = nplm()
    y = net(CTX)  # float64 logits, <s> at -inf
    log_z = torch.logsumexp(y, 1)
    nll = (log_z - y[torch.arange(5), TGT]).sum()
    got = SelfNormalized(alpha=0.25).loss(net, CTX, TGT)
    assert got.item() == pytest.approx((nll + 0.25 * log_z.square().sum()).item(), rel=1e-12)


@pytest.mark.slow
def test_nce_expected_gradient_approaches_the_likelihood_gradient_as_k_grows():
    """With Z(context) = 1, the NCE gradient's expectation tends to that of -log p as
    K -> infinity (Mnih & Teh 2012, section 3); sampled with a fixed seed."""
    torch.manual_seed(0)
    net = nplm(direct=False)
    ctx, tgt = CTX[:1], TGT[:1]
    with torch.no_grad():  # make Z = 1 for this context: shift every bias by -log Z
        net.b -= torch.logsumexp(net(ctx), 1)
    net.zero_grad()
    FullSoftmax().loss(net, ctx, tgt).backward()
    want = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
    errors = {}
    for k in (2, 20, 200):
        nce = unigram_nce(k, seed=1)
        nce.log_kq = nce.log_kq.double()
        total = torch.zeros_like(want)
        draws = 3000
        for _ in range(draws):
            net.zero_grad()
            nce.loss(net, ctx, tgt).backward()
            total += torch.cat([p.grad.reshape(-1) for p in net.parameters()])
        errors[k] = ((total / draws - want).norm() / want.norm()).item()
    assert errors[200] < errors[20] < errors[2], errors
    assert errors[200] < 0.1, errors


def test_nce_draws_follow_the_unigram_noise_and_never_bos():
    nce = unigram_nce(power=1.0)
    ids = nce.draw((200000,)).numpy()
    freq = np.bincount(ids, minlength=9) / len(ids)
    assert freq[BOS_ID] == 0
    assert np.allclose(freq, nce.q.numpy(), atol=0.005)


# -- the log-bilinear model ------------------------------------------------------------
@pytest.mark.parametrize("tied", [False, True])
def test_lbl_gradients_match_finite_differences_and_its_parameters_count(tied):
    net = lbl(tied=tied)
    assert_gradients_match_finite_differences(net, lambda: FullSoftmax().loss(net, CTX, TGT))
    assert net.num_parameters() == net.config.num_parameters()


def test_lbl_scores_are_the_bilinear_form():
    net = lbl()
    r = net.C.detach()
    ctx = CTX[0]  # oldest first: C_1 multiplies the most recent word
    C1, C2 = net.H.detach()[:, :3], net.H.detach()[:, 3:]
    r_hat = C1 @ r[ctx[1]] + C2 @ r[ctx[0]]
    want = net.U.detach() @ r_hat + net.b.detach()
    want[BOS_ID] = -math.inf
    assert torch.allclose(net(CTX[:1])[0], want)


# -- short-lists -----------------------------------------------------------------------
def shortlist_lm(K=5):
    train = Stream.from_lines([["a", "b", "c", "d"], ["e", "f", "a"], ["b", "f", "e", "d"]],
                              VOCAB)
    backoff = KneserNey(VOCAB, 3, discount_fallback=True).fit(train)
    cfg = NPLMConfig(vocab_size=len(VOCAB), order=2, m=3, h=4, output_size=K + 1)
    return NeuralLM(VOCAB, randomized(NPLMNetwork(cfg)), backoff=backoff), train


def test_shortlist_distributions_sum_to_one_and_match_per_token_scores():
    lm, train = shortlist_lm()
    contexts = np.random.default_rng(0).integers(0, len(VOCAB), (40, lm.order - 1))
    dist = lm.next_logprobs(contexts)
    assert np.allclose(np.exp(dist).sum(1), 1, atol=1e-9) and np.all(dist[:, BOS_ID] == -np.inf)
    targets = np.random.default_rng(1).integers(2, len(VOCAB), 40)
    assert np.allclose(lm.target_logprobs(contexts, targets), dist[np.arange(40), targets],
                       atol=1e-5)
    # a word outside the list: p_net(out) p_ng(w) / sum_{v outside} p_ng(v), by hand
    net = torch.log_softmax(lm.model(torch.tensor(contexts[:1, -1:])).double(), 1)[0]
    ng = np.exp(lm.backoff.next_logprobs(contexts[:1])[0])
    assert dist[0, 7] == pytest.approx(net[5].item() + math.log(ng[7] / ng[5:].sum()), abs=1e-6)
    assert lm.coverage(np.array([0, 3, 5, 8])) == 0.5


def test_shortlist_needs_a_backoff_model_over_the_same_vocabulary():
    from nnlm.base.errors import NnlmError

    cfg = NPLMConfig(vocab_size=len(VOCAB), order=2, m=3, h=4, output_size=6)
    with pytest.raises(NnlmError, match="needs an n-gram model"):
        NeuralLM(VOCAB, NPLMNetwork(cfg))
    other = Vocabulary.from_counts({w: 1 for w in WORDS[:-1] + ["z"]})
    backoff = AddK(other, 2).fit(Stream.from_lines([["a", "z"]], other))
    with pytest.raises(NnlmError, match="another vocabulary"):
        NeuralLM(VOCAB, NPLMNetwork(cfg), backoff=backoff)


# -- optimizers ------------------------------------------------------------------------
@pytest.mark.parametrize("decoupled", [True, False])
def test_lazy_adam_on_full_sparse_gradients_equals_torch_adam(decoupled):
    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(6, 3, dtype=torch.float64))
    b = torch.nn.Parameter(a.detach().clone())
    lazy = LazyAdam([{"params": [a], "weight_decay": 0.1}], lr=0.01, decoupled=decoupled)
    ref = (torch.optim.AdamW if decoupled else torch.optim.Adam)([b], lr=0.01, weight_decay=0.1)
    for step in range(5):
        g = torch.randn(6, 3, dtype=torch.float64)
        rows = torch.tensor([5, 0, 3, 1, 2, 4, 3])  # every row; row 3 twice (summed)
        values = torch.cat([g[[5, 0]], g[3:4] / 2, g[[1, 2, 4]], g[3:4] / 2])
        a.grad = torch.sparse_coo_tensor(rows[None], values, (6, 3), check_invariants=True)
        b.grad = g
        lazy.step()
        ref.step()
        assert torch.allclose(a, b, atol=1e-12), step


# -- persistence -----------------------------------------------------------------------
def every_kind(tmp_path=None):
    train = Stream.from_lines([["a", "b", "c", "d"], ["e", "f", "a", "b"], ["b", "f", "e"]],
                              VOCAB)
    from nnlm.ngram.estimate.classes import ClassNgram
    from nnlm.ngram.estimate.interpolated import DeletedInterpolation

    kn = KneserNey(VOCAB, 3, discount_fallback=True).fit(train)
    cls = ClassNgram(VOCAB, 2, n_classes=2, discount_fallback=True).fit(train)
    delint = DeletedInterpolation(VOCAB, 2).fit(train, train)
    nplm_lm = NeuralLM(VOCAB, randomized(NPLMNetwork(NPLMConfig(vocab_size=len(VOCAB),
                                                                order=3, m=3, h=4))))
    lbl_lm = NeuralLM(VOCAB, randomized(LBLNetwork(LBLConfig(vocab_size=len(VOCAB), order=3,
                                                             m=3))))
    from nnlm.neural.networks.energy import EnergyConfig, EnergyNetwork

    energy_lm = NeuralLM(VOCAB, randomized(EnergyNetwork(EnergyConfig(
        vocab_size=len(VOCAB), order=3, m=3, h=4, v_per_word=True))))
    short, _ = shortlist_lm()
    models = {"energy": energy_lm, "addk": AddK(VOCAB, 2).fit(train), "kn": kn, "class": cls,
              "interpolated": delint,
              "nplm": nplm_lm, "lbl": lbl_lm, "shortlist": short,
              "mixture": Mixture([kn, nplm_lm], weights=[0.3, 0.7])}
    if tmp_path is not None:  # a model read from an ARPA file: kind "backoff"
        from nnlm.ngram import read_arpa, write_arpa

        models["backoff"] = read_arpa(write_arpa(kn, tmp_path / "kn.arpa"))
    return models, train


@pytest.mark.parametrize("kind", ["addk", "kn", "backoff", "class", "interpolated", "nplm",
                                  "lbl", "energy", "shortlist", "mixture"])
def test_save_and_load_round_trip_every_model_kind(kind, tmp_path):
    models, train = every_kind(tmp_path)
    model = models[kind]
    save_model(model, tmp_path / kind)
    loaded = load_model(tmp_path / kind)
    assert type(loaded) is type(model)
    assert np.allclose(loaded.logprobs(train), model.logprobs(train), atol=1e-12)
    header = json.loads((tmp_path / kind / "config.json").read_text())
    assert header["vocab_fingerprint"] == VOCAB.fingerprint


def test_loading_refuses_non_finite_weights(tmp_path):
    from safetensors.torch import load_file, save_file

    models, _ = every_kind()
    save_model(models["nplm"], tmp_path / "m")
    tensors = load_file(str(tmp_path / "m/model.safetensors"))
    tensors["H"][0, 0] = float("nan")
    save_file(tensors, str(tmp_path / "m/model.safetensors"))
    code = main(["eval", str(tmp_path / "m"), str(write(tmp_path / "t.txt", "a b\n"))])
    assert code == 2


# -- the toy world: every objective trains -----------------------------------------------
def train_toy(toy, name, arch=None, train=None, preset="tiny", **kw):
    data = toy / "data"
    train_from_files(data / "train.txt", data / "valid.txt", toy / name, preset=preset,
                     arch=arch or {}, train={"epochs": 6, **(train or {})}, threads=1,
                     log=lambda s: None, load=load_model, save=save_model, **kw)
    lm = load_model(toy / name)
    return lm, evaluate(lm, read_stream(data / "test.txt", lm.vocab)).perplexity


@pytest.mark.slow
def test_every_objective_trains_within_ten_percent_of_the_full_softmax(toy):
    _, full = train_toy(toy, "softmax")
    results = {}
    for name, train in {"nce": {"objective": "nce", "noise_samples": 10},
                        "selfnorm": {"objective": "selfnorm"},
                        "nce_sgd": {"objective": "nce", "noise_samples": 10,
                                    "optimizer": "sgd", "lr": 0.02, "weight_decay": 0.0}}.items():
        lm, ppl = train_toy(toy, name, train=train)
        results[name] = ppl
        if name in ("selfnorm", "nce"):  # saved with log Z centred on validation text
            valid = lm.log_z_stats(read_stream(toy / "data/valid.txt", lm.vocab).contexts(3))
            assert abs(valid.mean) < 1e-4, valid
            stats = lm.log_z_stats(read_stream(toy / "data/test.txt", lm.vocab).contexts(3))
            assert abs(stats.mean) < 0.05 and stats.mean_abs < 0.3, stats
    assert all(ppl < 1.1 * full for ppl in results.values()), (full, results)


@pytest.mark.slow
def test_lbl_and_shortlist_train_on_the_toy_world(toy):
    data = toy / "data"
    _, full = train_toy(toy, "softmax2")
    _, ppl = train_toy(toy, "lbl", preset="lbl", arch={"order": 3, "m": 8},
                       train={"lr": 1e-2, "batch_size": 64, "bf16": False})
    assert ppl < 1.1 * full
    vocab = load_model(toy / "softmax2").vocab
    kn = KneserNey(vocab, 3, discount_fallback=True).fit(read_stream(data / "train.txt", vocab))
    save_model(kn, toy / "kn3")
    lm, ppl = train_toy(toy, "short", arch={"shortlist": 30}, shortlist_backoff=toy / "kn3")
    assert lm.shortlist == 30 and (toy / "short/shortlist_backoff/config.json").exists()
    assert ppl < 1.1 * full


def test_nce_resume_reaches_the_same_parameters_as_an_uninterrupted_run(toy, tmp_path):
    assert_resume_is_exact(toy / "data", tmp_path, 100, preset="tiny",
                           train={"epochs": 2, "objective": "nce", "noise_samples": 5})


def assert_resume_is_exact(data, tmp_path, max_steps: int, **settings):
    """A run stopped after ``max_steps`` updates and resumed ends with the parameters of
    the run that was never stopped, bit for bit."""
    from safetensors.torch import load_file

    kw = dict(threads=1, log=lambda s: None, **settings)
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "whole", **kw)
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "cut",
                     max_steps=max_steps, **kw)
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "cut", resume=True,
                     threads=1, log=lambda s: None)
    a = load_file(str(tmp_path / "whole/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model.safetensors"))
    assert set(a) == set(b) and all(torch.equal(a[k], b[k]) for k in a)


# -- layering --------------------------------------------------------------------------
def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            out.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def test_model_families_never_import_the_layers_above_them():
    src = Path(__file__).parents[1] / "src" / "nnlm"
    for family in ("neural", "ngram"):
        for path in (src / family).rglob("*.py"):
            bad = {m for m in imports_of(path) if "experiments" in m or m.endswith("cli")}
            assert not bad, (path.name, bad)
    weights_files = src / "neural" / "networks" / "checkpoint.py"
    assert not any("nplm_lm" in m for m in imports_of(weights_files))


# -- bad input -------------------------------------------------------------------------
def test_new_options_are_checked_with_one_line_errors(toy, tmp_path, capsys):
    data = toy / "data"
    base = ["train", data / "train.txt", "--valid", data / "valid.txt", "--preset", "tiny",
            "-o", tmp_path / "x"]
    cases = [
        (["--objective", "nce", "--noise-samples", "0"], "not in [1, inf)"),
        (["--objective", "selfnorm", "--selfnorm-alpha", "-1"], "not in [0, inf)"),
        (["--noise-samples", "5"], "--noise-samples applies to --objective nce"),
        (["--objective", "nce", "--noise-samples", "1000"], "K well below"),
        (["--shortlist", "10"], "needs --shortlist-backoff"),
        (["--shortlist", "0"], "not in [1, inf)"),
        (["--device", "gpu"], "invalid choice"),
    ]
    if not torch.cuda.is_available():
        cases.append((["--device", "cuda"], "no CUDA device is available"))
    for extra, message in cases:
        code, _, err = run_cli([*base, *extra], capsys)
        assert code == 2 and message in err and err.count("\n") == 1, (extra, err)
        assert err.startswith("nnlm: error:")


def test_shortlist_errors_name_the_problem(toy, tmp_path, capsys):
    data = toy / "data"
    vocab = Vocabulary.from_counts({"x": 3, "y": 2})
    save_model(AddK(vocab, 2).fit(Stream.from_lines([["x", "y"]], vocab)), tmp_path / "other")
    base = ["train", data / "train.txt", "--valid", data / "valid.txt", "--preset", "tiny"]
    code, _, err = run_cli([*base, "--shortlist", "10", "--shortlist-backoff", tmp_path / "other",
                            "-o", tmp_path / "a"], capsys)
    assert code == 2 and "another vocabulary" in err
    vocab = load_model(toy / "softmax").vocab if (toy / "softmax").exists() else None
    if vocab is None:
        return
    kn = KneserNey(vocab, 2, discount_fallback=True).fit(read_stream(data / "train.txt", vocab))
    save_model(kn, tmp_path / "kn")
    code, _, err = run_cli([*base, "--shortlist", str(len(vocab)), "--shortlist-backoff",
                            tmp_path / "kn", "-o", tmp_path / "b"], capsys)
    assert code == 2 and "K < |V|" in err


def test_self_normalized_scoring_warns_on_a_softmax_model_and_refuses_ngrams(toy, tmp_path,
                                                                             capsys):
    data = toy / "data"
    if not (toy / "softmax").exists():
        train_toy(toy, "softmax")
    code, out, err = run_cli(["eval", toy / "softmax", data / "test.txt", "--self-normalized",
                              "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and "log_z_mean" in result and result["log_z_tokens"] > 0
    if result["log_z_mean_abs"] > 0.1:
        assert "warning: mean |log Z|" in err
    code, out, err = run_cli(["score", toy / "softmax", data / "test.txt", "--self-normalized"],
                             capsys)
    assert code == 0 and "log Z:       mean" in err and len(out.splitlines()) == 501
    # raw scores are y_w: the per-token scores differ from the exact ones by log Z
    lm = load_model(toy / "softmax")
    stream = read_stream(data / "test.txt", lm.vocab)
    exact = lm.logprobs(stream)
    lm.self_normalized = True
    raw = lm.logprobs(stream)
    log_z = torch.logsumexp(lm.model(torch.from_numpy(stream.contexts(3).astype(np.int64))), 1)
    assert np.allclose(raw - exact, log_z.detach().double().numpy(), atol=1e-4)
    save_model(AddK(lm.vocab, 2).fit(stream), tmp_path / "addk")
    code, _, err = run_cli(["eval", tmp_path / "addk", data / "test.txt", "--self-normalized"],
                           capsys)
    assert code == 2 and "applies to neural models" in err


@pytest.mark.slow
def test_the_energy_model_trains_on_the_toy_world_under_every_objective(toy):
    """The energy variant learns the toy world: each objective within 15% of the NPLM's
    full softmax, log Z centred on validation text under NCE (the saved bias shift)."""
    _, nplm = train_toy(toy, "energy_ref")
    arch = {"order": 3, "m": 8, "h": 16, "dropout_x": 0.0}
    tiny = {"optimizer": "adam", "lr": 1e-2, "batch_size": 64, "weight_decay": 0.0}
    for name, train in {"softmax": tiny, "nce": {**tiny, "objective": "nce", "noise_samples": 10},
                        "sgd": {"optimizer": "sgd", "lr": 0.02, "weight_decay": 0.0,
                                "batch_size": 64}}.items():
        lm, ppl = train_toy(toy, f"energy_{name}", preset="energy", arch=arch, train=train)
        assert ppl < 1.15 * nplm, (name, ppl, nplm)
        if name == "nce":
            valid = lm.log_z_stats(read_stream(toy / "data/valid.txt", lm.vocab).contexts(3))
            assert abs(valid.mean) < 1e-4, valid

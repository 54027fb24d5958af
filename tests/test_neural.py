"""The NPLM: the paper's parameter count, gradients against finite differences, sums to
one, what an untrained and an overfitted model do, the toy world's generalisation,
checkpoints, exact resume, and every kind of bad input."""

import copy
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conftest import run_cli, write
from nnlm import Stream, Vocabulary, evaluate, load_model, read_stream
from nnlm.cli import main
from nnlm.neural.networks.network import NPLMConfig, NPLMNetwork
from nnlm.neural.networks.registry import build_network
from nnlm.neural.nplm_lm import NPLM
from nnlm.neural.objectives import FullSoftmax
from nnlm.neural.training.run import train_from_files
from nnlm.neural.training.train import TrainConfig, Trainer, TrainingDiverged
from nnlm.text.vocab import BOS_ID

WORDS = ["a", "b", "c", "d"]
VOCAB = Vocabulary.from_counts({w: 1 for w in WORDS})  # 7 words with the specials
SOFTMAX = FullSoftmax()


def load_neural(path):
    model = load_model(path)
    return model, json.loads((path / "config.json").read_text())


@pytest.mark.parametrize("direct,h", [(True, 50), (False, 50), (True, 0)])
def test_parameter_count_is_the_papers(direct, h):
    V, n, m = 1000, 5, 30
    cfg = NPLMConfig(vocab_size=V, order=n, m=m, h=h, direct=direct)
    net = NPLMNetwork(cfg)
    counted = sum(p.numel() for p in net.parameters())
    paper = V * (1 + n * m + h) + h * (1 + (n - 1) * m)  # with direct connections
    assert counted == cfg.num_parameters() == (paper if direct else paper - V * (n - 1) * m)


def test_tied_output_weights_are_c_and_drop_u():
    V, n, m = 1000, 5, 30
    cfg = NPLMConfig(vocab_size=V, order=n, m=m, h=m, direct=False, tied=True)
    net = NPLMNetwork(cfg)
    untied = V * (1 + n * m + m) + m * (1 + (n - 1) * m) - V * (n - 1) * m
    assert sum(p.numel() for p in net.parameters()) == cfg.num_parameters() == untied - V * m
    assert net.output_matrix is net.C and net.U is None
    for bad in ({"h": 20}, {"direct": True}):
        with pytest.raises(ValueError, match="tied"):
            NPLMConfig(vocab_size=V, order=n, m=m, **{"h": m, "direct": False, **bad}, tied=True)


def tiny_network(dtype=torch.float64, **kw):
    kw = {"m": 3, "h": 4, **kw}
    cfg = NPLMConfig(vocab_size=len(VOCAB), order=3, **kw)
    net = NPLMNetwork(cfg).to(dtype)
    with torch.no_grad():
        for p in net.parameters():
            p.normal_(0, 0.5, generator=torch.Generator().manual_seed(p.numel()))
    return net


@pytest.mark.parametrize("kw", [{"direct": True}, {"direct": False},
                                {"direct": False, "tied": True, "h": 3}])
def test_gradients_match_finite_differences_in_float64(kw):
    net = tiny_network(**kw)
    ctx = torch.tensor([[1, 3], [4, 5], [1, 1], [6, 3]])
    tgt = torch.tensor([3, 2, 5, 4])
    SOFTMAX.loss(net, ctx, tgt).backward()
    eps = 1e-6
    for name, p in net.named_parameters():
        numeric = torch.zeros_like(p)
        flat = p.data.view(-1)
        for i in range(flat.numel()):
            old = flat[i].item()
            flat[i] = old + eps
            up = SOFTMAX.loss(net, ctx, tgt).item()
            flat[i] = old - eps
            down = SOFTMAX.loss(net, ctx, tgt).item()
            flat[i] = old
            numeric.view(-1)[i] = (up - down) / (2 * eps)
        assert torch.allclose(p.grad, numeric, atol=1e-6, rtol=1e-5), name


def test_fused_loss_equals_cross_entropy_and_sparse_rows_equal_dense():
    net = tiny_network(torch.float32)
    ctx, tgt = torch.tensor([[1, 3], [4, 5], [6, 3]]), torch.tensor([3, 2, 5])
    want = F.cross_entropy(net(ctx), tgt, reduction="sum")
    assert torch.allclose(SOFTMAX.loss(net, ctx, tgt), want, rtol=1e-5)
    assert torch.allclose(SOFTMAX.loss(net, ctx, tgt, bf16=True), want, rtol=2e-2)
    SOFTMAX.loss(net, ctx, tgt, sparse=False).backward()
    dense = net.C.grad.clone()
    net.C.grad = None
    SOFTMAX.loss(net, ctx, tgt, sparse=True).backward()
    assert torch.allclose(net.C.grad.to_dense(), dense, atol=1e-6)


def test_bf16_loss_and_gradients_follow_float32_even_when_a_target_underflows():
    """The bf16 path (bias folded into the product, bf16 softmax as the gradient) against
    the float32 path: loss and every gradient within bf16's precision; a target whose
    probability underflows bf16 (logit 120 below the rest) still gets its exact loss."""
    torch.manual_seed(0)
    cfg = NPLMConfig(vocab_size=300, order=3, m=8, h=16)
    net = NPLMNetwork(cfg)
    with torch.no_grad():
        net.out_weight.normal_(0, 0.3)
        net.b.normal_(0, 1.0)
        net.b[7] = -120.0
    ctx = torch.randint(0, 300, (64, 2))
    tgt = torch.randint(3, 300, (64,))
    tgt[:3] = 7
    grads = {}
    for bf16 in (False, True):
        net.zero_grad()
        loss = SOFTMAX.loss(net, ctx, tgt, bf16=bf16)
        (loss / len(tgt)).backward()  # a scaled loss, as the Adam path backpropagates
        grads[bf16] = (loss.item(), {k: p.grad.clone() for k, p in net.named_parameters()})
    assert math.isfinite(grads[True][0])
    assert grads[True][0] == pytest.approx(grads[False][0], rel=1e-2)
    for name, want in grads[False][1].items():
        got = grads[True][1][name]
        assert (got - want).norm() <= 2e-2 * want.norm(), name


def test_every_distribution_sums_to_one_and_never_predicts_bos():
    lm = NPLM(VOCAB, tiny_network(torch.float32))
    contexts = np.random.default_rng(0).integers(0, len(VOCAB), (30, 2))
    dist = lm.next_logprobs(contexts)
    assert dist.dtype == np.float64
    assert np.allclose(np.exp(dist).sum(axis=1), 1, atol=1e-9)
    assert np.all(dist[:, BOS_ID] == -np.inf)
    targets = np.random.default_rng(1).integers(2, len(VOCAB), 30)
    assert np.allclose(lm.target_logprobs(contexts, targets),
                       dist[np.arange(30), targets], atol=1e-6)


def test_scoring_matches_a_float64_oracle_across_batches_in_fp32_and_bf16(monkeypatch):
    """The scoring loop (bias folded into the product, reused buffers, blocks of z) against
    log_softmax of the whole network run in float64, with blocks and batches that do not
    divide the row count. bf16 rounds z and W: close per token, closer on average."""
    import nnlm.neural.nplm_lm as nplm_lm

    monkeypatch.setattr(nplm_lm, "SCORE_BATCH", 7)
    monkeypatch.setattr(nplm_lm, "HIDDEN_BLOCK", 16)
    rng = np.random.default_rng(0)
    contexts = rng.integers(0, len(VOCAB), (53, 2))
    targets = rng.integers(2, len(VOCAB), 53)
    net = tiny_network(torch.float32)
    with torch.no_grad():
        oracle = copy.deepcopy(net).double()
        want = torch.log_softmax(oracle(torch.from_numpy(contexts)), 1)
    want = want[np.arange(53), targets].numpy()
    lm = NPLM(VOCAB, net)
    assert np.allclose(lm.target_logprobs(contexts, targets), want, atol=1e-5)
    lm.bf16 = True
    fast = lm.target_logprobs(contexts, targets)
    assert np.abs(fast - want).max() < 0.05 and abs(fast.mean() - want.mean()) < 0.01
    assert np.all(fast <= 0)
    with torch.no_grad():  # a target whose probability underflows bf16: computed exactly
        net.b[targets[0]] -= 200.0
        oracle.b[targets[0]] -= 200.0
        want = torch.log_softmax(oracle(torch.from_numpy(contexts)), 1)[np.arange(53), targets]
    fast = lm.target_logprobs(contexts, targets)
    assert np.all(np.isfinite(fast)) and np.abs(fast - want.numpy()).max() < 0.05


def test_untrained_model_is_uniform_over_predictable_words():
    lm = NPLM.new(VOCAB, order=3, m=4, h=5)
    stream = Stream.from_lines([["a", "b", "c"], ["d"]], VOCAB)
    assert evaluate(lm, stream).perplexity == pytest.approx(len(VOCAB) - 1)


@pytest.mark.slow
def test_a_tiny_model_overfits_a_tiny_corpus(tmp_path):
    lines = [["a", "b", "c", "d"], ["b", "a", "d"]] * 5
    stream = Stream.from_lines(lines, VOCAB)
    cfg = NPLMConfig(vocab_size=len(VOCAB), order=3, m=6, h=12)
    tc = TrainConfig(optimizer="adam", lr=0.05, weight_decay=0, batch_size=8, epochs=60,
                     patience=100)
    trainer = Trainer.build(VOCAB, cfg, tc, tmp_path / "m", log=lambda s: None)
    trainer.fit(stream, stream)
    assert evaluate(NPLM(VOCAB, trainer.model), stream).perplexity < 1.3


# -- the toy world -------------------------------------------------------------------
@pytest.fixture(scope="module")
def toy(toy):  # conftest's splits, with a tiny network trained on them
    train_from_files(toy / "data/train.txt", toy / "data/valid.txt", toy / "tiny",
                     preset="tiny", train={"epochs": 4}, threads=1, log=lambda s: None)
    return toy


def test_nplm_generalises_to_held_out_pairs_where_counts_cannot(toy):
    from nnlm.ngram import KneserNey
    from nnlm.text.toyworld import ANIMALS, HELD_OUT_EXAMPLES

    nplm = load_model(toy / "tiny")
    kn = KneserNey(nplm.vocab, 3, discount_fallback=True).fit(
        read_stream(toy / "data/train.txt", nplm.vocab))
    gains = [nplm.sentence_logprob(s) - kn.sentence_logprob(s) for s in HELD_OUT_EXAMPLES]
    assert min(gains) > 0.3 and np.mean(gains) > 0.8  # nats, per sentence
    near = [w for w, _ in nplm.neighbors("cat", 5)]
    assert len(set(near) & set(ANIMALS)) >= 3, near


def test_training_writes_metrics_plot_and_a_loadable_checkpoint(toy):
    d = toy / "tiny"
    rows = (d / "metrics.csv").read_text().splitlines()
    assert rows[0].startswith("epoch,step,train_ppl,valid_ppl") and len(rows) == 5
    assert (d / "learning_curve.png").read_bytes()[:4] == b"\x89PNG"
    model, header = load_neural(d)
    assert header["train"]["preset"] == "tiny" and model.order == 3
    best = min(float(r.split(",")[3]) for r in rows[1:])
    valid = read_stream(toy / "data/valid.txt", model.vocab)
    assert evaluate(model, valid).perplexity == pytest.approx(best, rel=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adamw"])
def test_tied_model_trains_saves_without_u_and_loads(toy, tmp_path, optimizer):
    data = toy / "data"
    arch = {"m": 8, "h": 8, "direct": False, "tied": True}
    train = {"epochs": 2, "optimizer": optimizer, "lr": 0.01 if optimizer == "adamw" else 0.05}
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "t", preset="tiny",
                     arch=arch, train=train, threads=1, log=lambda s: None)
    tensors = load_neural_tensors(tmp_path / "t" / "model.safetensors")
    assert sorted(tensors) == ["C", "H", "b", "d"]
    model, _ = load_neural(tmp_path / "t")
    assert model.model.output_matrix is model.model.C
    valid = read_stream(data / "valid.txt", model.vocab)
    assert evaluate(model, valid).perplexity < 0.5 * (len(model.vocab) - 1)


# -- resume --------------------------------------------------------------------------
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_resume_reaches_the_same_parameters_as_an_uninterrupted_run(toy, tmp_path, optimizer):
    data = toy / "data"
    train = {"epochs": 2, "optimizer": optimizer, "lr": 0.01 if optimizer == "adam" else 0.01}
    kw = dict(preset="tiny", train=train, threads=1, log=lambda s: None)
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "whole", **kw)
    first = train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "cut",
                             max_steps=500, **kw)  # mid-way through epoch 2
    assert first["interrupted"]
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "cut", resume=True,
                     threads=1, log=lambda s: None)
    for sub in ("model.safetensors", "state/model.safetensors"):
        a = load_neural_tensors(tmp_path / "whole" / sub)
        b = load_neural_tensors(tmp_path / "cut" / sub)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), sub


def load_neural_tensors(path):
    from safetensors.torch import load_file

    return load_file(str(path))


# -- divergence ----------------------------------------------------------------------
def test_a_diverging_run_stops_clearly_and_keeps_the_last_good_checkpoint(toy, tmp_path):
    """The state kept after a divergence must be sane, not the diverging step.
    A sane start (3 updates), then --resume with an absurd --lr (allowed on resume)."""
    data, out = toy / "data", tmp_path / "m"
    args = dict(preset="tiny", checkpoint_every=1, threads=1, log=lambda s: None)
    sgd = {"optimizer": "sgd", "lr": 0.05, "weight_decay": 0.0}
    train_from_files(data / "train.txt", data / "valid.txt", out, train=sgd, max_steps=3,
                     **args)
    with pytest.raises(TrainingDiverged, match=r"diverged at update \d+.*last good checkpoint"
                       r".*update 3\) is kept.*resume=True"):
        train_from_files(data / "train.txt", data / "valid.txt", out, resume=True,
                         train={**sgd, "lr": 500.0}, **args)
    info = json.loads((out / "state/trainer.json").read_text())
    assert info["trainer"]["step"] == 3
    from nnlm.neural.networks.registry import network_config
    from nnlm.neural.nplm_lm import NeuralLM

    header = json.loads((out / "config.json").read_text())
    net = build_network(network_config(header["config"]))
    net.load_named_tensors(load_neural_tensors(out / "state/model.safetensors"), "state")
    lm = NeuralLM(load_model(out).vocab, net)
    assert lm.perplexity(Path(data / "valid.txt")) < len(lm.vocab)  # better than uniform
    # a run that is insane from its first update keeps no state at all
    with pytest.raises(TrainingDiverged, match="no checkpoint was good yet"):
        train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "bad",
                         train={**sgd, "lr": 500.0}, **args)
    assert not (tmp_path / "bad/state").exists()


# -- bad input -----------------------------------------------------------------------
def test_checkpoint_damage_and_foreign_vocabulary_are_one_line_errors(toy, tmp_path, capsys):
    import shutil

    d = tmp_path / "ckpt"
    shutil.copytree(toy / "tiny", d)
    text = toy / "data/test.txt"
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    code, _, err = run_cli(["eval", d, text], capsys)
    assert code == 2 and "model.safetensors: unreadable" in err and err.count("\n") == 1
    (d / "model.safetensors").unlink()
    code, _, err = run_cli(["eval", d, text], capsys)
    assert code == 2 and "model.safetensors: missing" in err
    shutil.copy(toy / "tiny/model.safetensors", d / "model.safetensors")
    Vocabulary.from_counts({"x": 3, "y": 2}).save(d / "vocab.txt")
    code, _, err = run_cli(["eval", d, text], capsys)
    assert code == 2 and "does not match the model" in err


def test_eval_of_empty_and_all_unknown_texts(toy, tmp_path, capsys):
    write(tmp_path / "empty.txt", "")
    code, _, err = run_cli(["eval", toy / "tiny", tmp_path / "empty.txt"], capsys)
    assert code == 2 and "file is empty" in err
    write(tmp_path / "unknown.txt", "zebra quokka\nwombat\n")
    code, out, _ = run_cli(["eval", toy / "tiny", tmp_path / "unknown.txt", "--json"], capsys)
    result = json.loads(out)
    assert code == 0 and result["unk"] == 3 and result["tokens"] == 5  # counted, not dropped
    assert math.isnan(result["perplexity_without_unk"]) is False


def test_training_cli_errors(toy, tmp_path, capsys):
    data = toy / "data"
    base = ["train", data / "train.txt", "--valid", data / "valid.txt"]
    code, _, err = run_cli([*base, "--preset", "mlp99", "-o", tmp_path / "x"], capsys)
    assert code == 2 and "--preset mlp99: did you mean" in err and "mlp1" in err
    code, _, err = run_cli([*base, "-o", toy / "tiny", "--resume", "--lr", "0.5",
                            "--order", "4", "--batch-size", "7"], capsys)
    assert code == 2 and "order (checkpoint 3, now 4)" in err and "batch_size" in err
    assert "lr (" not in err  # the learning rate may change on resume
    code, _, err = run_cli([*base, "-o", toy / "tiny"], capsys)
    assert code == 2 and "--resume" in err
    code, _, err = run_cli([*base, "-o", tmp_path / "y", "--resume"], capsys)
    assert code == 2 and err.count("\n") == 1


def test_generate_neighbors_and_plot_through_the_cli(toy, tmp_path, capsys):
    code, out, _ = run_cli(["generate", toy / "tiny", "-n", "3", "--seed", "1",
                            "--prompt", "a dog", "--top-k", "5"], capsys)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3 and all(s.startswith("a dog ") for s in lines)
    code, out, _ = run_cli(["neighbors", toy / "tiny", "cat", "-k", "3"], capsys)
    assert code == 0 and out.startswith("cat: ") and out.count("(") == 3
    code, _, err = run_cli(["neighbors", toy / "tiny", "zebra"], capsys)
    assert code == 2 and "not in the model's vocabulary" in err
    code, out, _ = run_cli(["plot-embeddings", toy / "tiny", "cat", "dog", "man", "woman",
                            "-o", tmp_path / "e.png"], capsys)
    assert code == 0 and (tmp_path / "e.png").read_bytes()[:4] == b"\x89PNG"


def test_a_presets_bf16_falls_back_to_float32_on_a_cpu_without_it(tmp_path, monkeypatch,
                                                                   capsys):
    """On a CPU without bfloat16 instructions torch emulates bf16 products, 10-40x slower:
    a preset's bf16 becomes float32 there, with a note; --bf16 given by name is kept."""
    import json


    monkeypatch.setattr("nnlm.neural.training.run.native_bf16", lambda device: False)
    assert main(["prepare", "toy", str(tmp_path / "toy"), "--train-sentences", "200"]) == 0
    base = ["train", str(tmp_path / "toy/train.txt"), "--valid", str(tmp_path / "toy/valid.txt"),
            "--preset", "mlp1", "--max-steps", "2", "--threads", "1"]
    for extra, out, kept in (([], "a", False), (["--bf16"], "b", True)):
        capsys.readouterr()
        assert main([*base, *extra, "-o", str(tmp_path / out)]) == 0
        said = "".join(capsys.readouterr())
        saved = json.loads((tmp_path / out / "config.json").read_text())
        assert saved["train"]["bf16"] is kept, saved["train"]
        assert ("emulated here" if kept else "training in float32") in said


def test_resuming_a_finished_run_says_what_to_grow(tmp_path, capsys):

    assert main(["prepare", "toy", str(tmp_path / "toy"), "--train-sentences", "100"]) == 0
    base = ["train", str(tmp_path / "toy/train.txt"), "--valid", str(tmp_path / "toy/valid.txt"),
            "--preset", "tiny", "--threads", "1", "-o", str(tmp_path / "run")]
    assert main([*base, "--epochs", "1"]) == 0
    capsys.readouterr()
    assert main([*base, "--resume"]) == 2
    err = capsys.readouterr().err.strip()
    assert "finished its 1 epochs" in err and "--epochs 6" in err and len(err.splitlines()) == 1
    assert main([*base, "--resume", "--epochs", "2"]) == 0


def test_an_epochs_words_per_second_counts_the_whole_epoch(toy, tmp_path):
    """With checkpoints inside the epoch, the logged rate is the epoch's tokens over its
    training time (metrics.csv's elapsed_seconds between epochs), not the last span's."""
    import csv

    data = toy / "data"
    train_from_files(data / "train.txt", data / "valid.txt", tmp_path / "m", preset="tiny",
                     train={"epochs": 2}, checkpoint_every=25, threads=1,
                     log=lambda s: None)
    rows = list(csv.DictReader((tmp_path / "m/metrics.csv").open()))
    tokens = len(read_stream(data / "train.txt", load_model(tmp_path / "m").vocab))
    seconds = float(rows[1]["elapsed_seconds"]) - float(rows[0]["elapsed_seconds"])
    assert float(rows[1]["words_per_second"]) == pytest.approx(tokens / seconds, rel=0.02)

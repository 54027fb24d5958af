"""The CUDA path against the CPU: the same updates, the same scores, the same files.

Skipped where torch sees no GPU (CI has none); on a GPU machine run
``pytest tests/test_cuda.py``. The CPU is the oracle: float64 steps on both devices must
agree to rounding, and a model trained on one device scores the same on the other.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from nnlm.neural.batches import batches
from nnlm.neural.networks.registry import network_config
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.training.train import TrainConfig, Trainer, output_counts
from parallel_ranks import toy_data

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

CASES = [  # (network settings, objective, optimizer)
    ({"h": 16, "direct": True}, "softmax", "adamw"),
    ({"h": 16, "direct": True}, "softmax", "sgd"),  # the paper's sparse rows of C
    ({"h": 16, "direct": True}, "nce", "adamw"),
    ({"h": 16, "direct": True}, "selfnorm", "adam"),
    ({"h": 8, "direct": False, "tied": True}, "softmax", "adamw"),
    ({"network": "lbl"}, "softmax", "adamw"),
    ({"network": "energy", "h": 8}, "nce", "adamw"),
    ({"network": "energy", "h": 8}, "softmax", "adamw"),  # GPU: torch.tanh, CPU: exp form
]


def _steps(device: str, settings: dict, objective: str, optimizer: str, steps: int = 6,
           bf16: bool = False, dtype=torch.float64):
    vocab, train, valid = toy_data()
    mc = network_config({"vocab_size": len(vocab), "order": 3, "m": 8, "dropout_x": 0.0,
                         **settings})
    cfg = TrainConfig(optimizer=optimizer, objective=objective, lr=0.02 if optimizer == "sgd"
                      else 0.01, weight_decay=1e-3, batch_size=50, noise_samples=5, seed=3,
                      lr_decay=1e-3, bf16=bf16)
    trainer = Trainer.build(vocab, mc, cfg, Path("/nonexistent"), log=lambda m: None, device=device,
                      train_counts=output_counts(train, mc))
    trainer.model.to(dtype)
    perm = np.random.default_rng([cfg.seed, 0]).permutation(len(train))
    losses = []
    for _, ctx, tgt in batches(train, 3, perm, cfg.batch_size, 0, steps):
        loss, n = trainer.train_step(ctx, tgt)
        trainer.state.step += 1
        losses.append(loss / n)
    params = {k: v.detach().cpu().double().numpy() for k, v in
              trainer.model.named_tensors().items()}
    return losses, params, trainer, valid


@pytest.mark.parametrize("settings,objective,optimizer", CASES)
def test_cuda_updates_equal_cpu_in_float64(settings, objective, optimizer):
    """Every network, objective and optimizer: the same losses and weights after six
    updates on both devices (NCE's noise is drawn on the CPU, so it is the same too)."""
    cpu_loss, cpu_params, _, _ = _steps("cpu", settings, objective, optimizer)
    gpu_loss, gpu_params, trainer, _ = _steps("cuda", settings, objective, optimizer)
    assert all(p.device.type == "cuda" for p in trainer.model.parameters())
    np.testing.assert_allclose(gpu_loss, cpu_loss, rtol=1e-9)
    for name, want in cpu_params.items():
        # atol: Adam divides by sqrt(v), so where a gradient is near 0 the rounding of a
        # different summation order (atomics on the GPU) moves the update by ~1e-9
        np.testing.assert_allclose(gpu_params[name], want, rtol=1e-7, atol=1e-8, err_msg=name)


def test_cuda_bf16_training_tracks_float32():
    """bf16 products on the GPU: the loss stays within bf16's rounding of float32's."""
    f32, _, _, _ = _steps("cuda", {"h": 16, "direct": True}, "softmax", "adamw",
                          dtype=torch.float32)
    b16, _, _, _ = _steps("cuda", {"h": 16, "direct": True}, "softmax", "adamw", bf16=True,
                          dtype=torch.float32)
    np.testing.assert_allclose(b16, f32, rtol=2e-2)


def test_cuda_scores_are_distributions_and_match_cpu():
    """Scoring on the GPU: every row of p(. | context) sums to 1 (float64 sum), and the
    target log-probabilities equal the CPU's."""
    _, _, trainer, valid = _steps("cuda", {"h": 16, "direct": True}, "softmax", "adamw",
                                  dtype=torch.float32)
    lm = NeuralLM(trainer.vocab, trainer.model)
    ctx = valid.contexts(3)
    gpu = lm.target_logprobs(ctx, valid.ids)
    sums = np.exp(np.asarray(lm.next_logprobs(ctx[:64]), dtype=np.float64)).sum(1)
    np.testing.assert_allclose(sums, 1.0, atol=1e-6)
    trainer.model.cpu()
    cpu = NeuralLM(trainer.vocab, trainer.model).target_logprobs(ctx, valid.ids)
    np.testing.assert_allclose(gpu, cpu, rtol=1e-5, atol=1e-5)


def _cli(*args, env_extra=None, cwd=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "nnlm", *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=600)


@pytest.fixture(scope="module")
def toy_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    out = _cli("prepare", "toy", str(d))
    assert out.returncode == 0, out.stderr
    return d


def _perplexity(stdout: str) -> float:
    import json

    return float(json.loads(stdout)["perplexity"])


def test_cuda_cli_train_then_eval_on_either_device(toy_files, tmp_path):
    """nnlm train --device cuda writes an ordinary checkpoint: eval on the CPU and on the
    GPU give the same perplexity."""
    run = tmp_path / "run"
    out = _cli("train", str(toy_files / "train.txt"), "--valid", str(toy_files / "valid.txt"),
               "--preset", "tiny", "--epochs", "2", "--device", "cuda", "-o", str(run))
    assert out.returncode == 0, out.stderr
    assert "on cuda" in out.stderr + out.stdout
    ppl = {}
    for device in ("cpu", "cuda"):
        ev = _cli("eval", str(run), str(toy_files / "test.txt"), "--device", device, "--json")
        assert ev.returncode == 0, ev.stderr
        ppl[device] = _perplexity(ev.stdout)
    assert math.isfinite(ppl["cpu"]) and ppl["cuda"] == pytest.approx(ppl["cpu"], rel=1e-5)


def _torchrun(nproc, *args, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc-per-node={nproc}", "-m", "nnlm", *args],
                          capture_output=True, text=True, timeout=600, env=env)


def _toy_train(toy_files):
    return [str(toy_files / "train.txt"), "--valid", str(toy_files / "valid.txt"),
            "--preset", "tiny", "--epochs", "1", "--dropout-x", "0", "--dropout-h", "0",
            "--device", "cuda", "--no-bf16"]


@pytest.mark.parametrize("extra", [[], ["--output-parallel"]])
def test_cuda_two_ranks_train_what_one_process_trains(toy_files, tmp_path, extra):
    """Synchronous data-parallel and the output-parallel scheme on CUDA tensors, 2 ranks:
    nccl where there are 2 GPUs, else gloo with both ranks on the one GPU. The model
    scores what one process's model scores."""
    gpus = torch.cuda.device_count()
    backend = "nccl" if gpus >= 2 else "gloo"
    one = _cli("train", *_toy_train(toy_files), "-o", str(tmp_path / "one"))
    assert one.returncode == 0, one.stderr
    two = _torchrun(2, "train", *_toy_train(toy_files), *extra, "-o", str(tmp_path / "two"),
                    env_extra={"NNLM_DIST_BACKEND": backend})
    assert two.returncode == 0, two.stderr
    assert f"ranks ({backend})" in two.stderr + two.stdout
    ppl = {}
    for name in ("one", "two"):
        ev = _cli("eval", str(tmp_path / name), str(toy_files / "test.txt"), "--json")
        assert ev.returncode == 0, ev.stderr
        ppl[name] = _perplexity(ev.stdout)
    assert ppl["two"] == pytest.approx(ppl["one"], rel=1e-4)


def test_cuda_torchrun_joins_nccl(toy_files, tmp_path):
    """One rank per GPU on nccl: the process group forms and the run finishes."""
    out = _torchrun(torch.cuda.device_count(), "train", *_toy_train(toy_files), "-o",
                    str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "run" / "model.safetensors").exists()


def test_cuda_asynchronous_workers_are_refused(toy_files, tmp_path):
    """--workers on a GPU: refused with one line that names torchrun."""
    out = _cli("train", *_toy_train(toy_files), "--workers", "2", "-o", str(tmp_path / "a"))
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert "torchrun" in out.stderr


def _metrics(run: Path) -> list[dict]:
    import csv

    with open(run / "metrics.csv") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("dropout,network", [
    ("0", ["--preset", "tiny"]), ("0.2", ["--preset", "tiny"]),
    ("0", ["--preset", "energy", "--objective", "softmax", "--m", "16", "--h", "8"])])
def test_cuda_graph_updates_equal_kernel_by_kernel(toy_files, tmp_path, dropout, network):
    """A run whose updates replay a CUDA graph computes what the kernel-by-kernel run
    computes: the same training loss and validation perplexity at every epoch (with
    dropout too: the graph draws from the generator as the kernels would). The energy
    network's update is captured too (it once read a range check back to the host)."""
    args = [str(toy_files / "train.txt"), "--valid", str(toy_files / "valid.txt"),
            *network, "--epochs", "3", "--dropout-x", dropout, "--device", "cuda"]
    rows = {}
    for graphs in ("1", "0"):
        out = _cli("train", *args, "-o", str(tmp_path / graphs),
                   env_extra={"NNLM_CUDA_GRAPHS": graphs})
        assert out.returncode == 0, out.stderr
        assert ("CUDA graph" in out.stderr + out.stdout) == (graphs == "1")
        rows[graphs] = _metrics(tmp_path / graphs)
    assert len(rows["1"]) == len(rows["0"]) == 3
    for a, b in zip(rows["1"], rows["0"]):
        for key in ("train_loss", "valid_ppl"):
            assert float(a[key]) == pytest.approx(float(b[key]), rel=1e-6), (key, a, b)


def test_cuda_resume_continues_exactly(toy_files, tmp_path):
    """Stopped mid-epoch and resumed on the GPU (dropout on, graphs on): the same
    perplexities as the uninterrupted run; the GPU generator's state is in the checkpoint."""
    args = [str(toy_files / "train.txt"), "--valid", str(toy_files / "valid.txt"),
            "--preset", "tiny", "--epochs", "2", "--dropout-x", "0.2", "--device", "cuda"]
    whole = _cli("train", *args, "-o", str(tmp_path / "whole"))
    assert whole.returncode == 0, whole.stderr
    part = _cli("train", *args, "--max-steps", "7", "-o", str(tmp_path / "part"))
    assert part.returncode == 0, part.stderr
    rest = _cli("train", *args, "--resume", "-o", str(tmp_path / "part"))
    assert rest.returncode == 0, rest.stderr
    a, b = _metrics(tmp_path / "whole"), _metrics(tmp_path / "part")
    assert [float(r["valid_ppl"]) for r in b] == pytest.approx(
        [float(r["valid_ppl"]) for r in a], rel=1e-6)


def test_cuda_graph_capture_failure_runs_step_by_step(monkeypatch):
    """An update that cannot be captured (here: one that reads a value back to the host)
    is said in one log line and runs step by step, with the updates a run without graphs
    makes: nothing ran during the failed capture."""
    from nnlm.neural.networks import energy
    from nnlm.neural.training.cuda_graph import WARMUP, GraphedStep

    def syncing(a, G):
        float(a.abs().max())  # a host read: not allowed while a stream is capturing
        return None, None

    monkeypatch.setattr(energy, "_exponentials", syncing)
    vocab, train, _ = toy_data()
    mc = network_config({"network": "energy", "vocab_size": len(vocab), "order": 3, "m": 8,
                         "h": 8})
    cfg = TrainConfig(optimizer="adamw", objective="softmax", lr=0.01, batch_size=50, seed=3)
    runs = {}
    for graphs in (True, False):
        logged = []
        trainer = Trainer.build(vocab, mc, cfg, Path("/nonexistent"), log=logged.append,
                          device="cuda", train_counts=output_counts(train, mc))
        step = GraphedStep(trainer.model, trainer.objective, trainer.optimizer, cfg.batch_size,
                           cfg.bf16, logged.append) if graphs else None
        perm = np.random.default_rng([cfg.seed, 0]).permutation(len(train))
        for _, ctx, tgt in batches(train, 3, perm, cfg.batch_size, 0, WARMUP + 3):
            if graphs:
                step(ctx, tgt)
            else:
                trainer.train_step(ctx, tgt)
        runs[graphs] = {k: v.detach().cpu().numpy() for k, v in
                        trainer.model.named_tensors().items()}
        if graphs:
            assert step.eager and step.graph is None
            assert sum("could not be captured" in line for line in logged) == 1, logged
    for name in runs[True]:
        np.testing.assert_allclose(runs[True][name], runs[False][name], rtol=1e-5,
                                   atol=1e-6, err_msg=name)

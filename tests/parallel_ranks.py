"""What each rank runs in tests/test_parallel.py (importable by name, as spawned processes
need): training steps and output-layer gradients, float64, on the toy world."""

from __future__ import annotations

import collections
import copy
import os
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from nnlm.neural.batches import batches
from nnlm.neural.networks.registry import build_network, network_config
from nnlm.neural.objectives import make_objective
from nnlm.neural.parallel.distributed import World
from nnlm.neural.parallel.output_parallel import OutputShard
from nnlm.neural.training.train import TrainConfig, Trainer, output_counts
from nnlm.text.stream import Stream
from nnlm.text.toyworld import toy_world
from nnlm.text.vocab import Vocabulary

CPU = torch.device("cpu")


def _entry(rank, size, port, fn, args, results):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    try:
        results.put((rank, fn(World(rank, size, CPU, "gloo"), *args)))
    except Exception as e:  # noqa: BLE001 - shown by the test
        results.put((rank, f"{type(e).__name__}: {e}"))
    finally:
        dist.destroy_process_group()


def toy_data(n_train: int = 300):
    train, valid, _ = toy_world(seed=0, n_train=n_train, n_valid=50)
    lines = [s.split() for s in train]
    vocab = Vocabulary.from_counts(collections.Counter(w for s in lines for w in s))
    return vocab, Stream.from_lines(lines, vocab), Stream.from_lines(
        [s.split() for s in valid], vocab)


def _train_steps(world, optimizer, objective, steps):
    """The per-step loss and final parameters of ``steps`` updates, float64."""
    vocab, train, _ = toy_data()
    mc = network_config({"vocab_size": len(vocab), "order": 3, "m": 8, "h": 16, "direct": True,
                         "dropout_x": 0.0})
    cfg = TrainConfig(optimizer=optimizer, objective=objective, lr=0.02 if optimizer == "sgd"
                      else 0.01, weight_decay=1e-3, batch_size=50, noise_samples=5, seed=3,
                      lr_decay=1e-3)
    trainer = Trainer.build(vocab, mc, cfg, Path("/nonexistent"), log=lambda m: None, world=world,
                      train_counts=output_counts(train, mc))
    trainer.model.double()
    perm = np.random.default_rng([cfg.seed, 0]).permutation(len(train))
    part = None if world is None else (world.rank, world.size)
    losses = []
    for _, ctx, tgt in batches(train, 3, perm, cfg.batch_size, 0, steps, part):
        loss, n = trainer.train_step(ctx, tgt)
        trainer.state.step += 1
        losses.append(loss / n)
    return losses, {k: v.detach().numpy().copy() for k, v in trainer.model.named_tensors().items()}


def _output_parallel_grads(world, network, objective, tied):
    torch.manual_seed(0)
    vocab, train, _ = toy_data(100)
    settings = {"network": network, "vocab_size": len(vocab), "order": 3, "m": 8}
    if network == "nplm":
        settings.update(h=8 if tied else 16, direct=not tied, tied=tied)
    else:
        settings["tied"] = tied
    full = build_network(network_config(settings)).double()
    full.reset_parameters(torch.Generator().manual_seed(1))
    with torch.no_grad():  # trained-looking output rows and biases, not zeros
        full.output_matrix.normal_(0, 0.3, generator=torch.Generator().manual_seed(2))
        full.b.normal_(0, 1.0, generator=torch.Generator().manual_seed(3))
    split = copy.deepcopy(full)
    obj = make_objective(objective, np.bincount(train.ids, minlength=len(vocab)),
                         noise_samples=6, selfnorm_alpha=0.3)
    ctx = torch.from_numpy(train.contexts(3, np.arange(40)).astype(np.int64))
    tgt = torch.from_numpy(train.ids[:40].astype(np.int64))
    state = obj.generator.get_state() if hasattr(obj, "generator") else None
    loss = obj.loss(full, ctx, tgt, sparse=False)
    loss.backward()
    if state is not None:
        obj.generator.set_state(state)
    shard = OutputShard(world, split)
    split_loss = shard.loss(obj, split, ctx, tgt)
    split_loss.backward()
    errors = {"loss": abs(float(split_loss) - float(loss)) / abs(float(loss))}
    full_grads = dict(full.named_parameters())
    for name, p in split.named_parameters():
        want = full_grads[name].grad
        if p.shape != want.shape:  # this rank's rows
            want = want[shard.lo : shard.hi]
        errors[name] = float((p.grad - want).abs().max()) / (float(want.abs().max()) + 1e-30)
    # exact evaluation across ranks, and the gathered checkpoint
    nll, log_z = shard.nll_and_log_z(split, ctx, tgt)
    y = full.eval().scores(ctx).double()
    want_nll = torch.logsumexp(y, 1) - y.gather(1, tgt[:, None])[:, 0]
    errors["eval"] = float((nll - want_nll).abs().max())
    errors["log_z"] = float((log_z - torch.logsumexp(y, 1)).abs().max())
    gathered = shard.full_tensors(split)
    errors["gather"] = max(float((gathered[k] - v.detach()).abs().max())
                           for k, v in full.named_tensors().items())
    errors["rows"] = (shard.lo, shard.hi)
    return errors

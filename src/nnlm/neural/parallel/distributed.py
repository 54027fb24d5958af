"""Synchronous data-parallel training on torch.distributed: the process group, the shard
of each batch a rank trains on, and the gradient exchange.

Started by torchrun (``torchrun --nproc-per-node P -m nnlm train ...``), every process
runs the same command; torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT) says which one it is. The backend is gloo on the CPU and nccl between GPUs.

The scheme keeps the single-process run's arithmetic, so that moving from one process to
P changes nothing but the speed:

- ``--batch-size`` is the *global* batch B. Batch i of an epoch is the same B positions of
  the seeded permutation (seed, epoch) as in one process; rank r trains on its contiguous
  share of them (:func:`shard_range`), so the union of the ranks' shards is the
  single-process batch (DistributedSampler's ``set_epoch``, with the epoch in the seed).
- Each rank's loss is summed over its share (the paper's SGD) or divided by the global
  count (Adam): the *sum* of the ranks' gradients is then exactly the single-process
  gradient. :class:`GradientSync` all-reduces the dense gradients in one flat bucket, as
  DistributedDataParallel does, and all-gathers the sparse ones (the rows of C a batch
  touched; under NCE the sampled output rows). torch's DDP wrapper is not used: its
  reducer cannot carry an uncoalesced sparse gradient, whose per-row gather counts the
  paper's SGD needs for weight decay on C, and nccl has no sparse all-reduce at all.
- Every rank then takes the same optimizer step on the same gradient, so the replicas
  stay equal without a broadcast. Validation NLL and token counts are all-reduced; rank 0
  alone logs and writes the checkpoint, which is the ordinary single-process format.

A rank that dies makes the others' next collective fail; that failure becomes one line
(:class:`PeerLost`) instead of a hang or a traceback, and torchrun ends the job.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ...base.errors import NnlmError
from ..batches import shard_range  # noqa: F401 - the ranks' shards, named here too

BACKEND_ENV = "NNLM_DIST_BACKEND"  # gloo or nccl; default: nccl on CUDA, gloo on the CPU
TIMEOUT_SECONDS = float(os.environ.get("NNLM_DIST_TIMEOUT", 600))  # a stalled rank


class PeerLost(NnlmError):
    """A collective failed: another rank stopped (crashed, was killed, or timed out)."""


def launched_by_torchrun() -> bool:
    """True in a process that torchrun (or another launcher setting WORLD_SIZE) started."""
    return "WORLD_SIZE" in os.environ and "RANK" in os.environ


def env_rank() -> int:
    """This process's global rank under a launcher, 0 otherwise (before any init)."""
    return int(os.environ.get("RANK", "0") or 0)


@dataclass(frozen=True)
class World:
    """The process group this run trains in: ``rank`` of ``size``, on ``device``."""

    rank: int
    size: int
    device: torch.device
    backend: str

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def collective(self, what: str, fn: Callable, *args, **kwargs):
        """Run a collective; a dead or stalled peer becomes :class:`PeerLost`."""
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, dist.DistError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise PeerLost(f"rank {self.rank} of {self.size}: {what} failed because another "
                           f"rank stopped ({first[:160]}); see that rank's error above") from None

    def barrier(self, what: str = "waiting for the other ranks") -> None:
        if self.size > 1:
            self.collective(what, dist.barrier)

    def all_sum(self, values: Sequence[float], what: str = "summing over ranks") -> list[float]:
        """The element-wise sum over ranks of ``values`` (float64)."""
        t = torch.tensor(list(values), dtype=torch.float64, device=self.device)
        if self.size > 1:
            self.collective(what, dist.all_reduce, t)
        return t.tolist()

    def all_gather_rows(self, t: torch.Tensor, what: str = "gathering") -> list[torch.Tensor]:
        """Every rank's ``t`` (same trailing shape, any number of rows), in rank order."""
        if self.size == 1:
            return [t]
        n = torch.tensor([len(t)], dtype=torch.int64, device=self.device)
        sizes = [torch.zeros_like(n) for _ in range(self.size)]
        self.collective(what, dist.all_gather, sizes, n)
        sizes = [int(s) for s in sizes]
        longest = max(sizes)
        padded = t.new_zeros((longest, *t.shape[1:]))
        padded[: len(t)] = t
        parts = [torch.empty_like(padded) for _ in range(self.size)]
        self.collective(what, dist.all_gather, parts, padded.contiguous())
        return [p[:s] for p, s in zip(parts, sizes)]

    def gather_objects(self, obj, what: str = "gathering the state") -> list | None:
        """Every rank's picklable ``obj`` on rank 0 (None elsewhere)."""
        if self.size == 1:
            return [obj]
        out = [None] * self.size if self.is_main else None
        self.collective(what, dist.gather_object, obj, out, dst=0)
        return out


def init_world(device: torch.device) -> World:
    """Join the process group torchrun set up: gloo on the CPU, nccl on CUDA (each rank on
    GPU LOCAL_RANK). Returns the World and the device this rank computes on.

    ``NNLM_DIST_BACKEND=gloo`` keeps gloo on CUDA too; gloo then lets several ranks share
    a GPU (rank r on GPU r mod the count), which nccl refuses: slow, but it runs every
    scheme's CUDA code on a machine with one GPU (``tests/test_cuda.py``)."""
    rank, size = env_rank(), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    backend = os.environ.get(BACKEND_ENV) or ("nccl" if device.type == "cuda" else "gloo")
    if backend not in ("gloo", "nccl") or (backend == "nccl" and device.type != "cuda"):
        raise NnlmError(f"{BACKEND_ENV}={backend}: choose gloo, or nccl with device=cuda")
    if device.type == "cuda":
        gpus = torch.cuda.device_count()
        if backend == "nccl" and gpus <= local:
            raise NnlmError(f"rank {rank}: device=cuda, but this host has {gpus} GPU(s) "
                            f"for local rank {local}; start at most one process per GPU "
                            f"(--nproc-per-node), or set {BACKEND_ENV}=gloo to share them")
        device = torch.device("cuda", local % gpus)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        try:
            dist.init_process_group(backend, rank=rank, world_size=size,
                                    timeout=datetime.timedelta(seconds=TIMEOUT_SECONDS))
        except (RuntimeError, ValueError, dist.DistError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise NnlmError(f"rank {rank} of {size}: cannot join the process group at "
                            f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} "
                            f"({first[:160]})") from None
    return World(rank, size, device, backend)


def close_world() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


class GradientSync:
    """Sum every parameter's gradient over the ranks, in place (see the module docstring).

    Dense gradients (a missing one counts as zero) travel in one flat all-reduce. A sparse
    gradient's (indices, values) are all-gathered and concatenated in rank order, which is
    the uncoalesced gradient one process would have built for the whole batch.
    """

    def __init__(self, world: World, params: Sequence[torch.nn.Parameter],
                 sparse: Sequence[torch.nn.Parameter] = ()):
        """``sparse``: the parameters whose gradients are sparse (fixed for the run, so
        that every rank sends the same buffers even when its share of a batch is empty)."""
        sparse_ids = {id(p) for p in sparse}
        self.world = world
        self.dense = [p for p in params if id(p) not in sparse_ids]
        self.sparse = [p for p in params if id(p) in sparse_ids]

    @torch.no_grad()
    def __call__(self) -> None:
        if self.world.size == 1:
            return
        if self.dense:
            flat = torch.cat([_dense_grad(p).reshape(-1) for p in self.dense])
            self.world.collective("the gradient all-reduce", dist.all_reduce, flat)
            at = 0
            for p in self.dense:
                n = p.numel()
                p.grad = flat[at : at + n].view_as(p)
                at += n
        for p in self.sparse:
            g = p.grad
            if g is None:  # this rank's share of the batch was empty
                idx = torch.zeros(0, dtype=torch.int64, device=p.device)
                val = p.new_zeros((0, *p.shape[1:]))
            else:
                idx, val = g._indices()[0], g._values()
            idx = torch.cat(self.world.all_gather_rows(idx, "the sparse-gradient gather"))
            val = torch.cat(self.world.all_gather_rows(val, "the sparse-gradient gather"))
            p.grad = torch.sparse_coo_tensor(idx[None], val, p.shape, check_invariants=False)


def _dense_grad(p: torch.Tensor) -> torch.Tensor:
    if p.grad is None:
        return torch.zeros_like(p)
    return p.grad.to_dense() if p.grad.is_sparse else p.grad

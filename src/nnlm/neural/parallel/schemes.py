"""How the processes of one training run share its work: the parallel scheme.

The training loop (:class:`nnlm.neural.training.train.Trainer`) is the same whatever the scheme;
what differs is owned here:

- **the loss** of a batch and which share of the batch this process computes it on;
- **the gradient exchange** after the backward pass, and **clipping** of the whole
  model's gradient norm;
- **the evaluation NLL**: validation perplexity, the sanity check before a save, the
  mean log Z of a self-normalizing objective;
- **gathering**: the whole model's tensors for a checkpoint, each rank's optimizer
  moments, and cutting a saved model back into this rank's share on resume.

The schemes are those of Bengio et al. (2003), section 3:

- :class:`Scheme`: what every scheme answers, each answer one process's by default;
- :class:`SingleProcess`: one process (its threads are torch's);
- :class:`DataParallel`: synchronous data-parallel ranks of a torchrun job, each computing
  the gradient of its share of every batch, summed over ranks (``distributed.py``);
- :class:`OutputParallel`: the paper's parameter-parallel scheme, every rank on the whole
  batch with its slice of the output layer (``output_parallel.py``);
- ``Hogwild`` (``hogwild.py``): the paper's asynchronous shared-memory scheme, whose
  workers each run a single-process step.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import torch

from ...base.errors import NnlmError
from ...lm import LanguageModel
from ...text.stream import Stream
from ..networks.checkpoint import network_tensors
from ..networks.network import Network
from ..nplm_lm import LOG_Z_SAMPLE
from ..objectives import Objective
from ..optim import clip_gradients, scale_gradients
from .distributed import GradientSync, World, shard_range
from .output_parallel import OutputShard
from .run_view import RunView

EVAL_BATCH = 4096  # rows a rank scores at once under the output-parallel scheme


class Scheme:
    """What a parallel scheme owns in a run (see the module docstring); each method's
    default is what one process does, which trains on every batch whole and logs and
    writes. Schemes are chosen in one place, :func:`.choice.choose_scheme`."""

    world: World | None = None
    is_main = True
    graphable = True  # a CUDA graph may capture its update (training/cuda_graph.py)
    supports_average = True  # each process makes every update to the whole network

    def describe(self) -> str:
        """What the start-up line says of the scheme (nothing for one process)."""
        return ""

    def prepare(self, net: Network) -> None:
        """Called once on the freshly built network, before it moves to its device."""

    def attach(self, net: Network, sparse_params: list) -> None:
        """Called once the optimizer knows which parameters get sparse gradients."""

    def seed_rank(self) -> int | None:
        """The rank whose seed stream this process draws dropout from; None: the run's
        seed alone (see :meth:`reseed`)."""
        return None

    def reseed(self, seed: int, step: int) -> None:
        """Under torchrun the global RNG (dropout) is reseeded from (seed, update, rank) at
        the start and at every saved state, so a resumed job draws what an uninterrupted
        one would. Data-parallel ranks draw different masks for their different examples;
        output-parallel ranks the same ones, as they compute the same z."""
        rank = self.seed_rank()
        if rank is None:
            return
        seq = np.random.SeedSequence([seed, step, rank])
        torch.manual_seed(int(seq.generate_state(1, np.uint64)[0] >> 1))

    def batch_part(self) -> tuple[int, int] | None:
        """(rank, ranks) when this process trains on a share of every batch."""
        return None

    # -- one update --------------------------------------------------------------------
    def loss(self, objective: Objective, net: Network, contexts: torch.Tensor,
             targets: torch.Tensor, bf16: bool, sparse: bool) -> torch.Tensor | None:
        """The loss summed over this process's rows (None for an empty share)."""
        if not len(targets):
            return None
        return objective.loss(net, contexts, targets, bf16=bf16, sparse=sparse)

    def total(self, value: float, n: int) -> tuple[float, int]:
        """(loss sum, rows) over the whole batch, from this process's share."""
        return value, n

    def exchange(self) -> None:
        """Make every process's gradient the whole batch's."""

    def clip(self, net: Network, max_norm: float) -> None:
        """Scale the whole model's gradient down to norm ``max_norm``."""
        clip_gradients(net, max_norm)

    # -- evaluation --------------------------------------------------------------------
    def mean_nll(self, lm: LanguageModel, contexts: np.ndarray, targets: np.ndarray) -> float:
        """Mean -log p of ``targets`` after ``contexts`` under the current weights."""
        return -float(np.mean(lm.target_logprobs(contexts, targets)))

    def mean_log_z(self, lm: LanguageModel, valid: Stream) -> float:
        """Mean log Z over (a sample of) the validation contexts, dropout off."""
        return lm.log_z_stats(valid.contexts(lm.order)).mean

    def nll_sum(self, lm: LanguageModel, stream: Stream) -> tuple[float, int]:
        """(summed -log p, tokens) of ``stream`` under full normalization."""
        return -float(np.sum(lm.logprobs(stream))), len(stream)

    # -- gathering ---------------------------------------------------------------------
    def full_tensors(self, net: Network) -> dict[str, torch.Tensor]:
        """The whole model's named tensors on the CPU (a collective where they are split)."""

        return network_tensors(net)

    def own_tensors(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """A whole saved model's tensors -> this process's share."""
        return tensors

    def shifted_biases(self, tensors: dict, net: Network, shift: float) -> torch.Tensor:
        """The output biases b with ``shift`` subtracted, as the network defines them."""
        return net.bias_shifted(shift).cpu()

    def gather_optimizer(self, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Every process's optimizer tensors, as a checkpoint keeps them."""
        return tensors

    def record(self) -> dict:
        """The layout a checkpoint records, to check on resume."""
        return {"size": 1, "output_parallel": False}

    def own_optimizer(self, saved: dict, tensors: dict, state_dir: Path,
                      optimizer: str) -> dict:
        """This process's optimizer tensors from a state saved under layout ``saved``.
        Output-parallel runs keep Adam's moments of the output rows per rank: they resume
        only with the same layout."""
        size, split = int(saved.get("size") or 1), bool(saved.get("output_parallel"))
        moments = any(not k.startswith("__") for k in tensors)
        now = self.record()
        if moments and (split or now["output_parallel"]) and \
                (split, size) != (now["output_parallel"], now["size"]):
            was = f"{size} output-parallel ranks" if split else f"{size} data-parallel process(es)"
            raise NnlmError(f"{state_dir}: saved by {was}; {optimizer}'s moments "
                            "of the output rows are split by rank under output_parallel, so "
                            f"this run ({now['size']} process(es)"
                            f"{', output-parallel' if now['output_parallel'] else ''}) cannot "
                            f"take them over. Resume with the same layout ({was})")
        if not split:
            return tensors
        prefix = f"rank{self.world.rank if self.world else 0}."
        own = {k[len(prefix):]: v for k, v in tensors.items() if k.startswith(prefix)}
        own.update({k: v for k, v in tensors.items() if k.startswith("__")})
        return own

    # -- the run -----------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self, run: RunView, train: Stream):
        """Around the whole of a trainer's fit (where workers start and stop)."""
        yield

    def train_span(self, run: RunView, train: Stream, plan, until: int, bar,
                   started: float, words_at_start: int) -> None:
        """Train batches step_in_epoch .. until-1 of the epoch's ``plan``."""
        run.train_batches(train, plan, until, bar, started, words_at_start)

    def finish(self, result: dict, log) -> dict:
        """The run's result, with what the scheme measured."""
        return result

    def load_kernels(self, optimizer) -> None:
        """Load the optimizer's compiled updates before the clock starts: their first use
        would otherwise count about a second of loading as training time."""
        optimizer.load_kernels()


class SingleProcess(Scheme):
    """One process trains on every batch whole; it logs and writes."""


class DataParallel(Scheme):
    """Synchronous data-parallel ranks of a torchrun job: each trains on its share of
    every batch and the gradients are summed over ranks; rank 0 logs and writes."""

    graphable = False

    def __init__(self, world: World):
        self.world = world
        self.sync = None

    @property
    def is_main(self) -> bool:
        return self.world.is_main

    def describe(self) -> str:
        return f", {self.world.size} data-parallel ranks ({self.world.backend})"

    def attach(self, net: Network, sparse_params: list) -> None:
        self.sync = GradientSync(self.world, list(net.parameters()), sparse_params)

    def seed_rank(self) -> int:  # different masks for the ranks' different examples
        return self.world.rank

    def batch_part(self) -> tuple[int, int]:
        return self.world.rank, self.world.size

    def total(self, value: float, n: int) -> tuple[float, int]:
        value, n = self.world.all_sum([value, n], "the loss sum")
        return value, int(n)

    def exchange(self) -> None:
        self.sync()

    def nll_sum(self, lm: LanguageModel, stream: Stream) -> tuple[float, int]:
        lo, hi = shard_range(len(stream), self.world.size, self.world.rank)
        pos = np.arange(lo, hi)
        nll = -float(np.sum(lm.target_logprobs(stream.contexts(lm.order, pos),
                                               stream.ids[lo:hi]))) if hi > lo else 0.0
        nll, n = self.world.all_sum([nll, hi - lo], "the validation sum")
        return nll, int(n)

    def record(self) -> dict:
        return {"size": self.world.size, "output_parallel": False}


class OutputParallel(DataParallel):
    """The paper's parameter-parallel scheme: every rank trains on the whole batch and
    owns a slice of the output layer (see :mod:`nnlm.neural.parallel.output_parallel`)."""

    supports_average = False  # each rank updates only its slice of the output layer

    def __init__(self, world: World):
        super().__init__(world)
        self.shard = None

    def describe(self) -> str:
        return f", {self.world.size} output-parallel ranks ({self.world.backend})"

    def prepare(self, net: Network) -> None:
        self.shard = OutputShard(self.world, net)

    def attach(self, net: Network, sparse_params: list) -> None:
        """No sum: the replicated parameters get equal gradients on every rank, and each
        rank owns its output rows."""

    def seed_rank(self) -> int:  # the same masks: every rank computes the same z
        return 0

    def batch_part(self) -> None:
        return None

    def loss(self, objective, net, contexts, targets, bf16, sparse):
        return self.shard.loss(objective, net, contexts, targets, bf16=bf16, sparse=sparse)

    def total(self, value: float, n: int) -> tuple[float, int]:
        return value, n

    def exchange(self) -> None:
        pass

    def clip(self, net: Network, max_norm: float) -> None:
        norm = self.shard.grad_norm_squared(net) ** 0.5
        if norm > max_norm:
            scale_gradients(net, max_norm / (norm + 1e-6))

    def _nll_and_log_z(self, lm, contexts: np.ndarray, targets: np.ndarray
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """(-log p, log Z) per row from the output layer split over the ranks."""
        net = lm.model
        net.eval()
        device = next(net.parameters()).device
        out = [self.shard.nll_and_log_z(
            net, torch.from_numpy(contexts[i : i + EVAL_BATCH].astype(np.int64)).to(device),
            torch.from_numpy(targets[i : i + EVAL_BATCH].astype(np.int64)).to(device))
            for i in range(0, len(targets), EVAL_BATCH)]
        return torch.cat([a for a, _ in out]).cpu(), torch.cat([b for _, b in out]).cpu()

    def mean_nll(self, lm, contexts, targets) -> float:
        return float(self._nll_and_log_z(lm, contexts, targets)[0].mean())

    def mean_log_z(self, lm, valid: Stream) -> float:
        n = min(len(valid), LOG_Z_SAMPLE)
        pos = np.linspace(0, len(valid) - 1, n).astype(np.int64)
        return float(self._nll_and_log_z(lm, valid.contexts(lm.order, pos), valid.ids[pos])[1]
                     .mean())

    def nll_sum(self, lm, stream: Stream) -> tuple[float, int]:
        pos = np.arange(len(stream))
        nll = self._nll_and_log_z(lm, stream.contexts(lm.order, pos), stream.ids)[0].sum()
        return float(nll), len(stream)

    def full_tensors(self, net: Network) -> dict[str, torch.Tensor]:
        return self.shard.full_tensors(net)

    def own_tensors(self, tensors):
        return self.shard.shard_tensors(tensors)

    def shifted_biases(self, tensors: dict, net: Network, shift: float) -> torch.Tensor:
        return tensors["b"] - shift

    def gather_optimizer(self, tensors):
        """Each rank's moments of its own output rows, under ``rank{r}.``."""
        parts = self.world.gather_objects(tensors)
        return {f"rank{r}.{k}": v for r, part in enumerate(parts or []) for k, v in
                part.items()}

    def record(self) -> dict:
        return {"size": self.world.size, "output_parallel": True}


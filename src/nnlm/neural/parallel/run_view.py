"""What a parallel scheme is handed of the run it serves, typed: the training loop never
hands itself over, and the schemes never import training/ (which stands on them).

- :class:`Counters`: the loop's counters a scheme advances (training/'s ``TrainState``);
- :class:`WorkerSetup`: what a worker process builds its own one-process trainer from,
  the coordinator's builder included (passed by reference, as spawn pickles it);
- :class:`RunView`: the network, its optimizer, the counters, the interrupt check, the
  folder whose checkpoint a failure keeps, and the one-process loop over a span.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ...text.stream import Stream
from ...text.vocab import Vocabulary
from ..networks.network import Network, NetworkConfig
from ..settings import TrainConfig


class Counters(Protocol):
    """The training loop's counters that a scheme reads and advances."""

    epoch: int
    step: int
    step_in_epoch: int
    train_nll: float
    train_tokens: int


@dataclass(frozen=True)
class WorkerSetup:
    """What a worker process builds its own one-process trainer from: ``build`` (the
    trainer's builder) called with the other fields as keywords."""

    build: Callable[..., Any]
    vocab: Vocabulary
    model_config: NetworkConfig
    config: TrainConfig
    outdir: Path
    preset: str | None
    train_counts: np.ndarray | None
    model_id: str

    def make(self, log: Callable[[str], None]):
        """A one-process trainer on the CPU (its own network, to be given the shared
        parameters)."""
        return self.build(self.vocab, self.model_config, self.config, self.outdir,
                          preset=self.preset, log=log, device="cpu",
                          train_counts=self.train_counts, model_id=self.model_id)


@dataclass(frozen=True)
class RunView:
    """The parts of a run a scheme may touch while it trains."""

    model: Network
    optimizer: Any  # nnlm.neural.optim's: PaperSGD, Adam, ...
    counters: Counters
    check_interrupt: Callable[[], None]  # raises KeyboardInterrupt after Ctrl-C
    checkpoint_folder: Path  # what a failure keeps, named in its message
    worker_setup: WorkerSetup
    # one process's loop over batches step_in_epoch .. until-1 of an epoch's plan:
    # (train, plan, until, bar, started, words_at_start)
    train_batches: Callable[[Stream, Any, int, Any, float, int], None]

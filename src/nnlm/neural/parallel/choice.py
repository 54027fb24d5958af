"""The one place a training run's parallel scheme is chosen (Bengio et al. 2003, section
3): one process, data-parallel or output-parallel ranks of a torchrun job, or the paper's
asynchronous workers on shared memory."""

from __future__ import annotations

from ...base.errors import NnlmError
from .distributed import World
from .heartbeat import WORKER_TIMEOUT
from .hogwild import Hogwild
from .schemes import DataParallel, OutputParallel, Scheme, SingleProcess


def choose_scheme(world: World | None = None, output_parallel: bool = False,
                  workers: int = 1, worker_timeout: float = WORKER_TIMEOUT) -> Scheme:
    """The scheme of a process started alone (``workers`` > 1: Hogwild's workers) or as
    one rank of a torchrun job (``world``; ``output_parallel``: each rank owns a slice of
    the output layer). nnlm.train's settings were checked against how the process was
    started before (``training.run.check_parallel``)."""
    if workers > 1:
        return Hogwild(workers, worker_timeout)
    if world is None or world.size <= 1:
        if output_parallel:
            raise NnlmError("output_parallel splits the output layer over the ranks of a "
                            "torchrun job; start with torchrun --nproc-per-node P")
        return SingleProcess()
    return OutputParallel(world) if output_parallel else DataParallel(world)

"""Whether worker processes are alive and answering: heartbeats in shared memory, and
workers that die with the process that started them.

A worker that dies is seen at once (its process is gone), but one that is stopped
(SIGSTOP, a debugger), deadlocked or starved of CPU would hang its coordinator forever.
So each worker writes the time into its slot of a shared array after every update
(:meth:`Heartbeats.beat`), and a coordinator waiting for work checks the slots
(:meth:`Heartbeats.silent`): a worker silent for ``WORKER_TIMEOUT`` seconds (``train
--worker-timeout``) stops the run with one line, keeping the last checkpoint. The clock
is CLOCK_MONOTONIC, which all processes of a machine share.

The other way round, a worker must not outlive a coordinator that was killed
(SIGKILL leaves it no time to stop them): :func:`die_with_parent` asks Linux to send the
worker SIGKILL when its parent dies (``PR_SET_PDEATHSIG``), so no orphan keeps running
and holding the terminal's pipe (``nnlm train ... | tee log`` then ends).

Torch-free, so that the CLI can show the default.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time

WORKER_TIMEOUT = 120.0  # seconds a worker may go without finishing an update
STARTUP_SECONDS = 300.0  # a worker's start (spawn, imports) may take this long
PR_SET_PDEATHSIG = 1


class Heartbeats:
    """One slot per worker in shared memory: the monotonic time of its last sign of life."""

    def __init__(self, ctx, workers: int):
        self.times = ctx.Array("d", workers, lock=False)  # 8-byte writes: atomic on x86-64

    def beat(self, rank: int) -> None:
        self.times[rank] = time.monotonic()

    def silent(self, ranks, since: float, timeout: float) -> tuple[int, float] | None:
        """The first of ``ranks`` that has given no sign of life for ``timeout`` seconds,
        counting from ``since`` at the earliest, with how long; None if all answer."""
        now = time.monotonic()
        for rank in ranks:
            quiet = now - max(self.times[rank], since)
            if quiet > timeout:
                return rank, quiet
        return None


def die_with_parent(parent_pid: int) -> None:
    """Have the kernel kill this process when its parent dies (Linux; elsewhere nothing).
    A parent that died before the request was made is caught by the pid check after it."""
    name = ctypes.util.find_library("c")
    if name:
        try:
            libc = ctypes.CDLL(name, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent_pid:
        os._exit(1)

"""Where a distributed estimation runs: ``local:N`` starts N worker processes on this
machine (Dask's ``LocalCluster``); anything else is the address of a running Dask
scheduler (``tcp://host:8786``) whose workers can read the shards.

A cluster on several hosts, on SLURM or on Kubernetes is started with Dask's own tools
(``dask scheduler`` and ``dask worker``, dask-jobqueue, dask-kubernetes): see
docs/scaling.md. Workers that die are replaced by their nannies and the engine reruns
their tasks, so a job survives losing a worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re

from ...errors import NnlmError

CONNECT_TIMEOUT = 30.0  # seconds to wait for a scheduler's answer (NNLM_CLUSTER_TIMEOUT)
_LOCAL = re.compile(r"local:(\d+)$")


def check_cluster(spec: str) -> None:
    """A ``cluster=`` value, checked before any work: ``local:N`` (N >= 1) or an address."""
    m = _LOCAL.match(spec)
    if spec.startswith("local") and (m is None or int(m.group(1)) < 1):
        raise NnlmError(f"cluster={spec}: give local:N with N >= 1 worker processes, or a "
                        "Dask scheduler's address (tcp://host:8786)")
    if not spec.strip():
        raise NnlmError("cluster= is empty: give local:N or a Dask scheduler's address")


@contextlib.contextmanager
def connect(spec: str, timeout: float | None = None, memory_limit: str | None = None):
    """A Dask ``Client`` on the cluster ``spec`` (see the module docstring), closed (and
    a local cluster stopped) on the way out."""
    check_cluster(spec)
    if timeout is None:
        timeout = float(os.environ.get("NNLM_CLUSTER_TIMEOUT", CONNECT_TIMEOUT))
    try:
        from distributed import Client, LocalCluster
    except ModuleNotFoundError:
        raise NnlmError('cluster= needs Dask: pip install "nnlm[distributed]"') from None
    # the engine's own chatter (shuffles starting, workers joining) is not the user's
    for name in ("distributed", "distributed.shuffle", "distributed.worker",
                 "distributed.scheduler", "distributed.nanny", "distributed.core"):
        logging.getLogger(name).setLevel(logging.ERROR)
    m = _LOCAL.match(spec)
    with contextlib.ExitStack() as stack:
        if m:
            cluster = stack.enter_context(LocalCluster(
                n_workers=int(m.group(1)), threads_per_worker=1, processes=True,
                dashboard_address=None, memory_limit=memory_limit or "auto",
                silence_logs=logging.ERROR))
            client = stack.enter_context(Client(cluster))
        else:
            try:
                client = stack.enter_context(Client(spec, timeout=f"{timeout:g}s"))
            except (OSError, TimeoutError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise NnlmError(f"cluster={spec}: no Dask scheduler answered within "
                                f"{timeout:g} s ({first[:160]})") from None
            if not client.scheduler_info().get("workers"):
                raise NnlmError(f"cluster={spec}: the scheduler has no workers; start some "
                                f"with: dask worker {spec}")
        yield client

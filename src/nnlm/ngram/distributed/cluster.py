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
import warnings

from ...base.errors import NnlmError
from ...base.extras import DISTRIBUTED
from ...base.sysmem import available_memory

CONNECT_TIMEOUT = 30.0  # seconds to wait for a scheduler's answer (NNLM_CLUSTER_TIMEOUT)
_LOCAL = re.compile(r"local:(\d+)$")


WORKERS_PER_CORE = 4  # local:N: at most this many worker processes a core
WORKER_BYTES = 256 << 20  # and at least this much memory for each


def local_limit() -> int:
    """The most worker processes ``local:N`` may start on this machine: 4 a core, and no
    more than its memory holds at 256 MB each."""

    limit = WORKERS_PER_CORE * (os.cpu_count() or 1)
    room = available_memory()
    if room is not None:
        limit = min(limit, max(1, room // WORKER_BYTES))
    return limit


def check_cluster(spec: str) -> None:
    """A ``cluster=`` value, checked before any work: ``local:N`` (1 <= N <= what this
    machine can run, :func:`local_limit`) or an address."""
    m = _LOCAL.match(spec)
    if spec.startswith("local") and (m is None or int(m.group(1)) < 1):
        raise NnlmError(f"cluster={spec}: give local:N with N >= 1 worker processes, or a "
                        "Dask scheduler's address (tcp://host:8786)")
    if m and int(m.group(1)) > local_limit():
        raise NnlmError(f"cluster={spec}: local:N starts N worker processes on this machine, "
                        f"which has {os.cpu_count()} cores: at most {local_limit()} here "
                        f"({WORKERS_PER_CORE} a core, {WORKER_BYTES >> 20} MB each); for more, "
                        "start workers on other hosts and give the scheduler's address")
    if not spec.strip():
        raise NnlmError("cluster= is empty: give local:N or a Dask scheduler's address")


def _reachable(spec: str, timeout: float) -> None:
    """A TCP address's host and port answer a connection: one line at once where the
    OS says no (refused, no route, unknown host), or after ``timeout`` seconds of
    silence, instead of Dask's retries for the whole timeout."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(spec if "://" in spec else f"tcp://{spec}")
    if url.scheme not in ("tcp", "tls"):
        return  # another transport (ucx, inproc): Dask's own connection says
    try:
        host, port = url.hostname, url.port or 8786
    except ValueError:
        raise NnlmError(f"cluster={spec}: not an address (give tcp://host:8786)") from None
    if not host:
        raise NnlmError(f"cluster={spec}: not an address (give tcp://host:8786)")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except TimeoutError:
        raise NnlmError(f"cluster={spec}: the scheduler cannot be reached: nothing answered "
                        f"at {host}:{port} within {timeout:g} s (a wrong address, or a "
                        "firewall)") from None
    except OSError as e:
        why = "connection refused: no scheduler listens there" \
            if isinstance(e, ConnectionRefusedError) else (e.strerror or str(e))
        raise NnlmError(f"cluster={spec}: the scheduler cannot be reached at {host}:{port} "
                        f"({why})") from None


@contextlib.contextmanager
def connect(spec: str, timeout: float | None = None, memory_limit: str | None = None):
    """A Dask ``Client`` on the cluster ``spec`` (see the module docstring), closed (and
    a local cluster stopped) on the way out."""
    check_cluster(spec)
    if timeout is None:
        timeout = float(os.environ.get("NNLM_CLUSTER_TIMEOUT", CONNECT_TIMEOUT))
    try:
        from dask.config import set as dask_config
        from distributed import Client, LocalCluster
    except ModuleNotFoundError:
        raise NnlmError(f"cluster= needs Dask: {DISTRIBUTED}") from None
    # the engine's own chatter (shuffles starting, workers joining) is not the user's
    # nor are its workers' reports of a failed task: the job's error is one line (run.py)
    for name in ("distributed", "distributed.shuffle", "distributed.worker",
                 "distributed.scheduler", "distributed.nanny", "distributed.core"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    m = _LOCAL.match(spec)
    with contextlib.ExitStack() as stack:
        if m:
            # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also fixes
            # glibc's mmap threshold at 128 KB: every large numpy temporary is then a
            # fresh mapping, zeroed page by page, and a count task ran 1.3-1.5x slower
            # than in one process; local workers get glibc's defaults, as one process has
            stack.enter_context(dask_config({
                "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}))
            with warnings.catch_warnings():  # "port 8787 is in use": its HTTP server, which
                warnings.simplefilter("ignore", UserWarning)  # then takes another port
                cluster = stack.enter_context(LocalCluster(
                    n_workers=int(m.group(1)), threads_per_worker=1, processes=True,
                    dashboard_address=None, memory_limit=memory_limit or "auto",
                    silence_logs=logging.CRITICAL))
            client = stack.enter_context(Client(cluster))
        else:
            _reachable(spec, timeout)
            try:
                client = stack.enter_context(Client(spec, timeout=f"{timeout:g}s"))
            except (OSError, TimeoutError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                raise NnlmError(f"cluster={spec}: no Dask scheduler answered within "
                                f"{timeout:g} s ({first[:160]})") from None
            except Exception as e:  # noqa: BLE001 - a handshake no scheduler would send
                raise NnlmError(f"cluster={spec}: something answered there, but not a Dask "
                                f"scheduler ({type(e).__name__} in the handshake); check "
                                "the address and port") from None
            if not client.scheduler_info().get("workers"):
                raise NnlmError(f"cluster={spec}: the scheduler has no workers; start some "
                                f"with: dask worker {spec}")
        yield client

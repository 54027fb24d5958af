"""The one harness every bench uses: timing in alternating rounds, medians and spread,
peak memory, and the JSON record of a run.

A machine's speed drifts (other work, thermal limits, a neighbour on shared cores), so
cases compared with each other run in alternating rounds (A B C, A B C, ...): a slow
spell falls on all of them alike. A case's number is the median of its rounds, given
with the fastest and the slowest and their spread; a ratio of two cases is the median
of the rounds' ratios, each measured side by side.

Every bench writes its results through :func:`write_record`, which adds what makes a
number reproducible: the command, the commit (and whether the tree was changed), the
date, the machine (CPU model and the flags nnlm's speed depends on: AVX2, AVX-512,
AVX-512 BF16, AMX), Python's and the libraries' versions, and the process's peak
memory. The results keep their own keys at the top level; the record is under
``"record"``.

    import harness
    times = harness.rounds({"nnlm": ours, "kenlm": theirs}, n=5)
    harness.write_record(args.out, {"nnlm_over_kenlm": harness.ratio(times, "nnlm",
                                                                      "kenlm")})
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CPU_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "fma")


def timed(fn: Callable[..., Any], *args, sync: Callable[[], Any] | None = None,
          **kwargs) -> tuple[Any, float]:
    """(what ``fn(*args, **kwargs)`` returns, the wall seconds it took); ``sync`` (a GPU's
    synchronize) is called at both ends, so that queued device work is counted."""
    if sync is not None:
        sync()
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    if sync is not None:
        sync()
    return out, time.perf_counter() - start


def best_of(repeats: int, fn: Callable[[], Any],
            sync: Callable[[], Any] | None = None) -> tuple[Any, float]:
    """(the last result, the fastest of ``repeats`` calls): for one case alone, where
    there is nothing to alternate with (a load, a fresh process)."""
    out, best = None, math.inf
    for _ in range(repeats):
        out, seconds = timed(fn, sync=sync)
        best = min(best, seconds)
    return out, best


def rate(fn: Callable[[], Any], seconds: float = 3.0,
         sync: Callable[[], Any] | None = None) -> float:
    """Calls a second of ``fn``, called for at least ``seconds`` (``sync``: as
    :func:`timed`, at both ends)."""
    if sync is not None:
        sync()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    if sync is not None:
        sync()
    return n / (time.perf_counter() - start)


@dataclass
class Timing:
    """One case's seconds, a value per round."""

    seconds: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def spread(self) -> float:
        """(slowest - fastest) / median: how far the rounds disagree."""
        return (max(self.seconds) - min(self.seconds)) / self.median if self.median else 0.0

    def summary(self, per: float = 1.0, unit: str = "seconds") -> dict:
        """The median, fastest and slowest round and their spread, each divided by
        ``per`` (calls, tokens) where a round did ``per`` of them."""
        return {f"median_{unit}": self.median / per, f"min_{unit}": min(self.seconds) / per,
                f"max_{unit}": max(self.seconds) / per, "spread": self.spread,
                "rounds": len(self.seconds)}


def rounds(cases: dict[str, Callable[[], Any]], n: int = 5,
           warmup: int = 1) -> dict[str, Timing]:
    """Each case's seconds over ``n`` alternating rounds (every case once a round, in
    turn), after ``warmup`` untimed rounds (caches, lazy indexes, compiled kernels)."""
    if n < 1:
        raise ValueError(f"rounds: n={n}, need at least 1")
    for _ in range(warmup):
        for fn in cases.values():
            fn()
    out = {name: Timing() for name in cases}
    for _ in range(n):
        for name, fn in cases.items():
            out[name].seconds.append(timed(fn)[1])
    return out


def ratio(times: dict[str, Timing], a: str, b: str) -> dict:
    """Case ``a``'s time over case ``b``'s: the median of the rounds' ratios (each pair
    measured side by side), with the lowest and highest."""
    each = [x / y for x, y in zip(times[a].seconds, times[b].seconds)]
    return {"median": statistics.median(each), "min": min(each), "max": max(each)}


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (the kernel's VmHWM; ru_maxrss where
    /proc is not there)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def machine() -> dict:
    """The CPU (model, the flags nnlm's speed depends on, cores this process may use),
    memory, and the versions of Python and of the libraries loaded."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
                    break
    except OSError:
        pass
    memory = None
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            memory = int(f.readline().split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else os.cpu_count()
    versions = {"python": platform.python_version()}
    for name in ("numpy", "torch", "nnlm", "kenlm"):
        module = sys.modules.get(name)
        if module is not None:
            versions[name] = getattr(module, "__version__", "installed")
    return {"cpu": model, "flags": [f for f in CPU_FLAGS if f in flags], "cores": cores,
            "memory_bytes": memory, "system": platform.system(), "versions": versions}


def commit() -> str:
    """The commit the bench ran at, with ``-dirty`` where tracked files were changed;
    "unknown" outside a git checkout."""
    try:
        done = subprocess.run(["git", "describe", "--always", "--dirty", "--abbrev=12"],
                              cwd=ROOT, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def record() -> dict:
    """What makes a run's numbers reproducible: command, commit, date, machine, peak
    memory."""
    return {"command": shlex.join(["python", *sys.argv]), "commit": commit(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "machine": machine(), "peak_rss_bytes": peak_rss_bytes()}


def write_record(path: str | os.PathLike, results: dict, indent: int = 1) -> dict:
    """``results`` with the run's :func:`record` under ``"record"``, written to ``path``
    atomically (a file beside it, then renamed over it); returns what was written."""
    path = Path(path)
    out = {**results, "record": record()}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(out, indent=indent) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    print(f"wrote {path}", file=sys.stderr)
    return out

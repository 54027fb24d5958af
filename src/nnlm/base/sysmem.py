"""Memory: how much the process may still take, sizes in words, and giving freed
memory back to the operating system.

Sizes. :func:`check_allocation` is called before any big allocation that a user's
setting or file decides (a network's parameters, an embedding table): it compares the
bytes with what this process can still have (:func:`available_memory`: the smallest of
the free memory, the cgroup's limit and the address-space limit) and refuses in one line
what cannot fit, instead of a traceback from the allocator or a kill.

Freeing.
glibc raises its mmap threshold each time a large block is freed (up to 32 MiB), so many
of the big temporary arrays of n-gram counting end up on the heap, where freed memory
stays with the process: a 50M-token KN5 estimation peaked at 4.6 GB, 1.7 GB of it
already freed. ``malloc_trim(0)`` hands such free pages back (with ``MADV_DONTNEED``,
inside the heap too). Long computations call :func:`release_free_memory` between stages;
it costs a few milliseconds, and where there is no glibc it does nothing.
"""

from __future__ import annotations

import functools
import os
import resource

from .errors import NnlmError

SIZE_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def human_size(n: float) -> str:
    """``n`` bytes as a size with a unit, as a user would write it: 1K, 100K, 1.5G."""
    for unit in ("T", "G", "M", "K"):
        if n >= SIZE_UNITS[unit]:
            value = n / SIZE_UNITS[unit]  # 1,000 to 1,023 of a unit: no exponent
            return f"{value:.3g}{unit}" if value < 1000 else f"{value:.0f}{unit}"
    return f"{int(n)} bytes"


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room() -> int | None:
    """What the cgroup (v2 or v1) still allows, where it sets a limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            with open(limit_file) as f:
                limit = f.read().strip()
            if limit == "max" or int(limit) >= 1 << 60:
                continue
            with open(usage_file) as f:
                usage = int(f.read().strip())
            return max(int(limit) - usage, 0)
        except (OSError, ValueError):
            continue
    return None


def available_memory() -> int | None:
    """Bytes this process can still allocate: the smallest of the machine's available
    memory, the cgroup's room and the address-space limit (RLIMIT_AS); None if unknown."""
    known = [x for x in (_meminfo_available(), _cgroup_room()) if x is not None]
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            known.append(max(soft - _rss_bytes(), 0))
    except (OSError, ValueError):
        pass
    return min(known) if known else None


def _rss_bytes() -> int:
    try:
        with open(f"/proc/{os.getpid()}/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def check_allocation(n_bytes: float, what: str, hint: str = "make it smaller") -> None:
    """Refuse, in one line naming ``what``, the sizes and what to do (``hint``), an
    allocation of ``n_bytes`` that this process cannot have (see :func:`available_memory`)."""
    room = available_memory()
    if room is not None and n_bytes > room:
        raise NnlmError(f"{what} needs {human_size(n_bytes)} of memory, but this process can "
                        f"have only {human_size(room)}; {hint}")


@functools.cache
def _libc():
    try:
        import ctypes
        import ctypes.util

        name = ctypes.util.find_library("c")
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "malloc_trim") else None
    except OSError:
        return None


def release_free_memory() -> bool:
    """``malloc_trim(0)``; True where glibc released something."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False

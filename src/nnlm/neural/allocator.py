"""Keep large freed blocks in the process heap, so |V|-wide buffers are reused.

Every training step and scoring batch allocates (B, |V|) buffers of several megabytes.
glibc serves blocks that large with a fresh ``mmap`` and gives them back with ``munmap``
on free, so the kernel maps and zeroes the pages again at each step: on this project's
2-core machine that cost about a quarter of mlp1's training time. Raising glibc's mmap
and trim thresholds (``mallopt``) keeps freed blocks for reuse, which is what PyTorch's
CPU tuning guides get from jemalloc or tcmalloc. Linux with glibc only; elsewhere, or
with ``NNLM_SYSTEM_MALLOC=1``, nothing changes.

The thresholds are bounded: blocks up to 64 MiB (mlp1's (256, |V|) float32 buffer is
14 MiB) stay in the heap, larger ones are mapped and unmapped as usual, and at most
128 MiB of free heap top is kept. Thresholds of 1 GiB (the first version) kept every
scoring block of a few hundred megabytes too, and a process that scored three Brown
models one after the other held 17 GB.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD = 64 << 20  # blocks up to this size are served from (and kept in) the heap
_state: dict[str, bool] = {}


def keep_freed_memory() -> bool:
    """Raise the thresholds once per process; True when they are in effect."""
    if "on" in _state:
        return _state["on"]
    on = False
    if sys.platform.startswith("linux") and not os.environ.get("NNLM_SYSTEM_MALLOC"):
        try:
            libc = ctypes.CDLL("libc.so.6")
            # glibc refuses thresholds above its heap limit: try 64 MiB, then its 32 MiB cap
            for limit in (MMAP_THRESHOLD, 32 << 20):
                if libc.mallopt(_M_MMAP_THRESHOLD, limit):
                    on = bool(libc.mallopt(_M_TRIM_THRESHOLD, 2 * limit))
                    break
        except (OSError, AttributeError):
            on = False
    _state["on"] = on
    return on

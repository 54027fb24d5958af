"""numba's on-disk cache, written by one process at a time.

nnlm's compiled kernels (the ARPA scanner, the run merge of counting, the optimizer
updates) are cached beside their modules (``cache=True``). Processes that start together
(torchrun ranks, Hogwild workers, parallel test runs) and find no cache all compile at
once and write the same index files, which numba does not guard against (numba issue
4807: one process can then read a half-written index and crash). :func:`first_call`
makes the first call of each kernel in a process, where numba compiles or loads it,
hold an exclusive file lock, so the others wait and then load what the first wrote.
Later calls go straight to the kernel. Where file locks are unavailable (not POSIX) it
only calls the kernel.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

LOCK_NAME = "nnlm-numba.lock"
_done: set = set()


def _lock_path() -> Path:
    """Beside the cache: NUMBA_CACHE_DIR, or the __pycache__ of nnlm's kernels."""
    root = os.environ.get("NUMBA_CACHE_DIR")
    folder = Path(root) if root else Path(__file__).parent / "__pycache__"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if os.access(folder, os.W_OK):
            return folder / LOCK_NAME
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / LOCK_NAME


@contextlib.contextmanager
def compile_lock():
    """An exclusive lock shared by every nnlm process on this machine's cache."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    try:
        handle = open(_lock_path(), "a+b")
    except OSError:  # a read-only install: numba does not write there either
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def first_call(kernel, *args):
    """``kernel(*args)``, under :func:`compile_lock` the first time in this process."""
    if kernel in _done:
        return kernel(*args)
    with compile_lock():
        out = kernel(*args)
    _done.add(kernel)
    return out

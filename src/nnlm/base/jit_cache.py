"""numba, where it is installed, and its on-disk cache, written by one process at a time.

numba is not part of nnlm's core: it comes with the ``neural``, ``distributed`` and
``fast`` extras. :data:`HAVE_NUMBA` says whether it is installed (without importing it);
a kernel module decorates with :func:`njit`, numba's where it is installed and a
stand-in that leaves the function as it is where not, so that the module imports and its
callers take their numpy path (:func:`nnlm.ngram.estimate.radix.radix_unique`,
:func:`nnlm.ngram.estimate.run_merge.merge_runs_parts`).

nnlm's numba kernels (the radix sort and the run merge of counting, the optimizer
updates, the distributed blocks) are cached beside their modules (``cache=True``).
Processes that start together (torchrun ranks, Hogwild workers, parallel test runs) and
find no cache all compile at once and write the same index files, which numba does not
guard against (numba issue 4807: one process can then read a half-written index and
crash). :func:`first_call`
makes the first call of each kernel in a process, where numba compiles or loads it,
hold an exclusive file lock, so the others wait and then load what the first wrote.
Later calls go straight to the kernel. Where file locks are unavailable (not POSIX) it
only calls the kernel.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import tempfile
from pathlib import Path


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a finder that refuses it; a module set to None
        return False


HAVE_NUMBA = _installed("numba")


def _plain(*args, **options):
    """numba.njit's stand-in: the function itself (numba is not installed)."""
    if len(args) == 1 and callable(args[0]) and not options:
        return args[0]
    return lambda function: function


def __getattr__(name: str):
    """``njit``, looked up by a kernel module only: numba loads (0.3 s) only then."""
    if name != "njit":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if HAVE_NUMBA:
        from numba import njit

        return njit
    return _plain


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

"""Where n-gram counting keeps its big intermediate arrays: in memory, or spilled to disk.

Counting (see :mod:`nnlm.ngram.estimate.counts`) holds two kinds of intermediates besides the
tables it returns: arrays with one entry per corpus position (each position's n-gram id,
each order's run entries end to end) and sorted runs, one per chunk of positions. Both are only ever
touched a chunk at a time, so under a memory limit (``--memory``, like lmplz's ``-S``)
they go to files in a temporary folder (lmplz's ``-T``) and only the chunk being worked
on is in memory. Without a limit they stay in memory, which is faster.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ...base.errors import NnlmError

MIN_MEMORY = 64 << 20  # below this, --memory cannot hold a useful chunk of counting


def _write_error(folder: Path, error: OSError) -> NnlmError:
    """One line for a failed write of a temporary file in ``folder``. numpy's ``tofile``
    reports a short write without an errno ("262144 requested and 16384 written"): a
    full disk, which the free space then shows."""
    cause = error.strerror
    if cause is None:
        free = shutil.disk_usage(folder).free
        cause = "no space left on device" if free < (64 << 20) else str(error)
    cause = cause[:1].lower() + cause[1:]
    return NnlmError(f"{folder}: cannot write counting's temporary files ({cause}); free "
                     "some space or give another folder with temp=DIR")


class PositionArray:
    """An integer array over corpus positions, read and written a block at a time: in
    memory, or in the file ``path``. Its entries are undefined until written (counting
    writes every block)."""

    def __init__(self, n: int, dtype, path: Path | None = None):
        self.n, self.dtype, self.path = n, np.dtype(dtype), path
        self.data = None
        if path is None:
            self.data = np.empty(n, self.dtype)
        else:
            self._file = open(path, "w+b")

    def read(self, a: int, b: int) -> np.ndarray:
        """Entries [a, b)."""
        if self.data is not None:
            return self.data[a:b]
        self._file.seek(a * self.dtype.itemsize)
        return np.fromfile(self._file, self.dtype, b - a)

    def view(self, a: int, b: int) -> np.ndarray:
        """Entries [a, b) without reading them in: the file mapped read-only, paged in as
        they are used (in memory: a slice). Valid until :meth:`close`."""
        if self.data is not None:
            return self.data[a:b]
        if b <= a:
            return np.empty(0, self.dtype)
        self._file.flush()
        return np.asarray(np.memmap(self.path, self.dtype, "r", a * self.dtype.itemsize,
                                    (b - a,)))

    def write(self, a: int, values: np.ndarray) -> None:
        """Set entries [a, a + len(values))."""
        if self.data is not None:
            self.data[a:a + len(values)] = values
            return
        self._file.seek(a * self.dtype.itemsize)
        try:
            np.ascontiguousarray(values, self.dtype).tofile(self._file)
            self._file.flush()
        except OSError as e:
            raise _write_error(self.path.parent, e) from None

    def close(self) -> None:
        """Free the array (delete its file)."""
        self.data = None
        if self.path is not None:
            self._file.close()
            self.path.unlink(missing_ok=True)


class Workspace:
    """Factory and owner of the intermediates: in memory (``folder=None``) or as files
    in a fresh temporary folder inside ``folder``, removed on :meth:`close`."""

    def __init__(self, folder: str | os.PathLike | None = None):
        self.dir: Path | None = None
        if folder is not None:
            if Path(folder).exists() and not Path(folder).is_dir():
                raise NnlmError(f"{folder}: is a file; temp= needs a folder for counting's "
                                "temporary files")
            try:
                self.dir = Path(tempfile.mkdtemp(prefix="nnlm-count-", dir=folder))
            except OSError as e:
                raise NnlmError(f"{folder}: cannot make a temporary folder for counting "
                                f"({e.strerror or e}); give another with temp=DIR") from None
        self._runs: dict[str, tuple] = {}  # handle -> arrays, or their files on disk
        self._count = 0

    def _path(self, name: str) -> Path | None:
        self._count += 1
        return None if self.dir is None else self.dir / f"{self._count}-{name}.npy"

    def positions(self, n: int, dtype, name: str) -> PositionArray:
        """A new position array (see :class:`PositionArray`)."""
        return PositionArray(n, dtype, self._path(name))

    def put(self, arrays: tuple[np.ndarray, ...]) -> str:
        """Keep a run (a tuple of arrays, one file each on disk); returns its handle."""
        self._count += 1
        key = str(self._count)
        if self.dir is None:
            self._runs[key] = arrays
        else:
            paths = tuple(self.dir / f"{key}-run-{i}.npy" for i in range(len(arrays)))
            try:
                for path, a in zip(paths, arrays):
                    np.save(path, a, allow_pickle=False)
            except OSError as e:
                raise _write_error(self.dir, e) from None
            self._runs[key] = paths
        return key

    def get(self, key: str, i: int) -> np.ndarray:
        """Array ``i`` of the run ``key`` (read from its file when on disk)."""
        stored = self._runs[key][i]
        return stored if self.dir is None else np.load(stored, allow_pickle=False)

    def drop(self, key: str) -> None:
        stored = self._runs.pop(key)
        if self.dir is not None:
            for path in stored:
                path.unlink(missing_ok=True)

    def close(self) -> None:
        self._runs.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

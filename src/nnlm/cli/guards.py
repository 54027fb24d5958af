"""The command line's guards on what a command writes: one nnlm process per output
(:func:`output_lock`), and no output that would replace one of the command's inputs
(:func:`check_distinct`). The writes themselves go through :mod:`nnlm.text.fileio`."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..base.errors import NnlmError
from ..text.fileio import TEMP_TAG, make_parent, os_error_message


@contextlib.contextmanager
def output_lock(path: str | os.PathLike) -> Iterator[None]:
    """Hold an exclusive lock on the output ``path`` while a command writes it, so a
    second nnlm process writing the same output stops with a clear error instead of
    silently replacing the first one's result."""
    path = Path(path)
    made = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    make_parent(path)
    try:
        yield from _locked(path)
    finally:  # folders made for an output that was never written go again (a failed
        for folder in made:  # prepare brown left an empty one); deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()  # only an empty one


def _locked(path: Path) -> Iterator[None]:
    lock = path.parent / f".{path.name}{TEMP_TAG}lock"
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise NnlmError(os_error_message(path, e, "cannot write")) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise NnlmError(f"{path}: another nnlm process (pid {holder}) is writing it; "
                            "wait for it to finish or choose another output") from None
        try:  # the lock file may have been unlinked by its last holder meanwhile
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock)
        os.close(fd)


def _resolved(p: Path) -> Path:
    return Path(os.path.realpath(p))


def check_distinct(inputs: Iterable, outputs: Iterable) -> None:
    """Refuse an output that would destroy an input: the same file (by any name), a
    folder holding the input, or a file inside an input model directory."""
    ins = [(Path(i), _resolved(Path(i))) for i in inputs if i is not None]
    outs = [Path(o) for o in outputs if o is not None]
    for a, b in ((a, b) for i, a in enumerate(outs) for b in outs[i + 1:]):
        if _resolved(a) == _resolved(b):
            raise NnlmError(f"{b}: given as two outputs; choose different paths")
    for out in (Path(o) for o in outputs if o is not None):
        ro = _resolved(out)
        for given, ri in ins:
            same = ro == ri or (out.exists() and given.exists() and os.path.samefile(out, given))
            if same:
                why = "is also an input"
            elif ro in ri.parents:
                why = f"is a folder holding the input {given}"
            elif ri in ro.parents and out.exists():
                why = f"lies inside the input {given}"
            else:
                continue
            raise NnlmError(f"{out}: this output {why}; writing it would destroy the input. "
                            "Choose another output path")

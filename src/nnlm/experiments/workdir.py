"""The working folder of ``nnlm demo`` and ``nnlm reproduce``: claimed with a marker, so
a mistyped ``--workdir`` never clobbers a folder of the user's own files."""

from __future__ import annotations

import os
from pathlib import Path

from ..base.errors import NnlmError
from ..text.fileio import atomic_write_text, make_parent


def claim_workdir(path: str | os.PathLike, owner: str, may_hold: tuple[str, ...] = ()) -> Path:
    """Make ``path`` a working folder of the command ``owner`` (``demo``, ``reproduce``).

    A folder that exists, holds anything, and was not made by that command is refused, so
    a mistyped ``--workdir`` never clobbers the user's files; a marker file records the
    owner for the next run, which may reuse and replace what it finds. ``may_hold``: names
    the user may have put there beforehand (``reproduce`` reuses a prepared ``data``).
    """
    path = Path(path)
    marker = path / f".nnlm-{owner}"
    if path.exists() and not path.is_dir():
        raise NnlmError(f"{path}: is a file; workdir= needs a folder")
    foreign = path.is_dir() and any(p.name not in may_hold for p in path.iterdir())
    if foreign and not marker.exists():
        raise NnlmError(f"{path}: exists and holds files that `nnlm {owner}` did not make; "
                        "choose a new or empty workdir= (to reuse a folder that an older nnlm "
                        f"made, create {marker})")
    make_parent(marker)
    if not marker.exists():
        atomic_write_text(marker, f"made by nnlm {owner}; the command may replace what "
                          "is in this folder\n")
    return path

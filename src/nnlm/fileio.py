"""Reading text files line by line with clear errors, and writing files atomically.

Text files are read as bytes in blocks of whole lines and decoded per block, so a
non-UTF-8 byte is reported with its line number while a large file never becomes one
Python string. Writes go to a temporary file in the same folder and are renamed into
place, so an interrupted write never leaves a half-written file behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .errors import NnlmError, where

BLOCK_BYTES = 1 << 22  # lines are read in blocks of about 4 MiB


def open_for_reading(path: str | os.PathLike):
    """Open ``path`` in binary mode, turning OS errors into one-line NnlmErrors."""
    path = Path(path)
    if path.is_dir():
        raise NnlmError(f"{path}: is a directory, expected a text file")
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise NnlmError(f"{path}: no such file") from None
    except PermissionError:
        raise NnlmError(f"{path}: permission denied") from None
    except OSError as e:
        raise NnlmError(f"{path}: cannot open ({e.strerror})") from None


def iter_line_blocks(path: str | os.PathLike) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first_line_number, lines)`` blocks of decoded lines (1-based numbers).

    Lines keep no line terminator. Raises NnlmError for a missing or empty file and for
    bytes that are not UTF-8, naming the line and column.
    """
    path = Path(path)
    with open_for_reading(path) as f:
        line_no = 1
        seen_any = False
        while True:
            raw_lines = f.readlines(BLOCK_BYTES)
            if not raw_lines:
                break
            seen_any = True
            block = b"".join(raw_lines)
            try:
                text = block.decode("utf-8")
            except UnicodeDecodeError as e:
                bad_line = line_no + block.count(b"\n", 0, e.start)
                line_start = block.rfind(b"\n", 0, e.start) + 1
                column = e.start - line_start + 1
                raise NnlmError(
                    f"{where(path, bad_line)}: not valid UTF-8 (byte 0x{block[e.start]:02x} "
                    f"at column {column}); convert the file to UTF-8, e.g. with iconv"
                ) from None
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
            yield line_no, [line.rstrip("\r") for line in lines]
            line_no += len(lines)
        if not seen_any:
            raise NnlmError(f"{path}: file is empty")


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed onto ``path``.

    Works for files and for directories (a directory replaces the old one whole).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    target = tmp / "payload"
    try:
        yield target
        if path.is_dir() and target.is_dir():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=path.parent))
            os.replace(path, old / "payload")
            os.replace(target, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(target, path)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)

"""Every file nnlm reads or writes goes through here: one reader, one atomic writer.

Reading. Text is read as bytes in blocks of whole lines and decoded per block, so a bad
byte is reported with its line number while a large file never becomes one Python
string. One rule for every command: a UTF-8 byte-order mark is dropped, ``\\r\\n`` and a
lone ``\\r`` end a line like ``\\n``, and a NUL byte is an error (a binary file). Files
compressed with gzip, bzip2, xz or zstd (with the optional zstandard package) are read
through (recognized by their first bytes, whatever their name), and ``-`` is standard
input (kept in a temporary file on first use, so commands that read their input twice
can).

Writing. :func:`atomic_path` is the one way anything is written: the payload (a file or
a whole directory) is built under a hidden temporary name in the target's folder, given
the permissions of the user's umask, and then swapped into place in one step, so a kill,
a full disk or a permission error leaves the old output whole, never a half-written or
missing one. Temporaries left by killed processes are swept by the next write beside
them. The command line's guards on outputs (a lock per output, outputs that may not
replace inputs) are in :mod:`nnlm.cli.guards`.
"""

from __future__ import annotations

import bz2
import contextlib
import ctypes
import ctypes.util
import errno
import gzip
import io
import lzma
import os
import re
import shutil
import sys
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ..base.errors import NnlmError, where

BLOCK_BYTES = 1 << 18  # lines are read in blocks of about 256 KiB: a block's tokens are
# Python strings for a moment (~10x the bytes). Encoding bench/ngram/store.py's 985k-token test
# text peaked 18 MB lower than at 1 MiB (68 MB against 86, the process with a 10M-token
# model), at 0-5% of read_corpus's speed on 10M tokens; 64 KiB ran 40% slower
MAX_LINE_BYTES = 1 << 26  # 64 MiB: a longer "line" is no text (/dev/zero, a binary file)
STDIN_NAME = "<stdin>"
BOM = "\ufeff"


# -- reading ---------------------------------------------------------------------------
def os_error_message(path, error: OSError, doing: str = "cannot open") -> str:
    """One line for an OS error on ``path``: ``PATH: cannot open (permission denied)``."""
    cause = error.strerror or str(error) or type(error).__name__
    return f"{path}: {doing} ({cause[:1].lower() + cause[1:]})"


COMPRESSED = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz",
              b"\x28\xb5\x2f\xfd": "zstd"}
STDIN = "-"
_stdin_copy = None  # standard input, spooled to a temporary file on first use


def stdin_binary() -> BinaryIO:
    """Standard input as bytes; a clear error when the process was started with it closed
    (``<&-``), where Python has no ``sys.stdin`` at all."""
    if sys.stdin is None or not hasattr(sys.stdin, "buffer"):
        raise NnlmError("standard input is closed, so there is no text to read; give a FILE "
                        "or pipe text in")
    return sys.stdin.buffer


def _stdin_file():
    global _stdin_copy
    source = stdin_binary()
    if _stdin_copy is None or _stdin_copy[0] is not source:
        copy = tempfile.TemporaryFile()
        shutil.copyfileobj(source, copy, 1 << 20)
        _stdin_copy = (source, copy)
    copy = _stdin_copy[1]
    copy.seek(0)
    return open(os.dup(copy.fileno()), "rb")


def compression_of(head: bytes) -> str | None:
    """``gzip``, ``bzip2``, ``xz`` or None, from a file's first bytes."""
    return next((name for magic, name in COMPRESSED.items() if head.startswith(magic)), None)


def _zstandard():
    """The zstandard module (optional: the ``filter`` extra), or one line saying so."""
    try:
        import zstandard  # optional: only .zst files need it
    except ImportError:
        raise NnlmError("reading or writing .zst files needs the zstandard package: pip "
                        "install \"nnlm[filter]\" (or zstandard)") from None
    return zstandard


class _ZstdReader(io.RawIOBase):
    """``raw``'s zstd frames decompressed, one after another; a frame cut short is a
    ValueError at the end (zstandard's own stream reader ends there silently)."""

    def __init__(self, raw: BinaryIO):
        self.raw, self.module = raw, _zstandard()
        self.frame, self.buffer = None, b""  # the frame being read (None: between frames)

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.buffer) < size:
            chunk = self.raw.read(1 << 17)
            if not chunk:
                if self.frame is not None:
                    raise ValueError("a zstd frame cut short (a truncated file)")
                break
            while chunk:
                if self.frame is None:
                    self.frame = self.module.ZstdDecompressor().decompressobj()
                self.buffer += self.frame.decompress(chunk)
                chunk = b""
                if self.frame.eof:  # what follows is the next frame
                    chunk, self.frame = self.frame.unused_data, None
        if size < 0:
            out, self.buffer = self.buffer, b""
        else:
            out, self.buffer = self.buffer[:size], self.buffer[size:]
        return out

    def close(self) -> None:
        self.raw.close()
        super().close()


def _decompressing(raw: BinaryIO, kind: str) -> BinaryIO:
    """A reader of ``raw``'s decompressed bytes that closes ``raw`` when closed."""
    if kind == "zstd":
        return _ZstdReader(raw)
    if kind == "gzip":
        f = gzip.GzipFile(fileobj=raw, mode="rb")
        f.myfileobj = raw  # GzipFile closes this one on close()
    else:
        f = (bz2.BZ2File if kind == "bzip2" else lzma.LZMAFile)(raw)
        f._closefp = True  # as when opened by name: close() closes raw
    return f


def open_for_reading(path: str | os.PathLike) -> BinaryIO:
    """Open ``path`` (``-``: standard input) in binary mode, decompressing gzip, bzip2 and
    xz; OS errors become one-line NnlmErrors."""
    if str(path) == STDIN:
        raw = _stdin_file()
    else:
        path = Path(path)
        if path.is_dir():
            raise NnlmError(f"{path}: is a directory, expected a text file")
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise NnlmError(f"{path}: no such file") from None
        except OSError as e:
            raise NnlmError(os_error_message(path, e)) from None
    kind = compression_of(raw.peek(8)[:8] if hasattr(raw, "peek") else b"")
    return _decompressing(raw, kind) if kind else raw


def read_head(path: str | os.PathLike, size: int = 4096) -> bytes:
    """The first ``size`` bytes of ``path``'s content (decompressed), b"" if unreadable."""
    try:
        with open_for_reading(path) as f:
            return f.read(size)
    except (NnlmError, OSError, EOFError):
        return b""


def decode_block(block: bytes, name, first_line: int) -> list[str]:
    """The lines of ``block`` (whole lines of a file starting at ``first_line``), decoded.

    Raises NnlmError naming the line and column of a byte that is not UTF-8 or of a NUL.
    """
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as e:
        before = block[:e.start]  # its lines end at \n, \r\n or \r
        bad_line = first_line + line_ends(before)
        column = e.start - max(before.rfind(b"\n"), before.rfind(b"\r"))
        raise NnlmError(
            f"{where(name, bad_line)}: not valid UTF-8 (byte 0x{block[e.start]:02x} at column "
            f"{column}); convert the file to UTF-8, e.g. with iconv") from None
    if first_line == 1 and text.startswith(BOM):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in text:
        at = text.index("\x00")
        raise NnlmError(f"{where(name, first_line + text.count(chr(10), 0, at))}: NUL byte; "
                        "is this a binary file? nnlm reads UTF-8 text")
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def read_block(f, size: int, name, line: int) -> bytes:
    """``f.read(size)``, where a compressed file's damage is one line naming the file and
    the line it was read up to (gzip, bzip2, xz and zstd raise six different errors)."""
    try:
        data = f.read(size)
    except (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error) as e:
        raise NnlmError(f"{name}: corrupt or truncated compressed file around line {line} "
                        f"({str(e) or type(e).__name__})") from None
    except Exception as e:  # zstandard's ZstdError, without importing zstandard here
        if type(e).__name__ != "ZstdError":
            raise
        raise NnlmError(f"{name}: corrupt zstd file around line {line} ({e})") from None
    return data


def source_name(source, name: str | None = None) -> str:
    """What errors call ``source``: ``name``, its path, or ``<stdin>``."""
    if name:
        return name
    if isinstance(source, (str, os.PathLike)):
        return STDIN_NAME if str(source) == STDIN else str(source)
    return STDIN_NAME


def lines_in(block: bytes) -> int:
    """The lines of a block of whole lines, as :func:`decode_block` splits them (a line
    ends at \\n, \\r\\n or \\r; the last one may have no end)."""
    return line_ends(block) + (not block.endswith((b"\n", b"\r")))


def line_ends(block: bytes) -> int:
    """How many \\n, \\r\\n and lone \\r ``block`` holds."""
    ends = block.count(b"\n")
    if b"\r" in block:
        ends += block.count(b"\r") - block.count(b"\r\n")
    return ends


def iter_byte_blocks(source: str | os.PathLike | BinaryIO, name: str | None = None,
                     allow_empty: bool = False) -> Iterator[tuple[int, bytes]]:
    """Yield ``(first_line_number, block)``: blocks of whole lines, undecoded, as
    :func:`iter_line_blocks` decodes them (the same checks of the file, a NUL or a line
    too long for text; the bytes themselves are checked by whoever decodes them)."""
    is_path = isinstance(source, (str, os.PathLike))
    name = source_name(source, name)
    with open_for_reading(source) if is_path else contextlib.nullcontext(source) as f:
        line_no = 1
        seen_any = False
        pending = b""  # the start of a line whose end is not read yet
        while True:
            chunk = read_block(f, BLOCK_BYTES, name, line_no)
            data = pending + chunk
            if not data:
                break
            seen_any = True
            # cut after the last line end; a \r at the very end may be half of a \r\n
            cut = max(data.rfind(b"\n"), data.rfind(b"\r", 0, len(data) - bool(chunk))) + 1
            if not chunk:
                cut = len(data)  # end of file: the last line needs no line end
            if cut == 0:
                pending = data
                if b"\x00" in pending:
                    decode_block(pending, name, line_no)  # raises: a NUL byte, with its line
                if len(pending) > MAX_LINE_BYTES:
                    raise NnlmError(f"{where(name, line_no)}: a line longer than "
                                    f"{MAX_LINE_BYTES >> 20} MiB; is this a text file? nnlm "
                                    "reads one sentence a line")
                continue
            block, pending = data[:cut], data[cut:]
            yield line_no, block
            line_no += lines_in(block)
            if not chunk:
                break
        if not seen_any and is_path and str(source) != STDIN and not allow_empty:
            raise NnlmError(f"{name}: file is empty")


def iter_line_blocks(source: str | os.PathLike | BinaryIO, name: str | None = None,
                     allow_empty: bool = False) -> Iterator[tuple[int, list[str]]]:
    """Yield ``(first_line_number, lines)`` blocks of decoded lines (1-based numbers).

    ``source`` is a path or an open binary file (such as ``sys.stdin.buffer``; ``name``
    then names it in errors). Lines keep no line terminator. Raises NnlmError for a
    missing or empty file (unless ``allow_empty``) and for bad bytes, naming the line
    and column.
    """
    name = source_name(source, name)
    for line_no, block in iter_byte_blocks(source, name, allow_empty):
        yield line_no, decode_block(block, name, line_no)


def iter_lines(source, name: str | None = None, allow_empty: bool = False) -> Iterator[str]:
    """The decoded lines of ``source`` (see :func:`iter_line_blocks`), one at a time."""
    for _, block in iter_line_blocks(source, name, allow_empty):
        yield from block


# -- writing ---------------------------------------------------------------------------
def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _apply_umask(payload: Path) -> None:
    """Give the payload the permissions a plain ``open``/``mkdir`` would have: some
    writers (safetensors, ``mkdtemp``) create files 0600, which hides a model from the
    user's group."""
    mask = _umask()
    if payload.is_dir():
        os.chmod(payload, 0o777 & ~mask)
        for root, dirs, files in os.walk(payload):
            for d in dirs:
                os.chmod(os.path.join(root, d), 0o777 & ~mask)
            for f in files:
                os.chmod(os.path.join(root, f), 0o666 & ~mask)
    else:
        os.chmod(payload, 0o666 & ~mask)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Swap ``a`` and ``b`` in one step (Linux renameat2); False where unsupported."""
    libc_name = ctypes.util.find_library("c")
    if not libc_name:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(b))


TEMP_TAG = ".nnlm-"  # hidden temporaries: .NAME.nnlm-PID-XXXX.tmp (and .old)
_TEMP_RE = re.compile(r"^\..*\.nnlm-(\d+)-[^/]*\.(tmp|old)$")
TEMP_NAME = re.compile(r"^\..*\.nnlm-(\d+-[^/]*\.(tmp|old)|lock)$")  # any of ours


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_temporaries(folder: Path) -> None:
    """Remove the temporaries that killed nnlm processes left in ``folder``."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        m = _TEMP_RE.match(entry.name)
        if m and int(m.group(1)) != os.getpid() and not _alive(int(m.group(1))):
            shutil.rmtree(entry.path, ignore_errors=True)


def make_parent(path: Path) -> None:
    parent = path.parent
    for p in (parent, *parent.parents):
        if p.exists() and not p.is_dir():
            raise NnlmError(f"{path}: cannot write, {p} is a file, not a folder")
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise NnlmError(os_error_message(parent, e, "cannot create folder")) from None


_STAGED: dict[Path, Path] = {}  # temporary payload -> the path it will replace


def public_path(path) -> Path:
    """``path`` as the user knows it: a path inside a temporary payload is shown as the
    output it will become (errors never name hidden temporaries)."""
    path = Path(path)
    for payload, final in list(_STAGED.items())[::-1]:
        if path == payload or payload in path.parents:
            return public_path(final / path.relative_to(payload))
    return path


class _Staged:
    """One output being written: a hidden temporary beside ``path`` (``target``), then
    :meth:`finish` (permissions) and :meth:`commit` (the one-step swap), or
    :meth:`discard`."""

    def __init__(self, path: Path):
        self.path = path
        make_parent(path)
        sweep_temporaries(path.parent)
        self.prefix = f".{path.name}{TEMP_TAG}{os.getpid()}-"
        try:
            self.tmp = Path(tempfile.mkdtemp(prefix=self.prefix, suffix=".tmp", dir=path.parent))
        except OSError as e:
            raise NnlmError(os_error_message(public_path(path), e, "cannot write")) from None
        self.target = self.tmp / "payload"
        _STAGED[self.target] = path

    def finish(self) -> None:
        _apply_umask(self.target)
        if self.target.is_dir() and self.path.exists() and not self.path.is_dir():
            raise NnlmError(f"{public_path(self.path)}: is a file; a model directory cannot "
                            "replace it")
        if not self.target.is_dir() and self.path.is_dir():
            raise NnlmError(f"{public_path(self.path)}: is a directory; give a file name")

    def commit(self) -> None:
        target, path = self.target, self.path
        if not (target.is_dir() and path.exists()):
            os.replace(target, path)
        elif not _exchange(target, path):  # the old directory now lies in the temporary
            old = Path(tempfile.mkdtemp(prefix=self.prefix, suffix=".old", dir=path.parent))
            os.replace(path, old / "payload")  # no atomic swap here: two renames
            os.replace(target, path)
            shutil.rmtree(old, ignore_errors=True)

    def discard(self) -> None:
        _STAGED.pop(self.target, None)
        shutil.rmtree(self.tmp, ignore_errors=True)


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path`` in one step.

    Works for files and for directories (a directory replaces the old one whole, by an
    atomic exchange where the OS offers one). On any failure (an exception in the body,
    an OS error, a kill) ``path`` keeps its old content and the temporary is removed (or
    swept by a later write). OS errors become one-line NnlmErrors naming ``path`` (or the
    file inside it), never the temporary.
    """
    staged = _Staged(Path(path))
    try:
        yield staged.target
        staged.finish()
        staged.commit()
    except OSError as e:
        where_ = public_path(e.filename) if e.filename else public_path(staged.path)
        raise NnlmError(os_error_message(where_, e, "cannot write")) from None
    finally:
        staged.discard()


def open_text_for_writing(tmp: Path, final: str | os.PathLike):
    """A UTF-8 text stream onto ``tmp``, compressed as ``final``'s suffix asks (.gz, .bz2,
    .xz, .zst; anything else: plain)."""
    suffix = Path(final).suffix.lower()
    if suffix == ".zst":
        return io.TextIOWrapper(open_binary_for_writing(tmp, final), encoding="utf-8",
                                newline="\n")
    if suffix == ".gz":
        return gzip.open(tmp, "wt", encoding="utf-8", newline="\n", compresslevel=6)
    if suffix == ".bz2":
        return bz2.open(tmp, "wt", encoding="utf-8", newline="\n")
    if suffix == ".xz":
        return lzma.open(tmp, "wt", encoding="utf-8", newline="\n")
    return open(tmp, "w", encoding="utf-8", newline="\n")


def open_binary_for_writing(tmp: Path, final: str | os.PathLike) -> BinaryIO:
    """A byte stream onto ``tmp``, compressed as ``final``'s suffix asks (.gz, .bz2, .xz,
    .zst; anything else: plain)."""
    suffix = Path(final).suffix.lower()
    if suffix == ".zst":
        return _zstandard().ZstdCompressor(level=3).stream_writer(open(tmp, "wb"),
                                                                   closefd=True)
    if suffix == ".gz":
        return gzip.open(tmp, "wb", compresslevel=6)
    if suffix == ".bz2":
        return bz2.open(tmp, "wb")
    if suffix == ".xz":
        return lzma.open(tmp, "wb")
    return open(tmp, "wb")


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)


def atomic_write_texts(files: dict[Path, str]) -> None:
    """Write several text files so that either all are replaced or (on an error while
    writing, such as a full disk) none is: every file is written and finished before any
    is renamed into place."""
    staged: list[_Staged] = []
    try:
        for path, text in files.items():
            staged.append(_Staged(Path(path)))
            with open(staged[-1].target, "w", encoding="utf-8", newline="\n") as f:
                f.write(text)
        for s in staged:
            s.finish()
        for s in staged:
            s.commit()
    except OSError as e:
        where_ = public_path(e.filename) if e.filename else (staged[-1].path if staged else "")
        raise NnlmError(os_error_message(where_, e, "cannot write")) from None
    finally:
        for s in staged:
            s.discard()

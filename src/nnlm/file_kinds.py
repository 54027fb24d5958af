"""What a command's file output may replace: a file of the kind it writes, nothing else.

A user's ``notes.txt`` given by mistake as ``-o`` (or ``--arpa``) must not be lost. So a
file output replaces an existing file only when that file is of the kind the command
writes, recognized by its first bytes (decompressed): an ARPA file (``\\data\\``), a
NumPy array (``embed``), a PNG that nnlm drew (its ``Software`` text says nnlm), a word
clustering (``<unk>``, ``<s>``, ``</s>`` in classes 0, 1, 2), an n-best list (Moses' or
the tab form), a one-file model (nnlm's or KenLM's binary). Anything else, or a folder,
is one line and nothing written, unless the command was given ``--force`` (a file; a
folder is never replaced by a file). Model directories have their own rule
(:func:`nnlm.model_files.check_model_output`).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from .base import magic
from .base.errors import NnlmError
from .plots import PNG_SOFTWARE
from .text.fileio import read_head

ARPA_SUFFIXES = (".arpa", ".gz", ".bz2", ".xz")
FILE_SUFFIXES = (".nnlm", ".bin", ".binary")  # one file: what KenLM's clients copy around


def is_arpa_name(path: str | os.PathLike) -> bool:
    """Whether a target's name asks for an ARPA file (model.arpa, model.arpa.gz, lm.xz;
    not en.arpa.bin, cc_net's name for a KenLM binary)."""
    return Path(path).suffix in ARPA_SUFFIXES


def is_file_name(path: str | os.PathLike) -> bool:
    """Whether a target's name asks for a one-file model (lm.nnlm, lm.bin, lm.binary)."""
    return Path(path).suffix in FILE_SUFFIXES


CLASSES_HEAD = b"<unk>\t0\n<s>\t1\n</s>\t2\n"  # nnlm.ngram.estimate.classes.save_classes
_MOSES = re.compile(rb"^\S+ \|\|\| .* \|\|\| .* \|\|\| \S+\r?$")
_TABBED = re.compile(rb"^[^\t\n]+\t[-+0-9.eEinfaINFA]+\t[^\n]*$")


def _arpa(head: bytes) -> bool:
    return b"\\data\\" in (line.strip() for line in head.splitlines()[:50])


def _png(head: bytes) -> bool:
    return head.startswith(magic.PNG) and b"Software\x00" + PNG_SOFTWARE.encode() in head


def _nbest(head: bytes) -> bool:
    first = head.split(b"\n", 1)[0]
    return bool(_MOSES.match(first) or _TABBED.match(first))


def _model_file(head: bytes) -> bool:
    return head.startswith((magic.NNLM_TRIE, magic.KENLM_BINARY))


# kind -> (what the message calls it, whether a file's first bytes are of that kind)
KINDS = {
    "arpa": ("an ARPA file", _arpa),
    "npy": ("a NumPy array (.npy)", lambda head: head.startswith(magic.NPY)),
    "png": ("a PNG nnlm drew", _png),
    "classes": ("a word clustering nnlm wrote", lambda head: head.startswith(CLASSES_HEAD)),
    "nbest": ("an n-best list", _nbest),
    "model-file": ("a model file nnlm or KenLM wrote", _model_file),
}


def check_file_output(path: str | os.PathLike, kind: str, force: bool = False) -> None:
    """Refuse to let a file output of ``kind`` replace anything but a file of that kind
    (or, with ``force``, any file): one line naming the path, before any work is done."""
    path = Path(path)
    name, recognize = KINDS[kind]
    if path.is_dir():
        raise NnlmError(f"{path}: is a directory; a file written here would replace it whole. "
                        "Choose another output")
    if force or not path.exists():
        return
    if not path.is_file():
        raise NnlmError(f"{path}: exists and is not a regular file; choose another output")
    if not recognize(read_head(path, 4096)):
        raise NnlmError(f"{path}: exists and is not {name}; replacing it would lose it. "
                        "Choose another output, or give --force to replace it")

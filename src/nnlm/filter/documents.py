"""Documents in and out of a filter: JSON Lines records (plain, gzip, bzip2, xz, zstd) or
plain text, one document a line or documents separated by blank lines.

Reading yields each document with where it came from (file and line), its record (JSON
Lines) and its text; a line that is not a JSON object, a record without the text field
or with a text that is not a string is one line naming the file and line (stop, or
skip and count, as the caller asks), never a document silently dropped. Writing adds
the fields to each record in the order read and keeps every other field as it was.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import orjson

from ..base.errors import NnlmError, where
from ..text.fileio import iter_line_blocks, read_head
from . import parquet

FORMATS = ("auto", "jsonl", "parquet", "lines", "paragraphs")
JSONL_SUFFIXES = (".jsonl", ".json", ".ndjson")
COMPRESSED = (".gz", ".bz2", ".xz", ".zst")  # what a name may end in after its format


class Document(NamedTuple):
    """One document: its first line in its file, its record (None for plain text) and
    its text."""

    line: int
    record: dict | None
    text: str


class BadRecord(NnlmError):
    """A record that cannot be read as a document (the message names file and line)."""


def bad_record(message: str, errors: list[str] | None) -> None:
    """Stop on a bad record (``errors`` None: :class:`BadRecord`), or count it."""
    if errors is None:
        raise BadRecord(message)
    errors.append(message)


def format_of(path: str | os.PathLike, fmt: str = "auto") -> str:
    """``fmt``, or for ``auto`` what the file holds: JSON Lines where its name says so
    (.jsonl, .json, .ndjson, compressed or not) or its first character is ``{``, Parquet
    where its name or first bytes say so, else one document a line."""
    if fmt != "auto":
        return fmt
    name = Path(path).name.lower()
    for compressed in COMPRESSED:
        name = name.removesuffix(compressed)
    if name.endswith(JSONL_SUFFIXES):
        return "jsonl"
    if name.endswith(".parquet") or read_head(path, 4) == b"PAR1":
        return "parquet"
    return "jsonl" if read_head(path, 256).lstrip()[:1] == b"{" else "lines"


def read_documents(path: str | os.PathLike, fmt: str = "auto", text_field: str = "text",
                   errors: list[str] | None = None) -> Iterator[Document]:
    """The documents of ``path`` in order (module docstring). ``errors``: None to stop
    at the first bad record (:class:`BadRecord`); a list to skip bad records, each
    message appended to it."""
    fmt = format_of(path, fmt)
    if fmt == "jsonl":
        yield from _records(path, text_field, errors)
    elif fmt == "parquet":  # its rows' texts (the job writes Parquet back column-wise)
        source, _ = parquet.open_parquet(path, text_field)
        for first, _, texts in parquet.batches(source, text_field):
            for i, text in enumerate(texts):
                if text is None:
                    bad_record(f"{path}: row {first + i}: the text is null", errors)
                else:
                    yield Document(first + i, None, text)
    elif fmt == "lines":
        for first, lines in iter_line_blocks(path, allow_empty=True):
            for i, text in enumerate(lines):
                yield Document(first + i, None, text)
    else:
        yield from _paragraphs(path)


def _records(path, text_field: str, errors: list[str] | None) -> Iterator[Document]:
    for first, lines in iter_line_blocks(path, allow_empty=True):
        for i, line in enumerate(lines):
            if not line.strip():
                continue  # a blank line between records holds none
            problem, record = None, None
            try:
                record = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                problem = f"not a JSON object ({e})"
            if problem is None:
                if not isinstance(record, dict):
                    problem = f"a JSON {type(record).__name__}, not an object"
                elif text_field not in record:
                    problem = f"no field {text_field!r} (fields: {', '.join(list(record)[:8])})"
                elif not isinstance(record[text_field], str):
                    kind = {int: "a number", float: "a number", bool: "a boolean",
                            list: "a list", dict: "an object"}.get(type(record[text_field]),
                                                                    "null")
                    problem = f"field {text_field!r} is {kind}, not a string"
            if problem is None:
                yield Document(first + i, record, record[text_field])
                continue
            bad_record(f"{where(path, first + i)}: {problem}", errors)


def _paragraphs(path) -> Iterator[Document]:
    """Documents separated by blank lines (lines of whitespace only); a document's lines
    are joined with ``\\n``."""
    start, lines = 0, []
    for first, block in iter_line_blocks(path, allow_empty=True):
        for i, line in enumerate(block):
            if line.strip():
                if not lines:
                    start = first + i
                lines.append(line)
            elif lines:
                yield Document(start, None, "\n".join(lines))
                lines = []
    if lines:
        yield Document(start, None, "\n".join(lines))


def record_line(doc: Document, fields: dict, text_field: str = "text") -> bytes:
    """One output line (with its newline): the document's record with ``fields`` added
    (plain text becomes a record of ``text_field`` and the fields)."""
    record = {text_field: doc.text} if doc.record is None else doc.record
    return orjson.dumps({**record, **fields}) + b"\n"

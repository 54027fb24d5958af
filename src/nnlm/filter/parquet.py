"""Parquet in and out of a filter (pyarrow, the ``filter`` extra): the input's record
batches read in order, each written back with ``perplexity`` (float64) and ``bucket``
(string) columns appended, the input's schema and every other column kept as they are.

A file that is not Parquet, or whose text column is missing or not strings, is one line
naming it; a null or empty text is a bad record named by file and row (1-based), which
stops the run or, skipped, is left out and counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..base.errors import NnlmError

ROWS = 512  # rows read and scored at a time
ADDED = ("perplexity", "bucket", "ratio")  # the columns a filter writes


def _pyarrow():
    try:
        import pyarrow  # optional: only Parquet files need it
        import pyarrow.parquet
    except ImportError:
        raise NnlmError("Parquet files need the pyarrow package: pip install "
                        '"nnlm[filter]" (or pyarrow)') from None
    return pyarrow, pyarrow.parquet


def open_parquet(path: str | os.PathLike, text_field: str, with_ratio: bool = False):
    """The ParquetFile and its output schema (perplexity, bucket and, ``with_ratio``,
    ratio appended), checked."""
    pa, pq = _pyarrow()
    try:
        source = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as e:
        raise NnlmError(f"{path}: not a Parquet file ({e})") from None
    schema = source.schema_arrow
    if text_field not in schema.names:
        raise NnlmError(f"{path}: no column {text_field!r} (columns: "
                        f"{', '.join(schema.names[:12])})")
    kind = schema.field(text_field).type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        raise NnlmError(f"{path}: column {text_field!r} holds {kind}, not strings")
    for name in ADDED:
        if name in schema.names:
            schema = schema.remove(schema.get_field_index(name))
    schema = schema.append(pa.field("perplexity", pa.float64())).append(
        pa.field("bucket", pa.string()))
    if with_ratio:
        schema = schema.append(pa.field("ratio", pa.float64()))
    return source, schema


def batches(source, text_field: str) -> Iterator[tuple[int, object, list]]:
    """(first row, record batch, its texts) in order."""
    row = 1
    for batch in source.iter_batches(batch_size=ROWS):
        yield row, batch, batch.column(text_field).to_pylist()
        row += batch.num_rows


def with_columns(batch, schema, perplexities: list, buckets: list, ratios: list | None):
    """The batch as a table of ``schema``: perplexity, bucket and (given) ratio appended,
    replacing any of those names it had."""
    pa, _ = _pyarrow()
    table = pa.Table.from_batches([batch])
    for name in ADDED:
        if name in table.column_names:
            table = table.drop_columns([name])
    table = table.append_column("perplexity", pa.array(perplexities, pa.float64()))
    table = table.append_column("bucket", pa.array(buckets, pa.string()))
    if ratios is not None:
        table = table.append_column("ratio", pa.array(ratios, pa.float64()))
    return table.cast(schema)


def writer(path: str | os.PathLike, schema):
    """A ParquetWriter onto ``path``."""
    _, pq = _pyarrow()
    return pq.ParquetWriter(str(path), schema)


def select(table, rows: list[int]):
    """The table's rows at ``rows``, in order."""
    pa, _ = _pyarrow()
    return table.take(pa.array(rows, pa.int64()))

"""``nnlm filter score``'s work on one input: its documents scored, each record written
out with its ``perplexity`` and ``bucket`` (to one output file, or one a bucket with
``split``), those filtered out counted (:class:`Tally`); a run over many is
:mod:`.run`.

Each output is written under a temporary name and renamed when its input is done, so a
killed run leaves finished files whole and no half-written one. A bad record (a line
that is not a JSON object, no text field, a text that is not a string, an empty
document) stops the run naming file and line, or with ``on_error="skip"`` is left out
and counted with its message.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from ..base.errors import where
from ..text.fileio import atomic_path, open_binary_for_writing
from . import parquet
from .buckets import BUCKETS, NO_BUCKET, Cutoffs, Histogram
from .documents import (
    COMPRESSED,
    Document,
    bad_record,
    format_of,
    read_documents,
    record_line,
)
from .perplexity import DocumentScorer, perplexity, ratio

BATCH = 512  # documents normalized and cut into pieces together


class Settings(NamedTuple):
    """How documents are read, scored, kept and written (``nnlm filter score``'s flags)."""

    fmt: str = "auto"
    text_field: str = "text"
    digits: int | None = 1          # the perplexity rounded as cc_net and DataTrove do
    cutoffs: Cutoffs | None = None  # buckets; None: every document's is "all"
    keep: frozenset | None = None   # buckets written (None: every one)
    max_perplexity: float | None = None
    max_ratio: float | None = None  # with a bad model: ln ppl_good - ln ppl_bad at most
    split: bool = False             # one output a bucket
    on_error: str = "stop"          # or "skip"


class Tally:
    """What a run did: documents read, kept, filtered, bad; tokens scored; buckets."""

    def __init__(self):
        self.documents = self.kept = self.filtered = self.tokens = 0
        self.buckets: Counter = Counter()
        self.errors: list[str] = []
        self.histogram = Histogram()
        self.started = time.monotonic()

    def summary(self) -> dict:
        seconds = time.monotonic() - self.started
        return {"documents": self.documents, "kept": self.kept, "filtered": self.filtered,
                "bad_records": len(self.errors), "tokens": self.tokens,
                "seconds": round(seconds, 3),
                "tokens_per_second": round(self.tokens / seconds) if seconds else None,
                "buckets": {b: self.buckets[b] for b in (*BUCKETS, NO_BUCKET)
                            if self.buckets[b]},
                "errors": self.errors[:20]}

    def result(self) -> dict:
        """What one input counted (JSON-ready: a finished input's record)."""
        return {"documents": self.documents, "kept": self.kept, "filtered": self.filtered,
                "tokens": self.tokens, "buckets": dict(self.buckets), "errors": self.errors,
                "histogram": self.histogram.counts.tolist()}

    def absorb(self, result: dict) -> None:
        """Add one input's counts (:meth:`result`) to this run's."""
        for name in ("documents", "kept", "filtered", "tokens"):
            setattr(self, name, getattr(self, name) + int(result[name]))
        self.buckets.update(result["buckets"])
        self.errors += result["errors"]
        self.histogram.counts += result["histogram"]


def output_name(path: str | os.PathLike, fmt: str) -> str:
    """The output file's name: the input's (JSON Lines and Parquet stay so; plain text
    becomes JSON Lines records, its name .jsonl before any compression suffix);
    standard input is stdin.jsonl."""
    if str(path) == "-":
        return "stdin.jsonl"
    name = Path(path).name
    if fmt in ("jsonl", "parquet"):  # the input's own format
        return name
    suffix = next((s for s in COMPRESSED if name.lower().endswith(s)), "")
    stem = name[:len(name) - len(suffix)] if suffix else name
    return Path(stem).stem + ".jsonl" + suffix


def _batches(docs: Iterator[Document], size: int) -> Iterator[list[Document]]:
    batch: list[Document] = []
    for doc in docs:
        batch.append(doc)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _decide(perplexity: float | None, ratio: float | None, settings: Settings
            ) -> tuple[str, bool]:
    """(bucket, kept) of the perplexity as written (rounded: cc_net buckets the value its
    scoring step wrote) and the good/bad ratio."""
    bucket = settings.cutoffs.bucket(perplexity) if settings.cutoffs else NO_BUCKET
    kept = settings.keep is None or bucket in settings.keep
    if settings.max_perplexity is not None and (perplexity is None or
                                                perplexity > settings.max_perplexity):
        kept = False
    if settings.max_ratio is not None and (ratio is None or ratio > settings.max_ratio):
        kept = False
    return bucket, kept


def _written(perplexity: float | None, digits: int | None) -> float | None:
    """The perplexity as written: rounded to ``digits`` (None: as computed)."""
    if perplexity is None or digits is None or not math.isfinite(perplexity):
        return perplexity
    return round(perplexity, digits)


def _score_batch(scorer: DocumentScorer, texts: list[str], tally: Tally
                 ) -> list[tuple[float | None, float | None]]:
    """(perplexity, good/bad ratio or None) per text, unrounded, counted in ``tally``."""
    if scorer.bad is None:
        sums = [None if s is None else (s[0], None, s[1]) for s in scorer.log10_scores(texts)]
    else:
        sums = scorer.both(texts)
    out = []
    for s in sums:
        tally.documents += 1
        if s is None:
            out.append((None, None))
            continue
        tally.tokens += s[2]
        out.append((perplexity(s[0], s[2]), None if s[1] is None else ratio(*s)))
    return out


def _scored(scorer: DocumentScorer, path, settings: Settings, tally: Tally
            ) -> Iterator[tuple[Document, float | None, float | None]]:
    """Each good document of ``path`` with its perplexity (unrounded) and ratio."""
    errors = None if settings.on_error == "stop" else tally.errors
    docs = read_documents(path, settings.fmt, settings.text_field, errors)
    for batch in _batches(docs, BATCH):
        good = []
        for doc in batch:
            if doc.text.strip():
                good.append(doc)
                continue
            bad_record(f"{where(path, doc.line)}: an empty document", errors)
        for doc, (computed, r) in zip(good, _score_batch(scorer, [d.text for d in good],
                                                         tally)):
            yield doc, computed, r


def _account(computed: float | None, r: float | None, settings: Settings, tally: Tally
             ) -> tuple[float | None, str, bool]:
    """(the perplexity as written, its bucket, whether it is kept), counted in ``tally``."""
    perplexity = _written(computed, settings.digits)
    bucket, kept = _decide(perplexity, r, settings)
    tally.buckets[bucket] += 1
    if perplexity is not None:
        tally.histogram.add(perplexity)
    tally.kept += kept
    tally.filtered += not kept
    return perplexity, bucket, kept


def input_format(path, settings: Settings) -> str:
    """How ``path`` is read: ``settings.fmt``, or what the file holds (standard input:
    JSON Lines)."""
    return format_of(path, settings.fmt) if str(path) != "-" else "jsonl"


def output_targets(out_dir: Path, name: str, settings: Settings) -> dict:
    """{bucket (None: every one): the output file}: one a bucket where ``split``."""
    if settings.split:
        return {b: out_dir / b / name for b in (*BUCKETS, NO_BUCKET)}
    return {None: out_dir / name}


def filter_file(scorer: DocumentScorer, path, out_dir: Path, settings: Settings,
                tally: Tally) -> list[Path]:
    """Score one input into ``out_dir`` (module docstring); the outputs written."""
    fmt = input_format(path, settings)
    targets = output_targets(out_dir, output_name(path, fmt), settings)
    if fmt == "parquet":
        _filter_parquet(scorer, path, targets, settings, tally)
        return list(targets.values())
    with contextlib.ExitStack() as stack:
        files = {}
        for key, target in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = stack.enter_context(atomic_path(target))
            files[key] = stack.enter_context(open_binary_for_writing(tmp, target))
        for doc, computed, r in _scored(scorer, path, settings, tally):
            ppl, bucket, kept = _account(computed, r, settings, tally)
            if kept:
                fields = {"perplexity": ppl, "bucket": bucket}
                if scorer.bad is not None:
                    fields["ratio"] = r
                files[bucket if settings.split else None].write(
                    record_line(doc, fields, settings.text_field))
    return list(targets.values())


def _filter_parquet(scorer: DocumentScorer, path, targets: dict, settings: Settings,
                    tally: Tally) -> None:
    """:func:`filter_file` for Parquet (:mod:`.parquet`): each batch of rows written back
    with its perplexity and bucket columns, to each output the rows it keeps."""
    source, schema = parquet.open_parquet(path, settings.text_field, scorer.bad is not None)
    with contextlib.ExitStack() as stack:
        writers = {}
        for key, target in targets.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = stack.enter_context(atomic_path(target))
            writers[key] = stack.enter_context(parquet.writer(tmp, schema))
        for first, batch, texts in parquet.batches(source, settings.text_field):
            rows = []
            for i, text in enumerate(texts):
                if isinstance(text, str) and text.strip():
                    rows.append(i)
                    continue
                bad_record(f"{path}: row {first + i}: " + (
                    "the text is null" if text is None else "an empty document"),
                    None if settings.on_error == "stop" else tally.errors)
            columns = ([None] * len(texts), [NO_BUCKET] * len(texts), [None] * len(texts))
            keep: dict = {key: [] for key in writers}
            scores = _score_batch(scorer, [texts[i] for i in rows], tally)
            for i, (computed, r) in zip(rows, scores):
                columns[0][i], columns[1][i], kept = _account(computed, r, settings, tally)
                columns[2][i] = r
                if kept:
                    keep[columns[1][i] if settings.split else None].append(i)
            table = parquet.with_columns(batch, schema, *columns[:2],
                                         columns[2] if scorer.bad is not None else None)
            for key, chosen in keep.items():
                if chosen:
                    writers[key].write_table(parquet.select(table, chosen))


def sample_perplexities(scorer: DocumentScorer, inputs: Iterable, n: int,
                        settings: Settings | None = None) -> list[float | None]:
    """The perplexities of the first ``n`` documents of ``inputs`` (a sample for cutoffs;
    bad records are skipped here and met again by the run itself)."""
    out: list[float | None] = []
    sample = (settings or Settings())._replace(on_error="skip")
    for path in inputs:
        for _, computed, _ in _scored(scorer, path, sample, Tally()):
            out.append(computed)
            if len(out) == n:
                return out
    return out

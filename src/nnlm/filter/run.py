"""A filter run over many inputs: progress with an ETA over the inputs' bytes, each
finished input recorded so that a rerun skips it, and the inputs spread over worker
processes.

An input is finished when its outputs are in place; its record (``OUTDIR/.nnlm-filter/``
``NAME.json``: what it counted, and the identity of the input, the model, the tokenizer
and the settings) is written after them. A rerun with the same of all four skips it and
counts what the record says; a run killed in the middle of an input redoes that input,
whose outputs are then replaced whole, so nothing is lost or written twice. With
``workers`` > 1 each worker process opens the model once (mapped, where it is a binary)
and takes one input at a time.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing as mp
import os
import signal
from collections.abc import Iterable
from pathlib import Path

from ..base.errors import NnlmError
from ..base.progress import progress_bar
from ..ngram.distributed.cluster import connect
from ..text.fileio import atomic_write_text
from .job import Settings, Tally, filter_file, input_format, output_name, output_targets
from .perplexity import DocumentScorer

RECORDS = ".nnlm-filter"  # OUTDIR/.nnlm-filter/NAME.json: a finished input


def _identity(path) -> list:
    """What says a file is the same file: its absolute path, size and modification time."""
    if path is None:
        return [None]
    stat = os.stat(path)
    return [os.path.abspath(path), stat.st_size, stat.st_mtime_ns]


def run_key(scorer: DocumentScorer, settings: Settings) -> str:
    """A digest of the model, the tokenizer, the normalization and the settings."""
    spec = scorer.spec() or (None, None, scorer.normalize_name, scorer.bad_path)
    parts = [_identity(spec[0]), _identity(spec[1]), spec[2], _identity(spec[3]),
             {k: sorted(v) if isinstance(v, frozenset) else v
              for k, v in settings._asdict().items()}]
    return hashlib.sha256(json.dumps(parts, default=list).encode()).hexdigest()


def _record_path(out_dir: Path, name: str) -> Path:
    return out_dir / RECORDS / f"{name}.json"


def _finished(path, out_dir: Path, name: str, key: str, outputs: list[Path]) -> dict | None:
    """The record of ``path``'s earlier run where it still holds, else None."""
    try:
        record = json.loads(_record_path(out_dir, name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("key") != key or \
            record.get("input") != _identity(path) or not all(p.exists() for p in outputs):
        return None
    return record.get("result")


_worker: list = []  # the worker process's scorer, opened once by _start
_opened: dict = {}  # a Dask worker's scorers, by spec (each model opened once a worker)


def _start(spec) -> None:
    """A pool worker: the signals' default dispositions (the command's handlers, copied by
    fork, would turn the pool's SIGTERM into an exception a blocked worker may never
    raise, and Pool.terminate would wait for it forever; Ctrl-C is the parent's to
    handle), then its own scorer."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _worker.append(DocumentScorer(*spec))


def _one(task) -> tuple[str, dict]:
    path, out_dir, settings = task
    tally = Tally()
    filter_file(_worker[0], path, out_dir, settings, tally)
    return str(path), tally.result()


def _cluster_task(spec, path: str, out_dir: Path, settings: Settings) -> tuple[str, dict]:
    """One input on a Dask worker (its outputs written there, atomically)."""
    scorer = _opened.get(spec)
    if scorer is None:
        scorer = _opened[spec] = DocumentScorer(*spec)
    tally = Tally()
    filter_file(scorer, Path(path), out_dir, settings, tally)
    return path, tally.result()


def _on_cluster(cluster: str, spec, todo: list, out_dir: Path, settings: Settings, finish):
    """Each input a task on the Dask cluster ``cluster`` (local:N or an address), each
    finished as its task ends; a task whose worker dies is run again by Dask."""
    from distributed import as_completed  # the distributed extra: only for a cluster

    with connect(cluster) as client:
        futures = [client.submit(_cluster_task, spec, str(path), out_dir, settings,
                                 key=f"nnlm-filter-{i}-{name}", pure=False)
                   for i, (path, name) in enumerate(todo)]
        for future in as_completed(futures):
            finish(*future.result())


def filter_files(scorer: DocumentScorer, inputs: Iterable, out_dir: str | os.PathLike,
                 settings: Settings | None = None, workers: int = 1,
                 resume: bool = True, cluster: str | None = None) -> dict:
    """Every input through :func:`~.job.filter_file` (module docstring), in this process,
    on ``workers`` processes, or as tasks on a Dask ``cluster`` (``local:N`` or a
    scheduler's address: every worker must see the inputs and ``out_dir``); the run's
    summary, with ``skipped_inputs`` (finished before) and its ``histogram``."""
    settings = settings or Settings()
    inputs, out_dir, tally = [Path(p) for p in inputs], Path(out_dir), Tally()
    key = run_key(scorer, settings)
    todo, skipped = [], 0
    for path in inputs:
        name = output_name(path, input_format(path, settings))
        done = None if not resume or str(path) == "-" else _finished(
            path, out_dir, name, key, list(output_targets(out_dir, name, settings).values()))
        if done is None:
            todo.append((path, name))
        else:
            tally.absorb(done)
            skipped += 1
    sizes = {str(p): 0 if str(p) == "-" else os.path.getsize(p) for p, _ in todo}
    names = {str(p): n for p, n in todo}

    def finish(path: str, result: dict) -> None:
        tally.absorb(result)
        if path != "-":
            atomic_write_text(_record_path(out_dir, names[path]), json.dumps(
                {"key": key, "input": _identity(path), "result": result}))
        bar.update(sizes[path])
        bar.set_postfix(documents=f"{tally.documents:,}", tokens=f"{tally.tokens:,}")

    with progress_bar(sum(sizes.values()) or None, "filter", unit="B", delay=2.0) as bar:
        if cluster is not None or workers > 1:
            spec = scorer.spec()
            if spec is None:
                raise NnlmError("workers and clusters need a scorer opened from paths")
        if cluster is not None:
            if any(str(p) == "-" for p, _ in todo):
                raise NnlmError("standard input (-) is read in this process: a cluster's "
                                "workers read files")
            _on_cluster(cluster, spec, todo, out_dir, settings, finish)
        elif workers <= 1 or len(todo) <= 1:
            for path, _ in todo:
                one = Tally()
                filter_file(scorer, path, out_dir, settings, one)
                finish(str(path), one.result())
        else:
            tasks = [(path, out_dir, settings) for path, _ in todo]
            with mp.get_context("fork").Pool(min(workers, len(todo)), _start, (spec,)) as pool:
                for path, result in pool.imap_unordered(_one, tasks):
                    finish(path, result)
    return {**tally.summary(), "skipped_inputs": skipped, "histogram": tally.histogram}

"""ARPA files, written: any back-off model as text KenLM loads (read: :mod:`.arpa_read`).

ARPA stores log10 probabilities and back-off weights::

    \\data\\
    ngram 1=3
    ngram 2=2

    \\1-grams:
    -99       <s>     -0.30103
    -0.30103  a       -0.1
    -0.30103  </s>
    ...
    \\end\\

``<s>`` gets -99 (it is only ever context), as KenLM writes it. Files written here load
in KenLM (``kenlm.Model``) and give the same per-token log10 probabilities as nnlm.
"""

from __future__ import annotations

import math
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ...base.compiled import extension
from ...base.errors import NnlmError
from ...base.progress import progress_bar
from ...text.fileio import atomic_path, open_text_for_writing
from ..backoff import BackoffNgram, words_of

# the compiled formatter, or None (no compiler, or NNLM_NO_C=1): Python's formats instead
_arpa_lines = extension("nnlm.ngram.formats._arpa_lines")
LOG10_E = math.log10(math.e)
ARPA_ZERO = -99.0  # log10 probability written for "never predicted" (<s>)


def _fmt(values: np.ndarray) -> list[str]:
    log10 = np.where(np.isneginf(values), ARPA_ZERO,
                     np.asarray(values, np.float64) * LOG10_E + 0.0)  # + 0.0: no "-0"
    return [f"{x:.7g}" for x in log10.tolist()]


WRITE_CHUNK = 1 << 16  # n-grams formatted at a time: the writer's memory stays flat
FORMAT_THREADS = min(4, os.cpu_count() or 1)  # threads formatting chunks while one writes


def write_arpa(model: BackoffNgram, path: str | os.PathLike) -> Path:
    """Write ``model`` as an ARPA file (atomically; gzip, bzip2 or xz for a ``.gz``,
    ``.bz2`` or ``.xz`` name), with progress when it takes a while.

    Streams: each order is written WRITE_CHUNK n-grams at a time, their words found
    from the model (:func:`words_of`), so the writer adds a few MB to the model's
    memory at any size, not a copy of every n-gram's words and text."""
    path = Path(path)
    if not getattr(model, "normalized", True):
        raise NnlmError(f"{path}: not written: a {model.kind} model's penalty for contexts "
                        "never seen has no ARPA form (ARPA's back-off weights belong to seen "
                        "contexts); keep its nnlm directory")
    for name, level_logp in [("unigram", model.unigram_logp),
                             *((f"{k}-gram", level.logp) for k, level
                               in enumerate(model.levels, start=2))]:
        for lo in range(0, len(level_logp), 1 << 22):
            a = np.asarray(level_logp[lo:lo + (1 << 22)])
            if np.isnan(a).any() or (a > 1e-9).any():
                raise NnlmError(f"{path}: not written: the model's {name} log-probabilities "
                                "hold NaN or values above 0")
    words = WordTexts(model.vocab.words)

    def lines(k: int, level, lo: int) -> tuple[str | bytes, int]:
        hi = min(len(level), lo + WRITE_CHUNK)
        ids = words_of(model, k, np.arange(lo, hi))
        bows = level.log_bow[lo:hi] if k < model.order else None
        return ngram_lines(words, ids, level.logp[lo:hi], bows), hi - lo

    def section(k: int, level):
        # chunks are made on FORMAT_THREADS threads (numpy and the compiled formatter
        # let go of the GIL), a few ahead of the writer, and written in order
        with ThreadPoolExecutor(FORMAT_THREADS) as pool:
            ahead: deque = deque()
            for lo in range(0, len(level), WRITE_CHUNK):
                ahead.append(pool.submit(lines, k, level, lo))
                if len(ahead) > 2 * FORMAT_THREADS:
                    yield ahead.popleft().result()
            while ahead:
                yield ahead.popleft().result()

    write_arpa_sections(path, model.vocab, model.num_ngrams(), model.unigram_logp,
                        model.unigram_log_bow if model.order > 1 else None,
                        ((k, section(k, level)) for k, level in enumerate(model.levels,
                                                                         start=2)))
    return path


class WordTexts:
    """A vocabulary's words as the formatters take them: an object array for numpy's
    string joins, and their UTF-8 bytes end to end with offsets for the compiled one."""

    def __init__(self, words: list[str]):
        self.array = np.array(words, dtype=object)
        encoded = [w.encode("utf-8") for w in words]
        self.blob = b"".join(encoded)
        self.offsets = np.zeros(len(words) + 1, np.int64)
        np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded)), out=self.offsets[1:])


def ngram_lines(words: WordTexts, ids: np.ndarray, logp: np.ndarray,
                log_bow: np.ndarray | None, compiled: bool = True) -> str | bytes:
    """ARPA lines of n-grams (``ids``: (rows, k) word ids, oldest first) with natural-log
    probabilities and back-offs (None: the highest order, which has none): UTF-8 bytes
    from the compiled formatter, or a str from Python's (without it, or ``compiled``
    False); the same text either way."""
    if compiled and _arpa_lines is not None:
        ids = np.ascontiguousarray(ids, np.int64)
        return _arpa_lines.lines(
            words.blob, words.offsets, ids, ids.shape[1] if ids.ndim == 2 else 1,
            np.ascontiguousarray(logp, np.float64),
            None if log_bow is None else np.ascontiguousarray(log_bow, np.float64))
    probs = _fmt(logp)
    texts = words.array[ids[:, 0]]
    for j in range(1, ids.shape[1]):
        texts = texts + " " + words.array[ids[:, j]]
    if log_bow is None:
        return "".join(f"{p}\t{t}\n" for p, t in zip(probs, texts))
    return "".join(f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, texts, _fmt(log_bow)))


def write_arpa_sections(path: Path, vocab, counts: list[int], unigram_logp: np.ndarray,
                        unigram_log_bow: np.ndarray | None, sections) -> None:
    """Write an ARPA file (atomically, compressed by its name) from its n-gram counts, the
    unigram arrays and, per higher order, ``(k, chunks)``: an iterable of (ARPA lines as
    str or UTF-8 bytes, n-grams in them), written as they come. What the writer holds at once is one
    chunk, however the chunks are made (a model's level, a cluster's partitions)."""
    words = vocab.words
    with atomic_path(path) as tmp, open_text_for_writing(tmp, path) as f, \
            progress_bar(sum(counts), f"writing {path.name}", "n-grams", delay=2.0) as bar:
        f.write("\\data\\\n")
        for k, n in enumerate(counts, start=1):
            f.write(f"ngram {k}={n}\n")
        f.write("\n\\1-grams:\n")
        probs = _fmt(unigram_logp)
        bows = _fmt(unigram_log_bow) if unigram_log_bow is not None else None
        for i, w in enumerate(words):
            f.write(f"{probs[i]}\t{w}\t{bows[i]}\n" if bows else f"{probs[i]}\t{w}\n")
        bar.update(counts[0])
        for k, chunks in sections:
            f.write(f"\n\\{k}-grams:\n")
            written = 0
            for text, rows in chunks:
                if isinstance(text, bytes):  # the compiled formatter's UTF-8
                    f.flush()
                    f.buffer.write(text)
                else:
                    f.write(text)
                written += rows
                bar.update(rows)
            if written != counts[k - 1]:
                raise NnlmError(f"{path}: {written:,} {k}-grams written where the header "
                                f"says {counts[k - 1]:,}; the model changed while written")
        f.write("\n\\end\\\n")

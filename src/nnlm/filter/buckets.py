"""cc_net's perplexity buckets: a document is ``head`` below the head cutoff, ``middle``
below the tail cutoff, ``tail`` otherwise, and ``all`` where it has no perplexity (or
its language has no cutoffs). The cutoffs are percentiles of a reference corpus's
perplexities: cc_net's table (``cutoff.csv``: a percentile a row, 0-100, a language a
column) at its 30th and 60th percentiles by default, or the same percentiles of a sample
of the documents being filtered.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..base.errors import NnlmError, where

BUCKETS = ("head", "middle", "tail")
NO_BUCKET = "all"  # cc_net's name for a document it cannot place


class Cutoffs(NamedTuple):
    """Perplexities below ``head`` are head, below ``tail`` middle, the rest tail."""

    head: float
    tail: float

    def bucket(self, perplexity: float | None) -> str:
        if perplexity is None or perplexity < 0 or math.isnan(perplexity):
            return NO_BUCKET
        if perplexity < self.head:
            return "head"
        return "middle" if perplexity < self.tail else "tail"


def read_cutoff_table(path: str | os.PathLike, language: str, head_percentile: int = 30,
                      tail_percentile: int = 60) -> Cutoffs:
    """The cutoffs of ``language`` in cc_net's table (module docstring)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
    except OSError as e:
        raise NnlmError(f"{path}: cannot read the cutoff table ({e.strerror})") from None
    if not rows or language not in rows[0][1:]:
        have = ", ".join(rows[0][1:][:12]) if rows else "none"
        raise NnlmError(f"{path}: no column for language {language!r} (languages: {have})")
    column = rows[0].index(language)
    table = {}
    for n, row in enumerate(rows[1:], start=2):
        try:
            table[int(row[0])] = float(row[column])
        except (ValueError, IndexError):
            raise NnlmError(f"{where(path, n)}: expected a percentile and a perplexity per "
                            f"language, got {','.join(row)[:80]!r}") from None
    for p in (head_percentile, tail_percentile):
        if p not in table:
            raise NnlmError(f"{path}: no row for percentile {p}")
    return Cutoffs(table[head_percentile], table[tail_percentile])


def sample_cutoffs(perplexities: Sequence[float | None], head_percentile: int = 30,
                   tail_percentile: int = 60) -> Cutoffs:
    """The head and tail percentiles of the perplexities given (a sample of the corpus)."""
    values = np.array([p for p in perplexities if p is not None], np.float64)
    if len(values) == 0:
        raise NnlmError("no document of the sample has a perplexity: no cutoffs to compute")
    head, tail = np.percentile(values, [head_percentile, tail_percentile])
    return Cutoffs(float(head), float(tail))


class Histogram:
    """Perplexities counted in log-spaced bins (1 to 10^6, 50 a decade; the ends take
    what lies beyond): a run's picture in fixed memory, whatever the corpus."""

    LOW, HIGH, PER_DECADE = 0.0, 6.0, 50

    def __init__(self):
        self.counts = np.zeros(int((self.HIGH - self.LOW) * self.PER_DECADE), np.int64)

    def add(self, perplexity: float) -> None:
        if perplexity > 0 and math.isfinite(perplexity):
            at = int((math.log10(perplexity) - self.LOW) * self.PER_DECADE)
            self.counts[min(max(at, 0), len(self.counts) - 1)] += 1

    def edges(self) -> np.ndarray:
        return 10.0 ** np.linspace(self.LOW, self.HIGH, len(self.counts) + 1)


def plot_histogram(histogram: Histogram, path, cutoffs: Cutoffs | None = None,
                   title: str = "") -> None:
    """The histogram as a PNG at ``path`` (a log axis, the bins that hold documents), with
    the head and tail cutoffs drawn where there are some."""
    from matplotlib.ticker import ScalarFormatter  # matplotlib: imported only for a plot

    from ..plots import png_figure

    counts, edges = histogram.counts, histogram.edges()
    used = np.flatnonzero(counts)
    if len(used) == 0:
        raise NnlmError("no perplexity to plot")
    lo, hi = used[0], used[-1] + 1
    with png_figure(path, size=(7, 4), dpi=110) as (_, ax):
        ax.stairs(counts[lo:hi], edges[lo:hi + 1], fill=True, color="#4c72b0")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(ScalarFormatter())
        ax.set_xlabel("perplexity (log scale)")
        ax.set_ylabel("documents")
        if cutoffs is not None:
            ax.axvline(cutoffs.head, color="#55a868", linestyle="--",
                       label=f"head below {cutoffs.head:,.1f}")
            ax.axvline(cutoffs.tail, color="#c44e52", linestyle="--",
                       label=f"tail from {cutoffs.tail:,.1f}")
            ax.legend(fontsize=8)
        ax.set_title(title or f"{int(counts.sum()):,} documents")
        ax.grid(alpha=0.3)

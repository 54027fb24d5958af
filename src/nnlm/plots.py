"""Small plotting helpers: headless matplotlib, atomic PNG writes, readable log axes."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from .text.fileio import atomic_path

PNG_SOFTWARE = "nnlm"  # nnlm.file_kinds recognizes nnlm's PNGs by it


@contextmanager
def png_figure(path: str | Path, size=(6, 4), dpi: int = 100):
    """Yield ``(fig, ax)``; on exit the figure is laid out and written to ``path`` (PNG),
    its Software text saying nnlm drew it (so a later run may replace it)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=dpi)
    try:
        yield fig, ax
        fig.tight_layout()
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", metadata={"Software": PNG_SOFTWARE})
    finally:
        plt.close(fig)


def perplexity_axis(ax, label: str = "perplexity") -> None:
    """A log-scale y axis labelled with plain numbers (150, 200, ...) rather than 10^x."""
    from matplotlib.ticker import ScalarFormatter

    ax.set_ylabel(label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(ScalarFormatter())
    ax.yaxis.set_minor_formatter(ScalarFormatter())
    ax.grid(alpha=0.3, which="both")

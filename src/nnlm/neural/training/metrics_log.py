"""A training run's metrics, written after every epoch: ``metrics.csv`` (one row per
epoch), ``learning_curve.png``, and TensorBoard scalars when tensorboard is installed."""

from __future__ import annotations

import csv
import io
import math
from pathlib import Path

from ...plots import perplexity_axis, png_figure
from ...text.fileio import atomic_write_text

METRIC_FIELDS = ["epoch", "step", "train_ppl", "valid_ppl", "lr", "words_per_second",
                 "elapsed_seconds", "train_loss", "valid_log_z", "note"]


def write_metrics(history: list[dict], outdir: Path) -> None:
    """Every epoch's row so far, atomically, with its picture and the last row's
    TensorBoard scalars."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=METRIC_FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(history)
    atomic_write_text(outdir / "metrics.csv", buf.getvalue())
    plot_learning_curve(history, outdir / "learning_curve.png")
    if history:
        log_tensorboard(history[-1], outdir / "tensorboard")


def log_tensorboard(row: dict, logdir: Path) -> None:
    """The epoch's metrics as TensorBoard scalars, when the tensorboard package is installed."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:  # tensorboard is optional
        return
    with SummaryWriter(str(logdir)) as writer:
        for key in ("train_ppl", "valid_ppl", "lr", "words_per_second"):
            writer.add_scalar(key, row[key], row["epoch"])


def plot_learning_curve(history: list[dict], path: Path) -> None:
    if not history:
        return

    epochs = [r["epoch"] for r in history]
    with png_figure(path) as (fig, ax):
        if all(math.isfinite(r["train_ppl"]) for r in history):
            ax.plot(epochs, [r["train_ppl"] for r in history], "o-", label="train (running)")
        ax.plot(epochs, [r["valid_ppl"] for r in history], "s-", label="validation")
        ax.set_xlabel("epoch")
        perplexity_axis(ax)
        ax.legend()
        ax.set_title("learning curve")

"""Progress bars that stay out of the way: shown on a terminal, silent in pipes and tests."""

from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def progress_bar(total: int | None, desc: str, unit: str = "it"):
    """A tqdm bar (``disable=None``: only on a TTY); yields it for ``update``/``set_postfix``."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, disable=None, leave=False, dynamic_ncols=True)
    try:
        yield bar
    finally:
        bar.close()

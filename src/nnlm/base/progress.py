"""Progress on long work: a bar on a terminal, a log line now and then everywhere else.

On a terminal, a tqdm bar. In a pipe, a log file or CI, where a bar would be noise, one
line on stderr every ``--log-every`` seconds (every command takes it; it sets
``NNLM_PROGRESS_SECONDS``, which worker processes inherit; default 60; 0 turns the
lines off): ``epoch 2/5: 1,200/3,164 batch (38%), 4:10 elapsed, ETA 6:49, loss=5.102,
mean=5.230, words_s=41,203`` (loss: the updates since the last line; mean: the
epoch's).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from contextlib import contextmanager


class _LogLines:
    """The bar's interface (update, set_postfix, close) as periodic lines on stderr."""

    def __init__(self, total: int | None, desc: str, unit: str, every: float):
        self.total, self.desc, self.unit, self.every = total, desc, unit, every
        self.n, self.postfix = 0, {}
        self.start = self.last = time.monotonic()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if self.every and now - self.last >= self.every:
            self.last = now
            done = f"{self.n:,}" + (f"/{self.total:,} {self.unit} ({self.n / self.total:.0%})"
                                    if self.total else f" {self.unit}")
            elapsed = now - self.start
            timing = f", {clock(elapsed)} elapsed"
            if self.total and 0 < self.n < self.total:  # at the rate so far
                timing += f", ETA {clock(elapsed / self.n * (self.total - self.n))}"
            extra = "".join(f", {k}={v}" for k, v in self.postfix.items())
            print(f"{self.desc}: {done}{timing}{extra}", file=sys.stderr, flush=True)

    def set_postfix(self, **values) -> None:
        self.postfix = values

    def close(self) -> None:
        pass


def clock(seconds: float) -> str:
    """h:mm:ss, or m:ss under an hour.

    >>> clock(250), clock(3725)
    ('4:10', '1:02:05')
    """
    s = int(round(seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


ENV = "NNLM_PROGRESS_SECONDS"


@contextmanager
def progress_bar(total: int | None, desc: str, unit: str = "it", delay: float = 0.0):
    """A tqdm bar on a TTY, periodic log lines elsewhere; yields it for ``update`` and
    ``set_postfix``. ``delay``: the bar appears only once the work has taken that long
    (short work stays quiet)."""
    if getattr(_quiet, "on", False):
        bar = _LogLines(total, desc, unit, 0)
    elif sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True,
                   delay=delay)
    else:
        bar = _LogLines(total, desc, unit, float(os.environ.get(ENV, 60)))
    try:
        yield bar
    finally:
        bar.close()


_quiet = threading.local()


@contextmanager
def quietly():
    """No bar and no lines from the work inside, on this thread: a pass that shows its
    own progress runs, on several threads at once, work that would show its own."""
    before = getattr(_quiet, "on", False)
    _quiet.on = True
    try:
        yield
    finally:
        _quiet.on = before

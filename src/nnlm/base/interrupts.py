"""Ctrl-C that always stops a long run, at a point where stopping is safe.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT
arrives. Inside a weakref callback or a ``__del__`` (torch runs many) the exception is
printed as "Exception ignored" and swallowed, and the run goes on to exit 0: 3 of 24
interrupted training runs did so. :class:`StopOnInterrupt` notes the signal instead and
raises KeyboardInterrupt at the next :meth:`~StopOnInterrupt.check` (after each update),
or when the run ends, so an interrupt is never lost; a second Ctrl-C raises at once.

SIGTERM (what ``kill``, ``timeout`` and batch schedulers such as Slurm send before they
kill) is handled the same way and raises :class:`Terminated`: a run started in the
background, where the shell ignores Ctrl-C's signal, still stops after its current
update with its checkpoint written, and resumes with ``--resume``.
"""

from __future__ import annotations

import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be (exit status 143)."""


# the signals handled, each with the disposition it must have for the handler to be
# installed (one the program or its parent chose, such as an ignored SIGINT, is kept)
_HANDLED = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


class StopOnInterrupt:
    """A context in which SIGINT and SIGTERM are noted and raised at :meth:`check` (or
    at exit)."""

    def __init__(self):
        self.pending: int | None = None
        self._previous: dict = {}

    def _handler(self, signum, frame) -> None:
        if self.pending is not None:  # asked twice: now
            self._restore()
            self._raise(signum)
        self.pending = signum

    @staticmethod
    def _raise(signum) -> None:
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    def check(self) -> None:
        if self.pending is not None:
            signum, self.pending = self.pending, None
            self._raise(signum)

    def _restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous = {}

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread():
            for signum, default in _HANDLED.items():
                if signal.getsignal(signum) is default:
                    self._previous[signum] = signal.signal(signum, self._handler)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._restore()
        if exc_type is None:
            self.check()

"""Ctrl-C that always stops a long run, at a point where stopping is safe.

Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT
arrives. Inside a weakref callback or a ``__del__`` (torch runs many) the exception is
printed as "Exception ignored" and swallowed, and the run goes on to exit 0: 3 of 24
interrupted training runs did so. :class:`StopOnInterrupt` notes the signal instead and
raises KeyboardInterrupt at the next :meth:`~StopOnInterrupt.check` (after each update),
or when the run ends, so an interrupt is never lost; a second Ctrl-C raises at once.
"""

from __future__ import annotations

import signal
import threading


class StopOnInterrupt:
    """A context in which SIGINT is noted and raised at :meth:`check` (or at exit)."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def _handler(self, signum, frame) -> None:
        if self.pending:  # asked twice: now
            signal.signal(signal.SIGINT, self._previous or signal.default_int_handler)
            raise KeyboardInterrupt
        self.pending = True

    def check(self) -> None:
        if self.pending:
            self.pending = False
            raise KeyboardInterrupt

    def __enter__(self) -> StopOnInterrupt:
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if exc_type is None:
            self.check()

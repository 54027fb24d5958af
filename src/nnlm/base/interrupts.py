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
update with its checkpoint written, and resumes with ``--resume``. Outside such a run,
every command (:func:`terminate_as_interrupt`, around each) turns SIGTERM into
:class:`Terminated` where the program is, as Ctrl-C is, so that what a command cleans up
on the way out (a half-built index's temporary folder, an output's lock) is cleaned up.
"""

from __future__ import annotations

import contextlib
import signal
import threading


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where Ctrl-C's KeyboardInterrupt would be (exit status 143)."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated


@contextlib.contextmanager
def terminate_as_interrupt():
    """Within: SIGTERM raises :class:`Terminated` (a KeyboardInterrupt) where the main
    thread is, unless the process chose another disposition for it."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# the signals handled, each with the dispositions it must have for the handler to be
# installed (one the program or its parent chose, such as an ignored SIGINT, is kept)
_HANDLED = {signal.SIGINT: (signal.default_int_handler,),
            signal.SIGTERM: (signal.SIG_DFL, _raise_terminated)}


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
            for signum, defaults in _HANDLED.items():
                if signal.getsignal(signum) in defaults:
                    self._previous[signum] = signal.signal(signum, self._handler)
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self._restore()
        if exc_type is None:
            self.check()

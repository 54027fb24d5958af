"""The one exception type users see, and one-line warnings.

Anything that is the user's fault (a missing file, a bad byte, a checkpoint from another
vocabulary) raises :class:`NnlmError` with a one-line message that names the file and,
where there is one, the line. The CLI prints it as ``nnlm: error: ...`` and exits 2;
anything else is a bug and keeps its traceback.
"""

import warnings


class NnlmError(Exception):
    """A user-facing error: the message is one line and says what to do."""


def where(path, line: int | None = None) -> str:
    """``path`` or ``path:line``, the prefix every file error starts with."""
    return f"{path}:{line}" if line is not None else str(path)


class TrainingDiverged(NnlmError):
    """A training run whose weights stopped being sane (one line saying which update was
    kept): raised by the trainer and by the Hogwild coordinator for its workers."""


class NnlmWarning(UserWarning):
    """A user-facing warning: one line. The CLI prints it as ``nnlm: warning: ...``."""


def warn(message: str) -> None:
    """Warn the user in one line (through Python's warnings, so library users can filter
    or raise them; the CLI prints each once)."""
    warnings.warn(message, NnlmWarning, stacklevel=2)


_python_format = warnings.formatwarning


def _one_line(message, category, filename, lineno, line=None) -> str:
    """How Python shows a warning, but one line for nnlm's own, as kenlm prints one line:
    ``nnlm: warning: ...``, without nnlm's source file and line, which are no use to a
    library's user (their own code's place is not known here)."""
    if issubclass(category, NnlmWarning):
        return f"nnlm: warning: {message}\n"
    return _python_format(message, category, filename, lineno, line)


warnings.formatwarning = _one_line


def a(word: str) -> str:
    """``word`` with its indefinite article: "a kn", "an interpolated".

    >>> a("kn"), a("addk")
    ('a kn', 'an addk')
    """
    return ("an " if word[:1].lower() in "aeiou" else "a ") + word

"""The one reader of the JSON files nnlm writes for itself, each checked against its shape.

config.json, a training run's state/trainer.json and state/result.json, and the caches
of ``reproduce`` are written by nnlm and read back later, by which time a kill, a full
disk or a hand edit may have left them truncated or wrong. :func:`read_json` parses one,
checks each field it names (type, range, finiteness) and raises one NnlmError naming the
file and the field, never a JSONDecodeError or a ValueError from deeper down.

A shape is a dict ``{field: check}``; a check is a type (``int``, ``float``, ``str``,
``bool``, ``dict``, ``list``), or one of the small classes below. Fields not named are
not checked (newer versions may add some); ``Optional`` allows a field to be missing.

    >>> check_fields({"epoch": 3}, {"epoch": Int(min=0)}, "trainer.json")
    >>> check_fields({"epoch": -5}, {"epoch": Int(min=0)}, "trainer.json")
    Traceback (most recent call last):
    ...
    nnlm.base.errors.NnlmError: trainer.json: field 'epoch' should be an integer >= 0, got -5
"""

from __future__ import annotations

import json
import math
import os
from collections import namedtuple
from pathlib import Path

from ..base.errors import NnlmError

# The checks are frozen records (namedtuples, not dataclasses: a process that only reads a
# trie file's header through nnlm.kenlm then never imports dataclasses and inspect).


class Int(namedtuple("Int", "min max", defaults=(None, None))):
    """An integer (not a bool) in [min, max]."""

    __slots__ = ()

    def problem(self, value) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return "an integer"
        if (self.min is not None and value < self.min) or \
                (self.max is not None and value > self.max):
            return "an integer" + _range(self.min, self.max)
        return None


class Float(namedtuple("Float", "min max infinite", defaults=(None, None, False))):
    """A number (ints too) in [min, max]; finite unless ``infinite`` (then +inf is
    allowed, as a best validation loss before the first evaluation)."""

    __slots__ = ()

    def problem(self, value) -> str | None:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return "a number"
        if math.isnan(value) or (math.isinf(value) and not (self.infinite and value > 0)):
            return "a finite number"
        if (self.min is not None and value < self.min) or \
                (self.max is not None and value > self.max):
            return "a number" + _range(self.min, self.max)
        return None


class Optional(namedtuple("Optional", "check")):
    """``check``, or the field missing (or null)."""

    __slots__ = ()


class Map(namedtuple("Map", "check")):
    """A dict whose every value passes ``check``."""

    __slots__ = ()

    def problem(self, value) -> str | None:
        if not isinstance(value, dict):
            return "an object"
        for v in value.values():
            if _problem(self.check, v) is not None:
                return f"an object of {_describe(self.check)}s"
        return None


class Fields(namedtuple("Fields", "shape")):
    """A dict whose named fields pass their checks (see :func:`check_fields`)."""

    __slots__ = ()


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f" in [{lo}, {hi}]"
    return f" >= {lo}" if lo is not None else f" <= {hi}"


def _describe(check) -> str:
    if isinstance(check, type):
        return {int: "integer", float: "number", str: "string", bool: "boolean",
                dict: "object", list: "list"}.get(check, check.__name__)
    return (check.problem(object()) or "value").removeprefix("a ").removeprefix("an ")


def _problem(check, value) -> str | None:
    """What ``value`` should have been, or None if it passes ``check``."""
    if isinstance(check, type):
        if check is float:
            return Float().problem(value)
        if check is int:
            return Int().problem(value)
        ok = isinstance(value, check) and not (check is not bool and isinstance(value, bool))
        return None if ok else f"a{'n' if _describe(check)[0] in 'aeiou' else ''} " \
                               f"{_describe(check)}"
    return check.problem(value)


def check_fields(data, shape: dict, name: str, prefix: str = "") -> None:
    """Check ``data``'s fields against ``shape``; one NnlmError for the first that fails,
    with ``name`` (the file) and the field's dotted path (``prefix`` + key) in it."""
    if not isinstance(data, dict):
        where = f"field {prefix.rstrip('.')!r}" if prefix else "the file"
        raise NnlmError(f"{name}: {where} should be a JSON object, got {type(data).__name__}")
    for key, check in shape.items():
        optional = isinstance(check, Optional)
        check = check.check if optional else check
        value = data.get(key)
        if value is None:
            if optional:
                continue
            raise NnlmError(f"{name}: field {prefix + key!r} is missing")
        if isinstance(check, Fields):
            check_fields(value, check.shape, name, f"{prefix}{key}.")
            continue
        wanted = _problem(check, value)
        if wanted is not None:
            raise NnlmError(f"{name}: field {prefix + key!r} should be {wanted}, got "
                            f"{value!r:.60}")


def read_json(path: str | os.PathLike, shape: dict | None = None, what: str = "") -> dict:
    """The object in the JSON file ``path``, its fields checked against ``shape``.

    Raises NnlmError naming the file for a missing, unreadable, truncated or non-JSON
    file (``what`` says what the file is, e.g. "the training state"), and naming the
    field for one that fails its check. NaN and infinities, which Python's json module
    writes as bare words, are refused unless a check allows them."""
    path = Path(path)
    label = f" ({what})" if what else ""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise NnlmError(f"{path}: missing{label}") from None
    except UnicodeDecodeError:
        raise NnlmError(f"{path}: not UTF-8 text{label}; the file is damaged") from None
    except OSError as e:
        from .fileio import os_error_message

        raise NnlmError(os_error_message(path, e)) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise NnlmError(f"{path}: not valid JSON{label} ({e.msg} at line {e.lineno}); the "
                        "file may be truncated") from None
    check_fields(data, shape or {}, str(path))
    return data

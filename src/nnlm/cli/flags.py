"""The library's words for settings, in the command line's.

Library errors, warnings and log lines name the parameters a Python caller passed, as
Python writes them: ``lr=0.5``, ``objective=nce``, ``resume=True``, or ``lr=`` for the
setting alone. The command line shows each as the flag of the command being run
(``--lr 0.5``, ``--objective nce``, ``--resume``, ``--lr``), read from that command's own
parser, so no table of names is kept twice. A name that is not one of the command's
options stays as it is.

    >>> import argparse
    >>> p = argparse.ArgumentParser()
    >>> _ = p.add_argument("--lr", type=float)
    >>> _ = p.add_argument("--bf16", action=argparse.BooleanOptionalAction)
    >>> _ = p.add_argument("--resume", action="store_true")
    >>> _ = p.add_argument("--discount-fallback", nargs="*", type=float)
    >>> as_flags("lr=0.5 is too large; rerun with resume=True, or bf16=False, or size=3", p)
    '--lr 0.5 is too large; rerun with --resume, or --no-bf16, or size=3'
    >>> as_flags("use discount_fallback=True", p)
    'use --discount-fallback'
"""

from __future__ import annotations

import argparse
import re

# name=value: a Python keyword, then a quoted string, True/False or a plain value
_SETTING = re.compile(r"(?<![\w./-])([a-z][a-z0-9_]*)=('[^']*'|True\b|False\b|[^\s,;:)]*)")


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {a.dest: a for a in parser._actions if a.option_strings}


def _flag(action: argparse.Action, value: str) -> str:
    long = next((s for s in action.option_strings if s.startswith("--")),
                action.option_strings[0])
    if value == "True":  # a switch, or an option whose values are optional
        return long
    if value == "False":
        return f"--no-{long[2:]}" if isinstance(action, argparse.BooleanOptionalAction) \
            else f"no {long}"
    if value.startswith("'") and value.endswith("'") and len(value) >= 2:
        value = value[1:-1]
    return f"{long} {value}" if value else long


def as_flags(message: str, parser: argparse.ArgumentParser | None) -> str:
    """``message`` with the settings it names written as ``parser``'s flags."""
    if parser is None:
        return message
    options = _options(parser)

    def one(match: re.Match) -> str:
        action = options.get(match.group(1))
        return match.group(0) if action is None else _flag(action, match.group(2))

    return _SETTING.sub(one, message)

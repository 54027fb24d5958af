"""The command-line reference page (docs/cli.md), generated from the parser itself so
that it cannot drift from the code: ``python -m nnlm.cli.reference > docs/cli.md``.
A test regenerates it and fails on any difference."""

from __future__ import annotations

import os
import sys

WIDTH = "100"  # help text wraps at this many columns, whatever the terminal


def markdown() -> str:
    """Every command's ``--help``, in the order of ``nnlm --help``."""
    from .common import walk_parsers
    from .main import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH
    try:
        parts = ["# Command-line reference\n",
                 "Every command's `--help`, generated from the parser "
                 "(`python -m nnlm.cli.reference > docs/cli.md`).\n"]
        for path, parser in walk_parsers(build_parser(), ["nnlm"]):
            title = " ".join(path)
            parts.append(f"## {title}\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(parts)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


if __name__ == "__main__":
    sys.stdout.write(markdown())

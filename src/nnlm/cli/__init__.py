"""The ``nnlm`` command line (see ``main.py``); one module per command group."""

from .main import build_parser, main

__all__ = ["build_parser", "main"]

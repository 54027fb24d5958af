"""nnlm's version, in one place below everything that reports it (``nnlm --version``,
the server's OpenAPI page, ``reproduce``'s record of what ran)."""

__version__ = "0.20.0"  # CHANGELOG.md says what each version changed

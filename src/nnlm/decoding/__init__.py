"""Scoring inside a decoder: nnlm's decoder API (:mod:`.api`: :class:`Decoder`,
:class:`DecoderState`, the batched ``advance``), the kenlm module's API over any model
(:mod:`.kenlm`, which clients import as ``nnlm.kenlm``, with its C per-call path
``_kenlm_query.c``), the checks and lookups both share (:mod:`.core`), and n-best
rescoring (:mod:`.rescore`).

Names load on first use, so that ``nnlm.kenlm`` on a trie file imports no numpy."""

_LAZY = {"Decoder": "api", "DecoderState": "api", "Advance": "api"}


def __getattr__(name):
    import importlib

    if name in ("Model", "State"):  # renamed: a DeprecationWarning each time, no cache
        return importlib.import_module(f"{__name__}.api").renamed(name)
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Advance", "Decoder", "DecoderState"]

"""Scoring inside a decoder: the decoder API (:mod:`.api`: :class:`Model`, :class:`State`,
the batched ``advance``), the kenlm module's API over any model (:mod:`.kenlm`, which
clients import as ``nnlm.kenlm``, with its C per-call path ``_kenlm_query.c``), the
checks and lookups both share (:mod:`.core`), and n-best rescoring (:mod:`.rescore`).

Names load on first use, so that ``nnlm.kenlm`` on a trie file imports no numpy."""

_LAZY = {"Model": "api", "State": "api", "Advance": "api"}


def __getattr__(name):
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Advance", "Model", "State"]

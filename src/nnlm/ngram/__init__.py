"""Count-based language models. Nothing under this package imports torch.

- :class:`KneserNey`: interpolated modified Kneser-Ney, orders 1-9 (as KenLM's lmplz).
- :class:`DeletedInterpolation`: Jelinek-Mercer with context-frequency buckets (the paper's).
- :class:`ClassNgram`: exchange-algorithm classes with Kneser-Ney over class n-grams.
- :class:`BackoffNgram`: the back-off form, scored fast; ARPA import/export.
- :class:`AddK`: add-k unigram/bigram, a baseline.
"""

_LAZY = {"AddK": "addk", "BackoffNgram": "backoff", "ClassNgram": "classes",
         "exchange_clustering": "classes", "DeletedInterpolation": "interpolated",
         "KneserNey": "kneser_ney", "read_arpa": "store.arpa_read",
         "write_arpa": "store.arpa_write", "StupidBackoff": "stupid", "METHODS": "methods",
         "NgramJob": "methods", "train_ngram": "train"}


TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:  # the names for type checkers and editors; never run
    from .addk import AddK
    from .backoff import BackoffNgram
    from .classes import ClassNgram, exchange_clustering
    from .interpolated import DeletedInterpolation
    from .kneser_ney import KneserNey
    from .methods import METHODS, NgramJob
    from .store.arpa_read import read_arpa
    from .store.arpa_write import write_arpa
    from .stupid import StupidBackoff
    from .train import train_ngram


def __getattr__(name):  # loaded on first use, so that store's numpy-free parts stay so
    import importlib

    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METHODS", "AddK", "BackoffNgram", "ClassNgram", "DeletedInterpolation", "KneserNey",
    "NgramJob",
    "StupidBackoff", "exchange_clustering", "read_arpa", "train_ngram", "write_arpa",
]

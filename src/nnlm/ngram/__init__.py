"""Count-based language models. Nothing under this package imports torch.

The folders show the flow, each standing only on those before it:

- ``store/``: the levels of n-grams in memory (:mod:`.store.levels`) and nnlm's mapped trie
  (:mod:`.store.trie`): storage, below the model;
- ``backoff.py``: :class:`BackoffNgram`, the back-off model built from levels, scored fast;
  ``normalization.py``, its distributions' sums;
- ``estimate/``: the methods (:mod:`.estimate.methods`, one registry and
  :class:`NgramJob`): :class:`KneserNey` (interpolated modified Kneser-Ney, as KenLM's
  lmplz), :class:`DeletedInterpolation`, :class:`ClassNgram`, :class:`AddK`,
  :class:`StupidBackoff`, entropy pruning, and the counting under them;
- ``formats/``: ARPA files, KenLM's binaries and conversion, above the model;
- ``distributed/``: estimation on a Dask cluster, above the estimators and formats.

:func:`train_ngram` (in :mod:`nnlm.fit`) runs a job in one process or on a cluster.
"""

_LAZY = {"AddK": "estimate.addk", "BackoffNgram": "backoff", "ClassNgram": "estimate.classes",
         "exchange_clustering": "estimate.classes",
         "DeletedInterpolation": "estimate.interpolated", "KneserNey": "estimate.kneser_ney",
         "read_arpa": "formats.arpa_read", "write_arpa": "formats.arpa_write",
         "StupidBackoff": "estimate.stupid", "METHODS": "estimate.methods",
         "NgramJob": "estimate.methods", "train_ngram": "..fit"}


TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:  # the names for type checkers and editors; never run
    from ..fit import train_ngram
    from .backoff import BackoffNgram
    from .estimate.addk import AddK
    from .estimate.classes import ClassNgram, exchange_clustering
    from .estimate.interpolated import DeletedInterpolation
    from .estimate.kneser_ney import KneserNey
    from .estimate.methods import METHODS, NgramJob
    from .estimate.stupid import StupidBackoff
    from .formats.arpa_read import read_arpa
    from .formats.arpa_write import write_arpa


def __getattr__(name):  # loaded on first use, so that store's numpy-free parts stay so
    import importlib

    if name in _LAZY:
        where = _LAZY[name]
        module = importlib.import_module(where if where.startswith(".") else f".{where}",
                                         __name__)  # "..fit": nnlm.fit
        value = getattr(module, name)
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

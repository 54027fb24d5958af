"""Count-based language models. Nothing under this package imports torch.

- :class:`KneserNey`: interpolated modified Kneser-Ney, orders 1-9 (as KenLM's lmplz).
- :class:`DeletedInterpolation`: Jelinek-Mercer with context-frequency buckets (the paper's).
- :class:`ClassNgram`: exchange-algorithm classes with Kneser-Ney over class n-grams.
- :class:`BackoffNgram`: the back-off form, scored fast; ARPA import/export.
- :class:`AddK`: add-k unigram/bigram, a baseline.
"""

from .addk import AddK
from .backoff import BackoffNgram
from .classes import ClassNgram, exchange_clustering
from .interpolated import DeletedInterpolation
from .kneser_ney import KneserNey
from .store.arpa_read import read_arpa
from .store.arpa_write import write_arpa
from .stupid import StupidBackoff
from .train import METHODS, train_ngram

__all__ = [
    "METHODS", "AddK", "BackoffNgram", "ClassNgram", "DeletedInterpolation", "KneserNey",
    "StupidBackoff", "exchange_clustering", "read_arpa", "train_ngram", "write_arpa",
]

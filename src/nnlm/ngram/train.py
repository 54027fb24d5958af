"""Train any count-based model from text files in one call (what the CLI uses).

    from nnlm.ngram import train_ngram
    model = train_ngram("data/brown/train.txt", method="kn", order=5)
    model.sentence_logprob("the jury said")      # natural log, </s> included

Methods: ``kn`` (interpolated modified Kneser-Ney), ``interpolated`` (deleted
interpolation, needs ``valid``), ``class`` (exchange clustering + class KN), ``addk``,
``stupid`` (Stupid Backoff: scores, not probabilities).
"""

from __future__ import annotations

import os

import numpy as np

from ..corpus import read_corpus, read_stream, warn_same_text, warn_unknown_share
from ..errors import NnlmError
from ..lm import LanguageModel
from ..progress import progress_bar
from ..vocab import Vocabulary
from .addk import AddK
from .classes import ClassNgram, exchange_clustering, load_classes
from .interpolated import DeletedInterpolation
from .kneser_ney import FALLBACK_DISCOUNTS, KneserNey
from .stupid import StupidBackoff

METHODS = {
    "kn": "interpolated modified Kneser-Ney (Chen & Goodman; as KenLM's lmplz)",
    "interpolated": "deleted interpolation (Jelinek-Mercer), weights by EM on --valid",
    "class": "class-based: exchange clustering, then Kneser-Ney over class n-grams",
    "addk": "add-k (Lidstone) unigram or bigram; a baseline",
    "stupid": "Stupid Backoff (Brants et al. 2007): relative frequencies and a penalty "
              "--alpha per order backed off; scores, not probabilities (for rescoring)",
}


def _name(train_path) -> str:
    """A training text's name in a message: its path, or its first shard's and more."""
    if isinstance(train_path, (list, tuple)):
        return str(train_path[0]) + (f" (and {len(train_path) - 1} more)"
                                     if len(train_path) > 1 else "")
    return str(train_path)


def cluster_words(train_path, n_classes: int, vocab: Vocabulary | None = None,
                  max_iterations: int = 15):
    """Exchange clustering of a text file's words; returns (vocab, word_class)."""
    if vocab is None:
        vocab, stream = read_corpus(train_path)
    else:
        stream = read_stream(train_path, vocab)
        warn_unknown_share(stream, _name(train_path))
    with progress_bar(max_iterations, f"clustering into {n_classes} classes", "pass") as bar:
        def report(it, moved, objective):
            bar.update(1)
            bar.set_postfix(moved=moved)

        word_class = exchange_clustering(stream, vocab, n_classes, max_iterations,
                                         progress=report)
    return vocab, word_class


def train_ngram(
    train_path: str | os.PathLike,
    method: str = "kn",
    order: int = 3,
    valid_path: str | os.PathLike | None = None,
    vocab: Vocabulary | None = None,
    min_count: int = 1,
    max_size: int | None = None,
    n_classes: int = 500,
    clustering_path: str | os.PathLike | None = None,
    discount_fallback=None,
    k: float = 1.0,
    alpha: float = 0.4,
    prune_counts=None,
    memory: int | None = None,
    temp: str | os.PathLike | None = None,
    cluster: str | None = None,
    partitions: int | None = None,
    arpa: str | os.PathLike | None = None,
    log=lambda message: None,
) -> LanguageModel:
    """Fit a count-based model on a text file, or on several (shards of one corpus; see
    the module docstring for methods). ``cluster``: estimate on a Dask cluster instead
    (``local:N`` or a scheduler's address; modified Kneser-Ney only): each worker reads
    its own shards, which may be fsspec URLs (s3://, gs://, hdfs://) the workers can
    read; ``partitions``: how many parts each order is cut into (default: twice the
    workers); ``arpa``: also write the model there as an ARPA file (kn only; on a cluster,
    streamed from the workers' partitions)."""
    if method not in METHODS:
        raise NnlmError(f"method={method!r}: choose from {', '.join(METHODS)}")
    if not 1 <= order <= 9:
        raise NnlmError(f"order={order}: choose an order between 1 and 9")
    if cluster is not None:
        from .distributed.run import train_distributed

        if method != "kn":
            raise NnlmError(f"cluster= estimates method=kn (modified Kneser-Ney) only; "
                            f"method={method} runs in one process (drop cluster=)")
        for name, value in (("prune_counts", prune_counts), ("memory", memory),
                            ("temp", temp)):
            if value:
                raise NnlmError(f"{name}= applies to one process; with cluster= the engine "
                                "bounds and spills each worker's memory")
        return train_distributed(train_path, order, cluster, vocab, min_count, max_size,
                                 discount_fallback, partitions, log, arpa=arpa)
    if arpa is not None and method != "kn":
        raise NnlmError(f"arpa= needs method=kn (method={method} has no back-off form)")
    if vocab is None:
        vocab, train = read_corpus(train_path, min_count, max_size)
    else:
        train = read_stream(train_path, vocab)
        warn_unknown_share(train, _name(train_path))
    try:
        if method == "kn":
            model = KneserNey(vocab, order, discount_fallback).fit(train, prune_counts,
                                                                   memory=memory, temp=temp)
            if arpa is not None:
                from .store.arpa_write import write_arpa

                write_arpa(model, arpa)
            return model
        if method == "addk":
            return AddK(vocab, order, k).fit(train)
        if method == "stupid":
            return StupidBackoff(vocab, order, alpha).fit(train)
        if method == "interpolated":
            if valid_path is None:
                raise NnlmError("method=interpolated fits its weights on held-out data: "
                                "give valid_path=VALID")
            warn_same_text(train_path, valid_path)
            return DeletedInterpolation(vocab, order).fit(train, read_stream(valid_path, vocab))
        word_class = None
        if clustering_path is not None:
            word_class = load_classes(clustering_path, vocab)
        else:
            _, word_class = cluster_words(train_path, n_classes, vocab)
        fallback = discount_fallback if discount_fallback is not None else FALLBACK_DISCOUNTS
        return ClassNgram(vocab, order, n_classes, fallback).fit(train, word_class=np.asarray(
            word_class))
    except ValueError as e:
        raise NnlmError(str(e)) from None

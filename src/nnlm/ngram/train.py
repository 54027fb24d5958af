"""Train any count-based model from text files in one call (what the CLI uses).

    from nnlm.ngram import train_ngram
    model = train_ngram("data/brown/train.txt", method="kn", order=5)
    model.sentence_logprob("the jury said")      # natural log, </s> included

The methods, their settings and limits are one registry, :mod:`nnlm.ngram.methods`.
"""

from __future__ import annotations

import os

from ..corpus import read_corpus, read_stream, warn_same_text, warn_unknown_share
from ..errors import NnlmError
from ..lm import LanguageModel
from ..vocab import Vocabulary
from .methods import METHODS, NgramJob, cluster_stream

__all__ = ["METHODS", "NgramJob", "cluster_words", "run_ngram_job", "train_ngram"]


def _name(train_path) -> str:
    """A training text's name in a message: its path, or its first shard's and more."""
    if isinstance(train_path, (list, tuple)):
        return str(train_path[0]) + (f" (and {len(train_path) - 1} more)"
                                     if len(train_path) > 1 else "")
    return str(train_path)


def _encoded(train_path, vocab: Vocabulary | None, min_count: int = 1,
             max_size: int | None = None):
    """(vocabulary, encoded text): the vocabulary built from the text, or the fixed one
    (with a warning if most of the text is outside it)."""
    if vocab is None:
        return read_corpus(train_path, min_count, max_size)
    stream = read_stream(train_path, vocab)
    warn_unknown_share(stream, _name(train_path))
    return vocab, stream


def cluster_words(train_path, n_classes: int, vocab: Vocabulary | None = None,
                  max_iterations: int = 15):
    """Exchange clustering of a text file's words; returns (vocab, word_class)."""
    vocab, stream = _encoded(train_path, vocab)
    return vocab, cluster_stream(stream, vocab, n_classes, max_iterations)


def train_ngram(train_path: str | os.PathLike, method: str = "kn", order: int = 3,
                log=lambda message: None, **settings) -> LanguageModel:
    """Fit a count-based model on a text file, or on several (shards of one corpus):
    ``method`` one of :data:`METHODS`, ``settings`` the other fields of
    :class:`NgramJob` (``valid_path``, ``vocab``, ``discount_fallback``, ``cluster``,
    ``arpa``, ...)."""
    return run_ngram_job(NgramJob(train_path, method, order, **settings), log)


def run_ngram_job(job: NgramJob, log=lambda message: None) -> LanguageModel:
    """Run ``job``: checked against its method (:meth:`NgramJob.check`), then estimated
    in this process or, with ``cluster``, on a Dask cluster (``local:N`` or a scheduler's
    address; modified Kneser-Ney only: each worker reads its own shards, which may be
    fsspec URLs; ``partitions``: how many parts each order is cut into, by default twice
    the workers). ``arpa``: also write the model there as an ARPA file (on a cluster,
    streamed from the workers' partitions)."""
    method = job.check()
    if job.cluster is not None:
        from .distributed.run import train_distributed

        return train_distributed(job.train_path, job.order, job.cluster, job.vocab,
                                 job.min_count, job.max_size, job.discount_fallback,
                                 job.partitions, log, arpa=job.arpa)
    vocab, train = _encoded(job.train_path, job.vocab, job.min_count, job.max_size)
    valid = None
    if method.needs_valid:
        warn_same_text(job.train_path, job.valid_path)
        valid = read_stream(job.valid_path, vocab)
    try:
        model = method.fit(job, vocab, train, valid)
    except ValueError as e:
        raise NnlmError(str(e)) from None
    if job.arpa is not None:
        from .store.arpa_write import write_arpa

        write_arpa(model, job.arpa)
    return model

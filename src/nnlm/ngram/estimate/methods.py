"""The count-based estimation methods, one registry: what each is, what it takes and
needs, how far it goes, and how it is fitted.

Every entry point (:func:`nnlm.ngram.train_ngram`, ``nnlm.train(method=...)``, ``nnlm
ngram train``) reads its choices, limits and checks from :data:`METHODS` through an
:class:`NgramJob`, so none of them branches on a method's name: a new method is one
entry here.

The methods (Chen & Goodman 1998 survey all but the last two):

* ``kn``: interpolated modified Kneser-Ney, as KenLM's lmplz;
* ``interpolated``: deleted interpolation (Jelinek & Mercer 1980), weights by EM on
  held-out text;
* ``class``: exchange clustering (Kneser & Ney 1993), then Kneser-Ney over class
  n-grams;
* ``addk``: add-k (Lidstone), a unigram or bigram baseline;
* ``stupid``: Stupid Backoff (Brants et al. 2007): scores, not probabilities;
* ``infgram``: modified Kneser-Ney of order n, and above it every longer context of the
  text, counted in a suffix-array index (Liu et al. 2024's ∞-gram, smoothed by absolute
  discounting: :mod:`nnlm.ngram.infgram`).
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from ...base.errors import NnlmError
from ...lm import LanguageModel
from ...text.stream import Stream
from ...text.vocab import Vocabulary

MAX_ORDER = 9  # the estimators' limit. Models of higher order load (ARPA files and
# nnlm's trie to 64); the compiled paths take up to 12 (nnlm.kenlm's per-call queries,
# _kenlm_query.c) and 16 (bulk scoring, store/_trie.c), and the rest go through numpy


@dataclass
class NgramJob:
    """One estimation: the text, the method and its settings. ``train_path``: a file,
    several (shards of one corpus) or, with ``cluster``, fsspec URLs; ``vocab``: a fixed
    vocabulary (default: built from the text with ``min_count`` and ``max_size``). The
    other fields belong to the methods that list them in :data:`METHODS`."""

    train_path: object
    method: str = "kn"
    order: int = 3
    valid_path: str | os.PathLike | None = None
    vocab: Vocabulary | None = None
    min_count: int = 1
    max_size: int | None = None
    n_classes: int = 500
    clustering_path: str | os.PathLike | None = None
    discount_fallback: object = None
    k: float = 1.0
    alpha: float | None = None
    prune_counts: object = None
    memory: int | None = None
    temp: str | os.PathLike | None = None
    cluster: str | None = None
    partitions: int | None = None
    arpa: str | os.PathLike | None = None
    tokenizer: object = None  # a SubwordTokenizer: the text read as its subword tokens
    discount: float | None = None  # infgram's D above the base order
    compress: bool = False  # kn: the trie stores the counts the values come from

    def check(self) -> Method:
        """The job's method, its settings checked against it (one line naming the
        setting, in keyword form: the CLI shows it as the flag)."""
        method = METHODS.get(self.method)
        if method is None:
            raise NnlmError(f"method={self.method!r}: choose from {', '.join(METHODS)}")
        if self.cluster is not None and not method.distributed:
            raise NnlmError(f"cluster= estimates method=kn (modified Kneser-Ney) only; "
                            f"method={self.method} runs in one process (drop cluster=)")
        if isinstance(self.order, numbers.Integral) and not isinstance(self.order, bool):
            self.order = int(self.order)  # numpy's integers are integers
        if not (isinstance(self.order, int) and 1 <= self.order <= method.max_order):
            raise NnlmError(f"order={self.order!r}: method={self.method} takes an order "
                            f"between 1 and {method.max_order}")
        defaults = {f.name: f.default for f in fields(NgramJob)}
        for name in OWN_SETTINGS:
            if name not in method.settings and getattr(self, name) not in (None, False,
                                                                           defaults[name]):
                owners = [m for m, spec in METHODS.items() if name in spec.settings]
                raise NnlmError(f"{name}= goes with method={' or '.join(owners)}, not "
                                f"method={self.method}")
        if self.arpa is not None and not method.backoff_form:
            able = ", ".join(m for m, spec in METHODS.items() if spec.backoff_form)
            raise NnlmError(f"arpa= needs method={able} (method={self.method} has no "
                            "back-off form)")
        if self.cluster is not None:
            for name in ("prune_counts", "memory", "temp"):
                if getattr(self, name):
                    raise NnlmError(f"{name}= applies to one process; with cluster= the "
                                    "engine bounds and spills each worker's memory")
        if self.compress and self.order < 2:
            raise NnlmError("compress= codes the n-grams of orders 2 and up as counts: an "
                            "order-1 model has none (drop compress=)")
        if self.compress and (self.cluster is not None or self.prune_counts):
            raise NnlmError("compress= stores the counts of a Kneser-Ney estimate made in one "
                            "process and not pruned: drop cluster= and prune_counts=, or "
                            "compress=")
        if self.partitions is not None and self.cluster is None:
            raise NnlmError("partitions= cuts the work among the workers of cluster=: give "
                            "cluster=")
        from .workspace import MIN_MEMORY

        if self.memory is not None and self.memory < MIN_MEMORY:
            from ...base.sysmem import human_size

            raise NnlmError(f"memory={human_size(self.memory)} is too small to make "
                            f"progress: counting needs at least {MIN_MEMORY >> 20}M")
        if self.temp and not self.memory:
            raise NnlmError("temp= names the folder for memory='s files: give memory= too")
        if method.needs_valid and self.valid_path is None:
            raise NnlmError(f"method={self.method} fits its weights on held-out text: give "
                            "valid_path=VALID")
        return method


@dataclass(frozen=True)
class Method:
    """An estimation method: its summary (``--help``), its own settings (fields of
    :class:`NgramJob` that only it reads), what it needs and can do, and ``fit(job,
    vocab, train, valid)`` on encoded text (``valid``: None unless it ``needs_valid``)."""

    summary: str
    fit: Callable[[NgramJob, Vocabulary, Stream, Stream | None], LanguageModel]
    settings: tuple[str, ...] = ()
    max_order: int = MAX_ORDER
    needs_valid: bool = False
    backoff_form: bool = False  # an ARPA file and KenLM's decoders can hold it
    distributed: bool = False  # cluster= estimates it


# each method's estimator loads with its first fit (numba's kernels among them): the
# registry itself is read by the command line at start-up, which stays light
def _kn(job, vocab, train, valid):
    from .kneser_ney import KneserNey

    model = KneserNey(vocab, job.order, job.discount_fallback).fit(
        train, job.prune_counts, memory=job.memory, temp=job.temp, keep_counts=job.compress)
    model.store_compress = job.compress
    return model


def _interpolated(job, vocab, train, valid):
    from .interpolated import DeletedInterpolation

    return DeletedInterpolation(vocab, job.order).fit(train, valid)


def _class(job, vocab, train, valid):
    from .classes import ClassNgram, load_classes
    from .kneser_ney import FALLBACK_DISCOUNTS

    if job.clustering_path is not None:
        word_class = load_classes(job.clustering_path, vocab)
    else:
        word_class = cluster_stream(train, vocab, job.n_classes)
    fallback = job.discount_fallback if job.discount_fallback is not None \
        else FALLBACK_DISCOUNTS
    return ClassNgram(vocab, job.order, job.n_classes, fallback).fit(
        train, word_class=np.asarray(word_class))


def _addk(job, vocab, train, valid):
    from .addk import AddK

    return AddK(vocab, job.order, job.k).fit(train)


def _stupid(job, vocab, train, valid):
    from .stupid import ALPHA, StupidBackoff

    return StupidBackoff(vocab, job.order, ALPHA if job.alpha is None else job.alpha).fit(train)


def _infgram(job, vocab, train, valid):
    from ..infgram import DISCOUNT, InfgramLM

    base = _kn(job, vocab, train, valid)
    return InfgramLM.fit(base, train, DISCOUNT if job.discount is None else job.discount)


def cluster_stream(stream: Stream, vocab: Vocabulary, n_classes: int,
                   max_iterations: int = 15) -> np.ndarray:
    """Exchange clustering of encoded text into ``n_classes`` classes, with progress."""
    from ...base.progress import progress_bar
    from .classes import exchange_clustering

    with progress_bar(max_iterations, f"clustering into {n_classes} classes", "pass") as bar:
        def report(it, moved, objective):
            bar.update(1)
            bar.set_postfix(moved=moved)

        return exchange_clustering(stream, vocab, n_classes, max_iterations, progress=report)


METHODS: dict[str, Method] = {
    "kn": Method("interpolated modified Kneser-Ney (Chen & Goodman; as KenLM's lmplz)", _kn,
                 ("discount_fallback", "prune_counts", "memory", "temp", "compress"),
                 backoff_form=True, distributed=True),
    "interpolated": Method("deleted interpolation (Jelinek-Mercer), weights by EM on --valid",
                           _interpolated, needs_valid=True),
    "class": Method("class-based: exchange clustering, then Kneser-Ney over class n-grams",
                    _class, ("n_classes", "clustering_path", "discount_fallback")),
    "addk": Method("add-k (Lidstone) unigram or bigram; a baseline", _addk, ("k",),
                   max_order=2),
    "stupid": Method("Stupid Backoff (Brants et al. 2007): relative frequencies and a penalty "
                     "--alpha per order backed off; scores, not probabilities (for "
                     "rescoring)", _stupid, ("alpha",)),
    "infgram": Method("unbounded n-grams: Kneser-Ney of order --order, and every longer "
                      "context of the text from a suffix-array index, by absolute "
                      "discounting --discount", _infgram,
                      ("discount", "discount_fallback", "prune_counts", "memory", "temp")),
}
# the settings some methods take and others do not (checked by NgramJob.check)
OWN_SETTINGS = sorted({name for m in METHODS.values() for name in m.settings})

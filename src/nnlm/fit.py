"""Models in one call: in memory, ``nnlm.train(texts, ...)`` in the manner of nltk.lm;
from text files, :func:`train_ngram` (what ``nnlm ngram train`` runs), which takes a
corpus of any size, in shards, on one machine or a Dask cluster.

    >>> import nnlm
    >>> texts = ["the cat sat", "the dog sat", "a cat ran"] * 20
    >>> lm = nnlm.train(texts, method="kn", order=3, discount_fallback=True)
    >>> round(lm.score("sat", ["the", "cat"]), 3)        # p(sat | the cat), as nltk.lm's
    0.95
    >>> round(lm.logscore("sat", ["the", "cat"]), 3)     # log2, as nltk.lm's
    -0.074
    >>> lm.sentence_logprob("the cat sat") < 0           # natural log, </s> included
    True

Nothing is written unless ``output`` names a directory. A network trains in a temporary
folder (the trainer checkpoints as it goes) that is removed once the model is in memory.
Errors name keyword arguments, as every library error does (the command line shows
them as its flags).
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from .base.errors import NnlmError
from .lm import LanguageModel
from .ngram.estimate.methods import NgramJob, cluster_stream
from .text.corpus import (
    read_corpus,
    read_stream,
    text_paths,
    warn_same_text,
    warn_unknown_share,
)
from .text.stream import Stream
from .text.vocab import Vocabulary


def _sentences(texts) -> list[list[str]]:
    if isinstance(texts, (str, os.PathLike)) and Path(texts).is_file():
        from .text.fileio import iter_lines

        return [line.split() for line in iter_lines(Path(texts), str(texts)) if line.strip()]
    if isinstance(texts, str):
        raise NnlmError("texts: give a list of sentences (or a Path to a file), not one string")
    out = [t.split() if isinstance(t, str) else list(t) for t in texts]
    return [s for s in out if s]


def train(texts: Iterable[str | Sequence[str]] | os.PathLike, valid=None, *,
          method: str = "kn", order: int | None = None, preset: str | None = None,
          output: str | os.PathLike | None = None, min_count: int = 1,
          discount_fallback: bool | Sequence[float] = False, k: float = 1.0,
          alpha: float | None = None, discount: float | None = None,
          max_steps: int | None = None, threads: int | None = None, verbose: bool = False,
          **train_options) -> LanguageModel:
    """A model trained on ``texts`` (sentences: strings or word lists; or a file).

    Count-based: ``method`` one of :data:`nnlm.ngram.METHODS`: "kn" (modified
    Kneser-Ney), "interpolated" (its weights fitted on ``valid``), "class", "addk" (with
    ``k``) or "stupid" (Stupid Backoff with ``alpha``: scores, not probabilities), of
    ``order`` n (default 3; with a ``preset``, the network's n), or "infgram"
    (Kneser-Ney below, an index of ``texts`` above, with ``discount``). Neural:
    ``preset`` (e.g. "mlp1", "tiny"; see ``nnlm train --help``), which needs ``valid``
    sentences for early stopping; ``train_options`` are the network's settings over its
    preset's (``m``, ``h``, ``context``, ``history``, ``far_spans``, ``word_dropout``, ...)
    and the training settings (``epochs``, ``lr``, ``batch_size``, ``seed``, ...): the
    keywords of every architecture and training flag of ``nnlm train``.
    ``output``: also save the model there (a new directory).
    """
    sentences = _sentences(texts)
    if not sentences:
        raise NnlmError("texts: no sentence with a word in it")
    if preset is None:
        if train_options:
            raise NnlmError(f"{', '.join(train_options)}: training settings of a "
                            "network; give preset= to train one")
        model = _ngram(sentences, valid, method, 3 if order is None else order, min_count,
                       discount_fallback, k, alpha, discount)
        if output is not None:
            from .models import save_model

            save_model(model, output)
        return model
    if order is not None:
        train_options = {**train_options, "order": order}
    return _network(sentences, valid, preset, output, min_count, max_steps, threads,
                    verbose, train_options)


def _ngram(sentences, valid, method, order, min_count, discount_fallback, k, alpha,
           discount=None) -> LanguageModel:
    from .ngram.estimate.methods import NgramJob

    job = NgramJob(None, method, order, valid_path=valid, min_count=min_count,
                   discount_fallback=discount_fallback or None, k=k, alpha=alpha,
                   discount=discount)
    spec = job.check()
    vocab = Vocabulary.from_counts(Counter(w for s in sentences for w in s), min_count)
    stream = Stream.from_lines(sentences, vocab)
    held_out = Stream.from_lines(_sentences(valid), vocab) if spec.needs_valid else None
    try:
        return spec.fit(job, vocab, stream, held_out)
    except ValueError as e:
        raise NnlmError(str(e)) from None


def _network(sentences, valid, preset, output, min_count, max_steps, threads, verbose,
             options) -> LanguageModel:
    from .models import load_model, save_model
    from .neural.training.run import train_from_files

    if valid is None:
        raise NnlmError("valid: a network needs validation sentences (for early stopping "
                        "and the learning-rate schedule)")
    from .neural.settings import ARCH_FIELDS, TRAIN_FIELDS

    backoff = options.pop("shortlist_backoff", None)  # with shortlist=K: an n-gram model
    unknown = [k for k in options if k not in ARCH_FIELDS and k not in TRAIN_FIELDS]
    if unknown:
        raise NnlmError(f"{', '.join(unknown)}: not a setting of a network or of its "
                        f"training (nnlm train --help lists them as flags)")
    arch = {k: v for k, v in options.items() if k in ARCH_FIELDS}
    options = {k: v for k, v in options.items() if k in TRAIN_FIELDS}
    valid_sentences = _sentences(valid)
    with tempfile.TemporaryDirectory(prefix="nnlm-train-") as tmp:
        files = []
        for name, part in (("train.txt", sentences), ("valid.txt", valid_sentences)):
            path = Path(tmp) / name
            path.write_text("".join(" ".join(s) + "\n" for s in part), encoding="utf-8")
            files.append(path)
        outdir = Path(output) if output is not None else Path(tmp) / "model"
        train_from_files(files[0], files[1], outdir, preset=preset, arch=arch, train=options,
                         load=load_model, save=save_model,
                         shortlist_backoff=backoff,
                         max_steps=max_steps, threads=threads, min_count=min_count,
                         log=print if verbose else (lambda *a, **k: None))
        return load_model(outdir)


# -- count-based models from text files ------------------------------------------------------
def _name(train_path) -> str:
    """A training text's name in a message: its path, or its first shard's and more."""
    if isinstance(train_path, (list, tuple)):
        return str(train_path[0]) + (f" (and {len(train_path) - 1} more)"
                                     if len(train_path) > 1 else "")
    return str(train_path)


def _encoded(train_path, vocab: Vocabulary | None, min_count: int = 1,
             max_size: int | None = None, tokenizer=None):
    """(vocabulary, encoded text): the vocabulary built from the text, or the fixed one
    (with a warning if most of the text is outside it); ``tokenizer``: a subword model's,
    which reads the text and stays with the vocabulary."""
    if vocab is None:
        return read_corpus(train_path, min_count, max_size, tokenizer)
    if tokenizer is not None:
        vocab.tokenizer = tokenizer
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


def run_ngram_job(job: NgramJob, log=lambda message: None, output=None) -> LanguageModel:
    """Run ``job``: checked against its method (:meth:`NgramJob.check`), then estimated
    in this process or, with ``cluster``, on a Dask cluster (``local:N`` or a scheduler's
    address; modified Kneser-Ney only: each worker reads its own shards, which may be
    fsspec URLs; ``partitions``: how many parts each order is cut into, by default one a
    worker). ``arpa``: also write the model there as an ARPA file (on a cluster,
    streamed from the workers' partitions). ``output`` (a cluster's job only): the model
    directory, written from the workers' partitions a piece at a time, so that this
    process never holds the whole model; the model saved there is returned. In one
    process ``output`` is saved to as well; with ``memory`` below what the text needs in
    memory, modified Kneser-Ney is then estimated a partition at a time with its pieces
    on disk (:mod:`nnlm.ngram.distributed.out_of_core`) and written from them."""
    method = job.check()
    if job.cluster is not None and job.tokenizer is not None:
        raise NnlmError("tokenizer= reads the text in this process; a cluster's workers read "
                        "words: drop cluster=, or tokenize the shards first")
    if job.cluster is not None:
        from .models import load_model, save_model
        from .ngram.distributed.run import train_distributed

        model = train_distributed(job.train_path, job.order, job.cluster, job.vocab,
                                  job.min_count, job.max_size, job.discount_fallback,
                                  job.partitions, log, arpa=job.arpa,
                                  save=None if output is None else
                                  (lambda streamed: save_model(streamed, output)))
        return model if output is None else load_model(output)
    if output is not None and _out_of_core(job):
        if job.compress:
            raise NnlmError("compress= keeps the estimate's counts in memory, and memory= is "
                            "below what this text needs there: raise memory= or drop it")
        from .models import load_model, save_model
        from .ngram.distributed.out_of_core import estimate_out_of_core

        estimate_out_of_core(text_paths(job.train_path), job.order, job.memory, job.temp,
                             job.vocab, job.min_count, job.max_size, job.discount_fallback,
                             save=lambda streamed: save_model(streamed, output),
                             arpa=job.arpa, log=log)
        return load_model(output)
    vocab, train = _encoded(job.train_path, job.vocab, job.min_count, job.max_size,
                            job.tokenizer)
    valid = None
    if method.needs_valid:
        warn_same_text(job.train_path, job.valid_path)
        valid = read_stream(job.valid_path, vocab)
    try:
        model = method.fit(job, vocab, train, valid)
    except ValueError as e:
        raise NnlmError(str(e)) from None
    if job.arpa is not None:
        from .ngram.formats.arpa_write import write_arpa

        write_arpa(model, job.arpa)
    if output is not None:
        from .models import save_model

        save_model(model, output)
    return model


def _out_of_core(job: NgramJob) -> bool:
    """Whether ``job`` is estimated a partition at a time with its pieces on disk
    (:mod:`nnlm.ngram.distributed.out_of_core`): modified Kneser-Ney under ``memory``
    where the in-memory estimator would pass it (the text's size says), from files the
    compiled reader can read twice."""
    paths = text_paths(job.train_path)
    if (job.method != "kn" or job.memory is None or job.prune_counts or job.tokenizer
            is not None or any(str(p) == "-" for p in paths)):
        return False
    from .ngram.distributed import out_of_core  # (numba's kernels: only under --memory)

    if not out_of_core.available():
        return False
    try:
        tokens = sum(out_of_core.tokens_about(p) for p in paths)
    except OSError:
        return False  # the reader names what is missing
    return out_of_core.in_memory_need(tokens) > job.memory


def merge_ngram_models(models, weights=None, valid=None, iterations: int = 30):
    """``nnlm ngram merge``: back-off ``models`` interpolated into one back-off model
    (:mod:`nnlm.ngram.estimate.merge`), with ``weights``, or weights fitted by EM on the
    text ``valid`` (each model scoring it over its own vocabulary). Returns (merged model,
    weights)."""
    import numpy as np

    from .interpolation import em_mixture_weights
    from .ngram.estimate.merge import merge_backoff
    from .text.corpus import read_stream

    if weights is None:
        if valid is None:
            raise NnlmError("merge needs weights (one per model) or a validation text")
        rows = [m.logprobs(read_stream(valid, m.vocab)) for m in models]
        weights = list(em_mixture_weights(np.stack(rows, axis=1), iterations))
    return merge_backoff(models, weights), list(weights)

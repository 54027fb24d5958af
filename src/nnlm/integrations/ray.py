"""nnlm's perplexity stage for Ray Data's ``map_batches``::

    import ray
    from nnlm.integrations.ray import Perplexity

    ds = ray.data.read_json("raw/")
    ds = ds.map_batches(Perplexity, fn_constructor_kwargs={"model": "models/en.arpa.bin",
                                                           "max_perplexity": 1000},
                        concurrency=8)  # eight actors, each mapping the model once
    ds.write_json("kept/")

Ray runs a callable class as a pool of actors: each builds one :class:`Perplexity` (the
model and the SentencePiece model opened once, mapped where the model is a KenLM binary
or nnlm's one-file model) and calls it on batch after batch. A batch is Ray's ``numpy``
format (a dict of column arrays, the default) or ``pandas`` (a DataFrame); the same
comes back with a ``perplexity`` column (float64; NaN where cc_net gives none: a text
with nothing to score), as cc_net and DataTrove compute it, unrounded, and without the
rows outside ``max_perplexity`` / ``min_perplexity`` where those are given (a NaN is
outside any bound). Nothing here imports Ray: the class is a plain callable, usable on a
batch without it.
"""

from __future__ import annotations

import math
import os

import numpy as np

from ..base.errors import NnlmError
from ..filter.perplexity import DocumentScorer, pair_tokenizer


class Perplexity:
    """Add ``column`` (default ``perplexity``) to a batch of documents (module docstring).

    ``model``: a KenLM binary or ARPA file, or an nnlm model; ``tokenizer``: its
    SentencePiece model (default: ``LANG.sp.model`` beside a cc_net-style model; None
    where there is none); ``normalize``: ``ccnet`` (default), ``datatrove`` or ``none``;
    ``text_field``: the column holding the text."""

    def __init__(self, model: str | os.PathLike, tokenizer: str | os.PathLike | None = None,
                 normalize: str = "ccnet", text_field: str = "text",
                 column: str = "perplexity", max_perplexity: float | None = None,
                 min_perplexity: float | None = None):
        for name, bound in (("max_perplexity", max_perplexity),
                            ("min_perplexity", min_perplexity)):
            if bound is not None and not (isinstance(bound, (int, float)) and bound > 0
                                          and math.isfinite(bound)):
                raise NnlmError(f"{name}={bound!r}: give a finite number above 0")
        tokenizer = pair_tokenizer(model) if tokenizer is None else tokenizer
        self.scorer = DocumentScorer(model, tokenizer, normalize)
        self.text_field, self.column = text_field, column
        self.max_perplexity, self.min_perplexity = max_perplexity, min_perplexity

    def __call__(self, batch):
        texts = batch[self.text_field]
        if not all(isinstance(t, str) for t in texts):
            bad = next(i for i, t in enumerate(texts) if not isinstance(t, str))
            raise NnlmError(f"row {bad} of the batch: field {self.text_field!r} is "
                            f"{type(texts[bad]).__name__}, not a string")
        scores = np.array([np.nan if p is None else p
                           for p in self.scorer.perplexities(list(texts))], np.float64)
        keep = self._kept(scores)
        if isinstance(batch, dict):  # Ray's numpy format
            out = {k: np.asarray(v) for k, v in batch.items()}
            out[self.column] = scores
            return out if keep is None else {k: v[keep] for k, v in out.items()}
        out = batch.assign(**{self.column: scores})  # a pandas DataFrame
        return out if keep is None else out[keep].reset_index(drop=True)

    def _kept(self, scores: np.ndarray) -> np.ndarray | None:
        """Which rows stay, or None where no bound is given."""
        if self.max_perplexity is None and self.min_perplexity is None:
            return None
        keep = np.isfinite(scores)
        if self.max_perplexity is not None:
            keep &= scores <= self.max_perplexity
        if self.min_perplexity is not None:
            keep &= scores >= self.min_perplexity
        return keep

"""nnlm's perplexity stage as a DataTrove pipeline step::

    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from nnlm.integrations.datatrove import PerplexityFilter

    LocalPipelineExecutor(pipeline=[
        JsonlReader("raw/"),
        PerplexityFilter("models/en.arpa.bin", max_perplexity=1000),  # en.sp.model beside
        JsonlWriter("kept/"),
    ], tasks=8).run()

Each document gets ``metadata["perplexity"]`` as DataTrove's own
``KenlmModel.get_perplexity`` computes it (its normalization by default, SentencePiece,
rounded to one decimal: the same numbers, tested against it), in batches of
``batch_size`` documents; documents above ``max_perplexity`` (or below
``min_perplexity``) are dropped, through DataTrove's exclusion writer if one is given.
With neither bound it only annotates. The model is opened once per worker, mapped where
it is a KenLM binary or nnlm's one-file model.
"""

from __future__ import annotations

import os

from datatrove.pipeline.filters.base_filter import BaseFilter

from ..filter.perplexity import DocumentScorer, pair_tokenizer

DIGITS = 1  # DataTrove's get_perplexity rounds to one decimal


class PerplexityFilter(BaseFilter):
    """Annotate (and optionally filter) documents by perplexity (module docstring).

    ``model``: a KenLM binary or ARPA file, or an nnlm model; ``tokenizer``: its
    SentencePiece model (default: ``LANG.sp.model`` beside a cc_net-style model; None
    where there is none); ``normalize``: ``datatrove`` (DataTrove's own), ``ccnet`` or
    ``none``."""

    name = "🧮 nnlm perplexity"

    def __init__(self, model: str | os.PathLike, tokenizer: str | os.PathLike | None = None,
                 normalize: str = "datatrove", max_perplexity: float | None = None,
                 min_perplexity: float | None = None, metadata_key: str = "perplexity",
                 exclusion_writer=None, batch_size: int = 512):
        super().__init__(exclusion_writer, batch_size)
        self.model = os.fspath(model)
        tokenizer = pair_tokenizer(model) if tokenizer is None else tokenizer
        self.tokenizer = None if tokenizer is None else os.fspath(tokenizer)
        self.normalize, self.metadata_key = normalize, metadata_key
        self.max_perplexity, self.min_perplexity = max_perplexity, min_perplexity
        self._scorer: DocumentScorer | None = None  # opened in the worker, on first use

    def __getstate__(self) -> dict:  # a worker opens its own (the model mapped once)
        state = dict(self.__dict__)
        state["_scorer"] = None
        return state

    @property
    def scorer(self) -> DocumentScorer:
        if self._scorer is None:
            self._scorer = DocumentScorer(self.model, self.tokenizer, self.normalize)
        return self._scorer

    def filter_batch(self, batch: list) -> list[bool | tuple[bool, str]]:
        out = []
        for doc, p in zip(batch, self.scorer.perplexities([d.text for d in batch])):
            p = None if p is None else round(p, DIGITS)
            doc.metadata[self.metadata_key] = p
            if p is None:
                out.append((False, "no_perplexity") if self._bounded() else True)
            elif self.max_perplexity is not None and p > self.max_perplexity:
                out.append((False, "perplexity_above"))
            elif self.min_perplexity is not None and p < self.min_perplexity:
                out.append((False, "perplexity_below"))
            else:
                out.append(True)
        return out

    def filter(self, doc) -> bool | tuple[bool, str]:
        return self.filter_batch([doc])[0]

    def _bounded(self) -> bool:
        return self.max_perplexity is not None or self.min_perplexity is not None

"""``nnlm mix``'s workflow: load saved models, fit their mixture's weights by EM on a
validation text (Jelinek & Mercer 1980; per frequency bucket of the context, as the paper
mixes its networks with an n-gram model), report, and save.

It sits above the model families and :mod:`nnlm.models`, which it loads through; the
mixture itself is :class:`nnlm.mixture.Mixture`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..base.errors import NnlmError
from ..lm import evaluation_from_logprobs
from ..mixture import ContextBuckets, Mixture
from ..model_files import check_model_output
from ..models import load_model
from ..text.corpus import read_stream


@dataclass(frozen=True)
class MixResult:
    """What :func:`mix_models` found: the mixture, each component's and the mixture's
    validation perplexity."""

    mixture: Mixture
    component_perplexities: list[float]
    perplexity: float


def mix_models(paths: Sequence[str | os.PathLike], valid_path: str | os.PathLike,
               output: str | os.PathLike | None = None, weights: Sequence[float] | None = None,
               per_bucket: str | os.PathLike | None = None, iterations: int = 30,
               speed=None) -> MixResult:
    """``nnlm mix``: load the models, fit their weights by EM on the validation text (or
    take ``weights``; per frequency bucket of the context when ``per_bucket`` names the
    text that counts contexts), and save the mixture to ``output`` if given. Each
    component's validation scores are computed once, for the report, EM and the mixture.
    ``speed``: where and how the networks score (an object with ``bf16``, ``device`` and
    ``threads``, as the command line's options; None: float32 on the CPU). The saved
    mixture records none of it.
    """
    if output is not None:
        check_model_output(output, Mixture.kind)
    models = [load_model(p) for p in paths]
    if weights and len(weights) != len(models):
        raise NnlmError(f"weights= needs one weight per model ({len(models)})")
    buckets = None
    if per_bucket:
        buckets = ContextBuckets.from_stream(read_stream(per_bucket, models[0].vocab),
                                             len(models[0].vocab))
    mixture = Mixture(models, weights=weights, buckets=buckets)
    if speed is not None and (speed.bf16 or speed.device != "cpu" or mixture.neural_parts()):
        from ..neural.runtime import configure_for_scoring

        configure_for_scoring(mixture, speed.device, speed.bf16, False, speed.threads)
    valid = read_stream(valid_path, mixture.vocab)
    lp = mixture.component_logprobs(valid)
    each = [evaluation_from_logprobs(valid, row, mixture.vocab).perplexity for row in lp]
    if not weights:
        mixture.fit_weights(valid, iterations, component_logprobs=lp)
    result = evaluation_from_logprobs(valid, mixture.mix(lp, mixture.bucket_contexts(valid)),
                                      mixture.vocab)
    if output is not None:
        mixture.save(output, paths)
    return MixResult(mixture, each, result.perplexity)

"""An adapted network inside a mixture: the network's log-probabilities under the cache
and/or dynamic evaluation take its place among the components', and the mixture's
weights (per bucket where it has buckets) are fitted again by EM on VALID, where the
adapted network has earned a weight of its own."""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from ...base.errors import NnlmError
from ...text.stream import Stream
from ..nplm_lm import NeuralLM, ShortListLM
from .choose import TUNE_TOKENS, adapt, choose_settings


def adaptable_component(mixture) -> int:
    """The index of the mixture's one network that can be adapted, or one line why not."""
    found = [k for k, m in enumerate(mixture.components)
             if isinstance(m, NeuralLM) and not isinstance(m, ShortListLM)
             and m.model.linear_output]
    if len(found) != 1:
        raise NnlmError(f"a mixture with {len(found)} networks that can be adapted; --cache "
                        "and --dynamic adapt a mixture's one network (mix the adapted "
                        "models' outputs yourself for more)")
    return found[0]


def adapted_mixture_logprobs(mixture, stream: Stream, valid: Stream, *,
                             cache: dict | None = None, dynamic: dict | None = None,
                             tune_tokens: int | None = TUNE_TOKENS,
                             log: Callable[[str], None] = print) -> tuple[np.ndarray, dict]:
    """(log p of every slot of ``stream``, the report): the mixture with its network
    adapted (settings chosen for the network alone) and its weights refitted on
    ``valid``."""
    k = adaptable_component(mixture)
    net = mixture.components[k]
    dyn, chosen, report = choose_settings(net, cache=cache, dynamic=dynamic, valid=valid,
                                          tune_tokens=tune_tokens, log=log)
    refit = copy.copy(mixture)
    refit.weights = mixture.weights.copy()
    refit.fit_weights(valid, component_logprobs=_components(mixture, valid, k, dyn, chosen))
    lp = _components(mixture, stream, k, dyn, chosen)
    report["mixture_weights"] = refit.weights.tolist() if len(refit.weights) > 1 \
        else refit.weights[0].tolist()
    report["adapted_component"] = k
    log(f"mixture weights refitted on VALID with component {k + 1} adapted: "
        f"{np.round(refit.weights.mean(axis=0), 3).tolist()} (mean over buckets)")
    return refit.mix(lp, refit.bucket_contexts(stream)), report


def _components(mixture, stream: Stream, k: int, dyn, cache) -> np.ndarray:
    """(K, N): each component's log p of each slot, component k adapted."""
    return np.stack([adapt(m, stream, dyn, cache) if i == k else m.logprobs(stream)
                     for i, m in enumerate(mixture.components)])

"""pyctcdecode.decoder: the beam search decoder and its beams."""

# absolute imports: this module is also imported as pyctcdecode's (sys.modules
# ["pyctcdecode"] = nnlm.pyctcdecode), where a relative one would leave the package

import numpy as np

from nnlm.decoding.ctc.prefix_search import (  # noqa: F401 - the module's names, as pyctcdecode's
    EMPTY_START_BEAM,
    NULL_FRAMES,
    Beam,
    LMBeam,
    OutputBeam,
    OutputBeamMPSafe,
    merge_beams,
    prune_history,
)
from nnlm.decoding.ctc.prefix_search import log_probs as _log_probs  # noqa: F401
from nnlm.decoding.ctc.prefix_search import merge_tokens as _merge_tokens  # noqa: F401
from nnlm.decoding.ctc.prefix_search import sort_and_trim as _sort_and_trim_beams  # noqa: F401
from nnlm.decoding.ctc.prefix_search import sum_log_scores as _sum_log_scores  # noqa: F401
from nnlm.decoding.ctc.pyctcdecode import BeamSearchDecoderCTC, build_ctcdecoder  # noqa: F401
from nnlm.decoding.ctc.pyctcdecode import valid_pool as _get_valid_pool  # noqa: F401


def _normalize_whitespace(text: str) -> str:
    """Words separated by one space."""
    return " ".join(text.split())


def _log_softmax(x, axis=None):
    """log softmax along ``axis`` (pyctcdecode's helper: scipy's formula)."""
    x_max = np.amax(x, axis=axis, keepdims=True)
    if x_max.ndim > 0:
        x_max[~np.isfinite(x_max)] = 0
    elif not np.isfinite(x_max):
        x_max = 0
    tmp = x - x_max
    with np.errstate(divide="ignore"):
        return tmp - np.log(np.sum(np.exp(tmp), axis=axis, keepdims=True))


def _merge_beams(beams):
    """Beams with the same words, partial word and last label merged (as Beams)."""
    return [Beam(*b) for b in merge_beams(beams)]


def _prune_history(beams, lm_order: int):
    """Beams that agree on their last n - 1 words pruned to the first (as Beams)."""
    return [Beam(*b) for b in prune_history(beams, lm_order)]

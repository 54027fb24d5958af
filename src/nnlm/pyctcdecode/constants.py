"""pyctcdecode.constants: the decoder's defaults."""

# absolute imports: this module is also imported as pyctcdecode's (sys.modules
# ["pyctcdecode"] = nnlm.pyctcdecode), where a relative one would leave the package

from nnlm.decoding.ctc.fusion import (  # noqa: F401 - the module's names, as pyctcdecode's
    AVG_TOKEN_LEN,
    DEFAULT_ALPHA,
    DEFAULT_BETA,
    DEFAULT_SCORE_LM_BOUNDARY,
    DEFAULT_UNK_LOGP_OFFSET,
    LOG_BASE_CHANGE_FACTOR,
)
from nnlm.decoding.ctc.hotwords import DEFAULT_HOTWORD_WEIGHT  # noqa: F401
from nnlm.decoding.ctc.prefix_search import (  # noqa: F401
    DEFAULT_BEAM_WIDTH,
    DEFAULT_MIN_TOKEN_LOGP,
    DEFAULT_PRUNE_BEAMS,
    DEFAULT_PRUNE_LOGP,
    MIN_TOKEN_CLIP_P,
)

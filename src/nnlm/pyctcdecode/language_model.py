"""pyctcdecode.language_model: language models and hotwords inside the decoder."""

from ..decoding.ctc.fusion import (  # noqa: F401 - the module's names, as pyctcdecode's
    AbstractLanguageModel,
    AbstractLMState,
    KenlmState,
)
from ..decoding.ctc.hotwords import HotwordScorer  # noqa: F401
from ..decoding.ctc.pyctcdecode import (  # noqa: F401
    LanguageModel,
    MultiLanguageModel,
    MultiLanguageModelState,
    load_unigram_set_from_arpa,
)

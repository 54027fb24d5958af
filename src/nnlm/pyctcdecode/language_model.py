"""pyctcdecode.language_model: language models and hotwords inside the decoder."""

# absolute imports: this module is also imported as pyctcdecode's (sys.modules
# ["pyctcdecode"] = nnlm.pyctcdecode), where a relative one would leave the package

from nnlm.decoding.ctc.fusion import (  # noqa: F401 - the module's names, as pyctcdecode's
    AbstractLanguageModel,
    AbstractLMState,
    KenlmState,
)
from nnlm.decoding.ctc.hotwords import HotwordScorer  # noqa: F401
from nnlm.decoding.ctc.pyctcdecode import (  # noqa: F401
    LanguageModel,
    MultiLanguageModel,
    MultiLanguageModelState,
    load_unigram_set_from_arpa,
)

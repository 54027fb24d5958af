"""pyctcdecode's API, with nnlm's search and any nnlm model: change one import.

    from nnlm.pyctcdecode import build_ctcdecoder      # was: from pyctcdecode import ...

Code that imports ``pyctcdecode`` itself (transformers' ``Wav2Vec2ProcessorWithLM``,
NeMo's scripts) runs unchanged once ``sys.modules["pyctcdecode"] = nnlm.pyctcdecode``:
its submodules (``alphabet``, ``constants``, ``decoder``, ``language_model``) are here
too. :mod:`nnlm.decoding.ctc.pyctcdecode` says what differs from pyctcdecode 0.5.
"""

from ..decoding.ctc.alphabet import Alphabet
from ..decoding.ctc.pyctcdecode import (
    BeamSearchDecoderCTC,
    LanguageModel,
    build_ctcdecoder,
)

__all__ = ["Alphabet", "BeamSearchDecoderCTC", "LanguageModel", "build_ctcdecoder"]

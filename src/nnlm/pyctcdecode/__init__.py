"""pyctcdecode's API, with nnlm's search and any nnlm model: change one import.

    from nnlm.pyctcdecode import build_ctcdecoder      # was: from pyctcdecode import ...

Code that imports ``pyctcdecode`` itself (transformers' ``Wav2Vec2ProcessorWithLM``,
NeMo's scripts) runs unchanged once ``sys.modules["pyctcdecode"] = nnlm.pyctcdecode``:
its submodules (``alphabet``, ``constants``, ``decoder``, ``language_model``) are here
too. :mod:`nnlm.decoding.ctc.pyctcdecode` says what differs from pyctcdecode 0.5.

nnlm's own additions: ``build_batch_decoder`` (the same arguments and a ``device``), or
``BatchDecoderCTC.from_decoder(decoder)``, decodes a batch of utterances at once on the
CPU or a GPU, with the same beams (:mod:`nnlm.decoding.ctc.batch_decoder`; it needs
torch); ``log_add=False`` (``build_ctcdecoder``'s, the decoder's and the batch
decoder's) scores each text by its best alignment instead of pyctcdecode's sum over
alignments, as flashlight's decoders can.
"""

from ..decoding import ctc
from ..decoding.ctc.alphabet import Alphabet
from ..decoding.ctc.pyctcdecode import (
    BeamSearchDecoderCTC,
    LanguageModel,
    build_ctcdecoder,
)

__all__ = ["Alphabet", "BatchDecoderCTC", "BeamSearchDecoderCTC", "LanguageModel",
           "build_batch_decoder", "build_ctcdecoder"]


def __getattr__(name):
    if name in ("build_batch_decoder", "BatchDecoderCTC"):
        return getattr(ctc, name)  # needs torch: the package loads it when asked for
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

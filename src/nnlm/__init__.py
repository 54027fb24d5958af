"""nnlm: neural probabilistic language models (Bengio et al. 2003) and their count-based
baselines, behind one small interface.

    >>> from nnlm import Vocabulary, Stream, AddK, evaluate
    >>> vocab = Vocabulary.from_counts({"a": 2, "b": 1})
    >>> train = Stream.from_lines([["a", "b"], ["a"]], vocab)
    >>> model = AddK(vocab, order=2).fit(train)
    >>> round(evaluate(model, train).perplexity, 3)
    2.46

Importing nnlm imports nothing heavy: each name loads its module when first used (numpy
with the first model, torch with the first network).
``nnlm.Decoder`` and ``nnlm.DecoderState`` speak KenLM's method names with nnlm's
conventions (see :mod:`nnlm.decoding`; kenlm's own API is ``nnlm.kenlm``);
``nnlm.Index`` counts n-grams of any length in a corpus (see :mod:`nnlm.index`).
"""

from .base.version import __version__  # noqa: F401 - nnlm.__version__

# Every name loads on first use (PEP 562), so that ``import nnlm.kenlm`` opening a trie
# file imports neither numpy nor torch: the kenlm module's drop-in then costs a process
# no more than kenlm's own.
_LAZY = {"count_words": "nnlm.text.corpus", "read_stream": "nnlm.text.corpus",
         "Decoder": "nnlm.decoding.api", "DecoderState": "nnlm.decoding.api",
         "Index": "nnlm.index.index", "build_index": "nnlm.index.build",
         "NnlmError": "nnlm.base.errors", "train": "nnlm.fit", "Evaluation": "nnlm.lm",
         "LanguageModel": "nnlm.lm", "evaluate": "nnlm.lm", "load_model": "nnlm.models",
         "save_model": "nnlm.models", "AddK": "nnlm.ngram.estimate.addk",
         "Stream": "nnlm.text.stream", "Vocabulary": "nnlm.text.vocab",
         "NPLM": "nnlm.neural.nplm_lm", "NeuralLM": "nnlm.neural.nplm_lm",
         "NPLMConfig": "nnlm.neural.networks.network",
         "TrainConfig": "nnlm.neural.training.train", "Trainer": "nnlm.neural.training.train"}


TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing
if TYPE_CHECKING:  # the names for type checkers and editors; never run
    from .base.errors import NnlmError
    from .decoding.api import Decoder, DecoderState
    from .fit import train
    from .index.build import build_index
    from .index.index import Index
    from .lm import Evaluation, LanguageModel, evaluate
    from .models import load_model, save_model
    from .neural.networks.network import NPLMConfig
    from .neural.nplm_lm import NPLM, NeuralLM
    from .neural.training.train import TrainConfig, Trainer
    from .ngram.estimate.addk import AddK
    from .text.corpus import count_words, read_stream
    from .text.stream import Stream
    from .text.vocab import Vocabulary


def __getattr__(name):
    import importlib

    if name in ("Model", "State"):  # renamed: a DeprecationWarning each time, no cache
        return importlib.import_module("nnlm.decoding.api").renamed(name)
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    try:  # a submodule not yet imported (nnlm.models, ...), as an eager package had them
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as e:
        if e.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module 'nnlm' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AddK", "Decoder", "DecoderState", "Evaluation", "Index", "LanguageModel", "NPLM",
    "NPLMConfig", "NeuralLM", "NnlmError", "Stream", "TrainConfig", "Trainer", "Vocabulary",
    "build_index", "count_words", "evaluate", "load_model", "read_stream", "save_model", "train",
]

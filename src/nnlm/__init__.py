"""nnlm: neural probabilistic language models (Bengio et al. 2003) and their count-based
baselines, behind one small interface.

    >>> from nnlm import Vocabulary, Stream, AddK, evaluate
    >>> vocab = Vocabulary.from_counts({"a": 2, "b": 1})
    >>> train = Stream.from_lines([["a", "b"], ["a"]], vocab)
    >>> model = AddK(vocab, order=2).fit(train)
    >>> round(evaluate(model, train).perplexity, 3)
    2.46

Importing nnlm never imports torch; the neural models load it when first used.
``nnlm.Model`` and ``nnlm.State`` speak KenLM's Python API (see :mod:`nnlm.decoding`).
"""

from .corpus import count_words, read_stream
from .decoding import Model, State
from .errors import NnlmError
from .fit import train
from .lm import Evaluation, LanguageModel, evaluate
from .models import load_model, save_model
from .ngram import AddK
from .stream import Stream
from .vocab import Vocabulary

__version__ = "0.1.0"

_LAZY = {"NPLM": "nnlm.neural.nplm_lm", "NeuralLM": "nnlm.neural.nplm_lm",
         "NPLMConfig": "nnlm.neural.networks.network", "TrainConfig": "nnlm.neural.training.train",
         "Trainer": "nnlm.neural.training.train"}


def __getattr__(name):  # the neural names import torch only when first used
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'nnlm' has no attribute {name!r}")


__all__ = [
    "AddK", "Evaluation", "LanguageModel", "Model", "NPLM", "NPLMConfig", "NeuralLM", "NnlmError",
    "State", "Stream", "TrainConfig", "Trainer", "Vocabulary",
    "count_words", "evaluate", "load_model", "read_stream", "save_model", "train",
]

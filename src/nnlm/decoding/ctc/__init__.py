"""CTC decoding with a language model.

- :mod:`.prefix_search`: the search over character or subword labels that pyctcdecode
  runs (words form between separators, partial words scored against the vocabulary's
  prefixes, the LM fused a word at a time), with its :mod:`.alphabet` of labels, its
  word-level :mod:`.fusion` over any nnlm model and its :mod:`.hotwords`;
  :mod:`.pyctcdecode` gives it pyctcdecode's API (re-exported as
  :mod:`nnlm.pyctcdecode`).
- :mod:`.words`: a beam search whose labels are the LM's own tokens, the whole vocabulary
  advanced at once in torch (``beam_search``) and its one-word-at-a-time reference
  (``reference_beam_search``); imported on first use (it needs torch).
"""

_WORDS = ("beam_search", "reference_beam_search", "Hypothesis")


def __getattr__(name):
    if name in _WORDS:
        import importlib  # words.py needs torch: loaded only when its search is asked for

        value = getattr(importlib.import_module(f"{__name__}.words"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_WORDS)

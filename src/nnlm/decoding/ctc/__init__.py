"""CTC decoding with a language model.

- :mod:`.prefix_search`: the search over character or subword labels that pyctcdecode
  runs (words form between separators, partial words scored against the vocabulary's
  prefixes, the LM fused a word at a time), with its :mod:`.alphabet` of labels, its
  word-level :mod:`.fusion` over any nnlm model and its :mod:`.hotwords`;
  :mod:`.pyctcdecode` gives it pyctcdecode's API (re-exported as
  :mod:`nnlm.pyctcdecode`).
- :mod:`.batch_decoder`: the same search for a batch of utterances at once on tensors,
  the CPU or a GPU (``build_batch_decoder``; :mod:`.batched` is its search, :mod:`.word_table`
  its words as integer tables).
- :mod:`.words`: a beam search whose labels are the LM's own tokens, the whole vocabulary
  advanced at once in torch (``beam_search``) and its one-word-at-a-time reference
  (``reference_beam_search``).

The torch searches are imported on first use (the core install has no torch).
"""

from ...base.extras import missing_extra

_TORCH = {"beam_search": "words", "reference_beam_search": "words", "Hypothesis": "words",
          "build_batch_decoder": "batch_decoder", "BatchDecoderCTC": "batch_decoder",
          "BatchBeam": "batched"}


def __getattr__(name):
    if name in _TORCH:
        import importlib  # these need torch: loaded only when asked for

        try:
            module = importlib.import_module(f"{__name__}.{_TORCH[name]}")
        except ModuleNotFoundError as e:  # no torch: one line naming the extra
            raise missing_extra(e, name) or e from None
        value = globals()[name] = getattr(module, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_TORCH)

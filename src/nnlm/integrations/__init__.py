"""Thin steps that put nnlm's stages into other pipelines: :mod:`.datatrove` (a DataTrove
filter for perplexity) and :mod:`.ray` (a callable class for Ray Data's
``map_batches``). Each is imported only by code that runs that pipeline."""

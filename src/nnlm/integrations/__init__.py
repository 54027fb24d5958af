"""Thin steps that put nnlm's stages into other pipelines: :mod:`.datatrove` (a DataTrove
filter for perplexity). Each imports its pipeline's package, so it is imported only by
code that runs that pipeline."""

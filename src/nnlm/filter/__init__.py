"""Perplexity filtering of document corpora, as cc_net and DataTrove do it, at nnlm's
speed: :mod:`.normalize` (their normalizations), :mod:`.documents` (JSON Lines and text
in and out), :mod:`.perplexity` (a document's perplexity under a reference model),
:mod:`.buckets` (cc_net's head, middle and tail), :mod:`.job` (one input) and
:mod:`.run` (many: resumed, on worker processes), ``nnlm filter score``."""

from .buckets import Cutoffs, plot_histogram, read_cutoff_table, sample_cutoffs
from .job import Settings, filter_file, sample_perplexities
from .normalize import NORMALIZERS, ccnet, datatrove
from .perplexity import DocumentScorer, pair_tokenizer, perplexity
from .run import filter_files

__all__ = ["Cutoffs", "DocumentScorer", "NORMALIZERS", "Settings", "ccnet", "datatrove",
           "filter_file", "filter_files", "pair_tokenizer", "perplexity", "plot_histogram",
           "read_cutoff_table", "sample_cutoffs", "sample_perplexities"]

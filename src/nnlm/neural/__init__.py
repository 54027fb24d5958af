"""The neural family: networks that end in one linear output layer over the vocabulary
(Bengio et al. 2003 and its descendants).

- ``nplm_lm.py``: any network as a LanguageModel (exact, self-normalized, short-list);
  ``sentence.py``, ``open_vocab.py`` and ``embeddings.py`` are what a trained one does
  beyond scoring (sentence vectors, new words, maps of C);
- ``networks/``: the networks themselves (the NPLM, the log-bilinear model of Mnih &
  Hinton 2007, the energy model), their registry, the fused |V|-wide output layer and
  their weights files;
- ``training/``: the loop (``train.py``), the job (``run.py``), the objectives (full
  softmax, NCE, self-normalization), the optimizers (the paper's SGD, lazy Adam/AdamW,
  compiled updates), batches, the run's checkpoint and its metrics log;
- ``parallel/``: the schemes of section 3 (data-parallel and output-parallel ranks
  under torchrun, asynchronous Hogwild workers) and CUDA graphs;
- ``settings.py``, ``presets.py``: training settings and named architectures, readable
  without torch; ``runtime.py``, ``allocator.py``: devices, threads, memory.

Importing this package imports nothing; the modules import torch (but settings.py and
presets.py).
"""

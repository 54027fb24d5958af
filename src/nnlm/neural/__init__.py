"""The neural family: networks that end in one linear output layer over the vocabulary.

- ``network.py``: the protocol and its networks (the NPLM of Bengio et al. 2003, the
  log-bilinear model of Mnih & Hinton 2007), with a registry by name;
- ``objectives.py``: full softmax, NCE, self-normalization;
- ``output.py``: the fused |V|-wide output layer;
- ``optim.py``: the paper's SGD and (lazy) Adam/AdamW for any network;
- ``nplm_lm.py``: any network as a LanguageModel (exact, self-normalized, short-list);
- ``train.py``, ``run.py``, ``runtime.py``: training and the job layer (devices, threads);
- ``presets.py``: named architectures and recipes.

Importing this package imports nothing; the modules import torch.
"""

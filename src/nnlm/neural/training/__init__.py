"""Training a network of the family: ``train.py`` (the loop: epochs, early stopping,
divergence, exact resume), ``run.py`` (``nnlm train``'s job: settings, presets, resume),
``cuda_graph.py`` (one update as a CUDA graph), ``run_checkpoint.py`` (CKPT/state) and
``metrics_log.py`` (metrics.csv, the learning curve, TensorBoard). What is minimized and
how stand below it: ``../objectives.py``, ``../optim/``, ``../batches.py``."""

"""Training a network of the family: ``train.py`` (the loop: epochs, early stopping,
divergence, exact resume), ``run.py`` (``nnlm train``'s job: settings, presets, resume),
``objectives.py``, ``optim.py`` and ``compiled_updates.py`` (what is minimized and how),
``batches.py``, ``run_checkpoint.py`` (CKPT/state) and ``metrics_log.py`` (metrics.csv,
the learning curve, TensorBoard)."""

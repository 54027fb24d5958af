"""The parallel schemes of Bengio et al. (2003), section 3: ``schemes.py`` (what each
scheme owns in a run), ``distributed.py`` (torchrun's process group, data-parallel
gradient sums), ``output_parallel.py`` (the parameter-parallel output layer),
``hogwild.py`` and ``heartbeat.py`` (asynchronous workers on shared memory, and how a
stuck one is caught). They stand on the objectives and optimizers, never on training/,
which stands on them."""

"""N-gram estimation beyond one machine, on Dask (``nnlm ngram train SHARDS --cluster``).

- ``cluster.py``: starting or joining the cluster (``local:N`` or a scheduler address);
- ``kernels.py``: what a worker does with its shard or partition (numpy);
- ``estimate.py``: the passes of modified Kneser-Ney and the model they give.

Dask is an optional part (``pip install "nnlm[distributed]"``); nothing
here is imported by a single-process run.
"""

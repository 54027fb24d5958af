"""The networks of the family: each maps a context of n-1 word ids to z (``network.py``:
the protocol, the NPLM and the log-bilinear model; ``energy.py``: the paper's energy
variant), scores z against the output rows (``output.py``: the fused |V|-wide layer),
is built by name (``registry.py``) and saved with its binding (``checkpoint.py``)."""

"""Experiments above the model families: the reproduction of the paper's Table 1."""

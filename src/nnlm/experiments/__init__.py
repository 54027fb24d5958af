"""Experiments and workflows above the model families: the reproduction of the paper's
Table 1 (``reproduce.py``), mixing saved models (``mixing.py``) and their working folders
(``workdir.py``)."""

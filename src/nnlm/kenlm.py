"""``import nnlm.kenlm as kenlm``: the kenlm module's Python API over any nnlm model.

The module lives in :mod:`nnlm.decoding.kenlm`, beside the other decoder API; this name
is the one clients import (and install under kenlm's: ``sys.modules["kenlm"] =
nnlm.kenlm``), so it is that module itself, not a copy: the same object, its
attributes and its State type."""

import sys

from .decoding import kenlm as _module

sys.modules[__name__] = _module

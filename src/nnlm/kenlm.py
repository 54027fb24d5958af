"""``import nnlm.kenlm as kenlm``: the kenlm module's Python API over any nnlm model.

The module lives in :mod:`nnlm.decoding.kenlm`, beside the other decoder API; this name
is the one clients import (and install under kenlm's: ``sys.modules["kenlm"] =
nnlm.kenlm``), so it is that module itself, not a copy: the same object, its
attributes and its State type. ``python -m nnlm.kenlm install-alias`` puts it in
kenlm's place for a whole environment (:mod:`nnlm.base.aliases`)."""

import sys

from .decoding import kenlm as _module

if __name__ == "__main__":  # python -m nnlm.kenlm install-alias | uninstall-alias
    from .base.aliases import main

    raise SystemExit(main("kenlm", sys.argv[1:]))
sys.modules[__name__] = _module

"""python -m nnlm.pyctcdecode install-alias | uninstall-alias: nnlm.pyctcdecode in
pyctcdecode's place for a whole environment (:mod:`nnlm.base.aliases`)."""

import sys

from ..base.aliases import main

raise SystemExit(main("pyctcdecode", sys.argv[1:]))

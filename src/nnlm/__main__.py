"""``python -m nnlm``: the command line (torchrun starts its workers this way).

A torchrun worker whose process group ran ends with ``os._exit`` once its output is
flushed, skipping the interpreter's finalization: there, after the work is done and
written, gloo's threads sometimes abort the process ("terminate called without an
active exception", SIGABRT, no Python frame; about 1 two-host run in 15 under load),
which torchrun reports as a failed job and its other hosts wait out their exit barrier.
"""

import os
import sys

from .cli import main

code = main()
if "WORLD_SIZE" in os.environ and "RANK" in os.environ and "torch.distributed" in sys.modules:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
sys.exit(code)

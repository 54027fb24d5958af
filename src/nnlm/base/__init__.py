"""What every part of nnlm stands on, importing nothing of nnlm above it: the one error
type and one-line warnings (:mod:`.errors`), progress bars and log lines
(:mod:`.progress`), Ctrl-C (:mod:`.interrupts`), memory (:mod:`.sysmem`), numba's
caches (:mod:`.jit_cache`), digests (:mod:`.digest`), the files' magic bytes
(:mod:`.magic`), the command line's value types (:mod:`.argtypes`) and the hint for a
missing optional part (:mod:`.extras`). Nothing here imports numpy at import time."""

"""``nnlm ngram verify``: a model read whole and checked, every section of nnlm's mapped
files against the CRC-32 written with it.

Opening a mapped file checks its header and every section's bounds, not its bytes (that
would read the whole file, which mapping exists to avoid). A flipped bit in a section
would then change scores silently; the section checksums catch it. nnlm's commands
check them once at opening (:func:`.trie_layout.verifying`); this is the same check on
its own, for a file just copied, downloaded or long stored. ARPA files and KenLM's
binaries carry no checksums: for them it is what loading checks.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ...errors import warn
from .trie_layout import verifying


def verify_model(path: str | os.PathLike) -> dict:
    """Load the model at ``path`` with every mapped section checked; what was checked
    (NnlmError, one line naming the file and section, if anything is damaged)."""
    from ...models import load_model

    path = Path(path)
    began = time.perf_counter()
    with verifying() as log:
        model = load_model(path)
    seconds = time.perf_counter() - began
    files = [{"file": f, "sections": n} for f, n in dict(log).items()]
    unsummed = [f["file"] for f in files if f["sections"] == 0]
    for f in unsummed:
        warn(f"{f}: written before nnlm kept a checksum per section: only its header and "
             "sizes were checked; write it again (nnlm ngram convert) to add them")
    sections = sum(f["sections"] for f in files)
    if files:
        how = f"{sections} sections in {len(files)} mapped file{'s' * (len(files) > 1)} " \
              "match their checksums"
    else:
        how = "no checksums in its format (ARPA, KenLM binary, arrays): loaded and checked"
    return {"path": str(path), "kind": getattr(model, "kind", type(model).__name__),
            "order": model.order, "files": files, "sections": sections,
            "seconds": round(seconds, 3), "ok": True,
            "summary": f"{path}: whole; {how} ({seconds:.2f} s)"}

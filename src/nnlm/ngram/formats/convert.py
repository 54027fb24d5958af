"""``nnlm ngram convert``: a back-off model from one format into another.

Sources: an ARPA file (plain, gzip, bzip2 or xz), an nnlm model directory of a back-off
kind (kn, backoff; either storage), or whatever else :func:`nnlm.models.load_model`
reads. Targets: an ARPA file when the name says so (``.arpa``, or a compression suffix);
a one-file model for ``.nnlm``, ``.bin`` or ``.binary`` (the mapped trie with its
vocabulary inside: what KenLM's clients, pyctcdecode among them, copy around); otherwise
an nnlm model directory in the mapped trie format (:mod:`nnlm.ngram.store.trie`). With
``kenlm``, a file of any name (cc_net's ``LANG.arpa.bin``, ``lm.binary``) in KenLM's
probing format (:mod:`.kenlm_write`), for tools that load models only through the kenlm
module. Either nnlm form is quantized with ``quantize=(P, B)`` as KenLM's ``build_binary
-q P -b B``; a model whose values are coded as counts (``nnlm ngram train --compress``)
stays coded unless quantized.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...base.errors import NnlmError
from ...file_kinds import check_file_output as check_kind
from ...file_kinds import is_arpa_name, is_file_name
from ...model_files import check_model_output
from ...text.fileio import atomic_path
from ..backoff import BackoffNgram
from ..store.trie import FILE_NAME
from ..store.trie_write import write_trie
from .arpa_write import write_arpa
from .kenlm_write import write_kenlm_probing


def convert(source: str | os.PathLike, target: str | os.PathLike,
            quantize: tuple[int, int] | None = None, strict: bool = False,
            force: bool = False, kenlm: bool = False, *, load: Callable,
            save: Callable) -> dict:
    """Convert ``source`` into ``target``; returns what was written (for the CLI to
    print): format, orders, n-grams, bytes and bytes per n-gram. An ARPA or one-file
    target replaces only a file of its kind, or any file with ``force``. ``load`` and
    ``save`` read and write a model of any kind (:func:`nnlm.models.load_model` and
    ``save_model``, which hand themselves over: :func:`nnlm.models.convert`), so this
    format-level code never imports the models' registry above it."""
    target = Path(target)
    to_arpa, to_file = is_arpa_name(target), is_file_name(target)
    if kenlm and quantize:
        raise NnlmError(f"{target}: kenlm= writes KenLM's probing format, which is not "
                        "quantized (quantize= applies to nnlm's format)")
    if kenlm and to_arpa:
        raise NnlmError(f"{target}: kenlm= writes a binary file; give it a name that is not "
                        "an ARPA file's (.arpa, .gz, .bz2, .xz)")
    to_file = to_file or kenlm
    if to_arpa and quantize:
        raise NnlmError(f"{target}: quantize= applies to nnlm's model format; ARPA files "
                        "hold decimal numbers (give a directory name as the target)")
    if to_arpa:
        check_kind(target, "arpa", force)
    elif to_file:
        check_kind(target, "model-file", force)
    elif not to_arpa:
        check_model_output(target, "backoff")  # before the work, not after it
    model = load(source, strict=strict)
    if not isinstance(model, BackoffNgram):
        raise NnlmError(f"{source}: a {model.kind} model has no back-off form; convert takes "
                        "ARPA files and kn or backoff model directories")
    n_grams = sum(model.num_ngrams())
    if quantize:  # quantized values are not counts' codes
        model.store_compress = False
    compress = getattr(model, "store_compress", False)
    coded = ", values coded as counts" if compress else ""
    if to_arpa:
        write_arpa(model, target)
        size = target.stat().st_size
        kind = "ARPA"
    elif kenlm:
        size = write_kenlm_probing(model, target)
        kind = "KenLM probing file"
    elif to_file:
        with atomic_path(target) as tmp:
            size = write_trie(model, tmp, "", quantize, standalone=True, compress=compress)
        kind = "nnlm one-file model" + (f", quantized {quantize[0]}/{quantize[1]} bits"
                                        if quantize else coded)
    else:
        model.store_quantize = quantize
        save(model, target)
        size = (target / FILE_NAME).stat().st_size
        kind = "nnlm trie" + (f", quantized {quantize[0]}/{quantize[1]} bits" if quantize
                              else coded)
    return {"source": str(source), "target": str(target), "format": kind,
            "order": model.order, "ngrams": n_grams, "bytes": size,
            "bytes_per_ngram": size / max(n_grams, 1)}

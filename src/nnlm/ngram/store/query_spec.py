"""What nnlm.kenlm's compiled per-call queries are built from, and nnlm's trie file read
into it without numpy and without loading the model.

A :class:`QuerySpec` is plain data: the vocabulary's words as UTF-8 bytes end to end,
where each begins, the special words' ids, the unigrams' numbers, and one tagged tuple
per order k >= 2 in the layout the numbers lie in. Each layout's tuple is made beside
the code that owns the layout, and read in C by the header beside it:

========================  ==============================  ================================
layout                    made by                         read by
========================  ==============================  ================================
"hash" (in memory)        ``levels.NgramLevel.hash_spec``  ``store/hash_level.h``
"trie", "coded" (nnlm)    :func:`trie_level_spec`,        ``store/trie_level.h``
                          ``trie.TrieLevel.c_spec``
"probing" (KenLM)         ``formats/kenlm_query_spec.py``  ``formats/kenlm_probing.h``
"kenlm-trie" (KenLM)      ``formats/kenlm_query_spec.py``  ``formats/kenlm_trie.h``
========================  ==============================  ================================

Only :mod:`nnlm.decoding.kenlm` builds the compiled queries, from a spec.
"""

from __future__ import annotations

import math
from pathlib import Path

from ...base.compiled import extension
from ...base.errors import NnlmError
from ...text.specials import BOS_ID, EOS_ID, UNK_ID
from . import trie_layout as layout

# the model kinds whose trie file is queried as saved (KenLM's back-off numbers)
MAPPED_KINDS = ("kn", "backoff")


class QuerySpec:
    """A back-off model as the compiled queries take it.

    ``blob``, ``offsets``: the words' UTF-8 bytes end to end and where word i begins
    (V + 1 int64); ``unigrams``: float32 (log10 p, log10 back-off) per word, the sign of a
    zero back-off saying whether the word extends, or a trie file's (natural-log p,
    natural-log back-off) float32 pair, converted in C; ``levels``: orders 2..n, one
    tagged tuple each; ``index``: a mapping word -> id for Python's lookups (a dict, or
    the trie file's own table through ``_trie.WordIndex``); ``slots``: the file's own
    table of the words (vocab_hash.h), or None to build one (the C queries then look words
    up through ``index``, a dict). A plain
    class, not a dataclass: nnlm.kenlm opens a file without importing dataclasses'
    inspect (milliseconds a process)."""

    __slots__ = ("blob", "offsets", "vocab_size", "bos", "eos", "unk", "unigrams", "levels",
                 "order", "index", "slots")

    def __init__(self, blob, offsets, vocab_size: int, bos: int, eos: int, unk: int,
                 unigrams, levels: list, order: int, index, slots=None):
        self.blob, self.offsets, self.vocab_size = blob, offsets, vocab_size
        self.bos, self.eos, self.unk = bos, eos, unk
        self.unigrams, self.levels, self.order = unigrams, levels, order
        self.index, self.slots = index, slots


def word_blob(words: list[str]) -> tuple:
    """The words' UTF-8 bytes end to end, and where each begins (an int64 array.array),
    without numpy."""
    import array  # (only KenLM's files need it: nnlm's hold their words' bytes)

    encoded = [w.encode("utf-8") for w in words]
    offsets = array.array("q", [0])
    for w in encoded:
        offsets.append(offsets[-1] + len(w))
    return b"".join(encoded), offsets


def trie_level_spec(header: dict, k: int, section) -> tuple:
    """Order k of a trie file in the tuple ``trie_level.h`` reads: the sections where they
    lie (``section(name)`` maps one)."""
    counts = header["counts"]
    spec = header["pointers"][k - 2]  # order k-1's run pointers into order k
    if spec[0] == "packed":
        pointers = (0, section(f"child_{k - 1}"), b"", spec[1], 0)
    else:
        pointers = (1, section(f"child_lines_{k - 1}"), section(f"child_exceptions_{k - 1}"),
                    layout.width(counts[k - 1]), spec[1])

    def values(name):
        if name == "log_bow" and k == header["order"]:
            return b"", b"", 0
        coding = header["values"].get(f"{name}_{k}")
        if coding is None:
            return section(f"{name}_{k}"), b"", 0
        return section(f"{name}_codes_{k}"), section(f"{name}_centers_{k}"), coding[0]

    n_slots, slot_bits = header["slots"].get(str(k), (0, 0))
    trie = ("trie", section(f"word_{k}"), header["word_bits"], pointers, counts[k - 2],
            counts[k - 1], section(f"slots_{k}") if n_slots else b"", slot_bits, n_slots)
    if "coded" in header:  # values coded as counts (nnlm.ngram.store.value_codes)
        return layout.coded_spec(header, section, k, trie + (b"", b"", 0, b"", b"", 0))
    return trie + (*values("logp"), *values("log_bow"))


def _trie_file(path: Path) -> tuple | None:
    """(trie file, its binding, vocabulary size, order) of a back-off model saved as a
    directory or one file, or None for anything else."""
    if path.is_dir():
        from ...model_files import header_binding, read_header

        header = read_header(path)
        if header["nnlm_model"] not in MAPPED_KINDS:
            return None
        trie, binding = path / layout.FILE_NAME, header_binding(header)
        if binding is None or not trie.is_file():
            return None
        return trie, binding, header["vocab_size"], header["config"].get("order")
    if path.is_file():  # not a trie file (an ARPA file, KenLM's): NnlmError, caught below
        head = layout.read_trie_header(path)[0]
        model = head.get("model")
        if not (isinstance(model, dict) and model.get("kind") in MAPPED_KINDS
                and isinstance(model.get("config"), dict)):
            return None
        return path, layout.STANDALONE, head["vocab_size"], model["config"].get("order")
    return None


def open_trie_spec(text: str, max_order: int) -> QuerySpec | None:
    """The spec of the back-off model at ``text`` read straight from its trie file, without
    numpy and without loading the model: a one-file model (``.nnlm``) or a model directory
    whose ``ngrams.trie`` holds its vocabulary. The file passes the same checks as
    :func:`nnlm.ngram.store.trie_map.map_trie`'s (:mod:`.trie_layout`, the vocabulary's
    CRC-32, the code tables' numbers; the unigrams' are checked in C). None for anything
    else, or for a file that fails a check: then :func:`nnlm.models.load_model` opens it,
    and names what is wrong."""
    trie_c = extension("nnlm.ngram.store._trie")
    if trie_c is None:  # the words' table needs it
        return None
    try:
        found = _trie_file(Path(text))
        if found is None:
            return None
        trie, binding, vocab_size, order = found
        header, section = layout.map_sections(trie, binding, vocab_size)
        n, counts = header["order"], header["counts"]
        if "vocab" not in header or n != order or not 2 <= n <= max_order:
            return None
        words, offsets, slots = (section(f"vocab_{x}") for x in ("words", "offsets", "slots"))
        if layout.vocab_problem(words, offsets, header["vocab"]["crc32"]):
            return None  # (offsets that decrease: the compiled queries refuse them)
        ok = math.isfinite if header["quantize"] is None else (lambda x: x < math.inf)
        for key, coding in header["values"].items():  # the code tables, as map_trie's
            if coding is not None and not all(map(ok, section(
                    "{}_centers_{}".format(*key.rsplit("_", 1))))):
                return None
        # values coded as counts: their tables' ranges are checked by the C reader
        # (value_codes.h's tables_in_range), which refuses what numpy's map_trie refuses
        return QuerySpec(words, offsets, counts[0], BOS_ID, EOS_ID, UNK_ID,
                         (section("unigram_logp"), section("unigram_log_bow")),
                         [trie_level_spec(header, k, section) for k in range(2, n + 1)], n,
                         trie_c.WordIndex(slots, words, offsets), slots)
    except (NnlmError, ValueError, TypeError, KeyError, IndexError, OSError, ImportError):
        return None  # load_model reads it, or says in one line what is wrong with it

"""A KenLM binary file (build_binary's probing default, or any of its four trie layouts)
read where it lies into a :class:`~nnlm.ngram.store.query_spec.QuerySpec` for nnlm.kenlm's
compiled queries: the file mapped, its header and layout checked
(:mod:`.kenlm_header`), its tables handed over in place; no numpy, no model, as nnlm's
own trie files open. Each order's tuple is read in C by ``kenlm_probing.h`` or
``kenlm_trie.h`` beside this file. Word ids are KenLM's."""

from __future__ import annotations

import array
import mmap

from ...base.errors import NnlmError
from ..store.query_spec import QuerySpec, word_blob
from . import kenlm_header as kh


def open_kenlm_spec(text: str, max_order: int) -> QuerySpec | None:
    """The spec of the KenLM binary at ``text``; None for anything else, or for a file that
    fails a check: then :func:`nnlm.models.load_model` opens it, and names what is
    wrong."""
    try:
        with open(text, "rb") as f:
            if f.read(len(kh.MAGIC)) != kh.MAGIC:
                return None
            data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError:
        return None
    return kenlm_spec(text, data, max_order)


def kenlm_spec(text: str, data, max_order: int) -> QuerySpec | None:
    """The spec of a KenLM binary's bytes ``data`` (a mapping: a file's, or an image of
    one built in memory); None where they fail a check."""
    try:
        header, start = kh.read_header(text, data)
        if header["model_type"] not in kh.MODEL_TYPES or header["order"] > max_order:
            return None
        probing = header["model_type"] in (0, 1)
        if probing:
            layout = kh.probing_layout(text, data, header, start)
            words_at, (uni_at, uni_size) = layout["words"], layout["unigrams"]
        else:
            kh.check_words_kept(text, header)
            if header["search_version"] != kh.TRIE_VERSION or header["order"] < 2:
                return None
            layout = kh.TrieLayout(text, data, header, start)
            if len(data) < layout.end:
                return None
            words_at, uni_at, uni_size = layout.end, layout.unigrams, 16
        words = kh.read_words(text, data, words_at, header["counts"][0], probing)
        V = len(words)  # a probing file of a closed vocabulary: <unk> added (read_words)
        index = {w: i for i, w in enumerate(words)}
        if len(index) != V or words[0] != "<unk>" or "<s>" not in index or \
                "</s>" not in index:
            return None
        view = memoryview(data)
        levels = _probing_levels(view, layout, V) if probing else \
            _trie_levels(view, layout, header, uni_at)
        blob, offsets = word_blob(words)
        unigrams = _unigram_pb(view, uni_at, uni_size, V, index["<s>"], probing)
        return QuerySpec(blob, offsets, V, index["<s>"], index["</s>"], 0, unigrams, levels,
                         header["order"], index)
    except (NnlmError, ValueError, TypeError, KeyError, IndexError, OSError):
        return None


def _unigram_pb(view, at: int, size: int, V: int, bos: int, flagged: bool) -> array.array:
    """float32 (log10 p, log10 back-off) per word from KenLM's unigram records (a probing
    file's p carries a flag in its sign bit: its value is always the negative one)."""
    uni = array.array("f")
    uni.frombytes(view[at:at + V * size])
    stride = size // 4
    pb = array.array("f", bytes(8 * V))
    pb[0::2] = array.array("f", [-abs(p) for p in uni[0::stride]]) if flagged \
        else uni[0::stride]
    pb[1::2] = uni[1::stride]  # the back-off's sign of zero says whether the word extends
    pb[2 * bos] = -99.0  # never scored, as KenLM's <s>
    return pb


def _probing_levels(view, layout: dict, V: int) -> list:
    """Each order of a probing file: ("probing", its buckets, item size, bucket count,
    each word's KenLM id)."""
    kid = array.array("q", range(V))  # KenLM's ids are the queries' own
    return [("probing", view[o:o + n * item], item, n, kid) for o, item, n in layout["orders"]]


def _trie_levels(view, layout: kh.TrieLayout, header: dict, uni_at: int) -> list:
    """Each order of a trie file as ``kenlm_trie.h`` reads it (the bit-packed entries, the
    quantizer's centers, the array-compressed pointers' table: where they lie)."""
    counts, order = header["counts"], header["order"]
    uni = view[uni_at:uni_at + 16 * (counts[0] + 2)]
    per = (1 << layout.bow_bits) + (1 << layout.prob_bits)

    def centers(k, top):
        if not layout.quantized:
            return b"", b""
        probs = layout.tables + 4 * per * (order - 2 if top else k - 2)
        bows = probs + 4 * (1 << layout.prob_bits)
        return (view[probs:probs + 4 * (1 << layout.prob_bits)].cast("f"),
                b"" if top else view[bows:bows + 4 * (1 << layout.bow_bits)].cast("f"))

    levels = []
    for m in layout.middles:
        offsets = view[m.offsets_at:m.offsets_at + 8 * m.n_offsets].cast("Q") \
            if layout.array else b""
        levels.append(("kenlm-trie", view[m.base:m.base + m.size], m.n, m.total,
                       layout.word_bits, int(layout.quantized), layout.prob_bits,
                       layout.bow_bits, *centers(m.k, False), m.inline, offsets,
                       uni if m.k == 2 else b""))
    top = layout.longest
    levels.append(("kenlm-trie", view[top.base:top.base + top.size], top.n, top.total,
                   layout.word_bits, int(layout.quantized), layout.prob_bits,
                   layout.bow_bits, *centers(order, True), 0, b"",
                   uni if order == 2 else b""))
    return levels

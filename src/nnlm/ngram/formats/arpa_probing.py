"""An ARPA file read straight into KenLM's probing layout, in memory: how :mod:`nnlm.kenlm`
opens an ARPA file, as the kenlm module does (lm/search_hashed.cc), in about the memory
of the layout itself rather than of the whole file parsed.

:mod:`.arpa_read`'s scanner reads the n-grams a window of lines at a time (``sink``);
each window's n-grams get their keys (KenLM's CombineWordHash over KenLM's ids:
``<unk>`` 0, then the file's unigram order), are placed in their order's table in the
file's order, and flag the n-grams they need: the suffix (w2..wk) extends left, the
context (w1..wk-1) to the right (:mod:`.kenlm_write` says how the flags are kept).
The image is the file ``build_binary -s probing`` builds from the same ARPA file, byte
for byte, mapped anonymously; :mod:`.kenlm_query_spec` then reads it as it reads a file.

The stream judges nothing it could get wrong: a file it cannot hold as it is (pruned: a
context or suffix missing; an n-gram twice or two of one hash; numbers out of range; a
highest order with back-off weights; ``<s>`` or ``</s>`` out of place; a distribution
that does not sum to 1, within :data:`~nnlm.ngram.normalization.MASS_TOLERANCE`) or
refuses outright gives None, and :func:`~nnlm.models.load_model` reads it whole, adding
what KenLM adds, warning or naming the line as every command does. Needs the compiled
parts (``_kenlm_build`` and ``_arpa_scan``); None without them.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import numpy as np

from ...base.compiled import extension
from ...base.errors import NnlmError, warn
from ...base.sysmem import check_allocation
from ...text.vocab import BOS, EOS, UNK
from ..normalization import MASS_TOLERANCE
from .arpa_read import LOG10_LIMIT, MISSING_UNK, _ArpaScan, missing_unk_warning
from .kenlm_binary import combine
from .kenlm_write import LONGEST, MIDDLE, MULTIPLIER, UNIGRAM, _write_vocab, probing_plan

_C = extension("nnlm.ngram.formats._kenlm_build")
_SCAN = extension("nnlm.ngram.formats._arpa_scan")


CHUNK = 1 << 18  # entries a step where a whole table is checked


class _Unstreamable(Exception):
    """The file needs the whole reader (module docstring)."""


def probing_image(path: str | os.PathLike, multiplier: float = MULTIPLIER):
    """(image, its size) of the ARPA file at ``path`` in KenLM's probing layout: an
    anonymous mapping holding what ``build_binary -s probing -p multiplier`` would write;
    None where the stream cannot hold the file (module docstring)."""
    if _C is None or _SCAN is None:
        return None
    sink = _ProbingSink(Path(path), multiplier)
    try:
        scan = _ArpaScan(Path(path), sink)
        if sink.image is None or len(scan.declared) != sink.order:
            return None
    except (_Unstreamable, NnlmError):
        return None
    for message in sink.warnings:
        warn(message)
    return sink.image, sink.size


class _ProbingSink:
    """The image being built: its regions and each order's context sums (``start``,
    ``rows`` and ``finish`` are :class:`~.arpa_read._ArpaScan`'s sink calls)."""

    def __init__(self, path: Path, multiplier: float):
        self.path, self.multiplier = path, multiplier
        self.image = None
        self.warnings: list[str] = []

    # -- the unigrams: the vocabulary, the layout ------------------------------------------
    def start(self, scan) -> np.ndarray:
        """Lay the image out once the unigrams are read; their KenLM ids (the scanner's
        ids for every n-gram above)."""
        words, uni = scan.file_words, scan.sections[1]
        counts = [scan.declared[k] for k in range(1, len(scan.declared) + 1)]
        self.order = len(counts)
        if not 2 <= self.order <= 64:
            raise _Unstreamable
        kid = np.zeros(len(words), np.int64)
        known = np.array([w != UNK for w in words])
        kid[known] = np.arange(1, int(known.sum()) + 1)
        self.bos, self.eos = int(kid[words.index(BOS)]), int(kid[words.index(EOS)])
        names = [UNK.encode("utf-8")] + [w.encode("utf-8") for w in words if w != UNK]
        blob = b"\0".join(names) + b"\0"
        self._layout(counts, len(blob))
        image = np.frombuffer(self.image, np.uint8)
        _write_vocab(image[self.offsets[1]:self.offsets[2]], names, self.vocab_buckets)
        image[self.offsets[-1]:] = np.frombuffer(blob, np.uint8)
        logp, bow = uni.logp[:uni.count], uni.bow[:uni.count]
        if not (np.all((logp >= -LOG10_LIMIT) & (logp <= 0))
                and np.all(np.abs(bow) <= LOG10_LIMIT)):
            raise _Unstreamable
        table = self.tables[1] = image[self.offsets[2]:self.offsets[3]].view(UNIGRAM)
        table["p"][kid] = logp.astype(np.float32)
        table["b"][kid] = _backoffs(bow)
        if known.all():  # no <unk>: KenLM's closed vocabulary
            table[0] = (np.float32(MISSING_UNK), np.float32(0.0))
            self.warnings.append(missing_unk_warning(self.path))
        p = np.delete(logp, words.index(BOS))
        if abs(float(np.sum(10.0 ** p)) - 1) > MASS_TOLERANCE:
            raise _Unstreamable
        self.ends_eos = {1: np.arange(len(table)) == self.eos}
        return kid

    def _layout(self, counts: list[int], words_size: int) -> None:
        header, self.vocab_buckets, _, self.offsets = probing_plan(counts, self.multiplier)
        self.size = self.offsets[-1] + words_size
        check_allocation(self.size, f"{self.path}: KenLM's probing tables of its n-grams",
                         "convert it to a binary first (nnlm ngram convert ... --kenlm), "
                         "which is mapped, not read into memory")
        self.image = mmap.mmap(-1, self.size)
        image = np.frombuffer(self.image, np.uint8)
        image[:len(header)] = np.frombuffer(header, np.uint8)
        self.tables = {}
        for k in range(2, len(counts) + 1):
            region = image[self.offsets[k + 1]:self.offsets[k + 2]]
            self.tables[k] = region.view(LONGEST if k == self.order else MIDDLE)
        self.sums = None

    # -- each window of n-grams ------------------------------------------------------------
    def rows(self, sec, m: int) -> None:
        """Place a window's ``m`` n-grams of order ``sec.k`` and flag those they need."""
        if m == 0:
            return
        k, top = sec.k, sec.k == self.order
        ids, logp, bow = sec.ids[:m], sec.logp[:m], sec.bow[:m]
        if not np.all((logp >= -LOG10_LIMIT) & (logp <= 0)) \
                or (np.any(bow != 0) if top else not np.all(np.abs(bow) <= LOG10_LIMIT)) \
                or np.any(ids[:, 1:] == self.bos) or np.any(ids[:, :-1] == self.eos):
            raise _Unstreamable
        u = ids.astype(np.uint64)
        suffix = u[:, k - 1]
        for j in range(k - 2, 0, -1):
            suffix = combine(suffix, u[:, j])
        keys = combine(suffix, u[:, 0])
        context = u[:, k - 2]
        for j in range(k - 3, -1, -1):
            context = combine(context, u[:, j])
        table = self.tables[k]
        slots = np.empty(m, np.int64)
        try:
            _C.place_into(keys, table.view(np.uint8), table.itemsize, slots)
        except ValueError:
            raise _Unstreamable from None
        p = logp.astype(np.float32)
        table["p"][slots] = -np.abs(p)  # "does not extend left" until a longer one says so
        if not top:
            table["b"][slots] = _backoffs(bow)
            if k not in self.ends_eos:
                self.ends_eos[k] = np.zeros(len(table), bool)
            self.ends_eos[k][slots] = ids[:, -1] == self.eos
        lower = self.tables[k - 1]
        s_slots, c_slots = (suffix.astype(np.int64), context.astype(np.int64)) if k == 2 \
            else (self._find(lower, suffix), self._find(lower, context))
        lower_p = lower["p"][s_slots]
        lower["p"][s_slots] = np.abs(lower_p)
        b = lower["b"][c_slots]
        lower["b"][c_slots] = np.where(b == 0, np.float32(0.0), b)  # a weight 1 that is kept
        if self.sums is None:
            self.sums = np.zeros(len(lower))
        # each context's sum less its weight's share: p(w | h) - b(h) p(w | h') a word
        np.add.at(self.sums, c_slots, 10.0 ** logp - 10.0 ** b.astype(np.float64)
                  * 10.0 ** -np.abs(lower_p.astype(np.float64)))

    @staticmethod
    def _find(table: np.ndarray, keys: np.ndarray) -> np.ndarray:
        slots = np.empty(len(keys), np.int64)
        _C.find_in(keys, table.view(np.uint8), table.itemsize, slots)
        if np.any(slots < 0):  # a pruned file: KenLM adds blanks, read_arpa adds them too
            raise _Unstreamable
        return slots

    def finish(self, sec) -> None:
        """At the end of order k: every context of order k - 1 sums to 1 (what
        :func:`~nnlm.ngram.normalization.check_normalized` checks; the whole reader warns
        with its words where one does not)."""
        k = sec.k
        lower = self.tables[k - 1]
        sums = self.sums if self.sums is not None else np.zeros(len(lower))
        ends_eos = self.ends_eos.pop(k - 1)
        for lo in range(0, len(lower), CHUNK):  # sum = b(h) + the words' shares
            part = lower[lo:lo + CHUNK]
            total = sums[lo:lo + CHUNK] + 10.0 ** part["b"].astype(np.float64)
            used = ~ends_eos[lo:lo + CHUNK] & ((part["key"] != 0) if k > 2 else True)
            if np.any(used & (np.abs(total - 1) > MASS_TOLERANCE)):
                raise _Unstreamable
        self.sums = None
        if k == self.order:
            self.tables = {}


def _backoffs(bow: np.ndarray) -> np.ndarray:
    """float32 back-offs as KenLM reads them: a weight of 1 is -0.0 until some longer
    n-gram has the n-gram as its context (then +0.0)."""
    b = bow.astype(np.float32)
    b[b == 0] = np.float32(-0.0)
    return b

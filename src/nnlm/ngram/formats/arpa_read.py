"""ARPA files, read: as KenLM reads them, into a :class:`BackoffNgram`.

The text is scanned by compiled kernels (:mod:`.arpa_scan`) 16 MiB at a time. Whatever
KenLM loads loads here, with a warning for what is odd; what KenLM refuses is refused
naming the line. A pruned file's missing n-grams are added as KenLM adds them
(:func:`missing_ngrams`); whether the result sums to 1 is checked by
:mod:`nnlm.ngram.normalization`.
"""

from __future__ import annotations

import functools
import math
import os
import re
from pathlib import Path

import numpy as np

from ...base.errors import NnlmError, warn, where
from ...base.progress import progress_bar
from ...base.sysmem import check_allocation
from ...text.fileio import compression_of, decode_block, open_for_reading, read_block
from ...text.vocab import BOS, BOS_ID, EOS, EOS_ID, SPECIALS, UNK, UNK_ID, Vocabulary
from ..backoff import BackoffNgram
from ..normalization import MASS_TOLERANCE, check_normalized, contexts_text
from ..store.levels import NgramLevel
from .arpa_write import ARPA_ZERO

MISSING_UNK = -100.0  # KenLM's log10 p(<unk>) for a file that lists no <unk>


_NGRAM_LINE = re.compile(r"^ngram (\d+)=(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")
READ_BYTES = 1 << 24  # the file is scanned 16 MiB at a time
STREAM_BYTES = 1 << 21  # 2 MiB, where a sink takes the n-grams
WINDOW_ROWS = 1 << 15  # a sink's rows a window


class _Section:
    """One order's entries as read: log10 p, log10 bow, word ids (vocabulary ids) and
    file line numbers; ``count`` may exceed the declared size the arrays have."""

    def __init__(self, k: int, declared: int):
        self.k = k
        self.logp = np.empty(declared)
        self.bow = np.empty(declared)
        self.ids = np.empty((declared, 2 if k == 1 else k), np.int64)  # unigrams: spans
        self.lines = np.empty(declared, np.int64)
        self.count = 0
        self.flushed = 0  # rows handed to a sink (the arrays hold those after them)
        self.words: list[bytes] = []  # unigrams only

    def release(self) -> None:
        """Drop the arrays (a sink has taken every row)."""
        self.logp = self.bow = self.ids = self.lines = None


def _window_end(data: bytes, pos: int, cut: int, sec: _Section) -> int:
    """Where a window of whole lines from ``pos`` ends that holds no more n-gram lines
    than ``sec``'s arrays: an order-k line takes at least 2k + 2 bytes."""
    limit = pos + len(sec.logp) * (2 * sec.k + 2)
    if limit >= cut:
        return cut
    end = data.rfind(b"\n", pos, limit) + 1
    return end if end > pos else data.find(b"\n", pos, cut) + 1


class _ArpaScan:
    """Reads an ARPA file: the header lines in Python, each section's n-gram lines with
    the compiled scanner of :mod:`nnlm.ngram.formats.arpa_scan`, the file 16 MiB at a time.

    After reading: ``declared`` ({order: count}), ``sections`` ({order: _Section}),
    ``file_words`` (the unigrams' words in file order) and ``vocab`` (specials first, then
    the file's order), with ``remap`` from a unigram's file index to its vocabulary id
    (those two where no sink numbers the words).
    """

    def __init__(self, path: Path, sink=None):
        """``sink``: where n-grams above the unigrams go as they are read, a window of
        lines at a time (:mod:`.arpa_probing`), instead of arrays of the whole file; its
        ``start(scan)`` (once the unigrams are read) returns each unigram's id for the
        scanner, its ``rows(section, m)`` takes a window's m rows, its ``finish(section)``
        each finished order."""
        from . import arpa_scan

        self.kernels = arpa_scan
        self.path = path
        self.sink = sink
        self.declared: dict[int, int] = {}
        self.sections: dict[int, _Section] = {}
        self.table = None  # (words, starts, lengths, slots, bits) of the unigrams
        self.vocab: Vocabulary | None = None
        self.state = "start"
        self.current: _Section | None = None
        self._read()

    def _read(self) -> None:
        with progress_bar(None, f"reading {self.path.name}", "n-grams", delay=2.0) as bar:
            self._read_blocks(bar)

    def _read_blocks(self, bar) -> None:
        line, tail, first = 1, b"", True
        done = 0
        with open_for_reading(self.path) as f:
            while self.state != "end":
                chunk = read_block(f, READ_BYTES if self.sink is None else STREAM_BYTES,
                                   self.path, line)
                data = tail + chunk
                if first and data.startswith(BOM_BYTES):
                    data = data[len(BOM_BYTES):]
                first = False
                if not chunk:  # the end of the file: its last line may lack a newline
                    if data and not data.endswith(b"\n"):
                        data += b"\n"
                    cut = len(data)
                else:
                    cut = data.rfind(b"\n") + 1
                line = self._lines(data, cut, line)
                tail = data[cut:]
                if bar.total is None and self.declared:
                    bar.total = sum(self.declared.values())
                now = sum(sec.count for sec in self.sections.values())
                bar.update(now - done)
                done = now
                if not chunk:
                    break
        if self.state == "start":
            raise NnlmError(f"{self.path}: not an ARPA file (no \\data\\ line)")
        if self.state != "end":
            raise NnlmError(f"{self.path}: no \\end\\ line; the file may be truncated")

    def _lines(self, data: bytes, cut: int, line: int) -> int:
        """Read the whole lines data[:cut], the first being file line ``line``; returns the
        number of the line after them."""
        kernels = self.kernels
        buf = np.frombuffer(data, np.uint8)
        pos = 0
        while pos < cut and self.state != "end":
            if self.state == "grams":
                sec = self.current
                before = sec.count
                words, starts, lengths, slots, bits, remap = self.table or _NO_TABLE
                windowed = self.sink is not None and sec.k > 1
                stop = _window_end(data, pos, cut, sec) if windowed else cut
                pos, line, m, status = kernels.scan(
                    buf, pos, stop, sec.k, line, sec.count - sec.flushed, sec.logp, sec.bow,
                    sec.ids, sec.lines, words, starts, lengths, slots, bits, remap)
                sec.count = sec.flushed + m
                if sec.k == 1:
                    sec.words.extend(data[s : s + n] for s, n in sec.ids[before : min(
                        sec.count, len(sec.ids))].tolist())
                if windowed:
                    self.sink.rows(sec, m)
                    sec.flushed = sec.count
                if status == kernels.DONE:
                    if pos < cut:  # the end of a window, not of the block
                        continue
                    break
                if status != kernels.HEADER:
                    end = data.find(b"\n", pos, cut)
                    raise self._line_error(line, data[pos:end], status)
            end = data.find(b"\n", pos, cut)
            text = decode_block(data[pos:end], self.path, line)[0].strip()
            self._header_line(text, line)
            pos, line = end + 1, line + 1
        return line

    def _header_line(self, text: str, n: int) -> None:
        """One line outside the n-gram lines: \\data\\, its counts, a section, \\end\\."""
        if not text:
            return
        if self.state == "start":
            if text == "\\data\\":
                self.state = "data"
            return
        if self.state == "data":
            m = _NGRAM_LINE.match(text)
            if m:
                k = int(m.group(1))
                if k != len(self.declared) + 1:  # KenLM's rule too
                    raise NnlmError(f"{where(self.path, n)}: '{text}': \\data\\ must declare "
                                    "the orders 1, 2, 3, ... in turn, without gaps (an empty "
                                    "order is declared as ngram K=0)")
                self._check_declared(k, int(m.group(2)), text, n)
                self.declared[k] = int(m.group(2))
                return
        if text == "\\end\\":
            self._finish_section(n)
            missing = [k for k in self.declared if k not in self.sections]
            if missing:
                raise NnlmError(f"{where(self.path, n)}: no \\{missing[0]}-grams: section, "
                                f"though \\data\\ declares ngram {missing[0]}="
                                f"{self.declared[missing[0]]} (an empty order still has its "
                                "section header)")
            self.state = "end"
            return
        m = _SECTION.match(text)
        if not m:
            raise NnlmError(f"{where(self.path, n)}: expected a \\N-grams: section, "
                            f"got {text[:40]!r}")
        k = int(m.group(1))
        if k not in self.declared:
            raise NnlmError(f"{where(self.path, n)}: section {k}-grams not declared in \\data\\")
        if k in self.sections or (k > 1 and k - 1 not in self.sections):
            raise NnlmError(f"{where(self.path, n)}: section {k}-grams out of place (the "
                            "sections come once each, in order from the 1-grams)")
        self._finish_section(n)
        rows = self.declared[k] if self.sink is None or k == 1 else \
            min(self.declared[k], WINDOW_ROWS)
        self.current = self.sections[k] = _Section(k, rows)
        self.state = "grams"

    @functools.cached_property
    def _plain_size(self) -> int | None:
        """The file's size where its bytes are its text (not compressed, not stdin)."""
        if str(self.path) == "-" or not os.path.isfile(self.path):
            return None
        with open(self.path, "rb") as f:
            return os.fstat(f.fileno()).st_size if compression_of(f.read(8)) is None else None

    def _check_declared(self, k: int, count: int, text: str, n: int) -> None:
        """A declared count the file could hold and this process could store: a plain
        file's k-gram lines take at least 2k + 2 bytes each (a digit, a tab, k one-byte
        words and their spaces, a newline); the arrays take 24 + 8 max(k, 2) bytes an
        entry. A damaged header is named here, not as an allocation failure later."""
        place = f"{where(self.path, n)}: '{text}'"
        size = self._plain_size
        if size is not None:
            if count * (2 * k + 2) > size:
                raise NnlmError(f"{place}: \\data\\ declares {count:,} {k}-grams, more than "
                                f"the file's {size:,} bytes can hold; its header is damaged")
        if self.sink is None or k == 1:  # a sink keeps a window's rows, and checks its own
            check_allocation(count * (24 + 8 * max(k, 2)), f"{place}: {count:,} {k}-grams",
                             "is the count in its header right?")

    def _finish_section(self, n: int) -> None:
        """At the line after a section: its count must be the declared one."""
        sec = self.current
        if sec is not None and sec.count != self.declared[sec.k]:
            raise NnlmError(f"{self.path}: \\data\\ declares {self.declared[sec.k]:,} "
                            f"{sec.k}-grams, the file has {sec.count:,}")
        if sec is not None and self.sink is not None and sec.k > 1:
            self.sink.finish(sec)
            sec.release()
        elif sec is not None and sec.k > 1 and sec.k == max(self.declared):
            odd = np.flatnonzero(sec.bow[:sec.count] != 0)
            if len(odd):
                warn(f"{where(self.path, int(sec.lines[odd[0]]))}: {len(odd):,} of its "
                     f"{sec.k}-grams (the highest order) carry a back-off weight, which "
                     "nothing can use (KenLM refuses such a file); ignored")
        self._finish_unigrams(n)

    def _finish_unigrams(self, n: int) -> None:
        """At the end of the 1-grams: decode the words, refuse repeats, build the
        vocabulary and the compiled scanner's word table."""
        uni = self.sections.get(1)
        if uni is None or self.table is not None:
            return
        words = uni.words
        try:
            file_words = [w.decode("utf-8") for w in words]
        except UnicodeDecodeError:
            bad = next(i for i, w in enumerate(words) if _undecodable(w))
            decode_block(words[bad], self.path, int(uni.lines[bad]))  # raises, naming it
            raise
        lengths = np.array([len(w) for w in words], np.int64)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        flat = np.frombuffer(b"".join(words), np.uint8)
        bits = max(4, int(np.ceil(np.log2(max(2 * len(words), 1)))))
        slots, repeat = self.kernels.word_table(flat, starts, lengths, bits)
        if repeat >= 0:
            raise NnlmError(f"{where(self.path, int(uni.lines[repeat]))}: unigram "
                            f"{file_words[repeat]!r} appears twice")
        for special in (BOS, EOS):
            if special not in file_words:
                raise NnlmError(f"{self.path}: no {special} unigram; not a sentence-level "
                                "ARPA model")
        self.file_words = file_words
        if self.sink is not None:  # the sink numbers the words its own way
            self.table = (flat, starts, lengths, slots, bits, self.sink.start(self))
            return
        self.vocab = Vocabulary([*SPECIALS, *(w for w in file_words if w not in SPECIALS)])
        self.remap = np.array([self.vocab.index[w] for w in file_words], np.int64)
        self.table = (flat, starts, lengths, slots, bits, self.remap)

    def _line_error(self, n: int, raw: bytes, status: int) -> NnlmError:
        """What is wrong with line n, which the scanner could not read."""
        text = decode_block(raw, self.path, n)[0]  # bad UTF-8 or a NUL raise here
        k = self.current.k
        if status == self.kernels.UNKNOWN_WORD:
            return NnlmError(f"{where(self.path, n)}: word not among the unigrams")
        parts = text.split()
        try:
            if len(parts) not in (k + 1, k + 2):
                raise ValueError
            logp = np.array([float(parts[0])])
            bow = np.array([float(parts[k + 1]) if len(parts) == k + 2 else 0.0])
        except ValueError:
            return NnlmError(f"{where(self.path, n)}: expected 'log10p w1 ... w{k} [log10bow]'")
        try:
            _check_numbers(self.path, lambda i: " ".join(parts[1 : k + 1]), logp, bow,
                           k < max(self.declared), np.array([n]))
        except NnlmError as e:
            return e
        return NnlmError(f"{where(self.path, n)}: expected 'log10p w1 ... w{k} [log10bow]'")


# the word table while reading the 1-grams, when no word is looked up: an empty one
_NO_TABLE = (np.frombuffer(b"\0", np.uint8), np.zeros(1, np.int64), np.zeros(1, np.int64),
             np.full(16, -1, np.int64), 4, np.zeros(1, np.int64))
BOM_BYTES = "\ufeff".encode()


def _undecodable(word: bytes) -> bool:
    try:
        word.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def read_arpa(path: str | os.PathLike, strict: bool = False) -> BackoffNgram:
    """Read an ARPA file (gzip, bzip2 or xz compressed too) as a back-off model; its
    vocabulary is its unigrams.

    Whatever KenLM loads loads here, with a warning for what is odd: distributions that
    sum above 1 (KenLM's own lm/test.arpa has unigrams summing to 1.0026) or below it, a
    missing ``<unk>``, a pruned file's missing contexts (added as KenLM adds them, see
    :func:`missing_ngrams`). ``strict=True`` refuses a distribution that sums above 1.
    Refused always, naming the line: what KenLM refuses, non-finite or absurd numbers,
    and duplicate n-grams."""
    path = Path(path)
    scan = _ArpaScan(path)
    declared, sections = scan.declared, scan.sections
    for k, count in declared.items():
        got = sections[k].count if k in sections else 0
        if got != count:
            raise NnlmError(f"{path}: \\data\\ declares {count:,} {k}-grams, the file has {got:,}")
    order = max(declared) if declared else 0
    if order < 1 or scan.vocab is None:
        raise NnlmError(f"{path}: no unigrams")
    return assemble(path, scan.vocab, scan.file_words, scan.remap, sections, order, strict)


def assemble(path: Path, vocab: Vocabulary, file_words: list[str], remap: np.ndarray,
             sections: dict, order: int, strict: bool = False) -> BackoffNgram:
    """The back-off model of a file's n-grams, checked as KenLM checks them: ``sections``
    maps k to an object with ``logp`` and ``bow`` (log10, float64), ``lines`` (where each
    n-gram is in the file, for error messages) and, for k >= 2, ``ids``: (n, k) word ids
    of ``vocab``; unigrams are in the file's order, ``remap`` giving their ids. Shared by
    ARPA files and KenLM's binary files (:mod:`nnlm.ngram.formats.kenlm_binary`)."""
    for k in sorted(sections):
        sec = sections[k]
        words_of = ((lambda i: file_words[i]) if k == 1 else
                    (lambda i, sec=sec: " ".join(vocab.words[j] for j in sec.ids[i])))
        _check_numbers(path, words_of, sec.logp, sec.bow, k < order, sec.lines)
    V = len(vocab)
    ln10 = math.log(10)
    uni_logp = np.full(V, ARPA_ZERO * ln10)
    if UNK not in file_words:  # KenLM's choice for a file without <unk>, and its warning
        uni_logp[UNK_ID] = MISSING_UNK * ln10
        warn(missing_unk_warning(path))
    uni_bow = np.zeros(V)
    uni_logp[remap] = sections[1].logp * ln10
    uni_bow[remap] = sections[1].bow * ln10
    uni_logp[BOS_ID] = -np.inf
    file_ids = {}
    for k in range(2, order + 1):
        ids = sections[k].ids
        bad_rows = (ids[:, 1:] == BOS_ID).any(axis=1) | (ids[:, :-1] == EOS_ID).any(axis=1)
        if np.any(bad_rows):
            bad = int(np.flatnonzero(bad_rows)[0])
            raise NnlmError(f"{where(path, int(sections[k].lines[bad]))}: n-gram "
                            f"'{' '.join(vocab.words[i] for i in ids[bad])}' has <s> after its "
                            "first word or </s> before its last; <s> is only context and </s> "
                            "only predicted")
        file_ids[k] = ids
    base = (vocab, uni_logp, uni_bow)
    try:
        model, added = _build(path, base, sections, file_ids, {}, strict), {}
    except _Pruned:
        added = missing_ngrams(file_ids, order)
        model = _build(path, base, sections, file_ids, added, strict)
        n = sum(len(a) for a in added.values())
        warn(f"{path}: a pruned file: {n:,} n-grams that other n-grams need as context or "
             "suffix are missing; added with the probability of backing off and a back-off "
             "weight of 1, as KenLM does")
    check_normalized(model, path, skip=_added_masks(model, added), strict=strict)
    model.unk_extends = UNK not in file_words
    return model


def missing_unk_warning(path: Path) -> str:
    return (f"{path}: no <unk> unigram; out-of-vocabulary words get log10 p = "
            f"{MISSING_UNK:g} (as KenLM does), which will dominate any perplexity")


class _Pruned(Exception):
    """An n-gram's context or suffix is not among the lower-order n-grams."""


def missing_ngrams(file_ids: dict[int, np.ndarray], order: int) -> dict[int, np.ndarray]:
    """The n-grams a pruned file lacks: every context (w1..w_{k-1}) and suffix (w2..wk) of
    a listed or added k-gram must exist at order k-1 (closed from the top order down)."""
    added: dict[int, set] = {k: set() for k in range(2, order)}
    for k in range(order, 2, -1):
        present = set(map(tuple, file_ids[k - 1].tolist()))
        rows = [*map(tuple, file_ids[k].tolist()), *added.get(k, ())]
        for r in rows:
            for sub in (r[:-1], r[1:]):
                if sub not in present:
                    added[k - 1].add(sub)
    return {k: np.array(sorted(a), np.int64).reshape(-1, k) for k, a in added.items() if a}


def _build(path, base, sections, file_ids, added, strict: bool = False) -> BackoffNgram:
    """The back-off model of the parsed sections, orders ascending; ``added``: {k: (A, k)}
    n-grams missing from a pruned file, given p = bow(context) p(w | shorter context), the
    probability backing off gives them, and a back-off weight of 1 (KenLM's rule)."""
    from . import arpa_scan

    vocab, uni_logp, uni_bow = base
    V, ln10 = len(vocab), math.log(10)
    model = BackoffNgram(vocab, uni_logp, uni_bow, [])
    prev_size = V
    prev_rows = prev_rank = None  # order k-1: its n-grams' words, and each one's stored index
    for k in range(2, max(file_ids, default=1) + 1):
        logp, bow, ids = sections[k].logp * ln10, sections[k].bow * ln10, file_ids[k]
        n_file = len(ids)
        if k in added:
            extra = added[k]
            context = _chain_ids(model, extra[:, :-1])
            table = model.unigram_log_bow if k == 2 else model.levels[k - 3].log_bow
            lower = model.target_logprobs(extra[:, 1:-1], extra[:, -1])
            logp = np.concatenate([logp, table[context] + lower])
            bow = np.concatenate([bow, np.zeros(len(extra))])
            ids = np.concatenate([ids, extra])
        if k == 2:  # unigram ids are word ids
            suffix, prefix = ids[:, 1].copy(), ids[:, 0].copy()
        else:  # find the (k-1)-word suffix and context among order k-1's words at once
            bits = max(4, int(np.ceil(np.log2(max(2 * len(prev_rows), 1)))))
            slots = arpa_scan.rows_table(prev_rows, bits)
            suffix, prefix = (arpa_scan.find_rows(slots, bits, prev_rows, w)
                              for w in (ids[:, 1:], ids[:, :-1]))
            suffix = np.where(suffix >= 0, prev_rank[suffix], -1)
            prefix = np.where(prefix >= 0, prev_rank[prefix], -1)
        missing = (suffix < 0) | (prefix < 0)
        if np.any(missing):
            raise _Pruned
        keys = suffix * V + ids[:, 0]
        sort = np.argsort(keys, kind="stable")
        dup = np.flatnonzero(keys[sort][1:] == keys[sort][:-1])
        if len(dup):
            bad = int(max(sort[dup[0]], sort[dup[0] + 1]))
            where_ = where(path, int(sections[k].lines[min(bad, n_file - 1)]))
            raise NnlmError(f"{where_}: n-gram '{' '.join(vocab.words[i] for i in ids[bad])}' "
                            "appears twice")
        mass = np.bincount(prefix, weights=np.exp(logp))
        if mass.max(initial=0.0) > 1 + MASS_TOLERANCE:
            ctx = int(np.argmax(mass))
            bad = int(np.flatnonzero(prefix == ctx)[0])
            words_ = " ".join(vocab.words[i] for i in ids[bad][:-1])
            what = (f"the {k}-grams after '{words_}' have probabilities summing to "
                    f"{mass[ctx]:.6g}, more than 1")
            if strict:
                raise NnlmError(f"{path}: {what}")
            over = int((mass > 1 + MASS_TOLERANCE).sum())
            warn(f"{path}: {what}{f' ({contexts_text(over - 1)} too)' if over > 1 else ''}; "
                 "loaded as KenLM loads it, but its perplexities are too good")
        model.levels.append(NgramLevel(keys[sort], logp[sort], bow[sort], prefix[sort],
                                       ids[sort, -1], prev_size))
        model.order = k
        prev_size = len(keys)
        prev_rows, prev_rank = ids, np.empty(len(sort), np.int64)
        prev_rank[sort] = np.arange(len(sort))
    return model


def _added_masks(model: BackoffNgram, added: dict) -> dict[int, np.ndarray]:
    """{order: mask of the level's entries that were added} (not checked as contexts)."""
    masks = {}
    for k, rows in added.items():
        mask = np.zeros(len(model.levels[k - 2]), bool)
        mask[_chain_ids(model, rows)] = True
        masks[k] = mask
    return masks


LOG10_LIMIT = 1000.0  # no real model has a log10 probability or weight beyond this


def _check_numbers(path: Path, words_of, logp, bow, has_bow: bool, lines) -> None:
    """Every log10 probability in [-LOG10_LIMIT, 0], every log10 back-off weight within
    +-LOG10_LIMIT (NaN, infinities and absurd magnitudes, which overflow once converted
    to natural logs, are refused). ``words_of(i)``: entry i's words; ``lines``: each
    entry's line number."""
    bad_p = ~((logp >= -LOG10_LIMIT) & (logp <= 0))
    if np.any(bad_p):
        i = int(np.flatnonzero(bad_p)[0])
        raise NnlmError(f"{where(path, int(lines[i]))}: log10 probability "
                        f"{float(logp[i])!r} of '{words_of(i)}' is not a number in "
                        f"[-{LOG10_LIMIT:g}, 0]")
    bad_b = ~(np.abs(bow) <= LOG10_LIMIT)
    if has_bow and np.any(bad_b):
        i = int(np.flatnonzero(bad_b)[0])
        raise NnlmError(f"{where(path, int(lines[i]))}: back-off weight "
                        f"{float(bow[i])!r} of '{words_of(i)}' is not a finite log10 weight "
                        f"within +-{LOG10_LIMIT:g}")


def _chain_ids(model: BackoffNgram, words: np.ndarray) -> np.ndarray:
    """Ids of the n-grams ``words`` (M, j) in ``model``'s stored orders; -1 where absent.
    By each level's hash index, which scoring then reuses."""
    V = len(model.vocab)
    ids = words[:, -1].copy()
    for j in range(2, words.shape[1] + 1):
        ids = model.levels[j - 2].find(np.where(ids >= 0, ids * V + words[:, -j], -1))
    return ids

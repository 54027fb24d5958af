"""ARPA files: export any back-off model, import one as a :class:`BackoffNgram`.

ARPA stores log10 probabilities and back-off weights::

    \\data\\
    ngram 1=3
    ngram 2=2

    \\1-grams:
    -99       <s>     -0.30103
    -0.30103  a       -0.1
    -0.30103  </s>
    ...
    \\end\\

``<s>`` gets -99 (it is only ever context), as KenLM writes it. Files written here load
in KenLM (``kenlm.Model``) and give the same per-token log10 probabilities as nnlm.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

from ..errors import NnlmError, warn, where
from ..fileio import atomic_path, iter_line_blocks, open_text_for_writing
from ..vocab import BOS, BOS_ID, EOS, EOS_ID, SPECIALS, UNK, UNK_ID, Vocabulary
from .backoff import BackoffNgram, NgramLevel
from .counts import lookup

LOG10_E = math.log10(math.e)
ARPA_ZERO = -99.0  # log10 probability written for "never predicted" (<s>)
MISSING_UNK = -100.0  # KenLM's log10 p(<unk>) for a file that lists no <unk>


def ngram_words(model: BackoffNgram) -> list[np.ndarray]:
    """For each order k >= 2, an int64 (M_k, k) array of each stored n-gram's word ids."""
    V = len(model.vocab)
    out = []
    lower = None
    for k, level in enumerate(model.levels, start=2):
        first = level.keys % V
        suffix = level.keys // V
        rest = suffix[:, None] if k == 2 else lower[suffix]
        words = np.column_stack([first, rest])
        out.append(words)
        lower = words
    return out


def _fmt(values: np.ndarray) -> list[str]:
    log10 = np.where(np.isneginf(values), ARPA_ZERO, values * LOG10_E)
    return [f"{x:.7g}" for x in log10.tolist()]


def write_arpa(model: BackoffNgram, path: str | os.PathLike, progress=None) -> Path:
    """Write ``model`` as an ARPA file (atomically; gzip, bzip2 or xz for a ``.gz``,
    ``.bz2`` or ``.xz`` name). ``progress(k)`` is called per order."""
    path = Path(path)
    for name, a in [("unigram", model.unigram_logp), *((f"{k}-gram", level.logp) for k, level
                                                      in enumerate(model.levels, start=2))]:
        if np.isnan(a).any() or (a > 1e-9).any():
            raise NnlmError(f"{path}: not written: the model's {name} log-probabilities hold "
                            "NaN or values above 0")
    words = model.vocab.words
    all_words = ngram_words(model)
    word_array = np.array(words, dtype=object)
    counts = [len(words)] + [len(w) for w in all_words]
    with atomic_path(path) as tmp, open_text_for_writing(tmp, path) as f:
        f.write("\\data\\\n")
        for k, n in enumerate(counts, start=1):
            f.write(f"ngram {k}={n}\n")
        f.write("\n\\1-grams:\n")
        probs = _fmt(model.unigram_logp)
        bows = _fmt(model.unigram_log_bow) if model.order > 1 else None
        for i, w in enumerate(words):
            f.write(f"{probs[i]}\t{w}\t{bows[i]}\n" if bows else f"{probs[i]}\t{w}\n")
        for k, (level, ids) in enumerate(zip(model.levels, all_words), start=2):
            if progress:
                progress(k)
            f.write(f"\n\\{k}-grams:\n")
            probs = _fmt(level.logp)
            texts = word_array[ids[:, 0]]
            for j in range(1, k):
                texts = texts + " " + word_array[ids[:, j]]
            if k < model.order:
                bows = _fmt(level.log_bow)
                f.writelines(f"{p}\t{t}\t{b}\n" for p, t, b in zip(probs, texts, bows))
            else:
                f.writelines(f"{p}\t{t}\n" for p, t in zip(probs, texts))
        f.write("\n\\end\\\n")
    return path


_NGRAM_LINE = re.compile(r"^ngram (\d+)=(\d+)$")
_SECTION = re.compile(r"^\\(\d+)-grams:$")


def _parse(path: Path):
    """The declared counts and, per order, the section's lines and first line number."""
    declared: dict[int, int] = {}
    sections: dict[int, tuple[int, list[str]]] = {}
    state = "start"
    current: list[str] | None = None
    for first, block in iter_line_blocks(path):
        start = 0
        if state == "grams":  # the section's lines in bulk, up to the next line with a \
            text = "\n".join(block)
            if not text.startswith("\\"):
                at = text.find("\n\\")  # the line end before the next line with a \
                start = len(block) if at < 0 else text.count("\n", 0, at) + 1
            current.extend(block[:start])  # blank lines too, so line numbers stay exact
        for i in range(start, len(block)):
            line = block[i]
            if state == "grams" and not line.startswith("\\"):
                current.append(line)
                continue
            n = first + i
            line = line.strip()
            if not line:
                continue
            if state == "start":
                state = "data" if line == "\\data\\" else "start"
                continue
            if state == "data":
                m = _NGRAM_LINE.match(line)
                if m:
                    declared[int(m.group(1))] = int(m.group(2))
                    continue
            if line == "\\end\\":
                state = "end"
                break
            m = _SECTION.match(line)
            if not m:
                got = line[:40]
                raise NnlmError(f"{where(path, n)}: expected a \\N-grams: section, got {got!r}")
            k = int(m.group(1))
            if k not in declared:
                raise NnlmError(f"{where(path, n)}: section {k}-grams not declared in \\data\\")
            current = []
            sections[k] = (n + 1, current)
            state = "grams"
        if state == "end":
            break
    if state == "start":
        raise NnlmError(f"{path}: not an ARPA file (no \\data\\ line)")
    if state != "end":
        raise NnlmError(f"{path}: no \\end\\ line; the file may be truncated")
    return declared, sections


def _parse_section(path: Path, k: int, first_line: int, lines: list[str]):
    """(log10 p, words (M, k) as strings, log10 bow) of one section, parsed in bulk."""
    raw = lines
    tokens = " ".join(lines).split()
    per_line = _fields_per_line(lines)
    per_line = per_line[per_line > 0]  # blank lines hold no entry
    M = len(per_line)
    for fields in (k + 2, k + 1):
        # bulk split, valid only if every line has exactly this many fields
        if M and len(tokens) == M * fields and np.all(per_line == fields):
            table = np.array(tokens, dtype=object).reshape(M, fields)
            try:
                logp = table[:, 0].astype(np.float64)
                bow = table[:, -1].astype(np.float64) if fields == k + 2 else np.zeros(M)
                return logp, table[:, 1 : k + 1], bow
            except ValueError:
                break
    # slow path: find the first bad line and say which
    out_p, out_w, out_b = [], [], []
    for i, line in enumerate(raw):
        parts = line.split()
        if not parts:
            continue
        try:
            if len(parts) not in (k + 1, k + 2):
                raise ValueError
            out_p.append(float(parts[0]))
            out_w.append(parts[1 : k + 1])
            out_b.append(float(parts[k + 1]) if len(parts) == k + 2 else 0.0)
        except ValueError:
            raise NnlmError(f"{where(path, first_line + i)}: expected "
                            f"'log10p w1 ... w{k} [log10bow]'") from None
    return (np.array(out_p), np.array(out_w, dtype=object).reshape(len(out_w), k),
            np.array(out_b))


def read_arpa(path: str | os.PathLike) -> BackoffNgram:
    """Read an ARPA file as a back-off model; its vocabulary is its unigrams."""
    path = Path(path)
    declared, sections = _parse(path)
    parsed = {k: _parse_section(path, k, *sections[k]) for k in sorted(sections)}
    for k, count in declared.items():
        got = len(parsed[k][0]) if k in parsed else 0
        if got != count:
            raise NnlmError(f"{path}: \\data\\ declares {count:,} {k}-grams, the file has {got:,}")
    order = max(declared) if declared else 0
    if order < 1:
        raise NnlmError(f"{path}: no unigrams")
    for k in sorted(parsed):
        _check_numbers(path, k, sections[k], *parsed[k], has_bow=k < order)
    uni_p, uni_words, uni_b = parsed[1]
    file_words = uni_words[:, 0].tolist()
    if len(set(file_words)) < len(file_words):
        seen: set = set()
        bad = next(i for i, w in enumerate(file_words) if w in seen or seen.add(w))
        raise NnlmError(f"{where(path, _line_of_entry(*sections[1], bad))}: unigram "
                        f"{file_words[bad]!r} appears twice")
    for special in (BOS, EOS):
        if special not in file_words:
            raise NnlmError(f"{path}: no {special} unigram; not a sentence-level ARPA model")
    vocab = Vocabulary([*SPECIALS, *(w for w in file_words if w not in SPECIALS)])
    V = len(vocab)
    ln10 = math.log(10)
    uni_logp = np.full(V, ARPA_ZERO * ln10)
    if UNK not in file_words:  # KenLM's choice for a file without <unk>, and its warning
        uni_logp[UNK_ID] = MISSING_UNK * ln10
        warn(f"{path}: no <unk> unigram; out-of-vocabulary words get log10 p = "
             f"{MISSING_UNK:g} (as KenLM does), which will dominate any perplexity")
    uni_bow = np.zeros(V)
    idx = np.array([vocab.index[w] for w in file_words])
    uni_logp[idx] = uni_p * ln10
    uni_bow[idx] = uni_b * ln10
    uni_logp[BOS_ID] = -np.inf
    get = vocab.index.get
    file_ids = {}
    for k in range(2, order + 1):
        words = parsed[k][1]
        flat = words.ravel().tolist()
        try:  # the fast path: every word known
            ids = np.fromiter(map(vocab.index.__getitem__, flat), np.int64, len(flat))
        except KeyError:
            ids = np.array([get(w, -1) for w in flat], np.int64)
        ids = ids.reshape(-1, k)
        if np.any(ids < 0):
            bad = int(np.flatnonzero((ids < 0).any(axis=1))[0])
            line = _line_of_entry(*sections[k], bad)
            raise NnlmError(f"{where(path, line)}: word not among the unigrams")
        bad_rows = (ids[:, 1:] == BOS_ID).any(axis=1) | (ids[:, :-1] == EOS_ID).any(axis=1)
        if np.any(bad_rows):
            bad = int(np.flatnonzero(bad_rows)[0])
            raise NnlmError(f"{where(path, _line_of_entry(*sections[k], bad))}: n-gram "
                            f"'{' '.join(words[bad])}' has <s> after its first word or </s> "
                            "before its last; <s> is only context and </s> only predicted")
        file_ids[k] = ids
    base = (vocab, uni_logp, uni_bow)
    try:
        model, added = _build(path, base, parsed, sections, file_ids, {}), {}
    except _Pruned:
        added = missing_ngrams(file_ids, order)
        model = _build(path, base, parsed, sections, file_ids, added)
        n = sum(len(a) for a in added.values())
        warn(f"{path}: a pruned file: {n:,} n-grams that other n-grams need as context or "
             "suffix are missing; added with the probability of backing off and a back-off "
             "weight of 1, as KenLM does")
    check_normalized(model, path, skip=_added_masks(model, added))
    return model


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


def _build(path, base, parsed, sections, file_ids, added) -> BackoffNgram:
    """The back-off model of the parsed sections, orders ascending; ``added``: {k: (A, k)}
    n-grams missing from a pruned file, given p = bow(context) p(w | shorter context), the
    probability backing off gives them, and a back-off weight of 1 (KenLM's rule)."""
    vocab, uni_logp, uni_bow = base
    V, ln10 = len(vocab), math.log(10)
    model = BackoffNgram(vocab, uni_logp, uni_bow, [])
    prev_size = V
    for k in range(2, max(file_ids, default=1) + 1):
        logp10, words, bow10 = parsed[k]
        logp, bow, ids = logp10 * ln10, bow10 * ln10, file_ids[k]
        n_file = len(ids)
        if k in added:
            extra = added[k]
            context = _chain_ids(model, extra[:, :-1])
            table = model.unigram_log_bow if k == 2 else model.levels[k - 3].log_bow
            lower = model.target_logprobs(extra[:, 1:-1], extra[:, -1])
            logp = np.concatenate([logp, table[context] + lower])
            bow = np.concatenate([bow, np.zeros(len(extra))])
            ids = np.concatenate([ids, extra])
        suffix = _chain_ids(model, ids[:, 1:])
        prefix = _chain_ids(model, ids[:, :-1])
        missing = (suffix < 0) | (prefix < 0)
        if np.any(missing):
            raise _Pruned
        keys = suffix * V + ids[:, 0]
        sort = np.argsort(keys, kind="stable")
        dup = np.flatnonzero(keys[sort][1:] == keys[sort][:-1])
        if len(dup):
            bad = int(max(sort[dup[0]], sort[dup[0] + 1]))
            where_ = where(path, _line_of_entry(*sections[k], min(bad, n_file - 1)))
            raise NnlmError(f"{where_}: n-gram '{' '.join(vocab.words[i] for i in ids[bad])}' "
                            "appears twice")
        mass = np.bincount(prefix, weights=np.exp(logp))
        if mass.max(initial=0.0) > 1 + MASS_TOLERANCE:
            ctx = int(np.argmax(mass))
            bad = int(np.flatnonzero(prefix == ctx)[0])
            words_ = " ".join(vocab.words[i] for i in ids[bad][:-1])
            raise NnlmError(f"{path}: the {k}-grams after '{words_}' have probabilities "
                            f"summing to {mass[ctx]:.6g}, more than 1")
        model.levels.append(NgramLevel(keys[sort], logp[sort], bow[sort], prefix[sort],
                                       ids[sort, -1], prev_size))
        model.order = k
        prev_size = len(keys)
    return model


def _added_masks(model: BackoffNgram, added: dict) -> dict[int, np.ndarray]:
    """{order: mask of the level's entries that were added} (not checked as contexts)."""
    masks = {}
    for k, rows in added.items():
        mask = np.zeros(len(model.levels[k - 2]), bool)
        mask[_chain_ids(model, rows)] = True
        masks[k] = mask
    return masks


def check_normalized(model: BackoffNgram, path, skip: dict | None = None) -> None:
    """Every next-word distribution of a back-off model must sum to 1: more is an error
    (an impossible model, whose perplexities would be too good), less a warning (a
    deficient one; its perplexities are upper bounds). ``skip``: {order: bool mask} of
    contexts not to check (entries added for a pruned file's missing contexts).

    For a context h stored at order k-1, its explicit k-grams carry P(h w) and the rest
    comes from backing off: sum = sum_w P(h w) + bow(h) (1 - sum_w p(w | h')), where
    p(w | h') is the stored suffix n-gram's probability (ARPA stores every suffix). A
    context with no k-grams sums to bow(h), so its weight must be 1. Contexts ending in
    ``</s>`` are never used and are skipped. One vectorized pass per order.
    """
    V = len(model.vocab)
    mass = float(np.sum(np.exp(np.delete(model.unigram_logp, BOS_ID))))
    deficient = []  # (what, sum) of distributions summing to less than 1
    if mass > 1 + MASS_TOLERANCE:
        raise NnlmError(f"{path}: the unigram probabilities sum to {mass:.6g}, more than 1; "
                        "not a valid language model")
    if mass < 1 - MASS_TOLERANCE:
        deficient.append(("the unigrams", mass))
    for k, level in enumerate(model.levels, start=2):
        if k == 2:
            low, ctx_bow, ctx_last = model.unigram_logp[level.last], model.unigram_log_bow, \
                np.arange(V)
        else:
            lower = model.levels[k - 3]
            low, ctx_bow, ctx_last = lower.logp[level.keys // V], lower.log_bow, lower.last
        n = len(ctx_bow)
        s_exp = np.bincount(level.prefix, np.exp(level.logp), minlength=n)
        s_low = np.bincount(level.prefix, np.exp(low), minlength=n)
        with np.errstate(over="ignore"):
            total = s_exp + np.exp(ctx_bow) * (1.0 - s_low)
        used = ctx_last != EOS_ID
        if skip and k - 1 in skip:  # added contexts, and contexts of k-grams whose suffix
            used &= ~skip[k - 1]  # was added: a pruned file's sums hold only roughly
            if k >= 3:
                used[level.prefix[skip[k - 1][level.keys // V]]] = False
        for bad, above in ((used & (total > 1 + MASS_TOLERANCE), True),
                           (used & (total < 1 - MASS_TOLERANCE), False)):
            if not np.any(bad):
                continue
            i = int(np.flatnonzero(bad)[0])
            words = (model.vocab.words[i] if k == 2
                     else " ".join(model.vocab.words[j] for j in ngram_words(model)[k - 3][i]))
            if above:
                raise NnlmError(f"{path}: the probabilities after '{words}' sum to "
                                f"{total[i]:.6g}, more than 1: its n-grams and back-off weight "
                                "disagree, so every score would be wrong. Not a valid "
                                "language model")
            deficient.append((f"'{words}' and {int(bad.sum()) - 1:,} other contexts", total[i]))
    if deficient:
        what, total = deficient[0]
        warn(f"{path}: the probabilities after {what} sum to {total:.6g}, less than 1 (a "
             "deficient model, e.g. pruned without renormalizing): perplexities are upper "
             "bounds")


MASS_TOLERANCE = 1e-3  # ARPA's 7 significant digits, summed over a large vocabulary
LOG10_LIMIT = 1000.0  # no real model has a log10 probability or weight beyond this


def _check_numbers(path: Path, k: int, section, logp, words, bow, has_bow: bool) -> None:
    """Every log10 probability in [-LOG10_LIMIT, 0], every log10 back-off weight within
    +-LOG10_LIMIT (NaN, infinities and absurd magnitudes, which overflow once converted
    to natural logs, are refused)."""
    bad_p = ~((logp >= -LOG10_LIMIT) & (logp <= 0))
    if np.any(bad_p):
        i = int(np.flatnonzero(bad_p)[0])
        raise NnlmError(f"{where(path, _line_of_entry(*section, i))}: log10 probability "
                        f"{logp[i]!r} of '{' '.join(words[i])}' is not a number in "
                        f"[-{LOG10_LIMIT:g}, 0]")
    bad_b = ~(np.abs(bow) <= LOG10_LIMIT)
    if has_bow and np.any(bad_b):
        i = int(np.flatnonzero(bad_b)[0])
        raise NnlmError(f"{where(path, _line_of_entry(*section, i))}: back-off weight "
                        f"{bow[i]!r} of '{' '.join(words[i])}' is not a finite log10 weight "
                        f"within +-{LOG10_LIMIT:g}")


def _fields_per_line(lines: list[str]) -> np.ndarray:
    """Number of blank-separated fields on each line, counted with numpy over the bytes.

    A field starts where a non-blank byte follows a blank or a line start. ``str.split``
    also splits on Unicode spaces, so it never finds fewer fields on a line than this;
    equal totals therefore mean equal counts on every line.
    """
    data = np.frombuffer("\n".join(lines).encode("utf-8"), dtype=np.uint8)
    blank = (data == 32) | (data == 9) | (data == 10) | (data == 13) | (data == 11) | (data == 12)
    starts = np.flatnonzero(~blank & np.concatenate([[True], blank[:-1]]))
    newlines = np.flatnonzero(data == 10)
    return np.bincount(np.searchsorted(newlines, starts), minlength=len(lines))


def _line_of_entry(first_line: int, raw_lines: list[str], index: int) -> int:
    """File line of the index-th non-blank line of a section."""
    seen = -1
    for i, line in enumerate(raw_lines):
        seen += bool(line.strip())
        if seen == index:
            return first_line + i
    return first_line


def _chain_ids(model: BackoffNgram, words: np.ndarray) -> np.ndarray:
    """Ids of the n-grams ``words`` (M, j) in ``model``'s stored orders; -1 where absent."""
    V = len(model.vocab)
    ids = words[:, -1].copy()
    for j in range(2, words.shape[1] + 1):
        c = words[:, -j]
        ids = np.where(ids >= 0, lookup(model.levels[j - 2].keys, ids * V + c), -1)
    return ids

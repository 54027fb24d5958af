"""Class-based n-gram models: words clustered by the exchange algorithm, KN over classes.

    p(w | h) = p(w | class(w)) * p(class(w) | class(h))

The classes come from the exchange algorithm (Kneser & Ney 1993; Martin, Liermann & Ney
1998): each word in turn moves to the class that most increases the class-bigram
log-likelihood of train, which up to constants is::

    F = sum_{c,d} f(M[c, d]) - sum_c f(N_left[c]) - sum_d f(N_right[d]),   f(x) = x ln x

with M the class-bigram counts. The gain of every candidate class is computed at once
(numpy over classes), so c = 500 on Brown takes about a minute. ``<unk>``, ``<s>`` and
``</s>`` keep classes of their own (ids 0, 1, 2, as in the word vocabulary); the other
words share ``n_classes`` classes. The class n-gram p(class | class history) is modified
Kneser-Ney over the class stream; p(w | class) is the relative frequency in train.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...base.errors import NnlmError, where
from ...lm import LanguageModel
from ...model_files import header_binding, read_arrays, write_arrays
from ...text.fileio import atomic_write_text, iter_line_blocks
from ...text.stream import Stream
from ...text.vocab import BOS_ID, SPECIALS, Vocabulary
from ..store.trie_write import write_trie
from .kneser_ney import FALLBACK_DISCOUNTS, KneserNey, check_fallback

N_FIXED = len(SPECIALS)  # <unk>, <s>, </s>: one class each


def _xlogx(x: np.ndarray) -> np.ndarray:
    return x * np.log(np.maximum(x, 1.0))  # counts are 0 or >= 1


def exchange_clustering(
    stream: Stream,
    vocab: Vocabulary,
    n_classes: int,
    max_iterations: int = 15,
    min_moves: float = 0.001,
    progress: Callable[[int, int, float], None] | None = None,
) -> np.ndarray:
    """word id -> class id (int64, |V|): specials fixed, others in N_FIXED .. N_FIXED+c-1.

    Words start round-robin by frequency rank; passes stop when fewer than ``min_moves``
    of the words move, or after ``max_iterations``. ``progress(pass, moved, F)`` reports.
    """
    V = len(vocab)
    movable_words = V - N_FIXED
    if n_classes < 1:
        raise NnlmError(f"{n_classes} classes: need at least one")
    if n_classes > max(1, movable_words):
        raise NnlmError(f"{n_classes} classes for {movable_words} words: there can be at most "
                        "one class per word; choose fewer classes")
    C = N_FIXED + n_classes
    cls = np.arange(V, dtype=np.int64)
    cls[N_FIXED:] = N_FIXED + (np.arange(movable_words) % n_classes)

    prev = stream.contexts(2)[:, 0].astype(np.int64)
    nxt = stream.ids.astype(np.int64)
    keys, counts = np.unique(prev * V + nxt, return_counts=True)
    left, right = keys // V, keys % V
    counts = counts.astype(np.float64)
    # CSR of successors by left word, and of predecessors by right word
    succ_off = np.searchsorted(left, np.arange(V + 1))
    by_right = np.argsort(right, kind="stable")
    pred_off = np.searchsorted(right[by_right], np.arange(V + 1))
    self_count = np.zeros(V)
    self_count[left[left == right]] = counts[left == right]
    n_left = np.bincount(left, weights=counts, minlength=V)
    n_right = np.bincount(right, weights=counts, minlength=V)

    M = np.zeros((C, C))
    np.add.at(M, (cls[left], cls[right]), counts)
    NL, NR = M.sum(axis=1), M.sum(axis=0)
    size = np.bincount(cls, minlength=C)
    candidates = np.arange(N_FIXED, C)

    def objective() -> float:
        return float(_xlogx(M).sum() - _xlogx(NL).sum() - _xlogx(NR).sum())

    for it in range(1, max_iterations + 1):
        moved = 0
        for w in range(N_FIXED, V):
            a = cls[w]
            if size[a] == 1:
                continue  # never empty a class
            s_words = right[succ_off[w] : succ_off[w + 1]]
            s_counts = counts[succ_off[w] : succ_off[w + 1]]
            p_idx = by_right[pred_off[w] : pred_off[w + 1]]
            p_words, p_counts = left[p_idx], counts[p_idx]
            not_self_s, not_self_p = s_words != w, p_words != w
            s = np.bincount(cls[s_words[not_self_s]], weights=s_counts[not_self_s], minlength=C)
            p = np.bincount(cls[p_words[not_self_p]], weights=p_counts[not_self_p], minlength=C)
            sc, nl, nr = self_count[w], n_left[w], n_right[w]
            # take w out of its class
            M[a, :] -= s
            M[:, a] -= p
            M[a, a] -= sc
            NL[a] -= nl
            NR[a] -= nr
            # gain of putting it into each candidate class b
            S, P = np.flatnonzero(s), np.flatnonzero(p)
            gain = np.zeros(C)
            if len(S):
                block = M[:, S]
                gain += (_xlogx(block + s[S]) - _xlogx(block)).sum(axis=1)
            if len(P):
                block = M[P, :]
                gain += (_xlogx(block + p[P, None]) - _xlogx(block)).sum(axis=0)
            d = np.diagonal(M)
            gain -= _xlogx(d + s) - _xlogx(d)  # the diagonal was counted in both sums above
            gain -= _xlogx(d + p) - _xlogx(d)
            gain += _xlogx(d + s + p + sc) - _xlogx(d)
            gain -= _xlogx(NL + nl) - _xlogx(NL) + _xlogx(NR + nr) - _xlogx(NR)
            g = gain[candidates]
            b = int(candidates[np.argmax(g)])
            if g[b - N_FIXED] <= gain[a] + 1e-9:
                b = a
            M[b, :] += s
            M[:, b] += p
            M[b, b] += sc
            NL[b] += nl
            NR[b] += nr
            if b != a:
                cls[w] = b
                size[a] -= 1
                size[b] += 1
                moved += 1
        if progress:
            progress(it, moved, objective())
        if moved < min_moves * movable_words:
            break
    return cls


def save_classes(word_class: np.ndarray, vocab: Vocabulary, path: str | os.PathLike) -> None:
    """``word<TAB>class`` lines, in vocabulary order."""
    atomic_write_text(path, "".join(f"{w}\t{c}\n" for w, c in zip(vocab.words, word_class)))


def load_classes(path: str | os.PathLike, vocab: Vocabulary) -> np.ndarray:
    """Read a clustering written by :func:`save_classes`; words it lacks are an error."""
    path = Path(path)
    found: dict[str, int] = {}
    for first, block in iter_line_blocks(path):
        for i, line in enumerate(block):
            parts = line.split("\t")
            if len(parts) != 2 or not parts[1].strip().isdigit():
                raise NnlmError(f"{where(path, first + i)}: expected 'word<TAB>class'")
            found[parts[0]] = int(parts[1])
    missing = [w for w in vocab.words if w not in found]
    if missing:
        raise NnlmError(f"{path}: has no class for {len(missing)} vocabulary words "
                        f"(e.g. {missing[0]!r}); it was made for another vocabulary")
    word_class = np.array([found[w] for w in vocab.words], dtype=np.int64)
    if tuple(word_class[:N_FIXED]) != tuple(range(N_FIXED)):
        raise NnlmError(f"{path}: {', '.join(SPECIALS)} must have classes 0, 1, 2")
    return word_class


class ClassNgram(LanguageModel):
    """p(w | h) = p(w | class(w)) p(class(w) | class history), KN over class n-grams."""

    kind = "class"

    def __init__(self, vocab: Vocabulary, order: int = 3, n_classes: int = 500,
                 discount_fallback=FALLBACK_DISCOUNTS):
        """``discount_fallback`` applies only to orders whose class counts-of-counts leave
        the modified-KN discounts undefined (typically class unigrams: a few hundred
        classes all have many distinct predecessors, so none has adjusted count 1)."""
        if not (isinstance(n_classes, int) and n_classes >= 1):
            raise NnlmError(f"{n_classes!r} classes: need at least one")
        self.vocab, self.order, self.n_classes = vocab, order, n_classes
        self.discount_fallback = check_fallback(discount_fallback)
        self.word_class = np.zeros(len(vocab), np.int64)
        self.emission_logp = np.zeros(len(vocab))
        self.class_model: KneserNey | None = None

    @staticmethod
    def class_vocabulary(n_total: int) -> Vocabulary:
        return Vocabulary([*SPECIALS, *(f"C{i}" for i in range(N_FIXED, n_total))])

    def fit(self, train: Stream, word_class: np.ndarray | None = None,
            progress: Callable[[int, int, float], None] | None = None) -> ClassNgram:
        """Cluster (unless ``word_class`` is given), then estimate both factors."""
        if word_class is None:
            word_class = exchange_clustering(train, self.vocab, self.n_classes, progress=progress)
        word_class = np.asarray(word_class, np.int64)
        used = np.unique(word_class)
        remap = np.zeros(word_class.max() + 1, np.int64)  # make class ids dense
        remap[used] = np.arange(len(used))
        self.word_class = remap[word_class]
        n_total = len(used)
        self.n_classes = n_total - N_FIXED
        counts = np.bincount(train.ids, minlength=len(self.vocab)).astype(np.float64)
        counts[counts == 0] = 0.5  # words of the vocabulary unseen in train keep some mass
        counts[BOS_ID] = 0.0
        class_totals = np.bincount(self.word_class, weights=counts, minlength=n_total)
        with np.errstate(divide="ignore", invalid="ignore"):
            self.emission_logp = np.log(counts) - np.log(class_totals[self.word_class])
        self.emission_logp[BOS_ID] = 0.0  # p(<s> | class <s>) = 1; the class itself has p = 0
        class_stream = Stream(self.word_class[train.ids].astype(np.int32), train.offsets)
        self.class_model = KneserNey(self.class_vocabulary(n_total), self.order,
                                     self.discount_fallback).fit(class_stream)
        return self

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        targets = np.asarray(targets, np.int64)
        cls_ctx = self.word_class[np.asarray(contexts, np.int64)]
        return self.emission_logp[targets] + self.class_model.target_logprobs(
            cls_ctx, self.word_class[targets])

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        cls_ctx = self.word_class[np.asarray(contexts, np.int64)]
        class_dist = self.class_model.next_logprobs(cls_ctx)  # (B, classes)
        return class_dist[:, self.word_class] + self.emission_logp[None, :]

    # -- persistence ---------------------------------------------------------------
    def write_extra_files(self, directory: Path) -> None:
        """``classes.tsv``: the clustering, reusable with ``--clustering``."""
        save_classes(self.word_class, self.vocab, Path(directory) / "classes.tsv")

    def config(self) -> dict:
        return {"order": self.order, "n_classes": self.n_classes,
                "class_model": self.class_model.config()}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"word_class": self.word_class, "emission_logp": self.emission_logp}
        out.update({f"class_{k}": v for k, v in self.class_model.arrays().items()})
        return out

    CLASS_TRIE = "class_ngrams.trie"

    def save_files(self, directory: Path, binding: str, save) -> None:
        """arrays.npz (the clustering and p(w | class)), the class n-gram model as a mapped
        trie (nnlm.ngram.store.trie) and classes.tsv."""

        write_arrays(Path(directory) / "arrays.npz",
                     {"word_class": self.word_class, "emission_logp": self.emission_logp},
                     binding)
        write_trie(self.class_model, Path(directory) / self.CLASS_TRIE, binding)
        self.write_extra_files(directory)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> ClassNgram:
        trie = Path(path) / cls.CLASS_TRIE
        if not trie.exists():  # saved before the trie: everything in arrays.npz
            return super().load_dir(path, header, vocab, load)
        binding = header_binding(header)
        arrays = read_arrays(Path(path) / "arrays.npz", binding)
        config = header["config"]
        model = cls(vocab, order=config["order"], n_classes=config["n_classes"])
        model.word_class = arrays["word_class"]
        model.emission_logp = arrays["emission_logp"]
        if len(model.word_class) != len(vocab) or len(model.emission_logp) != len(vocab):
            raise NnlmError(f"{Path(path) / 'arrays.npz'}: its class arrays do not match the "
                            f"{len(vocab)}-word vocabulary; the model is corrupt")
        n_total = int(model.word_class.max()) + 1
        model.class_model = KneserNey.from_trie(trie, binding, cls.class_vocabulary(n_total),
                                                config["class_model"])
        return model

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict):
        model = cls(vocab, order=config["order"], n_classes=config["n_classes"])
        model.word_class = arrays["word_class"]
        model.emission_logp = arrays["emission_logp"]
        inner = {k[len("class_"):]: v for k, v in arrays.items() if k.startswith("class_")}
        n_total = int(model.word_class.max()) + 1
        model.class_model = KneserNey.from_saved(cls.class_vocabulary(n_total),
                                                 config["class_model"], inner)
        return model

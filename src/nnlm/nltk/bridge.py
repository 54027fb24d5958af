"""An nltk.lm model seen as an nnlm model: :class:`NltkModel`, what ``to_nnlm()`` gives and
what ``save(path)`` writes (kind ``nltk`` in nnlm's model files).

nnlm's conventions differ from nltk.lm's in one place: ``<s>`` is context only, never a
word predicted, and every distribution over the other words sums to 1. NLTK counts the
padding ``<s>`` as a word, so its models give it mass, and a few of its distributions
do not sum to 1 (docs/guide/nltk.md). Here

    p_nnlm(w | h) = p_nltk(w | h) / S(h),   S(h) = sum over w' != <s> of p_nltk(w' | h),

with p_nltk the masked ``score`` (words outside the vocabulary are ``<UNK>``, nnlm's
``<unk>``). Where NLTK's model sums to 1 over its vocabulary after h, S(h) = 1 -
p_nltk(<s> | h), one score (and one more for each word nnlm's ids hold once more or
once less than NLTK's vocabulary: ``</s>`` where NLTK padded nothing, scored as
``<UNK>``); elsewhere (Stupid Backoff, Kneser-Ney after a context ending in ``<s>``)
S(h) is summed over the vocabulary, once per distinct context of a batch.
MLE after a context never seen gives 0 to every word; here the context is shortened
until one was seen (as NLTK's ``generate`` does), so every distribution is one.

A model's contexts are nnlm's: the last n - 1 words, ``<s>``-padded at a sentence's
start, which is NLTK's ``pad_both_ends`` padding, so inside a sentence the scores of the
two agree up to S(h).
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np

from ..base.errors import NnlmError, warn
from ..lm import LanguageModel as NnlmLanguageModel
from ..model_files import header_binding, read_arrays, write_arrays
from ..models import load_model
from ..text.vocab import BOS, BOS_ID, EOS, NO_WORD, SPECIALS, UNK, Vocabulary
from .kinds import CLASSES
from .vocabulary import Vocabulary as NltkVocabulary

PARAMETERS = ("gamma", "alpha", "discount")  # the smoothing's own, where it has one
UNSAFE = ("\t", "\n", "\r", "\0")  # characters nnlm's vocab.txt cannot hold in a word


class NltkModel(NnlmLanguageModel):
    """An nnlm.nltk model (``nltk``) under nnlm's LanguageModel interface, renormalized
    without ``<s>`` (see the module docstring). A view of the model as it is: fitting
    it further calls for a new one (``to_nnlm()`` again)."""

    kind = "nltk"
    zero_means = ("nltk.lm's smoothing gives it 0 (MLE: an n-gram never seen; Kneser-Ney: "
                  "<UNK> never counted, fit with Vocabulary(unk_cutoff=2) to count rare "
                  "words as <UNK>)")

    def __init__(self, nltk_model):
        self.nltk = nltk_model
        self.order = max(int(nltk_model.order), 1)
        vocab = nltk_model.vocab
        own = {BOS, EOS, vocab.unk_label, UNK}
        words = [w for w in vocab if w not in own and not any(c in w for c in UNSAFE)]
        skipped = sum(1 for w in vocab if any(c in w for c in UNSAFE))
        if skipped:
            warn(f"{skipped} word(s) of the NLTK vocabulary hold a tab, newline or NUL, "
                 "which nnlm's vocabulary cannot: they are <unk> on nnlm's side")
        self.vocab = Vocabulary([*SPECIALS, *words],
                                [vocab.counts.get(vocab.unk_label, 0), 0, vocab.counts.get(EOS, 0),
                                 *(vocab.counts[w] for w in words)])
        # nnlm id -> the word NLTK scores (looked up: a padding symbol it never saw is <UNK>)
        self._words = list(vocab.lookup([vocab.unk_label, BOS, EOS, *words]))
        self._ids: tuple[int, np.ndarray] | None = None  # (tables' version, table_ids())
        # where nnlm's ids and NLTK's vocabulary differ (<s> never predicted, a padding
        # symbol NLTK never saw scored as <UNK> twice, a word nnlm cannot hold): the words
        # a sum over NLTK's vocabulary has less (-1) or more (+1) than one over nnlm's ids
        scored = Counter(w for i, w in enumerate(self._words) if i != BOS_ID)
        self._differs = [(w, -1) for w in vocab if w not in scored] + \
            [(w, +1) for w, n in scored.items() for _ in range(n - 1)]

    # -- the interface ---------------------------------------------------------------------
    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts, np.int64).reshape(len(targets), -1)
        targets = np.asarray(targets, np.int64)
        if len(targets) == 0:
            return np.zeros(0, np.float64)
        unique, inverse = np.unique(contexts, axis=0, return_inverse=True)
        histories, totals = self._normalizers([self._history(row) for row in unique])
        inverse = inverse.reshape(-1)
        p = self._id_scores(targets, histories, inverse)
        with np.errstate(divide="ignore"):
            out = np.log(p) - np.log(totals[inverse])
        out[targets == BOS_ID] = -np.inf
        return out

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts, np.int64).reshape(len(contexts), -1)
        V = len(self.vocab)
        out = np.empty((len(contexts), V), np.float64)
        for b, row in enumerate(contexts):
            history = self._history(row)
            if self.nltk.nothing_after_unseen:
                history = _seen_suffix(self.nltk, history)
            p = self._row(history)
            with np.errstate(divide="ignore"):
                out[b] = np.log(p) - math.log(math.fsum(p))
        return out

    def table_ids(self) -> np.ndarray:
        """Each nnlm id's id in the NLTK model's count tables (-1: never counted)."""
        tables = self.nltk.counts._tables
        if self._ids is None or self._ids[0] != tables.version:
            self._ids = (tables.version, np.array([tables.ids.get(w, -1) for w in self._words],
                                                  np.int64))
        return self._ids[1]

    def _id_scores(self, targets: np.ndarray, histories: list[tuple],
                   inverse: np.ndarray) -> np.ndarray:
        """p_nltk(targets[i] | histories[inverse[i]]): the words are mapped to the count
        tables' ids once per distinct history, not once per token."""
        ids, word = self.nltk.counts._tables.ids, self.table_ids()[targets]
        lengths = np.array([len(h) for h in histories])
        p = np.empty(len(targets), np.float64)
        for m in np.unique(lengths).tolist():
            rows = np.flatnonzero(lengths[inverse] == m)
            table = np.full((len(histories), m), -1, np.int64)  # rows of this length used
            for i in np.flatnonzero(lengths == m).tolist():
                table[i] = [ids.get(w, -1) for w in histories[i]]
            p[rows] = self.nltk._id_scores(word[rows], table[inverse[rows]])
        return p

    def _history(self, row: np.ndarray) -> tuple:
        """The NLTK words of one context row (slots with no word left out)."""
        return tuple(self._words[i] for i in row.tolist() if i != NO_WORD)

    def _row(self, history: tuple) -> np.ndarray:
        """p_nltk(w | history) for every nnlm id, 0 for <s>."""
        ids, word = self.nltk.counts._tables.ids, self.table_ids()
        context = np.array([ids.get(w, -1) for w in history], np.int64)
        p = self.nltk._id_scores(word, np.broadcast_to(context, (len(word), len(history))))
        p[BOS_ID] = 0.0
        return p

    def _normalizers(self, histories: list[tuple]) -> tuple[list[tuple], np.ndarray]:
        """(each history, shortened where MLE saw it never; S of each) for distinct
        histories."""
        model = self.nltk
        histories = list(histories)
        if model.nothing_after_unseen:
            histories = [_seen_suffix(model, h) for h in histories]
        totals = np.empty(len(histories), np.float64)
        exact = [i for i, h in enumerate(histories)
                 if not model.sums_to_one_after(model.vocab.lookup(h) if h else ())]
        fast = np.setdiff1d(np.arange(len(histories)), exact)
        if len(fast):  # 1, less what nnlm's ids leave out, plus what they score twice
            totals[fast] = 1.0
            for word, sign in self._differs:
                totals[fast] += sign * model._scores([word] * len(fast),
                                                     [histories[i] for i in fast])
        for i in exact:
            totals[i] = math.fsum(self._row(histories[i]).tolist())
        return histories, totals

    # -- saving and loading (nnlm.models) ------------------------------------------------------
    def config(self) -> dict:
        model, vocab = self.nltk, self.nltk.vocab
        return {"model": type(model).__name__, "order": model.order,
                **{p: getattr(model, p) for p in PARAMETERS if hasattr(model, p)},
                "unk_cutoff": vocab.cutoff, "unk_label": vocab.unk_label}

    def arrays(self) -> dict[str, np.ndarray]:
        vocab, tables = self.nltk.vocab, self.nltk.counts._tables
        out = {"vocab_counts": np.fromiter(vocab.counts.values(), np.int64, len(vocab.counts))}
        out["vocab_words"], out["vocab_words_offsets"] = _pack(list(vocab.counts))
        out["table_words"], out["table_words_offsets"] = _pack(tables.words)
        for k in tables.orders():
            out[f"rows_{k}"], out[f"counts_{k}"] = tables.counted(k)
        return out

    def save_files(self, directory: Path, binding: str, save) -> None:
        write_arrays(directory / "arrays.npz", self.arrays(), binding)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> NltkModel:
        file = Path(path) / "arrays.npz"
        arrays = read_arrays(file, header_binding(header))
        return cls(restore(file, header["config"], arrays))


def _seen_suffix(model, history: tuple) -> tuple:
    """``history`` without its oldest words until the model saw it as a context."""
    while history and not model.sums_to_one_after(model.vocab.lookup(history)):
        history = history[1:]
    return history


def _pack(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Words as one UTF-8 byte array and the offsets of their ends (no fixed width)."""
    encoded = [w.encode("utf-8") for w in words]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64)
    return np.frombuffer(b"".join(encoded), np.uint8).copy(), ends


def _unpack(file: Path, blob: np.ndarray, ends: np.ndarray, name: str) -> list[str]:
    if blob.dtype != np.uint8 or ends.ndim != 1 or (len(ends) and (
            ends[-1] != len(blob) or np.any(np.diff(ends) < 0) or ends[0] < 0)):
        raise NnlmError(f"{file}: {name} is damaged (its offsets do not fit its bytes)")
    data, starts = blob.tobytes(), [0, *ends[:-1].tolist()]
    try:
        return [data[a:b].decode("utf-8") for a, b in zip(starts, ends.tolist())]
    except UnicodeDecodeError:
        raise NnlmError(f"{file}: {name} is not UTF-8; the file is damaged") from None


def restore(file: Path, config: dict, arrays: dict):
    """The nnlm.nltk model saved as ``arrays`` with ``config``, every array checked."""
    cls = CLASSES.get(config["model"])
    if cls is None:
        raise NnlmError(f"{file}: unknown nltk.lm model {config['model']!r}")
    order = int(config["order"])
    kwargs = {p: config[p] for p in PARAMETERS if p in config}
    if config["model"] == "Laplace":
        kwargs.pop("gamma", None)
    vocab = NltkVocabulary(unk_cutoff=int(config["unk_cutoff"]),
                           unk_label=str(config["unk_label"]))
    try:
        words = _unpack(file, arrays["vocab_words"], arrays["vocab_words_offsets"],
                        "vocab_words")
        counts = arrays["vocab_counts"]
        table_words = _unpack(file, arrays["table_words"], arrays["table_words_offsets"],
                              "table_words")
    except KeyError as e:
        raise NnlmError(f"{file}: array {e} missing; the model is incomplete") from None
    if len(counts) != len(words) or counts.dtype.kind not in "iu":
        raise NnlmError(f"{file}: vocab_counts does not match vocab_words; the file is damaged")
    vocab.update(dict(zip(words, counts.tolist())))
    if config["model"] == "Lidstone":  # its gamma comes first, positional as NLTK's
        model = cls(kwargs.pop("gamma"), order, vocabulary=vocab)
    else:
        model = cls(order=order, vocabulary=vocab, **kwargs)
    tables = model.counts._tables
    for w in table_words:
        tables.word_id(w)
    if len(tables.words) != len(table_words):
        raise NnlmError(f"{file}: table_words repeats a word; the file is damaged")
    W = len(table_words)
    for name in sorted(n for n in arrays if n.startswith("rows_")):
        k = int(name[5:])
        rows, counts = arrays[name], arrays.get(f"counts_{k}")
        if (counts is None or rows.ndim != 2 or rows.shape[1] != k or rows.dtype != np.int32
                or len(counts) != len(rows) or counts.dtype.kind not in "iu"
                or (len(rows) and (rows.min() < 0 or rows.max() >= W or counts.min() < 1))):
            raise NnlmError(f"{file}: {name} does not fit the model's tables; the file is "
                            "damaged")
        tables.set_counted(k, rows, counts)
    return model


def load(path):
    """The nnlm.nltk model that ``save(path)`` wrote, as it was (NnlmError, one line, for
    a path holding another kind of model)."""
    model = load_model(path)
    if not isinstance(model, NltkModel):
        raise NnlmError(f"{path}: a {getattr(model, 'kind', type(model).__name__)} model, "
                        "not one nnlm.nltk saved; nnlm.load reads it")
    return model.nltk

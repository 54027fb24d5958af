"""An unbounded-n model of the family: a back-off n-gram model below, and above it every
longer context the corpus holds, counted exactly in a suffix-array index (Liu et al.
2024's ∞-gram, smoothed).

The ∞-gram of Liu et al. takes p(w | h) = c(h_L w) / c(h_L) for the longest suffix h_L of
the history that occurs: a word never seen after h_L gets 0, so it cannot be evaluated or
decoded with alone. Here every suffix length k from the base model's order n up to L
interpolates with the one below it, by absolute discounting (Ney, Essen & Kneser 1994),
the form Kneser-Ney takes at its highest order:

    p_k(w) = max(c(h_k w) - D, 0) / c(h_k)  +  D T(h_k) / c(h_k) * p_{k-1}(w),
    p_{n-1}(w) = p_base(w | h_{n-1}),

with c(h_k) the occurrences of h_k followed by a token, T(h_k) the distinct tokens after
it (both from one :func:`~nnlm.index.search.followers` pass over h_k's range), and D a
discount in (0, 1]. Since sum_w max(c(h_k w) - D, 0) = c(h_k) - D T(h_k), each p_k sums
to 1 wherever p_{k-1} does, so the model is a distribution over the vocabulary for every
history. Kneser-Ney's continuation counts would need each suffix's left contexts, which
a suffix array of the forward text does not give; below order n the base model (modified
Kneser-Ney) has them. The history is the sentence so far (from its ``<s>``), up to
``max_n - 1`` words.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from pathlib import Path

import numpy as np

from ..base.errors import NnlmError
from ..index import Index
from ..index.build import index_stream
from ..index.index import Batch
from ..index.states import HistoryStates
from ..lm import LanguageModel
from ..text.specials import BOS_ID
from ..text.stream import Stream
from ..text.vocab import Vocabulary

DISCOUNT = 1.0  # chosen on Brown's valid text over KN5: D = 0.5, 0.9, 1.0 gave 201.3,
# 199.2, 198.9 (KN5 alone 198.8); Witten-Bell over the same levels 201.2
MAX_N = 64  # the longest n-gram used: the history's last 63 words
DECODER_ROWS = 16  # a call with at most this many rows goes through the kept states
INDEX_DIR, BASE_DIR = "index", "base"


class InfgramLM(LanguageModel):
    """p(w | h) from ``base`` (a LanguageModel of order n) and ``index`` over the same
    vocabulary (see the module)."""

    kind = "infgram"

    def __init__(self, base: LanguageModel, index: Index, discount: float = DISCOUNT,
                 max_n: int = MAX_N, _owned: tempfile.TemporaryDirectory | None = None):
        if index.vocab is None or index.vocab.fingerprint != base.vocab.fingerprint:
            raise NnlmError(f"{index.path}: the index's vocabulary is not the base model's")
        if not 0 < discount <= 1:
            raise NnlmError(f"discount={discount}: between 0 (excluded) and 1")
        if not base.order <= max_n:
            raise NnlmError(f"max_n={max_n}: at least the base model's order {base.order}")
        self.vocab, self.base, self.index = base.vocab, base, index
        self.discount, self.order, self.min_n = float(discount), int(max_n), base.order
        self._owned = _owned  # the temporary folder of an index built for this model
        self.states = HistoryStates(index)  # a decoder's histories, kept

    @classmethod
    def fit(cls, base: LanguageModel, train: Stream, discount: float = DISCOUNT,
            max_n: int = MAX_N) -> InfgramLM:
        """``base`` and an index of ``train`` (kept in a temporary folder until saved)."""
        owned = tempfile.TemporaryDirectory(prefix="nnlm-index-")
        index_stream(train, base.vocab, Path(owned.name) / INDEX_DIR)
        index = Index.open(Path(owned.name) / INDEX_DIR, verify=False)
        return cls(base, index, discount, max_n, owned)

    def neural_parts(self) -> list:
        return self.base.neural_parts()

    # -- the levels above the base ----------------------------------------------------
    def _levels(self, contexts: np.ndarray):
        """For each suffix length k = n, n+1, ... that some row's history reaches and
        that occurs: (rows, c(h_k), T(h_k), the followers' rows, tokens and counts)."""
        contexts = np.asarray(contexts, np.int64)
        width = contexts.shape[1]
        is_bos = contexts == BOS_ID
        last_bos = np.where(is_bos.any(1), width - 1 - np.argmax(is_bos[:, ::-1], 1), 0)
        length = width - last_bos  # the history's tokens, its <s> included
        rows = np.flatnonzero(length >= self.min_n)
        k = self.min_n
        while len(rows) and k <= width:
            suffixes = Batch.of(contexts[rows, width - k:].ravel(),
                                np.full(len(rows), k, np.int64))
            owner, tokens, counts = self.index.followers(suffixes)
            total = np.bincount(owner, counts, len(rows))
            types = np.bincount(owner, minlength=len(rows)).astype(np.float64)
            seen = total > 0
            if not seen.any():
                return
            yield rows, total, types, owner, tokens, counts, seen
            # a longer suffix occurs only where this one does
            rows = rows[seen & (length[rows] > k)]
            k += 1

    def _histories(self, contexts: np.ndarray) -> list[tuple[int, ...]]:
        """Each row's history: its words from its (last) ``<s>`` on."""
        out = []
        for row in np.asarray(contexts, np.int64).tolist():
            start = len(row) - 1 - row[::-1].index(BOS_ID) if BOS_ID in row else 0
            out.append(tuple(row[start:]))
        return out

    def _decoder_step(self, contexts, targets, p: np.ndarray) -> np.ndarray:
        """:meth:`target_logprobs`' levels for a decoder's few rows, from the histories'
        kept states (:class:`~nnlm.index.states.HistoryStates`): a word after a known
        history costs lookups, a new history one narrowing a suffix length."""
        d = self.discount
        for i, (history, w) in enumerate(zip(self._histories(contexts), targets.tolist())):
            lengths, found = self.states.levels(history, self.min_n)
            if found is None:
                continue
            level, tokens, counts = found
            total = np.bincount(level, counts, len(lengths))
            types = np.bincount(level, minlength=len(lengths))
            hit = np.zeros(len(lengths))
            np.add.at(hit, level[tokens == w], counts[tokens == w])
            for k in range(len(lengths)):
                if total[k] > 0:
                    p[i] = (max(hit[k] - d, 0) + d * types[k] * p[i]) / total[k]
        return p

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        targets = np.asarray(targets, np.int64)
        base_k = self.min_n - 1
        logp = self.base.target_logprobs(contexts[:, contexts.shape[1] - base_k:]
                                         if base_k else contexts[:, :0], targets)
        p = np.exp(logp)
        if len(targets) <= DECODER_ROWS:
            with np.errstate(divide="ignore"):
                return np.log(self._decoder_step(contexts, targets, p))
        d = self.discount
        for rows, total, types, owner, tokens, counts, seen in self._levels(contexts):
            hit = tokens == targets[rows][owner]
            c_w = np.zeros(len(rows))
            c_w[owner[hit]] = counts[hit]
            new = (np.maximum(c_w - d, 0) + d * types * p[rows]) / np.maximum(total, 1)
            p[rows] = np.where(seen, new, p[rows])
        with np.errstate(divide="ignore"):
            return np.log(p)

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        base_k = self.min_n - 1
        p = np.exp(self.base.next_logprobs(contexts[:, contexts.shape[1] - base_k:]
                                           if base_k else contexts[:, :0]))
        d = self.discount
        for rows, total, types, owner, tokens, counts, seen in self._levels(contexts):
            c_w = np.zeros((len(rows), p.shape[1]))
            c_w[owner, tokens] = counts
            new = (np.maximum(c_w - d, 0) + d * types[:, None] * p[rows]) \
                / np.maximum(total, 1)[:, None]
            p[rows] = np.where(seen[:, None], new, p[rows])
        with np.errstate(divide="ignore"):
            return np.log(p)

    def matched_lengths(self, contexts: np.ndarray) -> np.ndarray:
        """The longest suffix of each history the index holds, in tokens (its ``<s>``
        counted), where it is at least the base's order - 1; otherwise 0."""
        out = np.zeros(len(contexts), np.int64)
        k = self.min_n
        for rows, *_, seen in self._levels(contexts):
            out[rows[seen]] = k
            k += 1
        return out

    # -- persistence (see nnlm.models) ------------------------------------------------
    def config(self) -> dict:
        return {"order": self.order, "discount": self.discount, "base": BASE_DIR,
                "index": INDEX_DIR}

    def save_files(self, directory: Path, binding: str, save) -> None:
        save(self.base, Path(directory) / BASE_DIR)
        target = Path(directory) / INDEX_DIR
        target.mkdir()
        for f in sorted(self.index.path.iterdir()):
            shutil.copyfile(f, target / f.name)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> InfgramLM:
        config = header["config"]
        try:
            discount, max_n = float(config["discount"]), int(config["order"])
            if not (0 < discount <= 1 and math.isfinite(discount)):
                raise ValueError
        except (KeyError, TypeError, ValueError):
            raise NnlmError(f"{Path(path) / 'config.json'}: bad infgram config") from None
        base = load(Path(path) / BASE_DIR)
        return cls(base, Index.open(Path(path) / INDEX_DIR), discount, max_n)

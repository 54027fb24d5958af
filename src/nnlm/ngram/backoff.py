"""Back-off n-gram models: the form ARPA files store, and how nnlm scores KN models.

    p(w | h) = P(h w)                    if the n-gram (h w) is stored
             = bow(h) * p(w | h')        otherwise (h' drops the oldest word of h;
                                         bow(h) = 1 when h is not stored)

Interpolated Kneser-Ney is exactly such a model once P(h w) holds the interpolated
probability and bow(h) the interpolation weight gamma(h), which is why one scorer
serves models estimated here and models read from ARPA files.

Storage, per order k >= 2, sorted by the suffix key of :mod:`nnlm.ngram.counts`
(``key = id(g2..gk) * |V| + g1``, where unigram ids are word ids): ``logp`` and
``log_bow`` (natural logs), ``prefix`` (the id of the context g1..g_{k-1}) and ``last``
(the predicted word gk). Unigrams are dense arrays over the vocabulary.
"""

from __future__ import annotations

import numpy as np

from ..lm import LanguageModel
from ..vocab import Vocabulary
from .counts import expand_ranges
from .hashindex import HashIndex


class NgramLevel:
    """The stored n-grams of one order k >= 2."""

    def __init__(self, keys, logp, log_bow, prefix, last, n_prefixes: int):
        self.keys = np.asarray(keys, np.int64)
        self.logp = np.asarray(logp, np.float64)
        self.log_bow = np.asarray(log_bow, np.float64)
        self.prefix = np.asarray(prefix, np.int64)
        self.last = np.asarray(last, np.int64)
        self.n_prefixes = n_prefixes
        self._index: HashIndex | None = None
        self._by_prefix: tuple[np.ndarray, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def _grouped(self) -> tuple[np.ndarray, np.ndarray]:
        """Entries grouped by context (CSR), built on first use: only full next-word
        distributions need it, and it costs 8 bytes an n-gram."""
        if self._by_prefix is None:
            order = np.argsort(self.prefix, kind="stable")
            offsets = np.searchsorted(self.prefix[order], np.arange(self.n_prefixes + 1))
            self._by_prefix = order, offsets.astype(np.int64)
        return self._by_prefix

    @property
    def by_prefix(self) -> np.ndarray:
        """Entry indices sorted by context."""
        return self._grouped()[0]

    @property
    def prefix_offsets(self) -> np.ndarray:
        """Where each context's entries start in :attr:`by_prefix` (one more than contexts)."""
        return self._grouped()[1]

    def find(self, queries: np.ndarray) -> np.ndarray:
        """Index of each key in ``queries`` (-1 where absent), by a hash index built on
        first use (scoring is dominated by these lookups)."""
        if self._index is None:
            self._index = HashIndex(self.keys)
        return self._index.lookup(queries)


class BackoffNgram(LanguageModel):
    """A back-off n-gram model over ``vocab`` (see the module docstring)."""

    kind = "backoff"

    def __init__(self, vocab: Vocabulary, unigram_logp, unigram_log_bow, levels: list[NgramLevel]):
        self.vocab = vocab
        self.order = 1 + len(levels)
        self.unigram_logp = np.asarray(unigram_logp, np.float64)
        self.unigram_log_bow = np.asarray(unigram_log_bow, np.float64)
        self.levels = levels

    null_context = True  # a context id of -1 means "no word" (KenLM's NullContext)

    def _log_bow(self, k: int, ids: np.ndarray) -> np.ndarray:
        """log bow of order-k entries ``ids`` (0 where id is -1: not stored)."""
        table = self.unigram_log_bow if k == 1 else self.levels[k - 2].log_bow
        return np.where(ids >= 0, table[np.maximum(ids, 0)], 0.0)

    def _context_ids(self, contexts: np.ndarray) -> list[np.ndarray]:
        """ids[j] = id at order j+1 of the context (c_{j+1} .. c1), -1 where not stored."""
        V = len(self.vocab)
        contexts = np.asarray(contexts, np.int64)
        out = []
        if self.order < 2:
            return out
        ids = contexts[:, -1].copy()
        out.append(ids)
        for j in range(2, self.order):
            c = contexts[:, -j]
            ids = self.levels[j - 2].find(np.where((ids >= 0) & (c >= 0), ids * V + c, -1))
            out.append(ids)
        return out

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        V = len(self.vocab)
        contexts = np.asarray(contexts, np.int64)
        targets = np.asarray(targets, np.int64)
        logp = self.unigram_logp[targets].copy()
        if self.order == 1:
            return logp
        ctx_ids = self._context_ids(contexts)
        ngram = targets
        acc_bow = np.zeros(len(targets))
        for k in range(2, self.order + 1):
            level = self.levels[k - 2]
            c = contexts[:, -(k - 1)]
            ngram = level.find(np.where((ngram >= 0) & (c >= 0), ngram * V + c, -1))
            found = ngram >= 0
            logp = np.where(found, level.logp[np.maximum(ngram, 0)], logp)
            acc_bow = np.where(found, 0.0, acc_bow + self._log_bow(k - 1, ctx_ids[k - 2]))
        return logp + acc_bow

    def matched_orders(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Length of the longest stored n-gram ending in each target (KenLM's ngram_length)."""
        V = len(self.vocab)
        contexts = np.asarray(contexts, np.int64)
        ngram = np.asarray(targets, np.int64)
        length = np.ones(len(ngram), np.int64)
        for k in range(2, self.order + 1):
            c = contexts[:, -(k - 1)]
            ngram = self.levels[k - 2].find(np.where((ngram >= 0) & (c >= 0), ngram * V + c, -1))
            length[ngram >= 0] = k
        return length

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts, np.int64)
        B = len(contexts)
        logp = np.tile(self.unigram_logp, (B, 1))  # in log space: no underflow
        for k, ctx in enumerate(self._context_ids(contexts), start=2):
            level = self.levels[k - 2]
            rows = np.flatnonzero(ctx >= 0)
            ctx = ctx[rows]
            logp[rows] += self._log_bow(k - 1, ctx)[:, None]
            r, e = expand_ranges(level.prefix_offsets[ctx], level.prefix_offsets[ctx + 1])
            e = level.by_prefix[e]
            logp[rows[r], level.last[e]] = level.logp[e]
        return logp

    # -- persistence (see nnlm.models) ------------------------------------------------
    def config(self) -> dict:
        return {"order": self.order}

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"unigram_logp": self.unigram_logp, "unigram_log_bow": self.unigram_log_bow}
        for k, level in enumerate(self.levels, start=2):
            for name in ("keys", "logp", "log_bow", "prefix", "last"):
                out[f"{name}_{k}"] = getattr(level, name)
        return out

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict):
        levels = []
        sizes = [len(vocab)]
        for k in range(2, config["order"] + 1):
            level = NgramLevel(*(arrays[f"{n}_{k}"] for n in
                                 ("keys", "logp", "log_bow", "prefix", "last")), sizes[-1])
            levels.append(level)
            sizes.append(len(level))
        model = cls.__new__(cls)
        BackoffNgram.__init__(model, vocab, arrays["unigram_logp"], arrays["unigram_log_bow"],
                              levels)
        model._restore_config(config)
        return model

    def _restore_config(self, config: dict) -> None:
        """Subclasses restore their own settings here."""

    def num_ngrams(self) -> list[int]:
        return [len(self.vocab)] + [len(level) for level in self.levels]

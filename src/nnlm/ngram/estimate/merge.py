"""Static interpolation: several back-off models merged into one back-off model (SRILM's
``ngram -mix-lm``; Stolcke 2002), which any KenLM-reading decoder loads as one file.

For models p_1 .. p_m with weights lambda_i, the merged model M stores the union of their
n-grams (and of their vocabularies), each with the interpolated probability

    P_M(w | h) = sum_i lambda_i p_i(w | h)

where p_i(w | h) is model i's own back-off probability after the words of h (its last
n_i - 1 of them; a word model i does not know is its ``<unk>`` in a context and has
probability 0 as a prediction, so each p_i still sums to 1 over the union). Every context
then gets the back-off weight that makes its distribution sum to 1
(:func:`.prune.renormalize`):

    bow_M(h) = (1 - sum_{w: (h, w) in M} P_M(w | h)) / (1 - sum_{w: (h, w) in M} P_M(w | h'))

So M equals the runtime mixture exactly on every stored n-gram, and everywhere the
mixture's components back off from the same context; elsewhere it backs off as one model
(the approximation SRILM makes). The union of n-gram sets closed under suffixes and
prefixes is closed too, so M is a proper back-off model and ARPA export needs no repair.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...base.errors import NnlmError
from ...lm import logsumexp
from ...text.specials import NO_WORD, UNK_ID
from ...text.vocab import Vocabulary
from ..backoff import BackoffNgram, ngram_words
from ..store.levels import NgramLevel
from .prune import renormalize


def common_tokenizer(models: Sequence[BackoffNgram]):
    """The one tokenizer every model reads text through (None: words split on spaces);
    models that tokenize otherwise predict different units and are not merged."""
    tokenizers = [getattr(m.vocab, "tokenizer", None) for m in models]
    kinds = [None if t is None else t.identity() for t in tokenizers]
    for i, kind in enumerate(kinds[1:], start=2):
        if kind != kinds[0]:
            raise NnlmError(f"merge: model 1 reads {_reads(kinds[0])}, model {i} "
                            f"{_reads(kind)}: their units differ, and a merged model would "
                            "mix them; merge models of one tokenization")
    return tokenizers[0]


def _reads(identity) -> str:
    return "words split on spaces" if identity is None else \
        f"a SentencePiece tokenizer ({identity[0]} encoding, {identity[1][:12]})"


def union_vocabulary(models: Sequence[BackoffNgram]) -> tuple[Vocabulary, list[np.ndarray]]:
    """The union of the models' vocabularies (the first model's ids kept, new words after
    them in order of appearance) and, per model, each of its word ids' union id."""
    words = list(models[0].vocab.words)
    index = {w: i for i, w in enumerate(words)}
    maps = []
    for m in models:
        ids = np.empty(len(m.vocab), np.int64)
        for i, w in enumerate(m.vocab.words):
            if w not in index:
                index[w] = len(words)
                words.append(w)
            ids[i] = index[w]
        maps.append(ids)
    return Vocabulary(words), maps


def _lookup(keys: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of each query in the sorted ``keys`` (-1 where absent)."""
    at = np.searchsorted(keys, queries).clip(max=max(len(keys) - 1, 0))
    return np.where((len(keys) > 0) & (keys[at] == queries) & (queries >= 0), at, -1)


def _ids(levels_keys: list[np.ndarray], words: np.ndarray, V: int) -> np.ndarray:
    """The id of each n-gram ``words`` (N, j) in the union's orders (-1 where absent):
    the last word's id, extended leftwards one order at a time (key = suffix id * V +
    first word)."""
    ids = words[:, -1].copy()
    for j in range(2, words.shape[1] + 1):
        ids = _lookup(levels_keys[j - 2], np.where(ids >= 0, ids * V + words[:, -j], -1))
    return ids


def _component_logprobs(model: BackoffNgram, inverse: np.ndarray, history: np.ndarray,
                        targets: np.ndarray) -> np.ndarray:
    """log p_i(target | history) for union-id rows: the last n_i - 1 words of the history
    (NO_WORD where it is shorter), unknown words as the model's <unk> in the context and
    probability 0 as a prediction."""
    k = model.order - 1
    ctx = np.full((len(targets), k), NO_WORD, np.int64)
    take = min(k, history.shape[1])
    if take:
        h = inverse[history[:, history.shape[1] - take:]]
        ctx[:, k - take:] = np.where(h >= 0, h, UNK_ID)
    t = inverse[targets]
    out = np.full(len(targets), -np.inf)
    known = np.flatnonzero(t >= 0)
    for lo in range(0, len(known), 1 << 20):
        rows = known[lo:lo + (1 << 20)]
        out[rows] = model.target_logprobs(ctx[rows], t[rows])
    return out


def merge_backoff(models: Sequence[BackoffNgram], weights: Sequence[float]) -> BackoffNgram:
    """One back-off model interpolating ``models`` with ``weights`` (module docstring)."""
    if len(models) < 2:
        raise NnlmError("merging needs at least two models")
    weights = np.asarray(weights, np.float64)
    if len(weights) != len(models) or np.any(weights < 0) or abs(weights.sum() - 1) > 1e-6:
        given = " ".join(f"{w:g}" for w in weights)
        raise NnlmError(f"merge: {len(models)} weights in [0, 1] summing to 1, one per model, "
                        f"not {given}")
    tokenizer = common_tokenizer(models)
    vocab, maps = union_vocabulary(models)
    vocab.tokenizer = tokenizer
    V = len(vocab)
    inverses = []
    for ids in maps:
        inv = np.full(V, -1, np.int64)
        inv[ids] = np.arange(len(ids))
        inverses.append(inv)
    log_w = np.log(np.maximum(weights, 1e-300))
    order = max(m.order for m in models)
    model_words = [ngram_words(m) for m in models]

    def mixed(history: np.ndarray, targets: np.ndarray) -> np.ndarray:
        parts = [lw + _component_logprobs(m, inv, history, targets)
                 for m, inv, lw in zip(models, inverses, log_w) if np.isfinite(lw)]
        return logsumexp(np.stack(parts), axis=0)

    uni = mixed(np.empty((V, 0), np.int64), np.arange(V))
    keys: list[np.ndarray] = []
    levels: list[NgramLevel] = []
    for k in range(2, order + 1):
        found = []
        for m, ids, words in zip(models, maps, model_words):
            if m.order >= k:
                union_words = ids[words[k - 2]]  # (M, k) in union ids
                suffix = _ids(keys, union_words[:, 1:], V)
                found.append(suffix * V + union_words[:, 0])
        level_keys = np.unique(np.concatenate(found))
        keys.append(level_keys)
        words = _words_of_keys(keys, k, V)
        prefix = _ids(keys[:-1], words[:, :-1], V) if k > 2 else words[:, 0]
        if np.any(prefix < 0):
            raise NnlmError(f"merge: an order-{k} n-gram's context is stored in no model; "
                            "an input is not a proper back-off model")
        logp = mixed(words[:, :-1], words[:, -1])
        n_prefixes = V if k == 2 else len(keys[-2])
        levels.append(NgramLevel(level_keys, logp, np.zeros(len(level_keys)), prefix,
                                 words[:, -1], n_prefixes))
    merged = BackoffNgram(vocab, uni, np.zeros(V), levels)
    renormalize(merged)
    return merged


def _words_of_keys(keys: list[np.ndarray], k: int, V: int) -> np.ndarray:
    """The word ids (g1..gk) of every entry of order k, from the keys of orders 2..k."""
    ids = np.arange(len(keys[k - 2]))
    out = np.empty((len(ids), k), np.int64)
    for j in range(k, 1, -1):
        key = keys[j - 2][ids]
        out[:, k - j] = key % V
        ids = key // V
    out[:, k - 1] = ids
    return out

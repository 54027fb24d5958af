"""Sampling sentences from any LanguageModel: temperature, top-k, an optional prompt.

All sentences are drawn together, one batched ``next_logprobs`` call per position.
``<unk>`` is never sampled unless allowed (it is a class of words, not a word).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .base.checks import integer, number
from .base.errors import NnlmError
from .base.sysmem import check_allocation
from .text.vocab import BOS, BOS_ID, EOS, EOS_ID, UNK_ID, special_error


def generate(model, n: int = 1, prompt: str | Sequence[str] = (), temperature: float = 1.0,
             top_k: int = 0, max_words: int = 50, seed: int | None = None,
             allow_unk: bool = False) -> list[str]:
    """``n`` sentences, each continuing ``prompt`` (words; unknown ones become ``<unk>``).

    ``seed``: None (the default) draws fresh sentences on every call; an int repeats them.
    """
    n = integer(n, "n", 0)
    temperature = number(temperature, "temperature", 0, low_open=True)
    top_k = integer(top_k, "top_k", 0)
    max_words = integer(max_words, "max_words", 1)
    if seed is not None:
        seed = integer(seed, "seed", 0)
    check_allocation(n * (len(model.vocab) * 8 * 3 + 8 * (model.order + max_words)),
                     f"generate with n={n} over {len(model.vocab):,} words", "ask for fewer "
                     "sentences at a time")
    rng = np.random.default_rng(seed)
    words = model.vocab.split(prompt) if isinstance(prompt, str) else list(prompt)
    if BOS in words or EOS in words:
        raise NnlmError(special_error("the prompt", words))
    prompt_ids = [int(i) for i in model.vocab.encode(words)]
    k = model.order - 1
    history = np.full((n, k + len(prompt_ids)), BOS_ID, dtype=np.int64)
    history[:, k:] = prompt_ids
    out = [list(words) for _ in range(n)]
    alive = np.ones(n, bool)
    for _ in range(max_words):
        rows = np.flatnonzero(alive)
        if not len(rows):
            break
        contexts = history[rows, history.shape[1] - k :] if k else np.zeros((len(rows), 0))
        logp = model.next_logprobs(contexts)
        logp[:, BOS_ID] = -np.inf
        if not allow_unk:
            logp[:, UNK_ID] = -np.inf
        choice = draw(logp, rng, temperature, top_k)
        nxt = np.full(n, EOS_ID, dtype=np.int64)
        nxt[rows] = choice
        history = np.concatenate([history, nxt[:, None]], axis=1)
        for r, w in zip(rows, choice):
            if w == EOS_ID:
                alive[r] = False
            else:
                out[r].append(model.vocab.words[w])
    return [" ".join(s) for s in out]


def draw(logp: np.ndarray, rng: np.random.Generator, temperature: float = 1.0,
         top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """One id per row of log-probabilities (B, |V|), float64: sampled from p^(1/T)
    renormalized, among the ``top_k`` most likely (0: all) and the smallest set whose
    probability reaches ``top_p`` (nucleus sampling, Holtzman et al. 2020); temperature 0
    takes each row's most likely id.

    >>> draw(np.log(np.array([[0.1, 0.6, 0.3]])), np.random.default_rng(0), 0.0).tolist()
    [1]
    """
    if temperature == 0:
        return logp.argmax(axis=1)
    logits = logp / temperature
    if top_k and top_k < logits.shape[1]:
        cut = np.partition(logits, -top_k, axis=1)[:, -top_k][:, None]
        logits = np.where(logits >= cut, logits, -np.inf)
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    if top_p < 1:
        order = np.argsort(-p, axis=1)
        sorted_p = np.take_along_axis(p, order, 1)
        keep = np.zeros(p.shape, bool)
        np.put_along_axis(keep, order, np.cumsum(sorted_p, axis=1) - sorted_p < top_p, 1)
        p = np.where(keep, p, 0.0)
        p /= p.sum(axis=1, keepdims=True)
    u = rng.random(len(p))[:, None]
    return np.minimum((p.cumsum(axis=1) < u).sum(axis=1), p.shape[1] - 1)

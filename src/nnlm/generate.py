"""Sampling sentences from any LanguageModel: temperature, top-k, an optional prompt.

All sentences are drawn together, one batched ``next_logprobs`` call per position.
``<unk>`` is never sampled unless allowed (it is a class of words, not a word).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .errors import NnlmError
from .vocab import BOS, BOS_ID, EOS, EOS_ID, UNK_ID, special_error


def generate(model, n: int = 1, prompt: str | Sequence[str] = (), temperature: float = 1.0,
             top_k: int = 0, max_words: int = 50, seed: int | None = None,
             allow_unk: bool = False) -> list[str]:
    """``n`` sentences, each continuing ``prompt`` (words; unknown ones become ``<unk>``).

    ``seed``: None (the default) draws fresh sentences on every call; an int repeats them.
    """
    if not (isinstance(n, int) and n >= 0):
        raise NnlmError(f"n = {n!r}: the number of sentences must be an integer >= 0")
    if not (isinstance(temperature, (int, float)) and 0 < temperature < float("inf")):
        raise NnlmError(f"temperature = {temperature!r}: must be a positive finite number")
    if not (isinstance(top_k, int) and top_k >= 0) or not (isinstance(max_words, int)
                                                             and max_words >= 1):
        raise NnlmError("top_k must be an integer >= 0 and max_words one >= 1")
    if seed is not None and not (isinstance(seed, int) and seed >= 0):
        raise NnlmError(f"seed = {seed!r}: must be an integer >= 0 or None")
    rng = np.random.default_rng(seed)
    words = prompt.split() if isinstance(prompt, str) else list(prompt)
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
        logp = model.next_logprobs(contexts) / temperature
        logp[:, BOS_ID] = -np.inf
        if not allow_unk:
            logp[:, UNK_ID] = -np.inf
        if top_k and top_k < logp.shape[1]:
            cut = np.partition(logp, -top_k, axis=1)[:, -top_k][:, None]
            logp = np.where(logp >= cut, logp, -np.inf)
        p = np.exp(logp - logp.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        u = rng.random(len(rows))[:, None]
        choice = np.minimum((p.cumsum(axis=1) < u).sum(axis=1), p.shape[1] - 1)
        nxt = np.full(n, EOS_ID, dtype=np.int64)
        nxt[rows] = choice
        history = np.concatenate([history, nxt[:, None]], axis=1)
        for r, w in zip(rows, choice):
            if w == EOS_ID:
                alive[r] = False
            else:
                out[r].append(model.vocab.words[w])
    return [" ".join(s) for s in out]

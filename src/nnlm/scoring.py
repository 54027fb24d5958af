"""Per-sentence and per-token scores, streamed: what ``nnlm score`` prints (KenLM's ``query``).

Sentences are scored in chunks of lines, so arbitrarily long inputs use bounded memory.
Each result gives log10 probabilities (the convention of ARPA and KenLM's output) with
``</s>`` included and ``<s>`` as context only.

:func:`windows` and :func:`target_scores` split the same work in two, for callers that
batch the model calls of many requests (the server) or choose the sentence boundaries as
kenlm's ``full_scores(sentence, bos, eos)`` does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from .base.errors import NnlmError
from .lm import LOG10_E, LanguageModel, check_logprobs
from .text.stream import Stream, seen_lengths
from .text.vocab import BOS, BOS_ID, EOS, EOS_ID, NO_WORD, UNK_ID, special_error

CHUNK_LINES = 4096


@dataclass
class SentenceScore:
    words: list[str]  # the sentence's words, then </s>
    log10_probs: np.ndarray  # one per word and one for </s>
    orders: np.ndarray | None  # n-gram length used per token, where the model knows it
    oov: np.ndarray  # bool: the token mapped to <unk>

    @property
    def log10_prob(self) -> float:
        total = float(self.log10_probs.sum())
        if not np.isfinite(total):  # finite scores whose sum overflows
            raise NnlmError(f"the log10 probability of '{' '.join(self.words[:-1])[:40]}' "
                            "sums beyond floating point: the model is damaged")
        return total

    @property
    def blank(self) -> bool:
        """A blank line: not a sentence, nothing predicted (its row keeps the line count)."""
        return len(self.log10_probs) == 0

    @property
    def perplexity(self) -> float:
        if not len(self.log10_probs):
            return float("nan")
        exponent = -self.log10_prob / len(self.log10_probs)
        if exponent > 300:  # 10^300: beyond it a perplexity is no float
            raise NnlmError(f"the perplexity of '{' '.join(self.words[:-1])[:40]}', "
                            f"10^{exponent:.4g}, is beyond floating point: the model gives "
                            "its words vanishing probabilities")
        return 10 ** exponent


_BLANK = SentenceScore([], np.zeros(0), None, np.zeros(0, bool))

SAMPLE_TOKENS = 20000  # how many tokens ``seen`` collects at most


def score_sentences(
    model: LanguageModel, lines: Iterable[str], source: str = "<input>",
    seen: list | None = None,
) -> Iterator[SentenceScore]:
    """Score each line as one sentence. A blank line is not a sentence (the rule of every
    command, see :mod:`nnlm.text.corpus`): it yields a score with no tokens, so output rows stay
    aligned with input lines.

    ``seen``: a list that receives the :class:`Stream` of the first chunks scored, up to
    about SAMPLE_TOKENS tokens (for reports on the text, such as log Z statistics).
    """
    chunk: list[list[str]] = []
    for n, line in enumerate(lines, start=1):
        words = model.vocab.split(line)
        if BOS in words or EOS in words:
            raise NnlmError(special_error(f"{source}:{n}", words))
        chunk.append(words)
        if len(chunk) == CHUNK_LINES:
            yield from _score_chunk(model, chunk, seen)
            chunk = []
    if chunk:
        yield from _score_chunk(model, chunk, seen)


def _score_chunk(model: LanguageModel, sentences: list[list[str]],
                 seen: list | None) -> Iterator[SentenceScore]:
    blank = [not words for words in sentences]
    if all(blank):
        for _ in sentences:
            yield _BLANK
        return
    if any(blank):
        scored = iter(_score_chunk(model, [w for w in sentences if w], seen))
        for b in blank:
            yield _BLANK if b else next(scored)
        return
    lengths = np.array([len(words) for words in sentences], np.int64)
    ids = model.vocab.encode(w for words in sentences for w in words)
    stream = Stream.from_ids(ids, lengths)  # an empty sentence is a single </s> slot
    if seen is not None and sum(len(s) for s in seen) < SAMPLE_TOKENS:
        seen.append(stream)
    if hasattr(model, "logprobs_and_orders"):  # back-off models: one pass gives both
        logp, orders = model.logprobs_and_orders(stream)
    else:
        logp, orders = model.logprobs(stream), None
    log10 = check_logprobs(logp, stream, model.vocab, model.zero_means) * LOG10_E
    oov = stream.ids == UNK_ID
    for i, words in enumerate(sentences):
        lo, hi = stream.offsets[i], stream.offsets[i + 1]
        yield SentenceScore([*words, EOS], log10[lo:hi],
                            None if orders is None else orders[lo:hi], oov[lo:hi])


@dataclass(frozen=True)
class Windows:
    """Every prediction of a list of sentences, laid out as a :class:`Stream` is, but with
    the boundaries chosen: ``contexts`` (P, n-1) int64, the predicted ``ids`` (P,),
    ``offsets`` (one per sentence plus P) and ``oov`` (the word was not in the vocabulary;
    ``</s>`` never is)."""

    contexts: np.ndarray
    ids: np.ndarray
    offsets: np.ndarray
    oov: np.ndarray


def windows(model: LanguageModel, sentences: list[list[str]], bos: bool = True,
            eos: bool = True) -> Windows:
    """The (context, word) pairs that score ``sentences`` (lists of words) under ``model``.

    ``bos``: the first word is conditioned on ``<s>``; otherwise on the null context
    where the model has one (back-off models, as KenLM), and on ``<s>`` where it has none
    (a network always sees n-1 words). ``eos``: ``</s>`` is predicted after the last word.
    ``<s>`` and ``</s>`` inside a sentence are refused (NnlmError naming the sentence).

    >>> from nnlm import AddK, Vocabulary
    >>> vocab = Vocabulary.from_counts({"a": 2, "b": 1})
    >>> lm = AddK(vocab, order=2)
    >>> w = windows(lm, [["a", "b"], ["zzz"]])
    >>> w.contexts.tolist(), w.ids.tolist(), w.offsets.tolist(), w.oov.tolist()
    ([[1], [3], [4], [1], [0]], [3, 4, 2, 0, 2], [0, 3, 5], [False, False, False, True, False])
    """
    for i, words in enumerate(sentences, start=1):
        if BOS in words or EOS in words:
            raise NnlmError(special_error(f"sentence {i}", words))
    k = model.order - 1
    pad = BOS_ID if bos or not getattr(model, "null_context", False) else NO_WORD
    lengths = np.array([len(w) + eos for w in sentences], np.int64)
    offsets = np.zeros(len(sentences) + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    flat = list(itertools.chain.from_iterable(sentences))
    words = np.fromiter(map(model.vocab.index.get, flat, itertools.repeat(UNK_ID)), np.int64,
                        len(flat))
    ids = np.full(int(offsets[-1]), EOS_ID, np.int64)
    slot = np.arange(len(ids)) - np.repeat(offsets[:-1], lengths)  # position in its sentence
    is_word = slot < np.repeat(lengths - eos, lengths)
    ids[is_word] = words
    return Windows(sentence_contexts(ids, offsets, k, pad), ids, offsets,
                   is_word & (ids == UNK_ID))


def sentence_contexts(ids: np.ndarray, offsets: np.ndarray, k: int, pad: int) -> np.ndarray:
    """int64 (P, k): the k ids before each of ``ids`` within its own sentence (sentence j
    is ``ids[offsets[j]:offsets[j + 1]]``), oldest first, ``pad``-filled at the start.

    >>> sentence_contexts(np.array([5, 6, 7, 8]), np.array([0, 3, 4]), 2, 1).tolist()
    [[1, 1], [1, 5], [5, 6], [1, 1]]
    """
    ids, offsets = np.asarray(ids, np.int64), np.asarray(offsets, np.int64)
    if not k or not len(ids):
        return np.zeros((len(ids), k), np.int64)
    lengths = np.diff(offsets)
    n = len(lengths)
    slot = np.arange(len(ids)) - np.repeat(offsets[:-1], lengths)  # position in its sentence
    # each sentence's history, padded, one after another; row i is the k entries before
    # prediction i in its own history
    history = np.full(len(ids) + k * n, pad, np.int64)
    at = np.repeat(offsets[:-1] + k * np.arange(n) + k, lengths) + slot
    history[at] = ids
    view = np.lib.stride_tricks.sliding_window_view(history, k)
    return np.ascontiguousarray(view[at - k])


def target_scores(model: LanguageModel, contexts: np.ndarray, ids: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Natural-log p(ids[i] | contexts[i]) (float64) and the n-gram length each used: a
    back-off model's longest matching n-gram, or for another model the words of the line
    it has seen plus one (kenlm's ``full_scores`` lengths)."""
    if hasattr(model, "target_logprobs_and_orders"):
        logp, orders = model.target_logprobs_and_orders(contexts, ids)
    else:
        logp = model.target_logprobs(contexts, ids)
        orders = seen_lengths(contexts, model.order)
    return np.asarray(logp, np.float64), np.asarray(orders, np.int64)

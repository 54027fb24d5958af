"""Per-sentence and per-token scores, streamed: what ``nnlm score`` prints (KenLM's ``query``).

Sentences are scored in chunks of lines, so arbitrarily long inputs use bounded memory.
Each result gives log10 probabilities (the convention of ARPA and KenLM's output) with
``</s>`` included and ``<s>`` as context only.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from .corpus import special_error
from .errors import NnlmError
from .lm import LOG10_E, LanguageModel, check_logprobs
from .stream import Stream
from .vocab import BOS, EOS, UNK_ID

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

SAMPLE_TOKENS = 20000  # how many (context, target) pairs ``seen`` collects at most


def score_sentences(
    model: LanguageModel, lines: Iterable[str], source: str = "<input>",
    seen: list | None = None,
) -> Iterator[SentenceScore]:
    """Score each line as one sentence. A blank line is not a sentence (the rule of every
    command, see :mod:`nnlm.corpus`): it yields a score with no tokens, so output rows stay
    aligned with input lines.

    ``seen``: a list that receives ``(contexts, targets)`` of the first chunks scored, up
    to about SAMPLE_TOKENS tokens (for reports on the text, such as log Z statistics).
    """
    chunk: list[list[str]] = []
    for n, line in enumerate(lines, start=1):
        words = line.split()
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
    if seen is not None and sum(len(t) for _, t in seen) < SAMPLE_TOKENS:
        seen.append((stream.contexts(model.order), stream.ids))
    if hasattr(model, "logprobs_and_orders"):  # back-off models: one pass gives both
        logp, orders = model.logprobs_and_orders(stream)
    else:
        logp, orders = model.logprobs(stream), None
    log10 = check_logprobs(logp, stream, model.vocab) * LOG10_E
    oov = stream.ids == UNK_ID
    for i, words in enumerate(sentences):
        lo, hi = stream.offsets[i], stream.offsets[i + 1]
        yield SentenceScore([*words, EOS], log10[lo:hi],
                            None if orders is None else orders[lo:hi], oov[lo:hi])

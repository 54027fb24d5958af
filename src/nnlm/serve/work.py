"""What each endpoint computes, apart from HTTP: sentences scored, next words ranked,
prompts tokenized, echoed and continued. Model calls go through the model's
:class:`~nnlm.serve.batching.Batcher`; everything here is numpy and bookkeeping.

Errors a client caused are :class:`RequestError` naming the request field (a 422).

Tokens, for the OpenAI-shaped endpoints, are nnlm's words: a text is split on
whitespace, and a newline ends a sentence (it is the token ``</s>``, scored as the end
of the sentence, and the next word starts a new one after ``<s>``). Each token's string
carries the whitespace before it, as OpenAI's do, so that the strings of a prompt's
tokens join to the prompt (up to trailing spaces), and ``text_offset`` is where each
string starts.
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass

import numpy as np

from ..base.errors import NnlmError
from ..generate import draw
from ..lm import LOG10_E, check_logprobs
from ..scoring import sentence_contexts, windows
from ..text.vocab import BOS, BOS_ID, EOS, EOS_ID, UNK_ID, Vocabulary
from . import schemas as s
from .registry import ServedModel

TOKEN = re.compile(r"\S+|\n")


class RequestError(Exception):
    """A request the server cannot answer: HTTP ``status``, the field at fault, a message."""

    def __init__(self, field: str | None, message: str, status: int = 422):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


# -- /v1/score ------------------------------------------------------------------------
async def score(m: ServedModel, req: s.ScoreRequest) -> dict:
    """Each text as one sentence: the numbers of ``nnlm score --per-token`` (bos and eos
    true) and of kenlm's ``full_scores(text, bos, eos)``, as a :class:`ScoreResponse`'s
    plain data (built from lists: pydantic objects per token would cost more than the
    scoring)."""
    sentences = [m.lm.vocab.split(t) for t in req.texts]
    try:
        w = windows(m.lm, sentences, req.bos, req.eos)
    except NnlmError as e:
        raise RequestError("texts", str(e)) from None
    logp, orders = await m.batcher.targets(w.contexts, w.ids)
    try:
        log10 = check_logprobs(logp, w, m.lm.vocab, m.lm.zero_means) * LOG10_E
    except NnlmError as e:  # a model whose weights overflow: the client is not at fault
        raise RequestError(None, str(e), 503) from None
    normalized = getattr(m.lm, "normalized", True)  # Stupid Backoff: no perplexity
    bounds = w.offsets.tolist()
    values, lengths, oov = log10.tolist(), orders.tolist(), w.oov.tolist()
    results = []
    for i, words in enumerate(sentences):
        a, b = bounds[i], bounds[i + 1]
        total = sum(values[a:b])
        names = words + [EOS] if b - a > len(words) else words
        results.append({
            "log10_prob": total,
            "perplexity": 10 ** (-total / (b - a))
            if normalized and b > a and -total / (b - a) < 300 else None,
            "tokens": [{"word": word, "log10_prob": p, "ngram_length": n, "oov": o}
                       for word, p, n, o in zip(names, values[a:b], lengths[a:b], oov[a:b])]
            if req.tokens else None})
    return {"model": m.name, "results": results}


# -- /v1/next -------------------------------------------------------------------------
def _top(k: int):
    """A reducer: the k best ids and log-probabilities of each row (best first), and the
    log-probability of each row's own id where ids are given (from the same numbers, so
    that a token that is the best is exactly its row's maximum)."""
    def reduce(dist: np.ndarray, ids: np.ndarray | None):
        dist = np.array(dist, np.float64)
        dist[:, BOS_ID] = -np.inf
        kk = min(k, dist.shape[1])
        best = np.argpartition(-dist, kk - 1, axis=1)[:, :kk]
        vals = np.take_along_axis(dist, best, 1)
        order = np.argsort(-vals, axis=1, kind="stable")
        picked = None if ids is None else dist[np.arange(len(dist)), ids]
        return np.take_along_axis(best, order, 1), np.take_along_axis(vals, order, 1), picked
    return reduce


def _context_row(m: ServedModel, words: list[str], bos: bool) -> np.ndarray:
    k = m.lm.order - 1
    ids = [int(i) for i in m.lm.vocab.encode(words)] if words else []
    pad = BOS_ID if bos or not getattr(m.lm, "null_context", False) else -1
    return np.array([([pad] * k + ids)[len(ids):]], np.int64).reshape(1, k)


async def next_words(m: ServedModel, req: s.NextRequest) -> s.NextResponse:
    words = m.lm.vocab.split(req.context)
    if BOS in words or EOS in words:
        raise RequestError("context", f"{BOS} and {EOS} are added by the server; give "
                           "the words only")
    ids, vals, _ = await m.batcher.next(_context_row(m, words, req.bos), _top(req.k))
    vocab = m.lm.vocab
    return s.NextResponse(
        model=m.name, context=[vocab.words[i] for i in vocab.encode(words)] if words else [],
        words=[s.NextWord(word=vocab.words[i], log10_prob=float(v) * LOG10_E)
               for i, v in zip(ids[0], vals[0]) if np.isfinite(v)])


# -- tokens -----------------------------------------------------------------------------
@dataclass
class Tokens:
    ids: list[int]
    strings: list[str]  # each with the whitespace before it
    text: str  # what the strings spell (the prompt, for a text prompt)


def tokenize(vocab: Vocabulary, text: str) -> Tokens:
    """Words (unknown ones as ``<unk>``) and newlines (``</s>``)."""
    ids, strings, end = [], [], 0
    index = vocab.index
    for match in TOKEN.finditer(text):
        word = match.group()
        ids.append(EOS_ID if word == "\n" else index.get(word, UNK_ID))
        strings.append(text[end:match.end()])
        end = match.end()
    return Tokens(ids, strings, text)


def detokenize(vocab: Vocabulary, ids: list[int], field: str = "tokens") -> Tokens:
    """Token ids back to strings: words joined by spaces, ``</s>`` as a newline."""
    bad = [i for i in ids if not 0 <= i < len(vocab)]
    if bad:
        raise RequestError(field, f"token id {bad[0]} is outside the vocabulary "
                           f"(0..{len(vocab) - 1})")
    strings, prev = [], "\n"
    for i in ids:
        word = "\n" if i == EOS_ID else vocab.words[i]
        strings.append(word if word == "\n" or prev == "\n" else " " + word)
        prev = word
    return Tokens(list(ids), strings, "".join(strings))


def _contexts(ids: list[int], k: int) -> tuple[np.ndarray, list[int]]:
    """The (n-1)-word context before each token, and the context after the last. ``</s>``
    ends a sentence; ``<s>`` may only open the prompt (where it changes nothing)."""
    ids = np.asarray(ids, np.int64)
    if (ids[1:] == BOS_ID).any():
        raise RequestError("prompt", f"{BOS} may only open a prompt (a newline or "
                           f"{EOS} ends a sentence and starts the next)")
    lead = int(len(ids) > 0 and ids[0] == BOS_ID)
    body = ids[lead:]
    ends = np.flatnonzero(body == EOS_ID) + 1  # a sentence ends after each </s>
    offsets = np.unique(np.concatenate([[0], ends, [len(body)]])).astype(np.int64)
    rows = np.concatenate([np.full((lead, k), BOS_ID, np.int64),
                           sentence_contexts(body, offsets, k, BOS_ID)])
    last = body[offsets[-2]:] if len(body) and body[-1] != EOS_ID else body[:0]
    after = ([BOS_ID] * k + last.tolist())[len(last):] if k else []
    return rows, after


# -- /v1/completions --------------------------------------------------------------------
def _prompts(m: ServedModel, prompt) -> list[Tokens]:
    vocab = m.lm.vocab
    if isinstance(prompt, str):
        return [tokenize(vocab, prompt)]
    if prompt and isinstance(prompt[0], str):
        return [tokenize(vocab, p) for p in prompt]
    if prompt and isinstance(prompt[0], int):
        return [detokenize(vocab, prompt, "prompt")]
    return [detokenize(vocab, p, "prompt") for p in prompt]


def _sampler(temperature: float, top_k: int, top_p: float, rng, alternatives: int):
    """A reducer drawing one word per row: ids, their log-probabilities under the model
    (not the temperature), and the ``alternatives`` best of each row."""
    def reduce(dist: np.ndarray, _ids):
        dist = np.array(dist, np.float64)
        rows = np.arange(len(dist))
        model_logp = dist.copy()
        dist[:, [BOS_ID, UNK_ID]] = -np.inf  # <unk> is a class of words, not one to write
        chosen = draw(dist, rng, temperature, top_k, top_p)
        top = _top(alternatives)(model_logp, None)[:2] if alternatives else None
        return chosen, model_logp[rows, chosen], top
    return reduce


async def complete(m: ServedModel, req: s.CompletionRequest) -> s.CompletionResponse:
    k = m.lm.order - 1
    prompts = _prompts(m, req.prompt)
    stops = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    rng = np.random.default_rng(req.seed)
    alternatives = req.logprobs or 0
    choices, prompt_tokens, completion_tokens = [], 0, 0
    for p_index, prompt in enumerate(prompts):
        contexts, after = _contexts(prompt.ids, k)
        prompt_tokens += len(prompt.ids)
        echo = await _echo(m, prompt, contexts, alternatives) if req.echo else None
        drawn = await _continue(m, prompt, after, req, rng, alternatives, stops)
        for j, (text, strings, logps, tops, reason) in enumerate(drawn):
            completion_tokens += len(strings)
            offset0 = len(prompt.text) if req.echo else 0
            logprobs = None
            if req.logprobs is not None:
                offsets = list(np.cumsum([offset0] + [len(x) for x in strings[:-1]])) \
                    if strings else []
                logprobs = s.Logprobs(tokens=strings, token_logprobs=[float(x) for x in logps],
                                      top_logprobs=tops if alternatives else None,
                                      text_offset=[int(o) for o in offsets])
                if echo is not None:
                    logprobs = s.Logprobs(
                        tokens=echo.tokens + logprobs.tokens,
                        token_logprobs=echo.token_logprobs + logprobs.token_logprobs,
                        top_logprobs=(echo.top_logprobs + logprobs.top_logprobs)
                        if alternatives else None,
                        text_offset=echo.text_offset + logprobs.text_offset)
            choices.append(s.Choice(text=(prompt.text if req.echo else "") + text,
                                    index=p_index * req.n + j, logprobs=logprobs,
                                    finish_reason=reason))
    return s.CompletionResponse(
        id=f"cmpl-{uuid.uuid4().hex[:24]}", created=int(time.time()), model=m.name,
        choices=choices, usage=s.Usage(prompt_tokens=prompt_tokens,
                                       completion_tokens=completion_tokens,
                                       total_tokens=prompt_tokens + completion_tokens))


async def _echo(m: ServedModel, prompt: Tokens, contexts: np.ndarray, alternatives: int
                ) -> s.Logprobs:
    """The prompt's tokens with their log-probabilities (the first is null, as OpenAI's:
    nothing before it is given) and alternatives."""
    n = len(prompt.ids)
    logps: list[float | None] = [None] * n
    tops: list[dict | None] = [None] * n
    if n > 1:
        ids = np.array(prompt.ids[1:], np.int64)
        if alternatives:  # one pass gives the tokens' numbers and their alternatives
            best, vals, logp = await m.batcher.next(contexts[1:], _top(alternatives), ids)
        else:
            logp, _ = await m.batcher.targets(contexts[1:], ids)
        for i in range(n - 1):
            logps[i + 1] = float(logp[i])
        if alternatives:
            for i in range(n - 1):
                tops[i + 1] = _alternatives(m.lm.vocab, best[i], vals[i], prompt.strings[i + 1])
    if any(v is not None and not np.isfinite(v) for v in logps):
        raise RequestError(None, "the model gives a prompt token probability 0 or NaN: it "
                           "is damaged", 503)
    offsets = list(np.cumsum([0] + [len(x) for x in prompt.strings[:-1]])) if n else []
    return s.Logprobs(tokens=list(prompt.strings), token_logprobs=logps,
                      top_logprobs=tops, text_offset=[int(o) for o in offsets])


def _alternatives(vocab: Vocabulary, ids, vals, like: str) -> dict[str, float]:
    """Alternatives keyed as tokens are written: with the whitespace of ``like``."""
    space = like[: len(like) - len(like.lstrip())].replace("\n", "") if like else ""
    return {("\n" if i == EOS_ID else space + vocab.words[i]): float(v)
            for i, v in zip(ids, vals) if np.isfinite(v)}


async def _continue(m: ServedModel, prompt: Tokens, after: list[int], req, rng,
                    alternatives: int, stops: list[str]) -> list[tuple]:
    """``n`` continuations, sampled together one word at a time; each is (text, token
    strings, log-probabilities, alternatives, finish reason)."""
    n, k, vocab = req.n, m.lm.order - 1, m.lm.vocab
    texts = [""] * n
    strings: list[list[str]] = [[] for _ in range(n)]
    logps: list[list[float]] = [[] for _ in range(n)]
    tops: list[list[dict]] = [[] for _ in range(n)]
    reasons = ["length"] * n
    history = [list(after) for _ in range(n)]
    alive = list(range(n)) if req.max_tokens else []
    sample = _sampler(req.temperature, req.top_k, req.top_p, rng, alternatives)
    for _ in range(req.max_tokens):
        if not alive:
            break
        contexts = np.array([history[c][len(history[c]) - k:] if k else [] for c in alive],
                            np.int64).reshape(len(alive), k)
        chosen, chosen_logp, top = await m.batcher.next(contexts, sample)
        still = []
        for row, c in enumerate(alive):
            w = int(chosen[row])
            if w == EOS_ID:  # the end of the sentence ends the completion: </s> is its
                reasons[c] = "stop"  # last token (as an end-of-text token is OpenAI's),
                strings[c].append("")  # with its number but no text
                logps[c].append(float(chosen_logp[row]))
                if alternatives:
                    tops[c].append(_alternatives(vocab, top[0][row], top[1][row], " "))
                continue
            prev = prompt.text + texts[c]
            string = vocab.words[w] if not prev or prev[-1].isspace() else " " + vocab.words[w]
            texts[c] += string
            strings[c].append(string)
            logps[c].append(float(chosen_logp[row]))
            if alternatives:
                tops[c].append(_alternatives(vocab, top[0][row], top[1][row], string))
            history[c] = (history[c] + [w])[-k:] if k else []
            cut = min((texts[c].find(x) for x in stops if x and x in texts[c]), default=-1)
            if cut >= 0:  # a stop sequence: the text ends before it
                texts[c] = texts[c][:cut]
                kept = int(np.searchsorted(np.cumsum([len(x) for x in strings[c]]), cut,
                                           side="right"))  # the tokens wholly before it
                strings[c], logps[c], tops[c] = (strings[c][:kept], logps[c][:kept],
                                                 tops[c][:kept])
                reasons[c] = "stop"
                continue
            still.append(c)
        alive = still
    return [(texts[c], strings[c], logps[c], tops[c], reasons[c]) for c in range(n)]

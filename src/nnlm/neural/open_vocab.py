"""Feature vectors for out-of-vocabulary words (Bengio et al. 2003, section on future
work and the paper's remark on unknown words): a word j outside V that occurs in a
context gets

    C(j) = sum_{i in V} C(i) P(i | context),

the expected feature vector of the words the model predicted there, averaged over j's
occurrences as more are seen. j then joins the vocabulary: it gets an output row, so the
distribution over the larger vocabulary is renormalized, and C(j) is used when j is
context. Every tensor with a row per word (C; the NPLM's U, W and b; the LBL's U; the
energy model's b and per-word v) gets the same convex combination of its rows, so the
energy model, whose output row is C(j) itself, gives j a probability from C(j) alone.

``NeuralLM.add_words`` does this from Python; :func:`score_open_vocab` does it online
while scoring a text (``nnlm eval --open-vocab``): the first occurrence of a new word is
scored as ``<unk>`` and its context defines C(j); later occurrences are scored with j's
row and refine the average.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..corpus import special_error
from ..errors import NnlmError, where
from ..fileio import iter_line_blocks
from ..vocab import BOS, BOS_ID, EOS, EOS_ID, UNK_ID, Vocabulary
from .registry import build_network


class VocabularyGrowth:
    """The words added to a network: for each, the running mean of P(. | context) over V
    (the vocabulary it was trained with) and the rows that mean gives every per-word
    tensor."""

    def __init__(self, lm):
        net = lm.model
        if net.config.outputs != net.config.vocab_size:
            raise NnlmError("a short-list network cannot grow its vocabulary (its output "
                            "layer has no row per word)")
        self.base_size = len(lm.vocab)
        self.base = {k: t.detach().clone() for k, t in net.named_tensors().items()
                     if k in net.word_tensor_names()}
        self.sums: list[np.ndarray] = []  # per added word: sum of P(. | context) over V
        self.seen: list[int] = []

    def observe(self, row: int, p: np.ndarray) -> None:
        """One more occurrence of added word ``row - base_size`` with P(. | context) ``p``
        (over the base vocabulary; renormalized here)."""
        p = np.asarray(p, np.float64)[: self.base_size]
        p = p / p.sum()
        k = row - self.base_size
        if k == len(self.sums):
            self.sums.append(p.copy())
            self.seen.append(1)
        else:
            self.sums[k] += p
            self.seen[k] += 1

    def rows(self, row: int) -> dict[str, torch.Tensor]:
        """The per-word tensors' rows of added word ``row``: its mean weights times the
        base rows."""
        k = row - self.base_size
        w = torch.from_numpy(self.sums[k] / self.seen[k])[None]
        return {name: _combine(w, t) for name, t in self.base.items()}


def _combine(W: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Rows W @ t for convex weights W (k, |V|) over the rows of t (|V|, ...)."""
    return (W.to(t.dtype) @ t.reshape(len(t), -1)).reshape(-1, *t.shape[1:])


def grow(lm, word: str) -> None:
    """Give ``lm`` (a NeuralLM) one more word, the next row of ``lm.growth``: a new
    vocabulary and a network with one more row in every per-word tensor, the other rows
    and tensors unchanged."""
    net = lm.model
    vocab = Vocabulary([*lm.vocab.words, word], [*lm.vocab.counts.tolist(), 0])
    config = replace(net.config, vocab_size=len(vocab))
    with torch.device("meta"):  # no random initialization of what is overwritten
        new = build_network(config)
    new.to_empty(device=net.C.device)
    new.mask.zero_()
    new.mask[BOS_ID] = float("-inf")
    rows = lm.growth.rows(len(lm.vocab))
    with torch.no_grad():
        old, target = net.named_tensors(), new.named_tensors()
        for name, t in target.items():
            if name in rows:
                t.copy_(torch.cat([old[name].detach(), rows[name].to(t.device, t.dtype)]))
            else:
                t.copy_(old[name].detach())
    new.eval()
    lm.vocab, lm.model = vocab, new
    lm.__dict__.pop("_encoder", None)


def refresh(lm, row: int) -> None:
    """Rewrite the rows of added word ``row`` from its current mean."""
    rows = lm.growth.rows(row)
    with torch.no_grad():
        named = lm.model.named_tensors()
        for k, new in rows.items():
            named[k][row] = new[0].to(named[k].device, named[k].dtype)


def base_distribution(lm, context: np.ndarray) -> np.ndarray:
    """P(. | context) over the model's current vocabulary, float64 (one context row)."""
    return np.exp(lm.next_logprobs(np.asarray(context)[None])[0])


@dataclass
class OpenVocabResult:
    """Per predicted token, in text order (words + one ``</s>`` a line)."""

    logprobs: np.ndarray  # natural log, online open-vocabulary scoring
    first_oov: np.ndarray  # bool: the target is a new word's first occurrence (<unk>)
    later_oov: np.ndarray  # bool: the target is a new word seen before (its own row)
    oov_in_context: np.ndarray  # bool: a base-vocabulary target with a new word in context
    added: list[str]  # the new words, in order of first occurrence
    sentences: int

    @property
    def perplexity(self) -> float:
        return float(np.exp(-self.logprobs.mean())) if len(self.logprobs) else float("nan")

    def to_dict(self) -> dict:
        """What ``nnlm eval --open-vocab`` reports."""
        lp = self.logprobs
        later = lp[self.later_oov]
        return {"sentences": self.sentences, "tokens": len(lp), "nll": float(-lp.sum()),
                "perplexity": self.perplexity, "words_added": len(self.added),
                "first_occurrences": int(self.first_oov.sum()),
                "later_occurrences": int(self.later_oov.sum()),
                "later_occurrences_mean_logprob": float(later.mean()) if len(later) else None,
                "tokens_with_new_word_in_context": int(self.oov_in_context.sum())}


def score_open_vocab(lm, path) -> OpenVocabResult:
    """Score the text at ``path`` with ``lm``, adding each new word as it is met (see the
    module docstring). Scoring is batched between vocabulary changes."""
    if not hasattr(lm, "model") or not hasattr(lm.model, "word_tensor_names"):
        raise NnlmError(f"--open-vocab needs a neural model that can grow its vocabulary; "
                        f"a {lm.kind} model cannot")
    if getattr(lm, "growth", None) is None:
        lm.growth = VocabularyGrowth(lm)
    base_words = set(lm.vocab.words[: lm.growth.base_size])
    k = lm.model.config.order - 1
    lps, first, later, in_ctx, added = [], [], [], [], []
    sentences = 0
    for start, block in iter_line_blocks(path):
        for i, line in enumerate(block):
            tokens = line.split()
            if not tokens:
                continue
            if BOS in tokens or EOS in tokens:
                raise NnlmError(special_error(where(path, start + i), tokens))
            sentences += 1
            _score_line(lm, tokens, k, base_words, lps, first, later, in_ctx, added)
    return OpenVocabResult(np.array(lps), np.array(first, bool), np.array(later, bool),
                           np.array(in_ctx, bool), added, sentences)


def _score_line(lm, tokens, k, base_words, lps, first, later, in_ctx, added) -> None:
    """One line: segments end after every position whose target is an out-of-vocabulary
    word (its occurrence changes the model), so each position is scored by the model as
    it stood after everything before it."""
    words = [*tokens, None]  # None: </s>
    new_flags = [w is not None and w not in base_words and w != "<unk>" for w in words]
    pos = 0
    padded = [BOS_ID] * k  # the line's ids so far, <s>-padded
    while pos < len(words):
        end = pos
        while end < len(words) and not new_flags[end]:
            end += 1
        stop = min(end + 1, len(words))  # the segment includes the first new word
        padded.extend(_id(lm, w) for w in words[pos:stop])
        ctx = np.array([padded[t : t + k] for t in range(pos, stop)], np.int64).reshape(-1, k)
        tgt = np.array(padded[k + pos : k + stop], np.int64)
        lps.extend(lm.target_logprobs(ctx, tgt).tolist())
        for t in range(pos, stop):
            w = words[t]
            is_new = new_flags[t]
            known = is_new and w in lm.vocab.index
            first.append(is_new and not known)
            later.append(bool(known))
            in_ctx.append(not is_new and any(
                c is not None and new_flags[c] for c in range(max(0, t - k), t)))
        if stop > pos and new_flags[stop - 1]:
            w = words[stop - 1]
            if learn(lm, w, base_distribution(lm, ctx[-1])):
                added.append(w)
            padded[k + stop - 1] = lm.vocab.index[w]  # read through its row from now on
        pos = stop


def learn(lm, word: str, p: np.ndarray) -> bool:
    """One occurrence of ``word`` where the model predicted ``p``: add it (True) or
    refine its rows (False)."""
    row = lm.vocab.index.get(word)
    if row is None:
        lm.growth.observe(len(lm.vocab), p)
        grow(lm, word)
        return True
    lm.growth.observe(row, p)
    refresh(lm, row)
    return False


def _id(lm, word) -> int:
    if word is None:
        return EOS_ID
    return lm.vocab.index.get(word, UNK_ID)


def add_words(lm, words: list[str], contexts: list) -> None:
    """``NeuralLM.add_words``: each word with the context(s) it occurred in (a sequence of
    words, oldest first, or a list of such); a word already added is refined."""
    if len(words) != len(contexts):
        raise NnlmError(f"add_words: {len(words)} words but {len(contexts)} contexts")
    if getattr(lm, "growth", None) is None:
        lm.growth = VocabularyGrowth(lm)
    k = lm.model.config.order - 1
    for w, ctxs in zip(words, contexts):
        if not isinstance(w, str) or not w or w.split() != [w]:
            raise NnlmError(f"add_words: {w!r} is not a word")
        if w in lm.vocab.index and lm.vocab.index[w] < lm.growth.base_size:
            raise NnlmError(f"add_words: {w!r} is already in the vocabulary")
        if ctxs and isinstance(ctxs[0], str) or not ctxs:
            ctxs = [ctxs]
        for ctx in ctxs:
            ids = [lm.vocab.index.get(c, UNK_ID) for c in (ctx if not isinstance(ctx, str)
                                                          else ctx.split())]
            ids = ([BOS_ID] * k + ids)[-k:] if k else []
            learn(lm, w, base_distribution(lm, np.array(ids, np.int64)))

"""Feature vectors for out-of-vocabulary words (Bengio et al. 2003, section on future
work and the paper's remark on unknown words): a word j outside V that occurs in a
context gets

    C(j) = sum_{i in V} C(i) q(i | context),

a convex combination of the feature vectors of the words that could have stood there,
averaged over j's occurrences as more are seen. j then joins the vocabulary: it gets an
output row, so the distribution over the larger vocabulary is renormalized, and C(j) is
used when j is context. Every tensor with a row per word (C; the NPLM's U, W and b; the
LBL's U; the energy model's b and per-word v) gets the same convex combination of its
rows, so the energy model, whose output row is C(j) itself, gives j a probability from
C(j) alone.

The weights q (``prior``):

- ``"tokens"``, the paper's rule: q(i | context) = P(i | context). P(i | context) is
  proportional to P(context | i) P(i), so frequent words win by their frequency, and a new
  word's rows become those of "the", "," and "of" in part: its output row then takes
  probability from every other token, and its feature vector reads as a blend of
  function words.
- ``"types"`` (the default): q(i | context) proportional to P(i | context) / P(i), that is
  to P(context | i): the words whose contexts look like this one, each word of V equally
  likely a priori. A new word is a rare word by definition, so the frequency prior is
  the wrong one for it. ``<s>`` and ``</s>`` get no weight under either (j is a word).

The convex combination is where a new word's rows start. :func:`score_open_vocab` (``nnlm
eval --open-vocab``) scores a text online: the first occurrence of a new word is scored
as ``<unk>`` and its context starts C(j); later occurrences are scored with j's row and
refine the average; and after each scored stretch of text one gradient step of rate
``lr`` on that stretch's log-likelihood moves the added words' rows (only theirs: the
trained model is unchanged), as a dynamically evaluated model would (Mikolov et al.
2010; Krause et al. 2018). The step is what teaches C(j) the words that follow j and
lowers j's output row where j does not occur. Each position is scored before the text at
it is learned from. ``lr=0`` with ``prior="tokens"`` is the paper's rule alone.
``NeuralLM.add_words`` does the combination from Python (no text to learn from).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from ..base.errors import NnlmError, a, where
from ..base.progress import progress_bar
from ..text.fileio import iter_line_blocks
from ..text.vocab import BOS, BOS_ID, EOS, EOS_ID, UNK_ID, Vocabulary, special_error
from .networks.registry import build_network

#: the weights of a new word's combination (see the module docstring)
PRIORS = ("types", "tokens")
#: the rate of the online step on the added words' rows (chosen on Brown valid)
DEFAULT_LR = 0.1


class VocabularyGrowth:
    """The words added to a network: for each, the running mean of q(. | context) over V
    (the vocabulary it was trained with) and the rows that mean gives every per-word
    tensor."""

    def __init__(self, lm, prior: str = "types"):
        if prior not in PRIORS:
            raise NnlmError(f"unknown prior {prior!r}; choose from {', '.join(PRIORS)}")
        net = lm.model
        if net.config.outputs != net.config.vocab_size:
            raise NnlmError("a short-list network cannot grow its vocabulary (its output "
                            "layer has no row per word)")
        self.base_size = len(lm.vocab)
        self.prior = prior  # fixed for the words added to this model
        # the weight of each base word per unit of P(i | context): 1/P(i) or 1; none for
        # <s> and </s>
        counts = np.asarray(lm.vocab.counts[: self.base_size], np.float64)
        if prior == "types":
            scale = np.divide(counts.sum(), counts, out=np.zeros_like(counts), where=counts > 0)
        else:
            scale = np.ones_like(counts)
        scale[[BOS_ID, EOS_ID]] = 0
        self.scale = scale
        self.base = {k: t.detach().clone() for k, t in net.named_tensors().items()
                     if k in net.word_tensor_names()}
        self.sums: list[np.ndarray] = []  # per added word: sum of q(. | context) over V
        self.seen: list[int] = []

    def weights(self, p: np.ndarray) -> np.ndarray:
        """q(. | context) over the base vocabulary from P(. | context) ``p`` (see the module
        docstring), summing to 1."""
        p = np.asarray(p, np.float64)[: self.base_size]
        q = p * self.scale
        if not q.sum() > 0:  # nothing but <s>/</s> predicted: P itself
            q = p
        return q / q.sum()

    def observe(self, row: int, p: np.ndarray) -> None:
        """One more occurrence of added word ``row - base_size`` where the model predicted
        P(. | context) ``p``."""
        p = self.weights(p)
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
    new.to_empty(device=net.C.device).to(net.C.dtype)  # the same device and precision
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


def refresh(lm, row: int, old: dict[str, torch.Tensor]) -> None:
    """Move the rows of added word ``row`` by the change of its mean combination since
    ``old`` (what the gradient steps learned stays)."""
    rows = lm.growth.rows(row)
    with torch.no_grad():
        named = lm.model.named_tensors()
        for k, new in rows.items():
            named[k][row] += (new[0] - old[k][0]).to(named[k].device, named[k].dtype)


def adapt(lm, contexts: np.ndarray, targets: np.ndarray, lr: float) -> None:
    """One gradient-ascent step of rate ``lr`` on sum log p(target | context) over these
    rows, on the added words' rows of every per-word parameter only."""
    base = lm.growth.base_size
    if lr == 0 or len(lm.vocab) == base or not len(targets):
        return
    net = lm.model
    params = net.word_parameters()
    wanted = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(True)
        with torch.enable_grad():
            ctx = torch.as_tensor(contexts, dtype=torch.long, device=net.device)
            tgt = torch.as_tensor(targets, dtype=torch.long, device=net.device)
            logits = net.scores(ctx).double()
            ll = torch.log_softmax(logits, 1).gather(1, tgt[:, None]).sum()
            grads = torch.autograd.grad(ll, params)
    finally:
        for p, w in zip(params, wanted):
            p.requires_grad_(w)
    with torch.no_grad():
        for p, g in zip(params, grads):
            p[base:] += lr * g[base:].to(p.dtype)


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


def score_open_vocab(lm, path, lr: float = DEFAULT_LR, prior: str = "types"
                     ) -> OpenVocabResult:
    """Score the text at ``path`` with ``lm``, adding each new word as it is met, its rows
    starting from the ``prior`` combination and learned at rate ``lr`` (see the module
    docstring). Scoring is batched between vocabulary changes."""
    if not hasattr(lm, "model") or not hasattr(lm.model, "word_tensor_names"):
        raise NnlmError(f"open_vocab=True needs a neural model that can grow its vocabulary; "
                        f"{a(lm.kind)} model cannot")
    if not (lr >= 0 and np.isfinite(lr)):
        raise NnlmError(f"the open-vocabulary learning rate must be >= 0, not {lr}")
    _growth(lm, prior)
    base_words = set(lm.vocab.words[: lm.growth.base_size])
    k = lm.model.config.context_size
    lps, first, later, in_ctx, added = [], [], [], [], []
    sentences = 0
    with progress_bar(None, "open-vocabulary scoring", "lines") as bar:
        for start, block in iter_line_blocks(path):
            for i, line in enumerate(block):
                tokens = line.split()
                if tokens:
                    if BOS in tokens or EOS in tokens:
                        raise NnlmError(special_error(where(path, start + i), tokens))
                    sentences += 1
                    _score_line(lm, tokens, k, base_words, lps, first, later, in_ctx, added,
                                lr)
                bar.update(1)
            bar.set_postfix(words_added=f"{len(added):,}")
    if not lps:
        raise NnlmError(f"{path}: no tokens: every line is blank")
    logprobs = np.array(lps)
    if not np.isfinite(logprobs).all():
        i = int(np.flatnonzero(~np.isfinite(logprobs))[0])
        raise NnlmError(f"{path}: open-vocabulary scoring diverged at token {i + 1} (a "
                        f"log-probability of {logprobs[i]}): the step {lr:g} for the new words' "
                        "rows is too large; use a smaller one")
    return OpenVocabResult(logprobs, np.array(first, bool), np.array(later, bool),
                           np.array(in_ctx, bool), added, sentences)


def _score_line(lm, tokens, k, base_words, lps, first, later, in_ctx, added, lr) -> None:
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
        adapt(lm, ctx, tgt, lr)  # learn from the stretch just scored
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
    old = lm.growth.rows(row)
    lm.growth.observe(row, p)
    refresh(lm, row, old)
    return False


def _growth(lm, prior: str) -> VocabularyGrowth:
    """``lm``'s vocabulary growth, started with ``prior`` on first use; one prior for all
    the words a model adds."""
    if getattr(lm, "growth", None) is None:
        lm.growth = VocabularyGrowth(lm, prior)
    elif lm.growth.prior != prior:
        raise NnlmError(f"this model's added words were combined with prior "
                        f"{lm.growth.prior!r}; it cannot add more with {prior!r}")
    return lm.growth


def _id(lm, word) -> int:
    if word is None:
        return EOS_ID
    return lm.vocab.index.get(word, UNK_ID)


def add_words(lm, words: list[str], contexts: list, prior: str = "types") -> None:
    """``NeuralLM.add_words``: each word with the context(s) it occurred in (a sequence of
    words, oldest first, or a list of such); a word already added is refined."""
    if len(words) != len(contexts):
        raise NnlmError(f"add_words: {len(words)} words but {len(contexts)} contexts")
    _growth(lm, prior)
    k = lm.model.config.context_size
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

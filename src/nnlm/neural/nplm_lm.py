"""The NPLM as a :class:`~nnlm.lm.LanguageModel`: scoring, generation, neighbours.

Evaluation runs the network in float32 (optionally bf16 products) and takes the log-softmax
in float64, so perplexities sum probabilities in float64 as every nnlm model does.
"""

from __future__ import annotations

import numpy as np
import torch

from ..lm import LanguageModel
from ..vocab import Vocabulary
from .allocator import keep_freed_memory
from .model import NPLMConfig, NPLMNetwork
from .output import folded_input, folded_weight

EVAL_BATCH = 2048  # full distributions (next_logprobs)
SCORE_BATCH = 256  # per-token scoring: rows per output product
HIDDEN_BLOCK = 16384  # rows whose z = [x, tanh(d + H x)] is computed at once


class NPLM(LanguageModel):
    """A trained (or untrained) NPLM over ``vocab``."""

    kind = "nplm"

    def __init__(self, vocab: Vocabulary, model: NPLMNetwork, bf16: bool = False):
        if model.config.vocab_size != len(vocab):
            raise ValueError("model and vocabulary sizes differ")
        self.vocab, self.model, self.bf16 = vocab, model, bf16
        self.order = model.config.order

    @classmethod
    def new(cls, vocab: Vocabulary, **config) -> NPLM:
        """An untrained model: ``NPLM.new(vocab, order=5, m=60, h=50, direct=True)``."""
        return cls(vocab, NPLMNetwork(NPLMConfig(vocab_size=len(vocab), **config)))

    @classmethod
    def load(cls, path) -> NPLM:
        """The best weights of a checkpoint directory written by ``nnlm train``."""
        from .checkpoint import load_neural

        return load_neural(path)[0]

    @torch.no_grad()
    def _log_softmax(self, contexts: np.ndarray) -> torch.Tensor:
        self.model.eval()
        logits = self.model(torch.from_numpy(np.ascontiguousarray(contexts, np.int64)),
                            bf16=self.bf16)
        return torch.log_softmax(logits.double(), dim=1)

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        out = [self._log_softmax(contexts[i : i + EVAL_BATCH]).numpy()
               for i in range(0, len(contexts), EVAL_BATCH)]
        return np.concatenate(out) if out else np.zeros((0, len(self.vocab)))

    @torch.no_grad()
    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log p(target | context) per row, float64.

        z = [x, tanh(d + H x)] is computed for a block of rows at a time, then one product
        per 256 rows gives the logits with the bias folded in (``output.folded_weight``),
        written into a buffer reused across batches (a fresh 14 MB tensor per batch costs
        as much as the product, in page faults). In float32 the row maximum is
        subtracted, exp runs in place and the sum over the vocabulary accumulates in
        float64. With ``bf16`` the product runs in bfloat16 (AMX where the CPU has it) and
        one fused ``softmax`` turns the bf16 logits into bf16 probabilities (see
        ``_bf16_logprobs``): about 4x faster, perplexity within about 0.01% (the
        rounding of z and W to bf16 adds noise to every logit, which raises log-sum-exp
        slightly on average; bench/nplm.py measures it).
        """
        keep_freed_memory()
        net = self.model.eval()
        dtype = torch.bfloat16 if self.bf16 else torch.float32
        weight = folded_weight(net.output_matrix, net.b + net.mask, dtype)
        weight_t = weight.t()
        V = weight.shape[0]
        logits = torch.empty(SCORE_BATCH, V, dtype=weight.dtype)
        out = np.empty(len(targets))
        for start in range(0, len(targets), HIDDEN_BLOCK):
            stop = min(start + HIDDEN_BLOCK, len(targets))
            ctx = torch.from_numpy(np.ascontiguousarray(contexts[start:stop], np.int64))
            tgt = torch.from_numpy(np.asarray(targets[start:stop], np.int64))
            z32 = net.hidden_input(ctx)
            z = folded_input(z32, weight.shape[1], dtype)
            for i in range(0, len(z), SCORE_BATCH):
                rows = min(SCORE_BATCH, len(z) - i)
                y, t = logits[:rows], tgt[i : i + rows]
                torch.mm(z[i : i + rows], weight_t, out=y)
                if self.bf16:
                    out[start + i : start + i + rows] = self._bf16_logprobs(
                        y, z32[i : i + rows], t)
                    continue
                picked = y.gather(1, t[:, None]).squeeze(1).double()
                mx = y.amax(dim=1)
                y.sub_(mx[:, None]).exp_()
                norm = mx.double() + y.sum(dim=1, dtype=torch.float64).log()
                out[start + i : start + i + rows] = (picked - norm).numpy()
        return out

    def _bf16_logprobs(self, logits: torch.Tensor, z: torch.Tensor,
                       targets: torch.Tensor) -> np.ndarray:
        """log p(target) from bf16 logits (B, |V|), float64.

        One fused ``softmax`` (float32 inside) writes bf16 probabilities, relative precision
        2^-9, so log p is within about 0.002 of the same computation in float32. Rows whose
        target probability underflows bf16 are scored from their z (float32 products,
        float64 softmax) instead.
        """
        p = torch.softmax(logits, dim=1).gather(1, targets[:, None]).squeeze(1).double()
        lp = p.log()
        bad = p == 0
        if bad.any():
            y = self.model.output_logits(z[bad]).double()
            lp[bad] = y.gather(1, targets[bad, None]).squeeze(1) - torch.logsumexp(y, 1)
        return lp.numpy()

    # -- beyond scoring --------------------------------------------------------------
    def neighbors(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The k words whose feature vectors C are closest in cosine similarity."""
        C = self.model.C.detach()
        C = C / C.norm(dim=1, keepdim=True).clamp_min(1e-12)
        i = self.vocab.index[word]
        sims = (C @ C[i]).numpy()
        sims[[i, 1]] = -np.inf  # not itself, never <s>
        best = np.argsort(-sims)[:k]
        return [(self.vocab.words[j], float(sims[j])) for j in best]

    def config(self) -> dict:
        return self.model.config.to_dict()

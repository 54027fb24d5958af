"""Any network of the neural family as a :class:`~nnlm.lm.LanguageModel`.

Evaluation runs the network in float32 (optionally bf16 products) and normalizes in
float64, so perplexities sum probabilities in float64 as every nnlm model does. Three
ways of scoring, all through ``target_logprobs``:

- exact (the default): log softmax over every output;
- ``self_normalized``: the raw score y_w, without the sum over the vocabulary (Devlin
  et al. 2014). Right only for a model whose log Z stays near 0 (trained with the
  self-normalized objective or NCE): :meth:`NeuralLM.log_z_stats` measures it;
- a short-list (Schwenk 2007, *Continuous space language models*): the network predicts
  the K most frequent words (ids below K, the specials included) and one more output,
  "not in the list"; a word w outside the list gets

      p(w | h) = p_net(out | h) p_ngram(w | h) / sum_{v not in list} p_ngram(v | h)

  from a back-off n-gram model over the same vocabulary, so every distribution sums to 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..base.errors import NnlmError
from ..base.progress import progress_bar
from ..lm import LanguageModel, logsumexp
from ..model_files import header_binding
from ..text.stream import Stream
from ..text.vocab import BOS_ID, Vocabulary
from .networks.checkpoint import read_network, write_network
from .networks.network import Network
from .networks.output import folded_input, folded_weight
from .networks.registry import build_network, network_config
from .recurrent_states import StateCache
from .segments import by_length, pieces, spans

EVAL_BATCH = 2048  # full distributions (next_logprobs)
SCORE_BATCH = 256  # per-token scoring: rows per output product (CPU: cache-sized)
HIDDEN_BLOCK = 16384  # rows whose z = [x, tanh(d + H x)] is computed at once
GPU_LOGITS = 2**26  # on a GPU: logits per product (256 MB in float32), fewer launches


def score_rows(vocab_size: int, device: torch.device) -> int:
    """Rows per output product when scoring: SCORE_BATCH on the CPU, where a product
    that fits the caches is fastest; on a GPU as many as GPU_LOGITS logits allow (up to
    HIDDEN_BLOCK), since there the time goes to launches, not to memory traffic."""
    if device.type == "cpu":
        return SCORE_BATCH
    return int(min(HIDDEN_BLOCK, max(SCORE_BATCH, GPU_LOGITS // max(vocab_size, 1))))


DECODER_ROWS = 1024  # a recurrent network continues batches up to this from cached states
LINE_TOKENS = 8192  # a recurrent network's padded positions per pass when scoring lines
BACKOFF_BATCH = 512  # rows of the short-list's n-gram distributions at once
LOG_Z_SAMPLE = 20000  # tokens whose log Z is measured for log_z_stats
BACKOFF_DIR = "shortlist_backoff"  # where a short-list checkpoint keeps its n-gram model


class _OutputHead:
    """The output layer prepared for scoring: the weight with the bias folded in, and a
    logits buffer reused across batches (a fresh 14 MB tensor per batch costs as much as
    the product, in page faults).

    ``by_word``: in float32 on a CPU the logits are computed word-major, y^T = W z^T
    (|V|, rows), which runs 1.2-1.5x faster here than z W^T (rows, |V|) with the same
    numbers; the softmax then reduces over the first axis."""

    def __init__(self, net: Network, bf16: bool):
        dtype = torch.bfloat16 if bf16 else torch.float32
        self.weight = folded_weight(net.output_matrix, net.b + net.mask, dtype)
        self.weight_t = self.weight.t()
        V = self.weight.shape[0]
        self.batch = score_rows(V, self.weight.device)
        self.by_word = not bf16 and self.weight.device.type == "cpu"
        self.logits = torch.empty(self.batch * V, dtype=self.weight.dtype,
                                  device=self.weight.device)

    def product(self, z: torch.Tensor) -> torch.Tensor:
        """The logits of the rows of z: (|V|, rows) word-major, else (rows, |V|)."""
        V, rows = self.weight.shape[0], len(z)
        if self.by_word:
            return torch.mm(self.weight, z.t(), out=self.logits[: V * rows].view(V, rows))
        return torch.mm(z, self.weight_t, out=self.logits[: V * rows].view(rows, V))


@dataclass(frozen=True)
class LogZStats:
    """log Z(context) = log sum_w exp(y_w) over a text: 0 for a self-normalized model."""

    mean: float
    std: float
    mean_abs: float
    tokens: int  # how many contexts were measured

    def to_dict(self) -> dict:
        return {"log_z_mean": self.mean, "log_z_std": self.std, "log_z_mean_abs": self.mean_abs,
                "log_z_tokens": self.tokens}


class NeuralLM(LanguageModel):
    """A trained (or untrained) network of the family over ``vocab``.

    ``backoff``: the n-gram model of a short-list network (whose ``output_size`` is K + 1).
    """

    kind = "nplm"
    shortlist: int | None = None  # a short-list network's K (:class:`ShortListLM`)
    backoff: LanguageModel | None = None  # and its n-gram model for the other words

    def __new__(cls, vocab: Vocabulary | None = None, model: Network | None = None, *args,
                **kwargs):
        """A network that predicts a short-list of K words and one "elsewhere" output
        (``output_size`` K + 1) is a :class:`ShortListLM`, whatever the caller names
        (copy and pickle call this with no arguments: the class stays as it is)."""
        if cls is NeuralLM and model is not None and \
                model.config.outputs < model.config.vocab_size:
            cls = ShortListLM
        return super().__new__(cls)

    def __init__(self, vocab: Vocabulary, model: Network, bf16: bool = False,
                 backoff: LanguageModel | None = None, self_normalized: bool = False):
        cfg = model.config
        if cfg.vocab_size != len(vocab):
            raise ValueError("model and vocabulary sizes differ")
        self.vocab, self.model, self.bf16 = vocab, model, bf16
        self.self_normalized = self_normalized
        self.order = cfg.context_size + 1

    @classmethod
    def new(cls, vocab: Vocabulary, network: str = "nplm", backoff=None, **config) -> NeuralLM:
        """An untrained model: ``NPLM.new(vocab, order=5, m=60, h=50, direct=True)``."""
        cfg = network_config({"network": network, "vocab_size": len(vocab), **config})
        return cls(vocab, build_network(cfg), backoff=backoff)

    def neural_parts(self) -> list:
        return [self]

    @property
    def recurrent(self) -> bool:
        """True for a network that reads the line word by word (the LSTM)."""
        return self.model.recurrent

    # -- persistence (nnlm.models.save_model / load_model; a checkpoint loads with
    # nnlm.load_model, which gives its best weights) ---------------------------------------
    def config(self) -> dict:
        return self.model.config.to_dict()

    def save_files(self, directory: Path, binding: str, save) -> None:
        write_network(self.model, directory / "model.safetensors", binding)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> NeuralLM:
        try:
            config = network_config({**header["config"], "vocab_size": len(vocab)})
        except (TypeError, ValueError) as e:
            raise NnlmError(f"{path / 'config.json'}: bad model config ({e})") from None
        net = read_network(config, Path(path) / "model.safetensors", header_binding(header))
        backoff = None
        if config.outputs < config.vocab_size:
            backoff = load(Path(path) / BACKOFF_DIR)
        return cls(vocab, net, backoff=backoff)

    # -- the network's own distribution over its outputs ------------------------------------
    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(a, np.int64)).to(self.model.device)

    def _net_contexts(self, contexts: np.ndarray) -> np.ndarray:
        k = self.model.config.context_size
        return np.asarray(contexts)[:, contexts.shape[1] - k :]

    @torch.no_grad()
    def _logits(self, ctx: torch.Tensor) -> torch.Tensor:
        self.model.eval()
        net = self.model
        if net.linear_output and len(ctx) <= DECODER_ROWS:  # a decoder's few rows: the
            head = self._small_head()  # output layer prepared once, bias folded in
            z = folded_input(self._hidden(ctx), head.weight.shape[1], head.weight.dtype)
            out = torch.empty(len(z), head.weight.shape[0], device=z.device)
            for i in range(0, len(z), head.batch):
                y = head.product(z[i:i + head.batch])  # into the head's buffer: copied
                out[i:i + head.batch] = y.t() if head.by_word else y
            return out
        if net.linear_output:  # z through _hidden: a recurrent network's cached states
            return net.output_logits(self._hidden(ctx), bf16=self.bf16)
        return net.scores(ctx, bf16=self.bf16)

    @torch.no_grad()
    def _log_softmax(self, contexts: np.ndarray) -> np.ndarray:
        return torch.log_softmax(self._logits(self._tensor(contexts)).double(),
                                 dim=1).cpu().numpy()

    @torch.no_grad()
    def next_log_softmax(self, contexts: torch.Tensor) -> torch.Tensor:
        """float32 [B, |V|] log-distributions after ``contexts`` (a LongTensor [B, n-1]),
        left on the network's device: the batched whole-vocabulary step of a GPU decoder
        (:mod:`nnlm.decoding.dense`)."""
        k = self.model.config.context_size
        ctx = contexts[:, contexts.shape[1] - k:].to(self.model.device)
        out = torch.empty((len(ctx), len(self.vocab)), dtype=torch.float32, device=ctx.device)
        for i in range(0, len(ctx), EVAL_BATCH):
            out[i:i + EVAL_BATCH] = torch.log_softmax(
                self._logits(ctx[i:i + EVAL_BATCH]).float(), dim=1)
        return out

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """Exact distributions (self-normalized scoring applies to ``target_logprobs``)."""
        contexts = np.asarray(contexts)
        if len(contexts) <= EVAL_BATCH:  # one batch (a decoder's pass): no copy
            return self._rows_logprobs(contexts)
        out = np.empty((len(contexts), len(self.vocab)))
        for i in range(0, len(contexts), EVAL_BATCH):
            rows = contexts[i : i + EVAL_BATCH]
            out[i : i + len(rows)] = self._rows_logprobs(rows)
        return out

    def _rows_logprobs(self, rows: np.ndarray) -> np.ndarray:
        """The distributions after a batch of contexts."""
        return self._log_softmax(self._net_contexts(rows))

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log p(target | context) per row, float64 (see the module docstring)."""
        contexts, targets = np.asarray(contexts), np.asarray(targets)
        net_ctx = self._net_contexts(contexts)
        if self.self_normalized:
            return self.raw_scores(net_ctx, targets)
        return self.network_logprobs(net_ctx, targets)

    @torch.no_grad()
    def network_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log softmax(y)[target] over the network's outputs, float64.

        z = [x, tanh(d + H x)] is computed for a block of rows at a time, then one product
        per 256 rows gives the logits with the bias folded in (``output.folded_weight``),
        written into a buffer reused across batches (a fresh 14 MB tensor per batch costs
        as much as the product, in page faults). In float32 the row maximum is
        subtracted, exp runs in place and the sum over the vocabulary accumulates in
        float64. With ``bf16`` the product runs in bfloat16 (AMX where the CPU has it) and
        one fused ``softmax`` turns the bf16 logits into bf16 probabilities (see
        ``_bf16_logprobs``): about 4x faster, perplexity within about 0.01%.
        """
        net = self.model.eval()
        if not net.linear_output:
            return self._scored_logprobs(contexts, targets)
        head = self._small_head() if len(targets) <= DECODER_ROWS else _OutputHead(net, self.bf16)
        out = np.empty(len(targets))
        for start in range(0, len(targets), HIDDEN_BLOCK):
            stop = min(start + HIDDEN_BLOCK, len(targets))
            z32 = self._hidden(self._tensor(contexts[start:stop]))
            out[start:stop] = self._z_logprobs(head, z32, self._tensor(targets[start:stop]))
        return out

    def _small_head(self) -> _OutputHead:
        """The output layer prepared once for the small batches of a decoder (folding the
        bias into a copy of the output rows costs more than scoring a few rows), kept
        while the weights stay as they are."""
        net = self.model
        key = (self.bf16, net.output_matrix.data_ptr(), net.output_matrix._version,
               net.b.data_ptr(), net.b._version)
        if getattr(self, "_head_key", None) != key:
            self._head, self._head_key = _OutputHead(net, self.bf16), key
        return self._head

    def _hidden(self, contexts: torch.Tensor) -> torch.Tensor:
        """z of each context row; a recurrent network's in a few rows (a decoder's, a
        generator's) continued from the states of their prefixes (``recurrent_states``)."""
        net = self.model
        if not self.recurrent or net.training or len(contexts) > DECODER_ROWS:
            return net.hidden_input(contexts)
        if not hasattr(self, "_states"):

            self._states = StateCache()
        return self._states.hidden_input(net, contexts, self.bf16)

    def _z_logprobs(self, head: _OutputHead, z32: torch.Tensor, tgt: torch.Tensor
                    ) -> np.ndarray:
        """log softmax(y)[target] for the rows of z (see ``network_logprobs``), float64."""
        z = folded_input(z32, head.weight.shape[1], head.weight.dtype)
        block = torch.empty(len(z), dtype=torch.float64, device=z.device)
        for i in range(0, len(z), head.batch):
            rows = min(head.batch, len(z) - i)
            y, t = head.product(z[i : i + rows]), tgt[i : i + rows]
            if self.bf16:
                lp = self._bf16_logprobs(y, z32[i : i + rows], t)
            else:  # the words run along axis d of y
                d = 0 if head.by_word else 1
                picked = y.gather(d, t.unsqueeze(d)).squeeze(d).double()
                mx = y.amax(dim=d)
                y.sub_(mx.unsqueeze(d)).exp_()
                lp = picked - (mx.double() + y.sum(dim=d, dtype=torch.float64).log())
            block[i : i + rows] = lp
        return block.cpu().numpy()  # one copy (and wait) per block

    def logprobs(self, stream: Stream, batch_size: int = 1 << 16) -> np.ndarray:
        """One float64 per slot of ``stream``; a recurrent network reads each line once
        (``_line_logprobs``), any other scores windows of contexts."""
        if not self.recurrent:
            return super().logprobs(stream, batch_size)
        return self._line_logprobs(stream)

    @torch.no_grad()
    def _line_logprobs(self, stream: Stream) -> np.ndarray:
        """A recurrent network's log-probabilities line by line: each line's first n - 1
        slots from one pass over the line (lines batched by length, LINE_TOKENS padded
        positions a batch), any later slot of a longer line through its window of n - 1
        words. Equal to scoring every slot through its context (``target_logprobs``)."""

        if self.self_normalized:
            raise NnlmError("self-normalized scoring needs a network trained to be "
                            "self-normalized (objective selfnorm or nce); a recurrent "
                            "network trains with the full softmax")
        net = self.model.eval()
        out = np.empty(len(stream))
        head = _OutputHead(net, self.bf16)
        k = self.order - 1
        starts, lengths = pieces(stream, k, first_only=True)
        with progress_bar(len(stream), f"scoring ({self.kind} {net.config.network_name})",
                          "tokens", delay=2.0) as bar:
            for batch in by_length(lengths, LINE_TOKENS):
                inputs, targets = spans(stream, starts[batch], lengths[batch])
                z32 = net.hidden_input(inputs.to(net.device))
                at = (starts[batch, None] + np.arange(inputs.inputs.shape[1])[None, :])[
                    inputs.mask().numpy()]
                out[at] = self._z_logprobs(head, z32, self._tensor(targets))
                bar.update(len(targets))
            # slots n - 1 or more words into a longer line: their windows of n - 1 words
            in_line = np.arange(len(stream)) - np.repeat(stream.offsets[:-1],
                                                         np.diff(stream.offsets))
            rest = np.flatnonzero(in_line >= k)
            for i in range(0, len(rest), EVAL_BATCH):
                pos = rest[i : i + EVAL_BATCH]
                out[pos] = self.network_logprobs(stream.contexts(self.order, pos),
                                                 stream.ids[pos])
                bar.update(len(pos))
        return out

    @torch.no_grad()
    def _scored_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log softmax(scores)[target] for a network without a linear output layer (the
        energy model), SCORE_BATCH rows at a time, normalized in float64."""
        net, out = self.model.eval(), np.empty(len(targets))
        for i in range(0, len(targets), SCORE_BATCH):
            ctx = self._tensor(contexts[i : i + SCORE_BATCH])
            t = self._tensor(targets[i : i + SCORE_BATCH])
            y = net.scores(ctx, bf16=self.bf16).double()
            lp = y.gather(1, t[:, None]).squeeze(1) - torch.logsumexp(y, 1)
            out[i : i + len(t)] = lp.cpu().numpy()
        return out

    def _bf16_logprobs(self, logits: torch.Tensor, z: torch.Tensor,
                       targets: torch.Tensor) -> torch.Tensor:
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
        return lp

    @torch.no_grad()
    def raw_scores(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """y_target = b_w + z . output_row(w): the self-normalized log-probability, with no
        sum over the vocabulary; -inf for ``<s>``. float64."""
        net = self.model.eval()
        W, b = net.output_matrix, net.b
        out = np.empty(len(targets))
        for start in range(0, len(targets), HIDDEN_BLOCK):
            stop = min(start + HIDDEN_BLOCK, len(targets))
            t = self._tensor(targets[start:stop])
            ctx = self._tensor(contexts[start:stop])
            if net.linear_output:
                z = net.hidden_input(ctx)
                y = (z * W.index_select(0, t)).sum(1).add_(b.index_select(0, t))
            else:
                y = net.scores(ctx, t[:, None]).squeeze(1)
            out[start:stop] = y.double().cpu().numpy()
        out[np.asarray(targets) == BOS_ID] = -np.inf
        return out

    @torch.no_grad()
    def log_z_stats(self, contexts: np.ndarray, sample: int = LOG_Z_SAMPLE) -> LogZStats:
        """Mean, standard deviation and mean |.| of log Z(context) over up to ``sample``
        contexts spread evenly through ``contexts``."""
        contexts = self._net_contexts(np.asarray(contexts))
        if len(contexts) > sample:
            contexts = contexts[np.linspace(0, len(contexts) - 1, sample).astype(np.int64)]
        net = self.model.eval()
        parts = []
        for i in range(0, len(contexts), EVAL_BATCH):
            y = net.scores(self._tensor(contexts[i : i + EVAL_BATCH])).double()
            parts.append(torch.logsumexp(y, 1).cpu().numpy())
        log_z = np.concatenate(parts) if parts else np.zeros(0)
        if not len(log_z):
            return LogZStats(math.nan, math.nan, math.nan, 0)
        return LogZStats(float(log_z.mean()), float(log_z.std()), float(np.abs(log_z).mean()),
                         len(log_z))

    # -- beyond scoring --------------------------------------------------------------
    def add_words(self, words, contexts, prior: str = "types") -> NeuralLM:
        """Add out-of-vocabulary ``words``, each with the context it occurred in (words,
        oldest first; or a list of contexts, averaged): C(j) = sum_i C(i) q(i | context)
        and the same combination of every output row, q = P(i | context) / P(i) with
        ``prior="types"`` or the paper's P(i | context) with ``"tokens"`` (see
        ``open_vocab.py``). The model grows in place (save it with ``save_model``);
        returns it."""
        from .open_vocab import add_words

        add_words(self, list(words), list(contexts), prior)
        return self

    def embed(self, sentences, normalize: bool = False, buckets: int | None = None,
              hash_fraction: float | None = None) -> np.ndarray:
        """One vector per sentence from the word features C: float32 (N, m). A str is one
        sentence; see :mod:`nnlm.neural.sentence` for the buckets and the combiner."""
        from .sentence import embed_sentences

        return embed_sentences(self, sentences, normalize, buckets, hash_fraction)

    def neighbors(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The k words whose feature vectors C are closest in cosine similarity."""
        from .embeddings import nearest_words

        return nearest_words(self, word, k)


class ShortListLM(NeuralLM):
    """A short-list network (Schwenk 2007): the network predicts the K most frequent words
    and one "elsewhere" output, whose probability an n-gram model (``backoff``, over the
    same vocabulary) shares among the other words in proportion to its own:

        p(w | h) = p_net(w | h)                                            for w < K
        p(w | h) = p_net(K | h) p_ngram(w | h) / sum_{v >= K} p_ngram(v | h)   otherwise

    :class:`NeuralLM` builds one for any network whose ``output_size`` is K + 1 < |V|."""

    def __init__(self, vocab: Vocabulary, model: Network, bf16: bool = False,
                 backoff: LanguageModel | None = None, self_normalized: bool = False):
        super().__init__(vocab, model, bf16, self_normalized=self_normalized)
        self.shortlist = model.config.outputs - 1
        check_backoff(backoff, vocab, self.shortlist)
        self.backoff = backoff
        self.order = max(self.order, backoff.order)

    def save_files(self, directory: Path, binding: str, save) -> None:
        super().save_files(directory, binding, save)
        save(self.backoff, directory / BACKOFF_DIR)

    def _rows_logprobs(self, rows: np.ndarray) -> np.ndarray:
        net, K = self._log_softmax(self._net_contexts(rows)), self.shortlist
        tail = self.backoff.next_logprobs(rows[:, rows.shape[1] - self.backoff.order + 1 :])
        out = np.empty((len(rows), len(self.vocab)))
        out[:, :K] = net[:, :K]
        out[:, K:] = net[:, K : K + 1] + tail[:, K:] - logsumexp(tail[:, K:], axis=1)[:, None]
        return out

    def next_log_softmax(self, contexts: torch.Tensor) -> torch.Tensor:
        """The short-list's rows (network and n-gram together), on the network's device."""
        rows = self._rows_logprobs(contexts.cpu().numpy())
        return torch.from_numpy(rows).float().to(self.model.device)

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        if self.self_normalized:
            raise NnlmError("self-normalized scoring does not apply to a short-list model")
        contexts, targets = np.asarray(contexts), np.asarray(targets)
        K = self.shortlist
        outside = targets >= K
        lp = self.network_logprobs(self._net_contexts(contexts), np.where(outside, K, targets))
        rows = np.flatnonzero(outside)
        if len(rows):
            lp[rows] += self.backoff_share(contexts[rows], targets[rows])
        return lp

    def backoff_share(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """log p_ngram(w | h) - log sum_{v not in list} p_ngram(v | h), for w outside."""
        K, n = self.shortlist, self.backoff.order
        out = np.empty(len(targets))
        for i in range(0, len(targets), BACKOFF_BATCH):
            ctx = contexts[i : i + BACKOFF_BATCH, contexts.shape[1] - n + 1 :]
            tail = self.backoff.next_logprobs(ctx)[:, K:]
            t = targets[i : i + BACKOFF_BATCH] - K
            out[i : i + len(t)] = tail[np.arange(len(t)), t] - logsumexp(tail, axis=1)
        return out

    def coverage(self, targets: np.ndarray) -> float:
        """Share of ``targets`` inside the short-list."""
        if not len(targets):
            return 1.0
        return float(np.mean(np.asarray(targets) < self.shortlist))


NPLM = NeuralLM  # the name of the paper's model, kept for the API
LOG_Z_WARN = 0.1  # mean |log Z| above this: raw scores are not probabilities


def scoring_report(parts: list[NeuralLM], streams: list[Stream]) -> tuple[dict, list[str]]:
    """What ``nnlm eval`` and ``score`` add for neural models: short-list coverage and,
    under self-normalized scoring, log Z statistics, over the texts ``streams``; with
    warnings where |log Z| is large. Keys get a suffix _i when there are several networks
    (a mixture)."""
    report, warnings = {}, []
    targets = np.concatenate([s.ids for s in streams]) if streams else np.zeros(0, np.int32)
    for i, lm in enumerate(parts):
        key = "" if len(parts) == 1 else f"_{i}"
        if lm.shortlist is not None:
            report[f"shortlist{key}"] = lm.shortlist
            report[f"shortlist_coverage{key}"] = lm.coverage(targets)
        if lm.self_normalized:
            stats = lm.log_z_stats(np.concatenate([s.contexts(lm.order) for s in streams]))
            report.update({f"{k}{key}": v for k, v in stats.to_dict().items()})
            if stats.mean_abs > LOG_Z_WARN:
                warnings.append(
                    f"mean |log Z| = {stats.mean_abs:.3f} over {stats.tokens:,} tokens: raw "
                    "scores are not normalized probabilities; train with objective=selfnorm "
                    "or nce, or score without self_normalized=True")
    return report, warnings


def check_backoff(backoff, vocab: Vocabulary, K: int) -> None:
    """A short-list's n-gram model: present, over the same vocabulary, K < |V|."""
    if backoff is None:
        raise NnlmError(f"a short-list of {K} words needs an n-gram model for the words "
                        "outside it (shortlist_backoff=MODEL)")
    if backoff.vocab != vocab:
        raise NnlmError(f"the short-list's n-gram model has another vocabulary "
                        f"({len(backoff.vocab):,} words, fingerprint {backoff.vocab.fingerprint}) "
                        f"than the network ({len(vocab):,}, {vocab.fingerprint}); train it on "
                        "the same text with the same vocabulary settings")
    if not 3 <= K < len(vocab):
        raise NnlmError(f"a short-list needs 3 <= K < |V| = {len(vocab):,}, got {K}")

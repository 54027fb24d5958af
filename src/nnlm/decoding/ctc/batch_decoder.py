"""A batch of utterances decoded at once, on the CPU or a GPU: pyctcdecode's settings and
fusion over :mod:`.batched`'s tensor search.

    decoder = build_batch_decoder(labels, "lm.arpa", device="cuda")
    texts = decoder.decode_batch(logits)          # [N, T, L], or a list of [T_i, L]

``build_batch_decoder`` takes :func:`~nnlm.pyctcdecode.build_ctcdecoder`'s arguments
(labels, model, unigrams, alpha, beta, unk_score_offset, lm_score_boundary) and a
``device``; any model nnlm loads: an ARPA file or KenLM binary (read into nnlm's back-off
arrays, placed on the device), an nnlm n-gram model, a network (run where it is placed),
a mixture. ``decode_beams_batch`` gives each utterance's beams with their scores; both
take pyctcdecode's ``hotwords`` and ``hotword_weight``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Collection, Iterable, Sequence

import numpy as np
import torch

from ...base.checks import flag, integer, number
from ...models import LanguageModel as NnlmLanguageModel
from ...models import load_model
from ...text.specials import BOS_ID, NO_WORD, SPECIALS
from ..dense import tensor_lm
from ..whole_line import reads_whole_line
from .alphabet import Alphabet
from .batched import MAX_BATCH, BatchBeam, BatchedSearch, Fusion, Settings
from .fusion import (
    DEFAULT_ALPHA,
    DEFAULT_BETA,
    DEFAULT_SCORE_LM_BOUNDARY,
    DEFAULT_UNK_LOGP_OFFSET,
    weight,
)
from .fusion import LanguageModel as FusedLanguageModel
from .hotwords import DEFAULT_HOTWORD_WEIGHT, HotwordScorer
from .prefix_search import (
    DEFAULT_BEAM_WIDTH,
    DEFAULT_MIN_TOKEN_LOGP,
    DEFAULT_PRUNE_BEAMS,
    DEFAULT_PRUNE_LOGP,
    MIN_TOKEN_CLIP_P,
    looks_like_probabilities,
)
from .word_table import HotwordTable, WordTable


def as_log_probs(logits, width: int, device: torch.device
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """[N, T, L] float64 log-probabilities on ``device`` and [N] lengths, from a tensor or
    array [N, T, L] or a list of [T_i, L] (padded): probabilities (rows summing to 1) by
    their log, anything else by a log-softmax, clipped at 1e-15 as pyctcdecode clips.
    Which is which is decided per utterance as ``decode`` decides it (pyctcdecode's
    rule, in the caller's dtype)."""
    if isinstance(logits, (list, tuple)):
        parts = [torch.as_tensor(_numeric(x, f"logits[{i}]", 2)) for i, x in enumerate(logits)]
        lengths = torch.tensor([len(p) for p in parts], dtype=torch.int64, device=device)
        T = max((len(p) for p in parts), default=0)
        out = torch.zeros((len(parts), T, width), dtype=torch.float64, device=device)
        for i, p in enumerate(parts):
            _width(p, width, f"logits[{i}]")
            out[i, :len(p)] = p.to(device, torch.float64)
    else:
        out = torch.as_tensor(_numeric(logits, "logits", 3)).to(device, torch.float64)
        _width(out, width, "logits")
        lengths = torch.full((out.shape[0],), out.shape[1], dtype=torch.int64, device=device)
    frames = torch.arange(out.shape[1], device=device)[None, :] < lengths[:, None]
    if bool(torch.isnan(out[frames]).any()) or bool((out[frames] == math.inf).any()):
        raise ValueError("logits hold NaN or +inf: the acoustic model's output is broken")
    given = [_host(p) for p in parts] if isinstance(logits, (list, tuple)) else _host(logits)
    probs = torch.tensor([looks_like_probabilities(x) for x in given], dtype=torch.bool,
                         device=device)
    with torch.no_grad():
        as_probs = torch.log(out.clamp(MIN_TOKEN_CLIP_P, 1))
        as_logits = torch.log_softmax(torch.where(frames[..., None], out, 0.0), dim=2)
    floor = math.log(MIN_TOKEN_CLIP_P)
    lp = torch.where(probs[:, None, None], as_probs, as_logits.clamp(floor, 0))
    return lp, lengths


def _host(x) -> np.ndarray:
    """Logits as the caller gave them, in their dtype, on the host (one copy for a whole
    batch): where pyctcdecode's rule is applied (bfloat16, which numpy lacks, as
    float32)."""
    if isinstance(x, torch.Tensor):
        x = x.detach()
        return (x.float() if x.dtype == torch.bfloat16 else x).cpu().numpy()
    return np.asarray(x)


def _numeric(x, name: str, rank: int):
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        raise ValueError(f"{name} must be a tensor or numpy array, not {type(x).__name__}")
    if getattr(x, "ndim", None) != rank:
        raise ValueError(f"{name} has {x.ndim} dimensions, but needs {rank}: "
                         f"{'(batch, time, vocabulary)' if rank == 3 else '(time, vocabulary)'}")
    if isinstance(x, torch.Tensor):
        numbers = not (x.dtype.is_complex or x.dtype == torch.bool)
    else:
        numbers = np.dtype(dtype).kind in "iuf"
    if not numbers:
        raise ValueError(f"{name} must be real numbers, not {dtype}")
    return x


def _width(x, width: int, name: str) -> None:
    if x.shape[-1] != width:
        raise ValueError(f"{name} shape is {tuple(x.shape)}, but the alphabet has {width} "
                         "labels")


class BatchDecoderCTC:
    """A batch decoder for one alphabet and LM on one device (module docstring)."""

    def __init__(self, alphabet: Alphabet, model: NnlmLanguageModel | None = None,
                 unigrams: Collection[str] | None = None, alpha: float = DEFAULT_ALPHA,
                 beta: float = DEFAULT_BETA, unk_score_offset: float = DEFAULT_UNK_LOGP_OFFSET,
                 lm_score_boundary: bool = DEFAULT_SCORE_LM_BOUNDARY,
                 device: str | torch.device = "cpu", log_add: bool = True):
        self.device = torch.device(device)
        self.alphabet = alphabet
        self.log_add = flag(log_add, "log_add")
        self.fusion = Fusion(weight(alpha, "alpha"), weight(beta, "beta"),
                             weight(unk_score_offset, "unk_score_offset"),
                             bool(lm_score_boundary))
        step, words, log10 = None, [], np.zeros(0)
        if model is not None and reads_whole_line(model):
            raise ValueError(f"the model reads the whole line (order {model.order}), which "
                             "the batch decoder's fixed contexts cannot hold; decode it with "
                             "build_ctcdecoder (one utterance at a time, any model)")
        pad = NO_WORD if hasattr(model, "state_lengths") else BOS_ID  # nnlm.kenlm's null
        if model is not None:
            step = tensor_lm(model, self.device)
            words = list(model.vocab.words)
            null = torch.full((1, step.k), pad, dtype=torch.int64, device=self.device)
            log10 = step.advance(null, log10=True)[0].to(torch.float64).cpu().numpy()
            if unigrams is None:
                unigrams = [w for w in words if w not in SPECIALS]
        listed = None if unigrams is None else set(unigrams) & set(words)
        table = WordTable(words, log10, listed, alphabet.labels, alphabet.is_bpe, self.device)
        self._search = BatchedSearch(table, step, self.fusion, pad)

    @classmethod
    def from_decoder(cls, decoder, device: str | torch.device = "cpu") -> BatchDecoderCTC:
        """The batch decoder of a pyctcdecode-API decoder (``build_ctcdecoder``'s, or
        transformers' ``processor.decoder``): its labels, its model (loaded from the file
        it was opened from) and its weights."""
        lm = decoder.model_container[decoder._model_key]  # where pyctcdecode keeps it
        alphabet = Alphabet(decoder._alphabet.labels, decoder._alphabet.is_bpe)
        log_add = getattr(decoder, "log_add", True)
        if lm is None:
            return cls(alphabet, device=device, log_add=log_add)
        source = getattr(getattr(lm, "_kenlm_model", None), "path", b"")
        if not isinstance(lm, FusedLanguageModel) or not source:
            raise ValueError("the decoder's language model has no file to load (a model "
                             "object, or several models): build the batch decoder from "
                             "the model itself with build_batch_decoder")
        model = load_model(os.fsdecode(source), verify=False)
        return cls(alphabet, model, lm.unigrams, lm.alpha, lm.beta, lm.unk_score_offset,
                   lm.score_boundary, device, log_add)

    def reset_params(self, alpha: float | None = None, beta: float | None = None,
                     unk_score_offset: float | None = None,
                     lm_score_boundary: bool | None = None) -> None:
        """New fusion weights, in place (None: unchanged)."""
        for name, value in (("alpha", alpha), ("beta", beta),
                            ("unk_score_offset", unk_score_offset)):
            if value is not None:
                setattr(self.fusion, name, weight(value, name))
        if lm_score_boundary is not None:
            self.fusion.score_boundary = bool(lm_score_boundary)

    def decode_beams_batch(self, logits, beam_width: int = DEFAULT_BEAM_WIDTH,
                           beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                           token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                           prune_history: bool = DEFAULT_PRUNE_BEAMS,
                           hotwords: Iterable[str] | None = None,
                           hotword_weight: float = DEFAULT_HOTWORD_WEIGHT
                           ) -> list[list[BatchBeam]]:
        """Each utterance's beams, best first: (text, logit_score, lm_score), as
        pyctcdecode's ``decode_beams`` gives them (``hotwords`` as there)."""
        return self._decode(logits, beam_width, beam_prune_logp, token_min_logp,
                            prune_history, hotwords, hotword_weight, best_only=False)

    def _decode(self, logits, beam_width, beam_prune_logp, token_min_logp, prune_history,
                hotwords, hotword_weight, best_only: bool) -> list[list[BatchBeam]]:
        settings, hot = self._prepared(beam_width, beam_prune_logp, token_min_logp,
                                       prune_history, hotwords, hotword_weight)
        lp, lengths = self._log_probs(logits)
        return self._search.run(lp, lengths, settings, hot, best_only) if len(lp) else []

    def stream(self, utterances: int, beam_width: int = DEFAULT_BEAM_WIDTH,
               beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
               token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
               prune_history: bool = DEFAULT_PRUNE_BEAMS,
               hotwords: Iterable[str] | None = None,
               hotword_weight: float = DEFAULT_HOTWORD_WEIGHT) -> BatchStream:
        """A batch of ``utterances`` streams decoded together, fed chunk by chunk
        (:class:`BatchStream`); the settings are :meth:`decode_beams_batch`'s."""
        integer(utterances, "utterances", 1, MAX_BATCH)
        settings, hot = self._prepared(beam_width, beam_prune_logp, token_min_logp,
                                       prune_history, hotwords, hotword_weight)
        return BatchStream(self, self._search.begin(utterances, settings, hot))

    def _prepared(self, beam_width, beam_prune_logp, token_min_logp, prune_history,
                  hotwords, hotword_weight) -> tuple[Settings, HotwordTable | None]:
        """The settings checked, and the hotwords' table (None: none)."""
        integer(beam_width, "beam_width", 1)
        number(beam_prune_logp, "beam_prune_logp", high=0)
        number(token_min_logp, "token_min_logp", high=0)
        weight(hotword_weight, "hotword_weight")
        hot = None
        if hotwords is not None:
            scorer = HotwordScorer.build_scorer(hotwords, hotword_weight)
            if scorer.trie_words:
                hot = HotwordTable(scorer, hotword_weight, self.device)
        return Settings(beam_width, beam_prune_logp, token_min_logp, bool(prune_history),
                        flag(self.log_add, "log_add")), hot

    def _log_probs(self, logits) -> tuple[torch.Tensor, torch.Tensor]:
        lp, lengths = as_log_probs(logits, len(self.alphabet.labels), self.device)
        if lp.shape[0] > MAX_BATCH:
            raise ValueError(f"logits hold {lp.shape[0]:,} utterances; decode at most "
                             f"{MAX_BATCH:,} at a time")
        return lp, lengths

    def decode_batch(self, logits, beam_width: int = DEFAULT_BEAM_WIDTH,
                     beam_prune_logp: float = DEFAULT_PRUNE_LOGP,
                     token_min_logp: float = DEFAULT_MIN_TOKEN_LOGP,
                     hotwords: Iterable[str] | None = None,
                     hotword_weight: float = DEFAULT_HOTWORD_WEIGHT) -> list[str]:
        """Each utterance's best text, as pyctcdecode's ``decode`` gives it (history
        pruned)."""
        return [beams[0].text for beams in self._decode(
            logits, beam_width, beam_prune_logp, token_min_logp, True, hotwords,
            hotword_weight, best_only=True)]


class BatchStream:
    """Utterances decoded as their frames arrive, all in one search: :meth:`feed` each
    chunk (an array [N, T, L], or a list of N arrays [T_i, L], T_i 0 where an utterance
    has nothing new), :meth:`decode_beams` or :meth:`decode` at any point for the beams
    or texts as if the utterances ended there. Chunked, a batch gives what it gives
    whole."""

    def __init__(self, decoder: BatchDecoderCTC, run):
        self._decoder, self._run = decoder, run

    def feed(self, logits) -> None:
        """The next chunk of every utterance's frames."""
        lp, lengths = self._decoder._log_probs(logits)
        self._run.feed(lp, lengths)

    def decode_beams(self) -> list[list[BatchBeam]]:
        """Each utterance's beams so far, best first: (text, logit_score, lm_score)."""
        return self._run.finish()

    def decode(self) -> list[str]:
        """Each utterance's best text so far."""
        return [beams[0].text for beams in self._run.finish(best_only=True)]


def build_batch_decoder(labels: Sequence[str],
                        kenlm_model_path: str | os.PathLike | NnlmLanguageModel | None = None,
                        unigrams: Collection[str] | None = None, alpha: float = DEFAULT_ALPHA,
                        beta: float = DEFAULT_BETA,
                        unk_score_offset: float = DEFAULT_UNK_LOGP_OFFSET,
                        lm_score_boundary: bool = DEFAULT_SCORE_LM_BOUNDARY,
                        device: str | torch.device = "cpu", log_add: bool = True
                        ) -> BatchDecoderCTC:
    """A batch decoder for ``labels`` with the model at ``kenlm_model_path`` (any model
    nnlm loads, or one already loaded; None: no LM) on ``device``; the other arguments
    are :func:`~nnlm.pyctcdecode.build_ctcdecoder`'s."""
    log_add = flag(log_add, "log_add")
    model = kenlm_model_path
    if model is not None and not isinstance(model, NnlmLanguageModel):
        model = load_model(os.fspath(model), verify=False)
    return BatchDecoderCTC(Alphabet.build_alphabet(list(labels)), model, unigrams, alpha,
                           beta, unk_score_offset, lm_score_boundary, device, log_add)

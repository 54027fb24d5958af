"""The LanguageModel interface every nnlm model speaks, and evaluation on top of it.

Conventions (the ones KenLM uses; every number nnlm prints follows them):

* Natural logarithms everywhere in the API; the CLI's ``score`` prints log10 as KenLM's
  ``query`` does and says so in its column names.
* Each line is a sentence. ``<s>`` is context only: it pads the start of each line and
  is never predicted (every model gives it probability 0). ``</s>`` is predicted at
  the end of each line and counts as a token.
* Words outside the vocabulary map to ``<unk>``, whose probability is the model's
  estimate for the class of rare words; they are predicted and counted, never dropped.
  :class:`Evaluation` reports how many there were and the perplexity without them.
* Perplexity = exp(total NLL / predicted tokens), weighted by tokens, never a mean of
  per-batch perplexities.

A model implements :meth:`LanguageModel.next_logprobs` (the full next-word distribution
for a batch of contexts). The per-token :meth:`~LanguageModel.target_logprobs` has a
default built on it; count-based models override it with a direct lookup.

Good: ``model.logprobs(stream)`` -> one float64 per ``stream.ids`` slot.
Bad: averaging ``exp(-mean)`` over sentences: short sentences would weigh as much as long ones.
"""

from __future__ import annotations

import math
import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .base.checks import integer
from .base.errors import NnlmError
from .base.progress import progress_bar
from .generate import generate
from .model_files import header_binding, read_arrays, write_arrays
from .text.corpus import read_stream
from .text.stream import Stream
from .text.vocab import BOS_ID, EOS_ID, UNK_ID, Vocabulary

LOG10_E = math.log10(math.e)
DAMAGED = "it is damaged, or its weights overflow"  # what a probability of 0 means


class LanguageModel(ABC):
    """p(w_t | w_{t-n+1}, ..., w_{t-1}) over a fixed vocabulary.

    Attributes:
        vocab: the model's vocabulary; ids in every array refer to it.
        order: n, the number of words in an n-gram: the model conditions on n-1 words.
    """

    vocab: Vocabulary
    order: int
    # whether save_model derives the model's id from its one trie file's content (the
    # back-off models: nnlm.model_files.ContentBinding), or draws a new one a save
    bound_by_content = False
    # what a probability of 0 (a log of -inf) for a token means, in the error that refuses it
    zero_means = DAMAGED

    def __repr__(self) -> str:
        """What the model is, at a glance: its kind, n, |V|, its n-grams or parameters
        where it knows them, and the file it came from.

        >>> import nnlm
        >>> nnlm.train(["a b", "b a"] * 5, method="kn", order=2, discount_fallback=True)
        <KneserNey kn: order 2, |V| = 5, n-grams 5 / 6>
        """
        parts = [f"order {self.order}", f"|V| = {len(self.vocab):,}"]
        counts = getattr(self, "num_ngrams", None)
        if callable(counts):
            try:
                parts.append("n-grams " + " / ".join(f"{c:,}" for c in counts()))
            except (AttributeError, TypeError, ValueError, NotImplementedError):
                pass
        net = getattr(self, "model", None)
        params = getattr(getattr(net, "config", None), "num_parameters", None)
        if callable(params):
            parts.append(f"{params():,} parameters")
        source = getattr(self, "loaded_from", None)
        if isinstance(source, (str, os.PathLike)):
            parts.append(f"from {os.fspath(source)}")
        kind = getattr(self, "kind", "model")
        return f"<{type(self).__name__} {kind}: {', '.join(parts)}>"

    @abstractmethod
    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        """Log-distributions over the next word.

        Args:
            contexts: int array (B, order-1) of word ids, oldest first, ``<s>``-padded.
        Returns:
            float64 (B, |V|): natural-log probabilities; each row sums to 1 in
            probability, with ``-inf`` for ``<s>``.
        """

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """float64 (B,): log p(targets[i] | contexts[i]). Override for speed."""
        out = np.empty(len(targets), dtype=np.float64)
        step = max(1, (1 << 22) // max(1, len(self.vocab)))  # ~32 MB of float64 at a time
        for lo in range(0, len(targets), step):
            dist = self.next_logprobs(contexts[lo : lo + step])
            out[lo : lo + step] = dist[np.arange(len(dist)), targets[lo : lo + step]]
        return out

    def logprobs(self, stream: Stream, batch_size: int = 1 << 16) -> np.ndarray:
        """float64, one natural-log probability per predicted token of ``stream``
        (with progress, on a terminal or in the log, when it takes a while)."""
        batch_size = integer(batch_size, "batch_size", 1)
        out = np.empty(len(stream), dtype=np.float64)
        lo = 0
        batches = stream.batches(self.order, batch_size)
        if len(stream) <= batch_size:  # one call: nothing to show progress on
            for contexts, targets in batches:
                out[: len(targets)] = self.target_logprobs(contexts, targets)
            return out

        with progress_bar(len(stream), f"scoring ({getattr(self, 'kind', 'model')})",
                          "tokens", delay=2.0) as bar:
            for contexts, targets in batches:
                out[lo : lo + len(targets)] = self.target_logprobs(contexts, targets)
                lo += len(targets)
                bar.update(len(targets))
        return out

    def sentence_logprob(self, sentence: str | Sequence[str]) -> float:
        """Natural-log probability of one sentence, ``</s>`` included, ``<s>`` as context.

        Good: ``model.sentence_logprob("the cat sat")`` (words split on whitespace).
        Bad: ``model.sentence_logprob("<s> the cat sat </s>")``: boundaries are added here,
        so this raises NnlmError rather than score a sentence with ``<s>`` inside.
        """
        words = self.vocab.split(sentence) if isinstance(sentence, str) else list(sentence)
        if not words:  # the empty sentence: just </s> after <s>
            contexts = np.full((1, self.order - 1), BOS_ID, dtype=np.int32)
            return float(self.target_logprobs(contexts, np.array([EOS_ID], np.int32))[0])
        return float(self.logprobs(Stream.from_lines([words], self.vocab)).sum())

    def score(self, word: str, context: Sequence[str] | str = ()) -> float:
        """p(word | context), as nltk.lm's ``score``: ``context`` the words before
        ``word`` (a string is split), of which the last n-1 are used. A shorter context is
        the null context (no words) where the model has one, as KenLM's, and the start of
        a sentence otherwise; put ``"<s>"`` first to mean the start of a sentence.

        Good: ``lm.score("sat", ["the", "cat"])``, ``lm.score("</s>", "the cat sat")``.
        """
        return math.exp(self._word_logprob(word, context))

    def logscore(self, word: str, context: Sequence[str] | str = ()) -> float:
        """log2 p(word | context), as nltk.lm's ``logscore`` (base 2; every other number
        in nnlm's API is a natural log)."""
        return self._word_logprob(word, context) / math.log(2)

    def _word_logprob(self, word: str, context) -> float:
        words = self.vocab.split(context) if isinstance(context, str) else list(context)
        if not isinstance(word, str):
            raise NnlmError(f"word: a string, not {type(word).__name__}")
        if word == "<s>" or "</s>" in words or "<s>" in words[1:]:
            raise NnlmError("<s> is never predicted and may only open a context; </s> ends "
                            "a sentence, so nothing follows it")
        k = self.order - 1
        start = bool(words) and words[0] == "<s>"
        ids = [int(i) for i in self.vocab.encode(words[start:])][-k:] if k else []
        pad = BOS_ID if start or not getattr(self, "null_context", False) else -1
        contexts = np.array([[pad] * (k - len(ids)) + ids], np.int64).reshape(1, k)
        target = np.array([self.vocab.index.get(word, UNK_ID)], np.int64)
        return float(self.target_logprobs(contexts, target)[0])

    def perplexity(self, text) -> float:
        """Perplexity on text: a :class:`Stream`, a file (a :class:`~pathlib.Path`), a
        string of sentences (one a line), or a list of sentences.

        Good: ``model.perplexity("the jury said")``, ``model.perplexity(Path("test.txt"))``.
        """
        return evaluate(self, _as_stream(text, self.vocab)).perplexity

    def generate(self, n: int = 1, prompt="", **options) -> list[str]:
        """Sample ``n`` sentences (see :func:`nnlm.generate.generate` for the options)."""

        return generate(self, n, prompt, **options)

    def neural_parts(self) -> list:
        """The neural LanguageModels inside this model (for devices and scoring modes)."""
        return []

    # -- persistence (nnlm.models.save_model / load_model; nnlm.model_files) -----------
    def config(self) -> dict:
        """The settings that rebuild the model with its files (config.json's ``config``)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")

    def arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError(f"{type(self).__name__} cannot be saved")

    def save_files(self, directory: Path, binding: str, save) -> None:
        """Write the model's own files into ``directory`` (default: ``arrays()`` as
        arrays.npz, plus any human-readable extras). ``binding`` (see
        :func:`~nnlm.model_files.array_binding`) goes into every array file; ``save``
        (``nnlm.models.save_model``) writes a model nested inside this one."""
        write_arrays(directory / "arrays.npz", self.arrays(), binding)
        if hasattr(self, "write_extra_files"):  # e.g. classes.tsv
            self.write_extra_files(directory)

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab: Vocabulary, load) -> LanguageModel:
        """The model saved in ``path`` (default: ``from_saved`` on its arrays.npz);
        ``load`` (``nnlm.models.load_model``) reads a model nested inside this one."""
        arrays = read_arrays(Path(path) / "arrays.npz", header_binding(header))
        problem = cls.saved_array_problem(arrays)
        if problem:
            raise NnlmError(f"{Path(path) / 'arrays.npz'}: {problem}; the model is corrupt")
        return cls.from_saved(vocab, header["config"], arrays)

    @classmethod
    def saved_array_problem(cls, arrays: dict) -> str | None:
        """What is wrong with a model's saved arrays beyond NaN and +inf (which every load
        refuses), or None; a kind whose arrays may not hold -inf says so here."""
        return None

    @classmethod
    def from_saved(cls, vocab: Vocabulary, config: dict, arrays: dict) -> LanguageModel:
        raise NotImplementedError(f"{cls.__name__} cannot be loaded from arrays")


def logsumexp(a: np.ndarray, axis: int) -> np.ndarray:
    """log sum exp(a) along ``axis`` in float64, -inf where every entry is -inf.

    >>> float(logsumexp(np.log(np.array([[0.25, 0.25, 0.5]])), axis=1)[0])
    0.0
    """
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.squeeze(m, axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def _as_stream(text, vocab: Vocabulary) -> Stream:
    """A Stream from a Stream, a path (file), a string (sentences, one a line) or a list."""
    if isinstance(text, Stream):
        return text
    if isinstance(text, str):
        if "\n" not in text and len(text.split()) == 1 and Path(text).is_file():
            raise NnlmError(f"{text!r} is a string, read as a one-word sentence, but it names "
                            f"a file; pass Path({text!r}) to read the file")
        text = text.splitlines()
    if isinstance(text, (list, tuple)):
        return Stream.from_lines([vocab.split(s) if isinstance(s, str) else s for s in text],
                                 vocab)

    return read_stream(text, vocab)


@dataclass(frozen=True)
class Evaluation:
    """What ``nnlm eval`` reports: totals in nats, counts, and perplexities."""

    tokens: int  # predicted tokens: words + one </s> per line
    sentences: int
    unk: int  # predicted tokens that were <unk> (out-of-vocabulary or literal <unk>)
    nll: float  # total negative log-likelihood, natural log
    perplexity: float
    perplexity_without_unk: float  # the same, with <unk> tokens left out (SRILM's convention)

    @property
    def log10_prob(self) -> float:
        return -self.nll * LOG10_E

    def to_dict(self) -> dict:
        return {**asdict(self), "log10_prob": self.log10_prob}


MAX_MEAN_NLL = 700.0  # exp(700) ~ 1e304: a perplexity beyond it is no float


def check_logprobs(logprobs: np.ndarray, stream: Stream, vocab: Vocabulary | None = None,
                   why: str = DAMAGED) -> np.ndarray:
    """The one place where a model's per-token scores become numbers for the user: every
    log-probability must be finite. A NaN or a probability of 0 (-inf) comes from a
    damaged model (or one whose finite weights overflow), and is refused in one line
    naming the token (``why``: what such a score means, the model's ``zero_means``),
    never printed or summed into a perplexity. (Scores above 0 are let
    through: self-normalized scoring gives them, and normalized models cannot.)"""
    logprobs = np.asarray(logprobs, dtype=np.float64)
    bad = ~np.isfinite(logprobs)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[0])
        value = float(logprobs[i])
        what = ("NaN" if math.isnan(value) else "probability 0 (log -inf)" if value < 0
                else "an infinite log-probability")
        line = int(np.searchsorted(stream.offsets, i, side="right")) - 1
        word = vocab.words[stream.ids[i]] if vocab is not None else f"id {int(stream.ids[i])}"
        raise NnlmError(f"the model gives {what} to '{word}' (token {i - stream.offsets[line] + 1}"
                        f" of sentence {line + 1}): {why}; "
                        "no score is reported")
    return logprobs


def _perplexity(nll: float, tokens: int) -> float:
    if not tokens:
        return float("nan")
    if nll / tokens > MAX_MEAN_NLL:
        raise NnlmError(f"the perplexity, e^{nll / tokens:.4g}, is beyond floating point: "
                        "the model gives these tokens vanishing probabilities")
    return math.exp(nll / tokens)


def evaluation_from_logprobs(stream: Stream, logprobs: np.ndarray,
                             vocab: Vocabulary | None = None, why: str = DAMAGED
                             ) -> Evaluation:
    """Totals from per-token log-probabilities (float64), as :func:`evaluate` reports them;
    the scores are checked first (:func:`check_logprobs`; ``vocab`` names the token)."""
    if len(logprobs) != len(stream):
        raise ValueError("one log-probability per predicted token expected")
    logprobs = check_logprobs(logprobs, stream, vocab, why)
    known = stream.ids != UNK_ID
    nll = float(-logprobs.sum())
    n_known = int(known.sum())
    nll_known = float(-logprobs[known].sum())
    return Evaluation(
        tokens=len(stream),
        sentences=stream.num_lines,
        unk=len(stream) - n_known,
        nll=nll,
        perplexity=_perplexity(nll, len(stream)),
        perplexity_without_unk=_perplexity(nll_known, n_known),
    )


def check_normalized_scores(model: LanguageModel, what: str) -> None:
    """Refuse ``what`` (a perplexity, a mixture) for a model whose scores are not
    probabilities (Stupid Backoff's do not sum to 1)."""
    if not getattr(model, "normalized", True):
        raise NnlmError(f"{what} needs probabilities, and a {model.kind} model gives scores "
                        "that do not sum to 1; score or rescore with it instead")


def evaluate(model: LanguageModel, stream: Stream) -> Evaluation:
    """Perplexity and totals of ``model`` on ``stream`` (see the module's conventions)."""
    check_normalized_scores(model, "a perplexity")
    return evaluation_from_logprobs(stream, model.logprobs(stream), model.vocab,
                                    model.zero_means)

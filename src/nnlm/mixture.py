"""Mixtures of language models over one vocabulary (Bengio et al. 2003, section 4.1).

    p(w | h) = sum_k a_k(q) p_k(w | h)

with weights that are fixed (the paper's 0.5 / 0.5), learned by EM on validation data
(maximum likelihood), or conditional on the frequency bucket q of the context, with the
buckets of the deleted-interpolation trigram: q = ceil(-ln((1 + n(w_{t-1}, w_{t-2})) / T)),
n counted on train. Components are any LanguageModels (count-based, neural, mixtures);
the mixture only ever sees their per-token log-probabilities, mixed in log space.

Saved as a directory: ``config.json`` names the components (paths relative to it) and
the weights; ``arrays.npz`` holds the bucket weights and context counts.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .base.errors import NnlmError
from .base.sorted_keys import lookup_counts
from .interpolation import fit_shifted_weights, frequency_bucket
from .lm import LanguageModel, check_normalized_scores, logsumexp
from .model_files import (
    array_binding,
    check_model_output,
    header_binding,
    model_identity,
    new_model_id,
    read_arrays,
    write_arrays,
    write_header,
)
from .text.fileio import atomic_path
from .text.stream import Stream

BUCKET_ORDER = 3  # buckets from the count of the two-word context, as the paper's trigram


class ContextBuckets:
    """q = ceil(-ln((1 + n(context)) / T)) for two-word contexts counted on train."""

    def __init__(self, keys: np.ndarray, counts: np.ndarray, total: int, vocab_size: int):
        self.keys, self.counts, self.total, self.V = keys, counts, int(total), vocab_size

    @classmethod
    def from_stream(cls, train: Stream, vocab_size: int) -> ContextBuckets:
        ctx = train.contexts(BUCKET_ORDER).astype(np.int64)
        keys, counts = np.unique(ctx[:, 0] * vocab_size + ctx[:, 1], return_counts=True)
        return cls(keys, counts, len(train), vocab_size)

    @property
    def n_buckets(self) -> int:
        return int(self.of_counts(np.zeros(1))[0]) + 1

    def of_counts(self, n: np.ndarray) -> np.ndarray:
        return frequency_bucket(n, self.total)

    def __call__(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts, np.int64)
        if contexts.shape[1] < 2:
            raise ValueError("context buckets need two words of context")
        keys = contexts[:, -2] * self.V + contexts[:, -1]
        return self.of_counts(lookup_counts(self.keys, self.counts, keys))


class Mixture(LanguageModel):
    """sum_k a_k(q) p_k(w | h); one weight row per bucket (a single row when unbucketed)."""

    kind = "mixture"

    def __init__(self, components: Sequence[LanguageModel], weights=None,
                 buckets: ContextBuckets | None = None):
        if len(components) < 2:
            raise NnlmError("a mixture needs at least two models")
        for m in components:
            check_normalized_scores(m, "a mixture")
        first = components[0].vocab
        for i, m in enumerate(components[1:], start=2):
            if m.vocab != first:
                raise NnlmError(f"model {i} has another vocabulary ({len(m.vocab):,} words, "
                                f"fingerprint {m.vocab.fingerprint}) than model 1 "
                                f"({len(first):,}, {first.fingerprint}); train them on the "
                                "same text with the same vocabulary settings")
        self.components, self.vocab = list(components), first
        self.buckets = buckets
        self.order = max(max(m.order for m in components), BUCKET_ORDER if buckets else 1)
        K = len(components)
        rows = buckets.n_buckets if buckets else 1
        w = np.full(K, 1.0 / K) if weights is None else np.asarray(weights, np.float64)
        if w.shape[-1] != K or np.any(w < 0) or not np.allclose(w.sum(axis=-1), 1.0):
            raise NnlmError(f"need {K} non-negative weights that sum to 1, got {w.tolist()}")
        self.weights = np.broadcast_to(w, (rows, K)).copy()

    def _rows(self, contexts: np.ndarray) -> np.ndarray:
        if self.buckets is None:
            return np.zeros(len(contexts), np.int64)
        return self.buckets(contexts)

    def _component_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """(K, N): each component's log p of each target, given its own context length."""
        return np.stack([m.target_logprobs(contexts[:, contexts.shape[1] - (m.order - 1):]
                                           if m.order > 1 else contexts[:, :0], targets)
                         for m in self.components])

    def component_logprobs(self, stream: Stream) -> np.ndarray:
        """(K, N): each component's log-probability of each predicted token of ``stream``
        (each scores the stream its own way: a recurrent network line by line); compute
        once and hand to :meth:`fit_weights` and :meth:`mix`."""
        return np.stack([m.logprobs(stream) for m in self.components])

    def bucket_contexts(self, stream: Stream) -> np.ndarray:
        """The contexts :meth:`mix` needs for ``stream``: the two words the buckets read
        (none when unbucketed), never the components' whole histories."""
        return stream.contexts(BUCKET_ORDER if self.buckets is not None else 1)

    def logprobs(self, stream: Stream, batch_size: int = 1 << 16) -> np.ndarray:
        return self.mix(self.component_logprobs(stream), self.bucket_contexts(stream))

    def mix(self, lp: np.ndarray, contexts: np.ndarray) -> np.ndarray:
        """Mixed log-probabilities (N,) from component log-probabilities ``lp`` (K, N);
        ``contexts``: at least the last two words of each (``bucket_contexts``)."""
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights[self._rows(contexts)]).T  # (K, N)
        return logsumexp(lp + logw, axis=0)

    def target_logprobs(self, contexts: np.ndarray, targets: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        return self.mix(self._component_logprobs(contexts, np.asarray(targets)), contexts)

    def next_logprobs(self, contexts: np.ndarray) -> np.ndarray:
        contexts = np.asarray(contexts)
        with np.errstate(divide="ignore"):
            logw = np.log(self.weights[self._rows(contexts)])  # (B, K)
        parts = [m.next_logprobs(contexts[:, contexts.shape[1] - (m.order - 1):]
                                 if m.order > 1 else contexts[:, :0]) + logw[:, [k]]
                 for k, m in enumerate(self.components)]
        return logsumexp(np.stack(parts), axis=0)

    def fit_weights(self, valid: Stream, iterations: int = 30,
                    component_logprobs: np.ndarray | None = None) -> list[float]:
        """EM on ``valid`` (per bucket if bucketed); returns the mean log-likelihood after
        each iteration (never decreasing). ``component_logprobs``: the (K, N) array of
        :meth:`component_logprobs`, if already computed."""
        contexts = self.bucket_contexts(valid)
        lp = component_logprobs if component_logprobs is not None else \
            self.component_logprobs(valid)
        self.weights, history = fit_shifted_weights(self.weights, lp.T, self._rows(contexts),
                                                    iterations)
        return history

    def neural_parts(self) -> list:
        return [part for m in self.components for part in m.neural_parts()]

    # -- persistence ---------------------------------------------------------------------
    def save(self, path, component_paths: Sequence[str | os.PathLike]) -> Path:
        """Write the mixture; components stay where they are, named relative to ``path``
        (``nnlm.save_model`` instead copies them into the mixture's directory)."""
        path = Path(path)
        check_model_output(path, self.kind)
        rel = [os.path.relpath(Path(p).resolve(), path.resolve()) for p in component_paths]
        ids = [model_identity(p, m) for p, m in zip(component_paths, self.components)]
        config = {**self.config(), "components": rel, "component_ids": ids}
        model_id = new_model_id()
        with atomic_path(path) as tmp:
            tmp.mkdir()
            self._write_arrays(tmp, array_binding(self.kind, self.vocab.fingerprint, config,
                                                  model_id))
            self.vocab.save(tmp / "vocab.txt")
            write_header(tmp, self.kind, self.vocab, config, model_id)
        return path

    def _write_arrays(self, directory: Path, binding: str) -> None:
        arrays = {"weights": self.weights}
        if self.buckets is not None:
            arrays.update(bucket_keys=self.buckets.keys, bucket_counts=self.buckets.counts,
                          bucket_total=np.array([self.buckets.total]))
        write_arrays(directory / "arrays.npz", arrays, binding)

    def save_files(self, directory: Path, binding: str, save) -> None:
        """The weights, and each component saved whole under ``components/K``."""
        self._write_arrays(directory, binding)
        for i, model in enumerate(self.components):
            save(model, directory / "components" / str(i))

    @classmethod
    def load_dir(cls, path: Path, header: dict, vocab, load) -> Mixture:
        """The mixture in ``path``; ``load`` (``nnlm.models.load_model``) reads each
        component, checked to be the model the weights were fitted to."""
        cfg = header["config"]
        ids = cfg.get("component_ids")  # absent in mixtures made before they were recorded
        if ids is not None and (not isinstance(ids, list) or len(ids) != len(cfg["components"])):
            raise NnlmError(f"{path / 'config.json'}: 'component_ids' should list one id per "
                            "component; the file was edited or is damaged")
        components = []
        for i, rel in enumerate(cfg["components"]):
            target = (Path(path) / rel).resolve()
            if not target.exists():
                raise NnlmError(f"{path / 'config.json'}: component {rel} ({target}) is missing")
            component = load(target)
            if ids is not None and model_identity(target, component) != ids[i]:
                raise NnlmError(f"{path / 'config.json'}: component {rel} ({target}) has "
                                "changed since the mixture was made (retrained or replaced), "
                                "so its weights no longer fit; mix the models again")
            components.append(component)
        arrays = read_arrays(Path(path) / "arrays.npz", header_binding(header))
        buckets = None
        if cfg["bucketed"]:
            buckets = ContextBuckets(arrays["bucket_keys"], arrays["bucket_counts"],
                                     int(arrays["bucket_total"][0]), len(vocab))
        return cls(components, weights=arrays["weights"], buckets=buckets)  # checks them

    def config(self) -> dict:
        return {"components": [f"components/{i}" for i in range(len(self.components))],
                "bucketed": self.buckets is not None, "weights": self.weights.tolist()}

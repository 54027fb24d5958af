"""Training any network of the family with any objective: minibatches, early stopping,
checkpoints, exact resume.

One :class:`Trainer` does it all, top to bottom:

1. seed everything; build the network, the objective (full softmax, NCE,
   self-normalization) and the optimizer (or load them from ``CKPT/state``);
2. each epoch visits every training slot once, in batches drawn from (seed, epoch) (a
   permutation of the slots; for a recurrent network, line pieces grouped by length), so
   a resumed run replays exactly the batches the interrupted one would have seen;
3. after each epoch: validation perplexity, a row of ``metrics.csv``, the learning-curve
   PNG, the best model so far in ``CKPT/model.safetensors``, the latest state in
   ``CKPT/state/``; early stopping after ``patience`` epochs without improvement;
4. a run that diverges stops with a clear message, and the last *good* checkpoint
   stays as it was: the state is saved only when the training loss since the previous
   save is finite and sane (below a uniform model's, for likelihood objectives) and, at
   the end of an epoch, when validation perplexity is finite and below |V|.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from ...base.errors import NnlmError, TrainingDiverged
from ...base.interrupts import StopOnInterrupt
from ...base.progress import progress_bar
from ...lm import LanguageModel
from ...model_files import array_binding, new_model_id
from ...text.stream import Stream
from ...text.vocab import Vocabulary
from ..batches import SlotPlan, epoch_plan
from ..networks.network import NetworkConfig
from ..nplm_lm import BACKOFF_DIR, NeuralLM
from ..optim import PaperSGD
from ..parallel.choice import choose_scheme
from ..parallel.distributed import World
from ..parallel.run_view import RunView, WorkerSetup
from ..parallel.schemes import Scheme
from ..segments import SpanPlan
from ..settings import TrainConfig
from .averaging import WeightAverage
from .cuda_graph import GraphedStep, graphed_step_for
from .parts import Parts, build_parts, complete_parts
from .run_checkpoint import RunCheckpoint, TrainState

__all__ = ["Trainer", "TrainConfig", "TrainState", "TrainingDiverged", "output_counts"]

def _perplexity(nll: float, tokens: int) -> float:
    """exp(nll / tokens) for the training loop's own checks: NaN stays NaN and an overflow
    is inf, which the divergence checks then catch (never an OverflowError)."""
    mean = nll / tokens
    return math.exp(mean) if mean <= 700 else (mean if math.isnan(mean) else math.inf)


def output_counts(train: Stream, config: NetworkConfig) -> np.ndarray:
    """Training counts of each output: of each word, or under a short-list of K words, of
    the first K and (in slot K) of all the words outside the list."""
    counts = np.bincount(train.ids, minlength=config.vocab_size).astype(np.float64)
    K = config.outputs - 1
    if config.outputs == config.vocab_size:
        return counts
    return np.concatenate([counts[:K], [counts[K:].sum()]])


class Trainer:
    """Trains one network of the family with one objective (see the module docstring).

    ``train_counts``: each output's count in the training text (NCE's noise; computed
    from the training stream when not given). ``backoff``: a short-list's n-gram model.
    Process-wide settings (threads, allocator) are the caller's: see ``runtime.py``.

    ``world``: the torch.distributed process group of a torchrun job (``distributed.py``):
    each rank trains on its share of every batch and the gradients are summed over ranks;
    with ``output_parallel`` every rank trains on the whole batch and owns a slice of the
    output layer instead (``output_parallel.py``). Rank 0 alone logs and writes.
    """

    def __init__(self, parts: Parts, vocab: Vocabulary, config: TrainConfig, outdir: Path,
                 scheme: Scheme, *, preset: str | None = None,
                 log: Callable[[str], None] = print, device: torch.device | str = "cpu",
                 backoff: LanguageModel | None = None, model_id: str | None = None,
                 save: Callable | None = None):
        self.parts, self.scheme, self.vocab, self.config = parts, scheme, vocab, config
        self.save_model = save  # nnlm.save_model, handed down: a short-list's n-gram model
        self.outdir, self.log = Path(outdir), log
        self.checkpoint = RunCheckpoint(outdir, scheme)
        self.model_id = model_id or new_model_id()
        self.preset, self.device, self.backoff = preset, torch.device(device), backoff
        self.lm = NeuralLM(vocab, self.model, bf16=config.bf16, backoff=backoff)
        self.state = TrainState()
        self.average = WeightAverage(config.average) if config.average else None
        if config.average and not scheme.supports_average:
            raise NnlmError("--average needs each process to make every update to the "
                            "whole network (not with --workers or --output-parallel)")

    @classmethod
    def build(cls, vocab: Vocabulary, model_config: NetworkConfig, config: TrainConfig,
              outdir: Path, preset: str | None = None, log: Callable[[str], None] = print,
              device: torch.device | str = "cpu", train_counts: np.ndarray | None = None,
              backoff: LanguageModel | None = None, model_id: str | None = None,
              world: World | None = None, output_parallel: bool = False,
              scheme: Scheme | None = None, save: Callable | None = None) -> Trainer:
        """A trainer with its parts built from the settings (:mod:`.parts`): the network,
        objective and optimizer, laid out for ``scheme`` (default: the one this process
        was started for, ``world`` and ``output_parallel``: :func:`choose_scheme`)."""
        device = torch.device(device)
        scheme = scheme if scheme is not None else choose_scheme(world, output_parallel)
        parts = build_parts(model_config, config, device, scheme, train_counts)
        return cls(parts, vocab, config, outdir, scheme, preset=preset, log=log,
                   device=device, backoff=backoff, model_id=model_id, save=save)

    # the parts, by name (the schemes and the CUDA graph use them)
    model = property(lambda self: self.parts.model)
    objective = property(lambda self: self.parts.objective)
    optimizer = property(lambda self: self.parts.optimizer)
    sparse = property(lambda self: self.parts.sparse)
    train_counts = property(lambda self: self.parts.train_counts)

    def ensure_ready(self, train: Stream) -> None:
        """Build NCE's noise distribution from ``train`` if it was not given."""
        if self.objective is None:
            complete_parts(self.parts, self.config, self.device, self.scheme,
                           output_counts(train, self.model.config))

    @property
    def is_main(self) -> bool:
        """True in the process that logs and writes (rank 0, or the only one)."""
        return self.scheme.is_main

    @property
    def world(self) -> World | None:
        """The torchrun job's process group, or None."""
        return self.scheme.world

    # -- header and resume -------------------------------------------------------------
    @property
    def binding(self) -> str:
        """What every weights file of this run carries (see nnlm.model_files.array_binding)."""
        return array_binding(self.lm.kind, self.vocab.fingerprint, self.lm.config(),
                             self.model_id)

    def load_state(self, header: dict | None = None) -> None:
        """The state in CKPT/state, checked to belong to this run (``header``: the
        checkpoint's config.json, whose model_id the run keeps)."""
        binding = None
        if header is not None and header.get("format_version", 1) >= 2:
            self.model_id = header["model_id"]
            binding = self.binding
        self.state = self.checkpoint.restore(self.parts, device=self.device, binding=binding,
                                             average=self.average,
                                             optimizer_name=self.config.optimizer)

    def model_tensors(self) -> dict[str, torch.Tensor]:
        """The whole model's named tensors on the CPU (output-parallel: gathered over the
        ranks, a collective every rank calls)."""
        return self.scheme.full_tensors(self.model)

    def save_state(self) -> None:
        """The latest parameters, optimizer and counters, atomically, in CKPT/state/.
        Under torchrun every rank calls it (the gathers) and rank 0 writes."""
        self.checkpoint.capture(self.parts, self.state, device=self.device,
                                binding=self.binding, average=self.average,
                                before_write=lambda: self.scheme.reseed(self.config.seed,
                                                                        self.state.step))

    # -- the loop ------------------------------------------------------------------------
    def current_lr(self) -> float:
        return self.optimizer.lr_at(self.state.step)

    def train_step(self, contexts: torch.Tensor, targets: torch.Tensor) -> tuple[float, int]:
        """One update on a batch (ids on any device; targets are word ids: a short-list
        network learns ``min(target, K)``). Returns the summed loss and the number of
        examples, over all ranks of a data-parallel job (whose ``contexts`` and ``targets``
        are this rank's share of the batch)."""
        cfg, net = self.config, self.model
        net.train()
        contexts = contexts.to(self.device, non_blocking=True)
        targets = targets.to(self.device, non_blocking=True)
        if net.config.outputs < net.config.vocab_size:
            targets = targets.clamp(max=net.config.outputs - 1)
        sgd = isinstance(self.optimizer, PaperSGD)
        loss = self.scheme.loss(self.objective, net, contexts, targets, cfg.bf16, self.sparse)
        value, n = (float(loss.detach()) if loss is not None else 0.0), len(targets)
        value, n = self.scheme.total(value, n)  # every rank decides on the whole batch's loss
        per_token = value / n
        if not math.isfinite(per_token) or per_token > self.objective.loss_limit(
                net.config.outputs):
            self._diverged(f"loss {per_token:.4g} per token")
        self.optimizer.zero_grad()
        if loss is not None:
            penalty = net.take_penalty()  # AR/TAR: reported losses stay the NLL alone
            if penalty is not None:
                loss = loss + penalty * len(targets)
            (loss if sgd else loss / n).backward()
        self.scheme.exchange()
        if cfg.clip:
            self.scheme.clip(net, cfg.clip)
        self.optimizer.step(self.state.step, n)
        return value, n

    def _diverged(self, what: str) -> None:
        saved = self.checkpoint.saved_step()
        if saved is not None:
            kept = (f"the last good checkpoint ({self.checkpoint.folder}, update "
                    f"{saved}) is kept. Continue from it with resume=True and a lower "
                    f"lr= (now {self.config.lr:g}) or clip=1.0")
        else:
            kept = (f"no checkpoint was good yet. Rerun with a lower lr= (now "
                    f"{self.config.lr:g}) or clip=1.0")
        raise TrainingDiverged(f"training diverged at update {self.state.step} ({what}); {kept}")

    SANITY_TOKENS = 4096
    interrupt = StopOnInterrupt()  # replaced by fit's own while it runs

    def check_sane(self, valid: Stream) -> None:
        """Raise TrainingDiverged unless the current weights are sane: their exact NLL on
        the first SANITY_TOKENS validation tokens is finite and at most a uniform model's
        log |V| plus one nat. Checked before every save, on the weights being saved (the
        training loss of a batch is measured before its update, so it cannot vouch for
        them)."""
        if self.model.recurrent:  # whole lines, read once each (their contexts are long)
            head = valid.first_lines(self.SANITY_TOKENS)
            nll = -float(np.mean(self.lm.logprobs(head)))
        else:
            if not hasattr(self, "_sanity"):
                n = min(len(valid), self.SANITY_TOKENS)
                self._sanity = (valid.contexts(self.lm.order, np.arange(n)), valid.ids[:n])
            nll = self.scheme.mean_nll(self.lm, *self._sanity)
        limit = math.log(self.model.config.vocab_size) + 1  # sane_perplexity's, in nats
        if not nll <= limit:  # NaN fails too
            self._diverged(f"the weights score {nll:.4g} nats per validation token, worse "
                           f"than a uniform model's {limit - 1:.4g} by more than one")

    def sane_perplexity(self, ppl: float) -> bool:
        """Whether a validation perplexity is one a training run can have: finite and at
        most e times a uniform model's |V| (one nat per token worse). A network that has
        barely started scores about |V|, a little above it as often as below; a run that
        diverges scores far past it, or inf, or NaN (which fails the test too)."""
        return ppl <= math.e * self.model.config.vocab_size

    def evaluate(self, stream: Stream) -> float:
        """Exact perplexity (full normalization) of the current model on ``stream``; under
        torchrun every rank calls it (data-parallel ranks score a share each and the
        NLL and token counts are all-reduced)."""
        return _perplexity(*self.scheme.nll_sum(self.lm, stream))

    def fit(self, train: Stream, valid: Stream, max_steps: int | None = None,
            checkpoint_every: int = 0) -> dict:
        """Train until done (or until ``max_steps`` updates: then save and return early).
        Ctrl-C stops it after the current update, always (see :mod:`nnlm.base.interrupts`);
        the last checkpoint is kept."""
        self.ensure_ready(train)
        try:
            with StopOnInterrupt() as self.interrupt:
                self._view = self._run_view()
                with self.scheme.running(self._view, train):
                    result = self._fit(train, valid, max_steps, checkpoint_every)
        except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: say what was kept (main prints)
            raise type(e)(self._kept_note()) from None
        return self.scheme.finish(result, self.log)

    def _run_view(self) -> RunView:
        """What the scheme may touch of this run while one fit trains."""
        setup = WorkerSetup(type(self).build, self.vocab, self.model.config, self.config,
                            self.outdir, self.preset, self.train_counts, self.model_id)
        return RunView(self.model, self.optimizer, self.state, self.interrupt.check,
                       self.checkpoint.folder, setup, self.train_batches)

    def _write_header(self) -> None:
        self.checkpoint.write_header(self.lm, self.model_id, self.preset, self.config)

    def _kept_note(self) -> str:
        """What an interrupted run leaves, as the interrupt's message."""
        saved = self.checkpoint.saved_step() if self.is_main else None
        if saved is None:
            return (f"stopped at update {self.state.step}, before any checkpoint; nothing to "
                    "resume from")
        return (f"stopped at update {self.state.step}; its checkpoint of update {saved} is "
                f"kept in {self.outdir}: continue with the same command and resume=True")

    def _fit(self, train: Stream, valid: Stream, max_steps: int | None,
             checkpoint_every: int) -> dict:
        cfg, st = self.config, self.state
        if self.is_main:
            self.outdir.mkdir(parents=True, exist_ok=True)
            self._write_header()
            self.vocab.save(self.outdir / "vocab.txt")
            if self.backoff is not None and not (self.outdir / BACKOFF_DIR).exists():
                if self.save_model is None:
                    raise NnlmError("a short-list run saves its n-gram model beside the "
                                    "network: give the trainer save=nnlm.save_model")
                self.save_model(self.backoff, self.outdir / BACKOFF_DIR)
        self.scheme.reseed(self.config.seed, self.state.step)
        self.scheme.load_kernels(self.optimizer)
        while st.epoch < cfg.epochs and st.bad_epochs < cfg.patience:
            plan = epoch_plan(train, self.model, self.config, self.state.epoch)
            steps_per_epoch = plan.steps
            started = time.perf_counter()
            words_at_start = plan.words(st.step_in_epoch)
            # the epoch's rate counts all of its spans between checkpoints (this process's)
            epoch_words, epoch_elapsed = words_at_start, st.elapsed
            bar_context = progress_bar(steps_per_epoch, f"epoch {st.epoch + 1}/{cfg.epochs}",
                                       "batch") if self.is_main else \
                contextlib.nullcontext(_SilentBar())
            with bar_context as bar:
                bar.update(st.step_in_epoch)
                while st.step_in_epoch < steps_per_epoch:
                    # train up to the next stop: a checkpoint, --max-steps or the epoch's end
                    until = steps_per_epoch
                    if checkpoint_every:
                        until = min(until, st.step_in_epoch + checkpoint_every
                                    - st.step % checkpoint_every)
                    if max_steps is not None:
                        until = min(until, st.step_in_epoch + max(max_steps - st.step, 1))
                    self.scheme.train_span(self._view, train, plan, until, bar, started,
                                           words_at_start)
                    stop = max_steps is not None and st.step >= max_steps
                    if stop or (checkpoint_every and st.step % checkpoint_every == 0):
                        self.check_sane(valid)  # never save a state gone bad
                        st.elapsed += time.perf_counter() - started
                        started = time.perf_counter()
                        words_at_start = plan.words(st.step_in_epoch)
                        self.save_state()
                        if stop:
                            self._save_unfinished(valid)
                            return {"interrupted": True, "step": st.step}
            st.elapsed += time.perf_counter() - started
            self._end_epoch(train, valid, (plan.words(st.step_in_epoch) - epoch_words)
                            / max(st.elapsed - epoch_elapsed, 1e-9))
        return {"interrupted": False, "best_valid": st.best_valid, "epochs": st.epoch,
                "step": st.step, "elapsed": st.elapsed}

    def train_batches(self, train: Stream, plan: SlotPlan | SpanPlan, until: int, bar,
                      started: float, words_at_start: int) -> None:
        """Train on batches step_in_epoch .. until-1 of the epoch's ``plan``, one update
        each, advancing the counters (the Hogwild scheme hands them to workers instead)."""
        st = self.state
        graphed = self._graphed_step()
        window = (st.train_nll, st.train_tokens)  # the sums at the last progress line
        for _, contexts, targets in plan.range(st.step_in_epoch, until, self.scheme.batch_part(),
                                               pin=graphed is not None):
            self.interrupt.check()
            if graphed is not None and len(targets) == graphed.batch_size:
                graphed(contexts, targets)  # its loss is read at the next flush
                n = len(targets)
            else:
                self._flush_graphed()
                loss, n = self.train_step(contexts, targets)
                st.train_nll += loss
            st.train_tokens += n
            if self.average is not None:
                self.average.update(self.model, st.step)
            st.step += 1
            st.step_in_epoch += 1
            bar.update(1)
            if st.step % self.LOG_EVERY == 0:
                self._flush_graphed()
                rate = (plan.words(st.step_in_epoch) - words_at_start) / max(
                    time.perf_counter() - started, 1e-9)
                # loss: the updates since the last line (fresh each line); mean: the epoch's
                recent = (st.train_nll - window[0]) / max(st.train_tokens - window[1], 1)
                window = (st.train_nll, st.train_tokens)
                bar.set_postfix(loss=f"{recent:.3f}",
                                mean=f"{st.train_nll / max(st.train_tokens, 1):.3f}",
                                words_s=f"{rate:,.0f}")
        self._flush_graphed()

    LOG_EVERY = 50  # updates between progress updates (and reads of a CUDA graph's loss)

    def averaged_weights(self):
        """The network holds the averaged weights inside the block, where ``--average``
        keeps one (:mod:`.averaging`), its own after it."""
        return self.average.applied(self.model) if self.average is not None \
            else contextlib.nullcontext()

    def _graphed_step(self) -> GraphedStep | None:
        """The CUDA-graph update of full batches, where this run can use one (decided once,
        :func:`.cuda_graph.graphed_step_for`)."""
        if not hasattr(self, "_graphed"):
            self._graphed = graphed_step_for(self.parts, self.scheme, self.config, self.device,
                                             self.log)
        return self._graphed

    def _flush_graphed(self) -> None:
        """Add the graphed updates' losses to the running sum; a non-finite or too large
        loss among them means the run diverged."""
        graphed = getattr(self, "_graphed", None)
        if graphed is None or graphed.warm == 0:
            return
        total, worst = graphed.flush()
        self.state.train_nll += total
        limit = self.objective.loss_limit(self.model.config.outputs)
        if not (math.isfinite(total) and worst <= limit):
            self._diverged(f"loss {worst:.4g} per token in the last {self.LOG_EVERY} updates")

    def _save_unfinished(self, valid: Stream) -> None:
        """Stopped (--max-steps) before any epoch ended: model.safetensors still gets the
        current weights (their average, with config.average), so eval and generate work;
        the log says what they are."""
        if (self.outdir / "model.safetensors").exists():
            return
        with self.averaged_weights():
            ppl = self.evaluate(valid)
            if not self.sane_perplexity(ppl):
                self._diverged(f"validation perplexity {ppl:.4g}, more than e times a uniform "
                               f"model's {self.model.config.vocab_size:,}")
            self.checkpoint.write_model(self.model, self.binding)
        self.log(f"no epoch finished yet: {self.outdir / 'model.safetensors'} holds the weights "
                 f"at update {self.state.step} (validation perplexity {ppl:.2f})")

    def _end_epoch(self, train: Stream, valid: Stream, words_per_second: float) -> None:
        with self.averaged_weights():  # what is validated and saved (config.average)
            self._validate_epoch(valid, words_per_second)
        self.save_state()

    def _validate_epoch(self, valid: Stream, words_per_second: float) -> None:
        cfg, st = self.config, self.state
        valid_ppl = self.evaluate(valid)
        if not self.sane_perplexity(valid_ppl):
            self._diverged(f"validation perplexity {valid_ppl:.4g}, more than e times a "
                           f"uniform model's {self.model.config.vocab_size:,}")
        # the running training loss per token; a perplexity over V only under the full
        # softmax without a short-list (whose network predicts K + 1 outputs)
        train_loss = st.train_nll / max(st.train_tokens, 1)
        over_v = cfg.spec.likelihood and self.lm.shortlist is None
        train_ppl = math.exp(train_loss) if over_v else math.nan
        st.epoch += 1
        row = {"epoch": st.epoch, "step": st.step, "train_ppl": train_ppl, "valid_ppl": valid_ppl,
               "lr": self.current_lr(), "words_per_second": words_per_second,
               "elapsed_seconds": st.elapsed, "train_loss": train_loss, "note": st.note}
        st.note = ""
        st.history.append(row)
        improved = valid_ppl < st.best_valid
        # a self-normalizing objective drives log Z toward 0 under training's dropout noise;
        # without it Z comes out lower (log-sum-exp is convex): the best model is saved with
        # its output biases shifted by the mean log Z over (up to 20,000) validation
        # contexts, so exact probabilities do not change and log Z is centred on held-out text
        log_z = self.scheme.mean_log_z(self.lm, valid) if self.objective.self_normalizing \
            else math.nan
        row["valid_log_z"] = log_z
        if improved:
            st.best_valid, st.bad_epochs = valid_ppl, 0
            self._write_header()
            self.checkpoint.write_model(self.model, self.binding,
                                        0.0 if math.isnan(log_z) else log_z)
        else:
            st.bad_epochs += 1
            if cfg.plateau_decay < 1:
                self._decay_lr(cfg.plateau_decay)
        st.step_in_epoch, st.train_nll, st.train_tokens = 0, 0.0, 0
        train_text = (f"train ppl {train_ppl:.2f}" if over_v
                      else f"train {cfg.objective} loss {train_loss:.3f}")
        if not math.isnan(log_z):
            train_text += f", valid log Z {log_z:+.3f}"
        self.log(f"epoch {st.epoch}: {train_text}, valid ppl {valid_ppl:.2f}"
                 f"{' (best)' if improved else ''}, {words_per_second:,.0f} words/s")
        self.checkpoint.write_metrics(st.history)

    def _decay_lr(self, factor: float) -> None:
        self.optimizer.scale_lr(factor)

class _SilentBar:
    """The progress bar of a rank that does not log."""

    def update(self, n: int = 1) -> None:
        pass

    def set_postfix(self, **kwargs) -> None:
        pass

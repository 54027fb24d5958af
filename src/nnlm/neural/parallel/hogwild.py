"""Asynchronous data-parallel training on one machine: the paper's shared-memory scheme
(Bengio et al. 2003, section 3.1), known since as Hogwild (Niu, Recht, Re & Wright 2011).

``nnlm train ... --workers P`` keeps the parameters in shared memory and starts P worker
processes (torch.multiprocessing, spawned), one thread each. Batch i of an epoch's seeded
permutation goes to worker i mod P, which computes its gradient and writes its update
into the shared parameters whenever it is done. Under the paper's SGD it writes without
locks: an update may be lost or read half-written, which the paper found harmless and
Niu et al. proved convergent when updates are sparse. Each worker runs the
single-process ``Trainer.train_step``, so every objective and optimizer works:

- the paper's SGD as it is (sparse rows of C, the learning-rate schedule at the global
  update count), updates written without locks;
- Adam and AdamW with one set of moments (and step count) in shared memory, and a lock
  around each update: gradients are computed concurrently, on parameters that may be an
  update old, and the updates take turns. On mlp1's first epoch on Brown, moments per
  worker (each seeing every other batch) cost 2.2% validation perplexity, and shared
  moments updated without the lock 6-30% (concurrent read-modify-writes of the same
  moments); a gradient one update old costs nothing (``bench/neural/staleness.py`` simulates
  each departure in one process). Checkpoints hold the shared moments. The run's log
  ends with the share of the workers' time spent waiting for the lock and holding it
  (mlp1, 400 updates: 0.5% and 8.4%). Each worker loads its compiled updates (numba)
  before its first update: loaded at that update, under the lock, they had the other
  worker wait about a second, 4.6% of a 400-update run.

The process that started the workers (the coordinator) holds the same shared parameters.
It hands out spans of batches up to the next checkpoint, --max-steps or the epoch's end,
waits for them, then validates, logs and writes checkpoints: validation and checkpoints
come from one process. ``--resume`` continues from the last checkpoint's parameters,
optimizer state, schedule position and data position, with any number of workers (batch
i is batch i whoever trains it). It is not bit-exact: the races make every run differ.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import time
import traceback

import numpy as np
import torch
import torch.multiprocessing as mp

from ...base.errors import NnlmError, TrainingDiverged
from ...text.stream import Stream
from ..allocator import keep_freed_memory
from ..batches import batches
from ..optim import PaperSGD
from .heartbeat import STARTUP_SECONDS, WORKER_TIMEOUT, Heartbeats, die_with_parent
from .run_view import RunView, WorkerSetup
from .schemes import Scheme

POLL_SECONDS = 1.0  # how often the coordinator checks that its workers are alive


class Hogwild(Scheme):
    """The coordinator's side of the scheme: it starts ``workers`` processes on the
    trainer's shared parameters, hands each span of batches to them and waits; it
    validates and writes, as one process does. Each worker must finish an update every
    ``worker_timeout`` seconds."""

    graphable = False
    supports_average = False  # each worker makes only some of the updates

    def __init__(self, workers: int = 2, worker_timeout: float = WORKER_TIMEOUT):
        self.workers, self.worker_timeout = workers, worker_timeout
        self._pool = None
        # seconds the workers spent waiting for Adam's update lock, holding it, training
        self.lock_seconds = {"wait": 0.0, "hold": 0.0, "busy": 0.0}

    def describe(self) -> str:
        return f", {self.workers} asynchronous workers (Hogwild)"

    def prepare(self, net) -> None:
        net.share_memory()

    # -- the workers ---------------------------------------------------------------------
    @contextlib.contextmanager
    def running(self, run: RunView, train: Stream):
        self.run = run
        self._start(run, train)
        finished = False
        try:
            yield
            finished = True
        finally:
            self._stop(kill=not finished)

    def _start(self, run: RunView, train: Stream) -> None:
        ctx = mp.get_context("spawn")
        setup = run.worker_setup  # each worker builds its own one-process trainer from it
        shared = {name: p.data for name, p in run.model.named_parameters()}
        # Adam's moments: one shared set; the paper's SGD: its state (the decay scale)
        opt = run.optimizer
        opt_state = opt.share_memory() if hasattr(opt, "share_memory") else opt.state()
        # a run killed by SIGKILL leaves its queues' semaphores to multiprocessing's
        # resource tracker, which frees them and would print a warning saying so
        quiet = "ignore::UserWarning:multiprocessing.resource_tracker"
        if quiet not in os.environ.get("PYTHONWARNINGS", ""):
            os.environ["PYTHONWARNINGS"] = ",".join(
                x for x in (os.environ.get("PYTHONWARNINGS"), quiet) if x)
        self._outbox = ctx.Queue()
        lock = ctx.Lock()  # one Adam update at a time on the shared moments
        self._beats = Heartbeats(ctx, self.workers)
        self._inboxes, self._procs = [], []
        for rank in range(self.workers):
            inbox = ctx.Queue()
            proc = ctx.Process(target=_worker, daemon=True,
                               args=(rank, self.workers, setup, shared, opt_state,
                                     lock, train, inbox, self._outbox, self._beats,
                                     os.getpid()))
            proc.start()
            self._inboxes.append(inbox)
            self._procs.append(proc)
        self._pool = True
        # start-up (imports) is not training time, and may be slow on a loaded machine
        self._wait(max(self.worker_timeout, STARTUP_SECONDS))

    def _wait(self, timeout: float | None = None) -> list[dict]:
        """One result from every worker (in rank order); a failed, dead or silent worker
        (no update finished for ``timeout`` seconds, default ``worker_timeout``) raises."""
        timeout = self.worker_timeout if timeout is None else timeout
        results = [None] * self.workers
        since = time.monotonic()
        while any(r is None for r in results):
            self.run.check_interrupt()  # Ctrl-C: the workers are killed on the way out
            try:
                rank, result = self._outbox.get(timeout=POLL_SECONDS)
            except queue.Empty:
                self._check_alive()
                self._check_answering([r for r in range(self.workers) if results[r] is None],
                                      since, timeout)
                continue
            _raise_failure(result)
            results[rank] = result
        return results

    def _check_answering(self, ranks: list[int], since: float, timeout: float) -> None:
        silent = self._beats.silent(ranks, since, timeout)
        if silent is not None:
            rank, seconds = silent
            raise NnlmError(f"worker {rank} of {self.workers} (pid {self._procs[rank].pid}) has "
                            f"not finished an update for {seconds:.0f} s (stopped, stuck or "
                            f"starved; the limit is worker_timeout={timeout:g}); the run is "
                            f"stopped and the last checkpoint in {self.run.checkpoint_folder}"
                            " is kept: continue with resume=True")

    def _stop(self, kill: bool) -> None:
        """Let the workers finish (or, after an error, kill them at once)."""
        if not self._pool:
            return
        for inbox in self._inboxes:
            inbox.put(None)
        for proc in self._procs:
            if not kill:
                proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._pool = None

    def finish(self, result: dict, log) -> dict:
        t = self.lock_seconds
        if t["busy"] > 0 and t["hold"] > 0:
            result["lock_wait_share"] = t["wait"] / t["busy"]
            result["lock_hold_share"] = t["hold"] / t["busy"]
            log(f"asynchronous workers: {result['lock_wait_share']:.1%} of their training "
                f"time waiting for the shared Adam update, {result['lock_hold_share']:.1%} "
                "updating under it")
        return result

    def load_kernels(self, optimizer) -> None:
        """Nothing: the coordinator never updates; each worker loads its own kernels."""

    def train_span(self, run: RunView, train: Stream, plan, until: int, bar,
                   started: float, words_at_start: int) -> None:
        """Hand batches step_in_epoch .. until-1 to the workers (batch i to worker i mod P;
        each draws the epoch's ``plan`` itself, from the same seed) and wait for all of
        them (Adam's moments are shared; under the paper's SGD worker 0 returns its state
        for checkpoints)."""
        run.check_interrupt()
        st = run.counters
        first = st.step_in_epoch
        lr = _lr_state(run.optimizer)
        for inbox in self._inboxes:
            inbox.put((st.epoch, first, until, st.step, lr))
        results = self._wait()
        for result in results:
            st.train_nll += result["nll"]
            st.train_tokens += result["tokens"]
            for key, seconds in result["seconds"].items():
                self.lock_seconds[key] += seconds
        if "optimizer" in results[0]:
            run.optimizer.load_state(*results[0]["optimizer"])
        st.step += until - first
        st.step_in_epoch = until
        bar.update(until - first)
        rate = (plan.words(until) - words_at_start) / max(
            time.perf_counter() - started, 1e-9)
        bar.set_postfix(loss=f"{st.train_nll / max(st.train_tokens, 1):.3f}",
                        words_s=f"{rate:,.0f}")

    def _check_alive(self) -> None:
        for rank, proc in enumerate(self._procs):
            if not proc.is_alive():
                try:  # a worker that failed says why before it exits
                    _raise_failure(self._outbox.get(timeout=POLL_SECONDS)[1])
                except queue.Empty:
                    pass
                code = proc.exitcode
                how = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0
                       else f"exit status {code}")
                raise NnlmError(f"worker {rank} of {self.workers} died ({how}); the last "
                                f"checkpoint in {self.run.checkpoint_folder} is kept: "
                                "continue with resume=True")


def _raise_failure(result: dict) -> None:
    """A worker's report of a failure, raised in the coordinator as that failure."""
    if "error" in result:
        cls = TrainingDiverged if result["diverged"] else NnlmError
        raise cls(result["error"])


def _lr_state(optimizer):
    if isinstance(optimizer, PaperSGD):
        return {"scale": optimizer.scale}
    return {"lrs": [g["lr"] for g in optimizer.param_groups]}


def _set_lr_state(optimizer, lr: dict) -> None:
    if "scale" in lr:
        optimizer.scale = lr["scale"]
    else:
        for g, value in zip(optimizer.param_groups, lr["lrs"]):
            g["lr"] = value


def _worker(rank: int, workers: int, setup: WorkerSetup, shared: dict, opt_state, lock,
            train: Stream, inbox, outbox, beats: Heartbeats, parent: int) -> None:
    """One Hogwild worker: a Trainer whose parameters are the shared ones. It beats after
    every update and dies with its coordinator (see :mod:`nnlm.neural.parallel.heartbeat`)."""
    die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the coordinator's to handle
    beats.beat(rank)
    torch.set_num_threads(1)
    keep_freed_memory()
    try:
        trainer = setup.make(log=lambda message: None)
        params = dict(trainer.model.named_parameters())
        for name, tensor in shared.items():
            params[name].data = tensor
        trainer.ensure_ready(train)
        # now, not at the first update: that one holds the lock under Adam, and the other
        # worker would wait out this one's loading of numba (about a second)
        trainer.optimizer.load_kernels()
        lock_seconds = {"wait": 0.0, "hold": 0.0}
        if isinstance(opt_state, list):
            trainer.optimizer.use_shared(opt_state)
            lock_seconds = _serialize_steps(trainer.optimizer, lock)
        else:
            trainer.optimizer.load_state(*opt_state)
        cfg, order = trainer.config, trainer.model.config.context_size + 1
        beats.beat(rank)
        outbox.put((rank, {"ready": True}))
    except Exception as e:  # noqa: BLE001 - reported to the coordinator as one line
        outbox.put((rank, {"error": f"worker {rank}: {_one_line(e)}", "diverged": False}))
        return
    while True:
        task = inbox.get()
        if task is None:
            return
        beats.beat(rank)
        epoch, first, until, step0, lr = task
        try:
            _set_lr_state(trainer.optimizer, lr)
            seq = np.random.SeedSequence([cfg.seed, step0, rank])
            torch.manual_seed(int(seq.generate_state(1, np.uint64)[0] >> 1))
            perm = np.random.default_rng([cfg.seed, epoch]).permutation(len(train))
            nll, tokens, started = 0.0, 0, time.perf_counter()
            lock_seconds.update(wait=0.0, hold=0.0)
            for i, contexts, targets in batches(train, order, perm, cfg.batch_size, first,
                                                 until, stride=(rank, workers)):
                trainer.state.step = step0 + (i - first)  # the schedule's t: global updates
                loss, n = trainer.train_step(contexts, targets)
                nll, tokens = nll + loss, tokens + n
                beats.beat(rank)
            result = {"nll": nll, "tokens": tokens,
                      "seconds": {**lock_seconds, "busy": time.perf_counter() - started}}
            if rank == 0 and isinstance(trainer.optimizer, PaperSGD):
                result["optimizer"] = trainer.optimizer.state()  # Adam's is shared already
            outbox.put((rank, result))
        except Exception as e:  # noqa: BLE001
            outbox.put((rank, {"error": _one_line(e),
                               "diverged": isinstance(e, TrainingDiverged)}))
            return


def _serialize_steps(optimizer, lock) -> dict[str, float]:
    """Make ``optimizer.step`` hold ``lock``: the workers' gradients are still computed
    concurrently on parameters that may be an update old, but their Adam updates of the
    shared moments and parameters take turns. Returns the seconds spent waiting for the
    lock and holding it, which the steps keep adding to."""
    step = optimizer.step
    seconds = {"wait": 0.0, "hold": 0.0}

    def locked_step(*args, **kwargs):
        asked = time.perf_counter()
        with lock:
            got = time.perf_counter()
            out = step(*args, **kwargs)
        seconds["wait"] += got - asked
        seconds["hold"] += time.perf_counter() - got
        return out

    optimizer.step = locked_step
    return seconds


def _one_line(e: BaseException) -> str:
    if isinstance(e, NnlmError):
        return str(e)
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" at {where.filename.rsplit('/', 1)[-1]}:{where.lineno}" if where else ""
    text = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}{at}: {text}" if text else f"{type(e).__name__}{at}"


"""``nnlm train``: resolve a preset and overrides, or a checkpoint to resume, then train.

Under torchrun every rank runs this same function: they join one process group first
(``distributed.py``), all check the inputs, then train; rank 0 alone logs and writes.
``workers`` > 1 trains asynchronously in that many processes instead (``hogwild.py``).

With ``--resume`` the settings come from the checkpoint. The ones that are safe to change
mid-run (:data:`RESUMABLE`: learning rate, clipping, epochs, patience) may be given anew,
for instance to recover from a divergence; the change is logged and recorded in
metrics.csv. Any other setting given again must equal the saved one, or the run is
refused, naming each difference.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...base.errors import NnlmError
from ...lm import LanguageModel
from ...model_files import check_model_output, load_vocab_for, read_header
from ...text.corpus import count_words, read_stream, warn_same_text, warn_unknown_share
from ...text.fileio import atomic_write_text
from ...text.vocab import Vocabulary
from ..networks.registry import NETWORKS, network_config
from ..nplm_lm import BACKOFF_DIR, check_backoff
from ..parallel.choice import choose_scheme
from ..parallel.distributed import close_world, init_world, launched_by_torchrun
from ..parallel.heartbeat import WORKER_TIMEOUT
from ..presets import PRESETS, RECIPES, resolved
from ..runtime import available_cores, native_bf16, prepare_process, resolve_device
from ..settings import (
    ARCH_SETTINGS,
    RUN_SETTINGS,
    TrainConfig,
    check_objective_settings,
    check_settings,
)
from .train import Trainer, output_counts

DEFAULT_PRESET = "mlp1"
RESUMABLE = ("lr", "clip", "epochs", "patience")  # may change on resume


@dataclass
class TrainJob:
    """One ``nnlm train`` job: where the text is, where the model goes, what to train and
    how to run it. Each setting is resolved once, by :func:`run_job`.

    ``arch`` and ``train``: the network's and the training's settings given over the
    preset's (``arch`` may hold ``shortlist`` K: the network then predicts the K most
    frequent words and one "elsewhere" output, and ``shortlist_backoff``, a model path,
    scores the rest). ``vocab``: a fixed vocabulary (default: built from ``train_path``
    with ``min_count`` and ``max_size``). ``workers``: asynchronous data-parallel
    processes (Hogwild), each of which must finish an update every ``worker_timeout``
    seconds. Under torchrun the job is synchronous data-parallel, or with
    ``output_parallel`` parameter-parallel.
    """

    train_path: Path
    valid_path: Path
    outdir: Path
    preset: str | None = None
    arch: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)
    recipe: str | None = None
    resume: bool = False
    threads: int | None = None
    max_steps: int | None = None
    checkpoint_every: int = 500
    min_count: int = 1
    max_size: int | None = None
    device: str = "cpu"
    shortlist_backoff: Path | None = None
    vocab: Vocabulary | None = None
    workers: int = 1
    output_parallel: bool = False
    worker_timeout: float = WORKER_TIMEOUT
    # nnlm.load_model and nnlm.save_model, handed down by whoever stands above the model
    # registry (training stands below it): a short-list run reads and keeps its n-gram model
    load: Callable | None = None
    save: Callable | None = None

    def load_model(self, path):
        if self.load is None:
            raise NnlmError("shortlist_backoff= is read with nnlm.load_model: give the "
                            "job load=nnlm.load_model (nnlm.train and nnlm train do)")
        return self.load(path)

    def __post_init__(self):
        self.outdir = Path(self.outdir)
        self.arch = check_settings(dict(self.arch or {}), ARCH_SETTINGS)
        self.train = dict(self.train or {})
        for name, value in check_settings({k: getattr(self, k) for k in RUN_SETTINGS},
                                          RUN_SETTINGS).items():
            setattr(self, name, value)  # as the command line's flags check them


def resolve(preset: str | None, arch: dict, train: dict,
            recipe: str | None = None) -> tuple[str, dict, dict]:
    name = preset or DEFAULT_PRESET
    if name not in PRESETS:
        close = difflib.get_close_matches(name, list(PRESETS), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise NnlmError(f"preset={name!r}: {hint}choose from {', '.join(PRESETS)}")
    if recipe is not None and recipe not in RECIPES:
        raise NnlmError(f"recipe={recipe!r}: choose from {', '.join(RECIPES)}")
    model, training = resolved(name, recipe, train.get("objective"))
    return name, {**model, **arch}, {**training, **train}


def train_from_files(train_path, valid_path, outdir, log=print, **settings) -> dict:
    """Train (or resume) a network of the family from text files into ``outdir``; the
    settings are :class:`TrainJob`'s."""
    return run_job(TrainJob(train_path, valid_path, outdir, **settings), log)


def run_job(job: TrainJob, log=print) -> dict:
    """Run ``job``: under torchrun every rank joins the process group first."""
    device = resolve_device(job.device)  # once: "auto" is the CPU or a GPU from here on
    check_parallel(job.workers, job.output_parallel, device)
    world = init_world(device) if launched_by_torchrun() else None
    try:
        result = _train(job, world.device if world is not None else device, world, log)
        if world is not None:
            # rank 0 writes the model after the last collective; the others wait for it
            # here, so that every rank ends together and none reports success for a run
            # whose model was not written (the abort at exit is __main__'s to avoid)
            world.barrier("finishing")
        return result
    finally:
        close_world()


def check_parallel(workers: int, output_parallel: bool, device="cpu") -> None:
    """The parallel settings against how this process was started (one line each)."""
    torchrun = launched_by_torchrun()
    if workers > 1 and str(device) != "cpu":
        raise NnlmError(f"workers={workers} runs the paper's asynchronous scheme on CPU "
                        f"cores, not with device={device}; on GPUs use torchrun "
                        "(synchronous data-parallel): torchrun --nproc-per-node P -m nnlm "
                        "train ... --device cuda")
    if output_parallel and not torchrun:
        raise NnlmError("output_parallel splits the output layer over the ranks of a "
                        "torchrun job: torchrun --nproc-per-node P -m nnlm train ... "
                        "--output-parallel")
    if workers < 1:
        raise NnlmError(f"workers={workers}: need at least 1")
    if workers > 1 and torchrun:
        raise NnlmError("workers= (asynchronous, one machine) and torchrun (synchronous) are "
                        "two different schemes; use one")
    cores = available_cores()
    if workers > cores:
        raise NnlmError(f"workers={workers}: this machine gives the process {cores} cores; "
                        "more workers than cores only take turns")


@dataclass
class RunSettings:
    """What a new run starts from, or what the run being resumed continues with."""

    preset: str | None  # the preset's name
    arch: dict  # the network's settings
    train: dict  # the training settings
    vocab: Vocabulary
    backoff: LanguageModel | None  # a short-list's n-gram model
    header: dict | None = None  # the checkpoint's config.json, on resume
    changes: dict = field(default_factory=dict)  # setting -> (saved, now), on resume


def _settings(job: TrainJob) -> RunSettings:
    """The settings of a new run, or of the run being resumed (checked against the
    checkpoint's: only :data:`RESUMABLE` ones may change)."""
    arch, train = dict(job.arch), dict(job.train)
    shortlist = arch.pop("shortlist", None)
    if not job.resume:
        check_model_output(job.outdir, "nplm", training_run=True)
        name, arch, train = resolve(job.preset, arch, train, job.recipe)
        vocab = job.vocab
        if vocab is None:
            vocab = Vocabulary.from_counts(count_words(job.train_path), job.min_count,
                                           job.max_size)
        backoff = None
        if shortlist is not None:
            if job.shortlist_backoff is None:
                raise NnlmError(f"shortlist={shortlist} needs shortlist_backoff=MODEL: an "
                                "n-gram model for the words outside the list")
            backoff = job.load_model(job.shortlist_backoff)
            check_backoff(backoff, vocab, shortlist)
            arch["output_size"] = shortlist + 1
        elif job.shortlist_backoff is not None:
            raise NnlmError("shortlist_backoff= goes with shortlist=K")
        return RunSettings(name, arch, train, vocab, backoff)
    header = read_header(job.outdir)
    vocab = load_vocab_for(job.outdir, header)
    if job.vocab is not None and job.vocab != vocab:
        raise NnlmError("resume=True with vocab=: the file differs from the checkpoint's "
                        "vocabulary; drop vocab=")
    saved_arch = {k: v for k, v in header["config"].items() if k != "vocab_size"}
    saved_train = dict(header.get("train") or {})
    saved_preset = saved_train.pop("preset", None)
    if shortlist is not None:
        arch["output_size"] = shortlist + 1
    changes = {k: (saved_train.get(k), v) for k, v in train.items()
               if k in RESUMABLE and saved_train.get(k) != v}
    conflicts = [f"{k} (checkpoint {saved.get(k)!r}, now {v!r})"
                 for saved, given in ((saved_arch, arch), (saved_train, train))
                 for k, v in given.items() if saved.get(k) != v and k not in changes]
    if job.preset is not None and job.preset != saved_preset:
        conflicts.insert(0, f"preset (checkpoint {saved_preset!r}, now {job.preset!r})")
    if job.recipe is not None:
        conflicts.insert(0, "recipe= (the checkpoint's settings already include it)")
    if conflicts:
        raise NnlmError(f"resume=True with changed settings: {'; '.join(conflicts)}. Only "
                        f"{', '.join(k + '=' for k in RESUMABLE)} may change on resume; "
                        "otherwise train into a new directory")
    train = {**saved_train, **{k: new for k, (_, new) in changes.items()}}
    backoff = job.load_model(job.outdir / BACKOFF_DIR) if saved_arch.get("output_size") \
        else None
    return RunSettings(saved_preset, saved_arch, train, vocab, backoff, header, changes)


def _train(job: TrainJob, device, world, log) -> dict:
    if world is not None and not world.is_main:
        log = _quiet
    outdir = job.outdir
    asked_bf16 = job.train.get("bf16") is True  # bf16 given, not a preset's default
    run = _settings(job)
    name, arch, train, vocab, backoff = run.preset, run.arch, run.train, run.vocab, run.backoff
    try:
        model_config = network_config({**arch, "vocab_size": len(vocab)})
        train_config = TrainConfig(**train)
    except (TypeError, ValueError) as e:
        raise NnlmError(f"bad settings: {e}") from None
    if not job.resume:
        check_objective_settings(train, model_config.outputs)
    check_recurrent(model_config, train_config, job.workers, world)
    prepare_process(job.threads, device)
    if train_config.bf16 and not native_bf16(device):
        if asked_bf16:  # asked for by name: kept, and said
            log("note: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX); bf16 "
                "is emulated here, 10-40x slower than float32")
        else:  # a preset's default: float32, which is faster here
            train_config = dataclasses.replace(train_config, bf16=False)
            log("note: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), where "
                "bf16 products are 10-40x slower: training in float32 (bf16=True keeps bf16)")
    train_stream = read_stream(job.train_path, vocab)
    if job.vocab is not None:
        warn_unknown_share(train_stream, job.train_path)
    valid_stream = read_stream(job.valid_path, vocab)
    warn_same_text(job.train_path, job.valid_path)
    if world is not None:  # every rank has checked the inputs before rank 0 writes
        world.barrier("checking the inputs")
    scheme = choose_scheme(world, job.output_parallel, job.workers, job.worker_timeout)
    trainer = Trainer.build(vocab, model_config, train_config, outdir, preset=name, log=log,
                      device=device, train_counts=output_counts(train_stream, model_config),
                      backoff=backoff, scheme=scheme, save=job.save)
    if job.resume:
        trainer.load_state(run.header)
        if run.changes:
            apply_resume_changes(trainer, run.changes)
        st, cfg = trainer.state, trainer.config
        if st.epoch >= cfg.epochs or st.bad_epochs >= cfg.patience:
            why = (f"finished its {cfg.epochs} epochs" if st.epoch >= cfg.epochs else
                   f"stopped early: {st.bad_epochs} epochs without a better validation "
                   f"perplexity (patience {cfg.patience})")
            grow = (f"epochs={st.epoch + 5}" if st.epoch >= cfg.epochs else
                    f"patience={st.bad_epochs + 2}")
            raise NnlmError(f"{outdir}: the run {why}, so resume=True has nothing to do; to "
                            f"train on, resume=True with {grow}")
        log(f"resuming {outdir} at epoch {st.epoch + 1}, update {st.step}")
    else:
        log(f"training {name}: {describe(model_config)}, objective {train_config.objective}, "
            f"{model_config.num_parameters():,} parameters, |V| = {len(vocab):,}, "
            f"{len(train_stream):,} training tokens, on {device}{scheme.describe()}")
        if arch.get("output_size"):
            log(f"short-list of {arch['output_size'] - 1:,} words covers "
                f"{trainer.lm.coverage(train_stream.ids):.1%} of the training tokens")
    result = trainer.fit(train_stream, valid_stream, max_steps=job.max_steps,
                         checkpoint_every=job.checkpoint_every)
    if result["interrupted"]:
        log(f"stopped after {result['step']} updates; continue with resume=True")
    else:
        log(f"done: best validation perplexity {result['best_valid']:.2f}; "
            f"model in {outdir / 'model.safetensors'}")
    if trainer.is_main:
        atomic_write_text(outdir / "state" / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def check_recurrent(config, train: TrainConfig, workers: int, world) -> None:
    """What a recurrent network (the LSTM) does not train with, refused in one line: the
    sampled and self-normalized objectives (its scoring reads whole lines, exactly), and
    the parallel schemes, which split batches of fixed-size contexts."""
    if not NETWORKS[config.network_name][1].recurrent:
        return
    name = config.network_name
    if train.objective != "softmax":
        raise NnlmError(f"objective={train.objective}: the {name} network trains with the "
                        "full softmax (objective=softmax)")
    if workers > 1:
        raise NnlmError(f"workers={workers}: the {name} network trains in one process (the "
                        "asynchronous scheme splits batches of fixed-size contexts)")
    if world is not None:
        raise NnlmError(f"the {name} network trains in one process, not under torchrun")


def _quiet(message: str) -> None:
    """The log of a rank other than 0."""


def describe(config) -> str:
    """One line: the network and its sizes."""
    d = config.to_dict()
    keys = [k for k in ("order", "m", "h", "layers", "direct", "tied", "v_per_word", "history",
                        "span")
            if k in d]
    keys += [k for k in ("dropout_w", "dropout_e", "locked", "ar", "tar") if d.get(k)]
    parts = [f"{'n' if k == 'order' else k}={d[k]}" for k in keys]
    if d.get("history"):
        parts.append(f"far={d['far']}" if "far" in d else f"context={d['context']}")
        if d.get("far_spans", 1) > 1:
            parts.append(f"spans={d['far_spans']}")
    if d.get("context") == "fofe" or d.get("far") == "fofe":
        parts.append(f"alpha={d['fofe_alpha']}")
    if config.outputs < config.vocab_size:
        parts.append(f"short-list {config.outputs - 1}")
    return f"{d['network']} " + " ".join(parts)


def apply_resume_changes(trainer, changes: dict) -> None:
    """Settings changed on --resume (``{name: (old, new)}``): the optimizer's step size
    follows a new lr (plateau decay kept), and the next metrics.csv row notes it."""
    if "lr" in changes:
        old, new = changes["lr"]
        trainer.optimizer.scale_lr(new / old)
    text = ", ".join(f"{k} {old!r} -> {new!r}" for k, (old, new) in changes.items())
    trainer.state.note = f"resumed at update {trainer.state.step}: {text}"
    trainer.log(f"changed on resume: {text}")

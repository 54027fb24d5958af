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
import json
from pathlib import Path

from ..corpus import count_words, read_stream
from ..errors import NnlmError
from ..fileio import atomic_write_text
from ..models import check_model_output, load_model, load_vocab_for, read_header
from ..vocab import Vocabulary
from .distributed import close_world, init_world, launched_by_torchrun
from .heartbeat import WORKER_TIMEOUT
from .nplm_lm import BACKOFF_DIR, check_backoff
from .presets import PRESETS, RECIPES, resolved
from .registry import network_config
from .runtime import available_cores, native_bf16, prepare_process, resolve_device
from .train import TrainConfig, Trainer, output_counts

DEFAULT_PRESET = "mlp1"
RESUMABLE = ("lr", "clip", "epochs", "patience")  # may change on --resume
# settings that only mean something with one objective
OBJECTIVE_SETTINGS = {"noise_samples": "nce", "noise_power": "nce", "noise_per_position": "nce",
                      "selfnorm_alpha": "selfnorm"}


def resolve(preset: str | None, arch: dict, train: dict,
            recipe: str | None = None) -> tuple[str, dict, dict]:
    name = preset or DEFAULT_PRESET
    if name not in PRESETS:
        raise NnlmError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    if recipe is not None and recipe not in RECIPES:
        raise NnlmError(f"unknown recipe {recipe!r}; choose from {', '.join(RECIPES)}")
    model, training = resolved(name, recipe, train.get("objective"))
    return name, {**model, **arch}, {**training, **train}


def check_objective(train: dict, model_config) -> None:
    """An objective's settings must belong to it and fit the output layer."""
    objective = train.get("objective", "softmax")
    for key, owner in OBJECTIVE_SETTINGS.items():
        if key in train and owner != objective:
            raise NnlmError(f"--{key.replace('_', '-')} applies to --objective {owner}, not to "
                            f"{objective}")
    outputs, samples = model_config.outputs, train.get("noise_samples", TrainConfig.noise_samples)
    if objective == "nce" and samples >= outputs - 1:
        raise NnlmError(f"--objective nce with {samples} noise samples "
                        f"for an output layer of {outputs} words: NCE saves work only with "
                        "K well below |V_out|; use the full softmax")


def train_from_files(train_path, valid_path, outdir, preset=None, arch=None, train=None,
                     recipe=None, resume=False, threads=None, max_steps=None, checkpoint_every=500,
                     min_count=1, max_size=None, device="cpu", shortlist_backoff=None,
                     log=print, vocab=None, workers=1, output_parallel=False,
                     worker_timeout=WORKER_TIMEOUT) -> dict:
    """Train (or resume) a network of the family from text files into ``outdir``.

    ``vocab``: a fixed vocabulary (default: built from ``train_path``).
    ``arch`` may hold ``shortlist`` (K): the network then predicts the K most frequent words
    and one "elsewhere" output, and ``shortlist_backoff`` (a model path) scores the rest.
    ``workers``: asynchronous data-parallel processes (Hogwild), each of which must finish
    an update every ``worker_timeout`` seconds. Under torchrun the job is
    synchronous data-parallel, or with ``output_parallel`` parameter-parallel.
    """
    check_parallel(workers, output_parallel, device)
    world = init_world(resolve_device(device)) if launched_by_torchrun() else None
    try:
        return _train(train_path, valid_path, Path(outdir), preset, arch, train, recipe, resume,
                      threads, max_steps, checkpoint_every, min_count, max_size, device,
                      shortlist_backoff, log, vocab, workers, output_parallel, world,
                      worker_timeout)
    finally:
        close_world()


def check_parallel(workers: int, output_parallel: bool, device="cpu") -> None:
    """The parallel settings against how this process was started (one line each)."""
    torchrun = launched_by_torchrun()
    if workers > 1 and str(device) != "cpu":
        raise NnlmError(f"--workers {workers} runs the paper's asynchronous scheme on CPU "
                        f"cores, not with --device {device}; on GPUs use torchrun "
                        "(synchronous data-parallel): torchrun --nproc-per-node P -m nnlm "
                        "train ... --device cuda")
    if output_parallel and not torchrun:
        raise NnlmError("--output-parallel splits the output layer over the ranks of a "
                        "torchrun job: torchrun --nproc-per-node P -m nnlm train ... "
                        "--output-parallel")
    if workers < 1:
        raise NnlmError(f"--workers {workers}: need at least 1")
    if workers > 1 and torchrun:
        raise NnlmError("--workers (asynchronous, one machine) and torchrun (synchronous) are "
                        "two different schemes; use one")
    cores = available_cores()
    if workers > cores:
        raise NnlmError(f"--workers {workers}: this machine gives the process {cores} cores; "
                        "more workers than cores only take turns")


def _train(train_path, valid_path, outdir, preset, arch, train, recipe, resume, threads,
           max_steps, checkpoint_every, min_count, max_size, device, shortlist_backoff, log,
           vocab, workers, output_parallel, world, worker_timeout=WORKER_TIMEOUT) -> dict:
    if world is not None and not world.is_main:
        log = _quiet
    asked_bf16 = (train or {}).get("bf16") is True  # --bf16 given, not a preset's default
    arch, train = dict(arch or {}), dict(train or {})
    shortlist = arch.pop("shortlist", None)
    backoff = None
    if resume:
        header = read_header(outdir)
        given_vocab, vocab = vocab, load_vocab_for(outdir, header)
        if given_vocab is not None and given_vocab != vocab:
            raise NnlmError("--resume with --vocab: the file differs from the checkpoint's "
                            "vocabulary; drop --vocab")
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
        if preset is not None and preset != saved_preset:
            conflicts.insert(0, f"preset (checkpoint {saved_preset!r}, now {preset!r})")
        if recipe is not None:
            conflicts.insert(0, "--recipe (the checkpoint's settings already include it)")
        if conflicts:
            raise NnlmError(f"--resume with changed settings: {'; '.join(conflicts)}. Only "
                            f"{', '.join('--' + k for k in RESUMABLE)} may change on resume; "
                            "otherwise train into a new directory")
        name, arch = saved_preset, saved_arch
        train = {**saved_train, **{k: new for k, (_, new) in changes.items()}}
        if saved_arch.get("output_size"):
            backoff = load_model(outdir / BACKOFF_DIR)
    else:
        changes = {}
        check_model_output(outdir, "nplm", training_run=True)
        name, arch, train = resolve(preset, arch, train, recipe)
        if vocab is None:
            vocab = Vocabulary.from_counts(count_words(train_path), min_count, max_size)
        if shortlist is not None:
            if shortlist_backoff is None:
                raise NnlmError(f"--shortlist {shortlist} needs --shortlist-backoff MODEL: an "
                                "n-gram model for the words outside the list")
            backoff = load_model(shortlist_backoff)
            check_backoff(backoff, vocab, shortlist)
            arch["output_size"] = shortlist + 1
        elif shortlist_backoff is not None:
            raise NnlmError("--shortlist-backoff goes with --shortlist K")
    try:
        model_config = network_config({**arch, "vocab_size": len(vocab)})
        train_config = TrainConfig(**train)
    except (TypeError, ValueError) as e:
        raise NnlmError(f"bad settings: {e}") from None
    if not resume:
        check_objective(train, model_config)
    device = prepare_process(threads, device)
    if world is not None:
        device = world.device
    if train_config.bf16 and not native_bf16(device):
        if asked_bf16:  # asked for by name: kept, and said
            log("note: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX); --bf16 "
                "is emulated here, 10-40x slower than --no-bf16")
        else:  # a preset's default: float32, which is faster here
            train_config = dataclasses.replace(train_config, bf16=False)
            log("note: this CPU has no bfloat16 instructions (AVX-512 BF16 or AMX), where "
                "bf16 products are 10-40x slower: training in float32 (--bf16 keeps bf16)")
    train_stream = read_stream(train_path, vocab)
    valid_stream = read_stream(valid_path, vocab)
    if world is not None:  # every rank has checked the inputs before rank 0 writes
        world.barrier("checking the inputs")
    if workers > 1:
        from .hogwild import HogwildTrainer

        trainer = HogwildTrainer(vocab, model_config, train_config, outdir, preset=name,
                                 log=log, device=device, workers=workers,
                                 worker_timeout=worker_timeout,
                                 train_counts=output_counts(train_stream, model_config),
                                 backoff=backoff)
    else:
        trainer = Trainer(vocab, model_config, train_config, outdir, preset=name, log=log,
                          device=device, train_counts=output_counts(train_stream, model_config),
                          backoff=backoff, world=world, output_parallel=output_parallel)
    if resume:
        trainer.load_state(header)
        if changes:
            trainer.apply_resume_changes(changes)
        st, cfg = trainer.state, trainer.config
        if st.epoch >= cfg.epochs or st.bad_epochs >= cfg.patience:
            why = (f"finished its {cfg.epochs} epochs" if st.epoch >= cfg.epochs else
                   f"stopped early: {st.bad_epochs} epochs without a better validation "
                   f"perplexity (patience {cfg.patience})")
            grow = (f"--epochs {st.epoch + 5}" if st.epoch >= cfg.epochs else
                    f"--patience {st.bad_epochs + 2}")
            raise NnlmError(f"{outdir}: the run {why}, so --resume has nothing to do; to "
                            f"train on, resume with {grow}")
        log(f"resuming {outdir} at epoch {st.epoch + 1}, update {st.step}")
    else:
        log(f"training {name}: {describe(model_config)}, objective {train_config.objective}, "
            f"{model_config.num_parameters():,} parameters, |V| = {len(vocab):,}, "
            f"{len(train_stream):,} training tokens, on {device}{describe_parallel(trainer)}")
        if shortlist is not None:
            log(f"short-list of {shortlist:,} words covers "
                f"{trainer.lm.coverage(train_stream.ids):.1%} of the training tokens")
    result = trainer.fit(train_stream, valid_stream, max_steps=max_steps,
                         checkpoint_every=checkpoint_every)
    if result["interrupted"]:
        log(f"stopped after {result['step']} updates; continue with --resume")
    else:
        log(f"done: best validation perplexity {result['best_valid']:.2f}; "
            f"model in {outdir / 'model.safetensors'}")
    if trainer.is_main:
        atomic_write_text(outdir / "state" / "result.json", json.dumps(result, indent=1) + "\n")
    return result


def _quiet(message: str) -> None:
    """The log of a rank other than 0."""


def describe_parallel(trainer) -> str:
    workers = getattr(trainer, "workers", 1)
    if workers > 1:
        return f", {workers} asynchronous workers (Hogwild)"
    if trainer.world is None:
        return ""
    scheme = "output-parallel" if trainer.shard is not None else "data-parallel"
    return f", {trainer.world.size} {scheme} ranks ({trainer.world.backend})"


def describe(config) -> str:
    """One line: the network and its sizes."""
    d = config.to_dict()
    keys = [k for k in ("order", "m", "h", "direct", "tied", "v_per_word") if k in d]
    parts = [f"{'n' if k == 'order' else k}={d[k]}" for k in keys]
    if config.outputs < config.vocab_size:
        parts.append(f"short-list {config.outputs - 1}")
    return f"{d['network']} " + " ".join(parts)

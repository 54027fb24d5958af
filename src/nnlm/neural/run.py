"""``nnlm train``: resolve a preset and overrides, or a checkpoint to resume, then train.

With ``--resume`` the settings come from the checkpoint; any setting given again on the
command line must equal the saved one, or the run is refused, naming each difference.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..corpus import count_words, read_stream
from ..errors import NnlmError
from ..experiments.presets import PRESETS, RECIPES, resolved
from ..models import load_vocab_for, read_header
from ..vocab import Vocabulary
from .model import NPLMConfig
from .train import TrainConfig, Trainer

DEFAULT_PRESET = "mlp1"


def resolve(preset: str | None, arch: dict, train: dict,
            recipe: str | None = None) -> tuple[str, dict, dict]:
    name = preset or DEFAULT_PRESET
    if name not in PRESETS:
        raise NnlmError(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    if recipe is not None and recipe not in RECIPES:
        raise NnlmError(f"unknown recipe {recipe!r}; choose from {', '.join(RECIPES)}")
    model, training = resolved(name, recipe)
    return name, {**model, **arch}, {**training, **train}


def train_from_files(train_path, valid_path, outdir, preset=None, arch=None, train=None,
                     recipe=None, resume=False, threads=None, max_steps=None, checkpoint_every=500,
                     min_count=1, max_size=None, log=print) -> dict:
    outdir = Path(outdir)
    arch, train = dict(arch or {}), dict(train or {})
    if resume:
        header = read_header(outdir)
        vocab = load_vocab_for(outdir, header)
        saved_arch = {k: v for k, v in header["config"].items() if k != "vocab_size"}
        saved_train = dict(header["train"])
        saved_preset = saved_train.pop("preset", None)
        conflicts = [f"{k} (checkpoint {saved.get(k)!r}, now {v!r})"
                     for saved, given in ((saved_arch, arch), (saved_train, train))
                     for k, v in given.items() if saved.get(k) != v]
        if preset is not None and preset != saved_preset:
            conflicts.insert(0, f"preset (checkpoint {saved_preset!r}, now {preset!r})")
        if recipe is not None:
            conflicts.insert(0, "--recipe (the checkpoint's settings already include it)")
        if conflicts:
            raise NnlmError(f"--resume with changed settings: {'; '.join(conflicts)}. Resume "
                            "with the checkpoint's settings, or train into a new directory")
        name, arch, train = saved_preset, saved_arch, saved_train
    else:
        if (outdir / "state" / "trainer.json").exists():
            raise NnlmError(f"{outdir}: already holds a training run; add --resume to continue "
                            "it, or choose another -o")
        name, arch, train = resolve(preset, arch, train, recipe)
        vocab = Vocabulary.from_counts(count_words(train_path), min_count, max_size)
    try:
        model_config = NPLMConfig(vocab_size=len(vocab), **arch)
        train_config = TrainConfig(**train)
    except (TypeError, ValueError) as e:
        raise NnlmError(f"bad settings: {e}") from None
    train_stream = read_stream(train_path, vocab)
    valid_stream = read_stream(valid_path, vocab)
    trainer = Trainer(vocab, model_config, train_config, outdir, preset=name, threads=threads,
                      log=log)
    if resume:
        trainer.load_state()
        log(f"resuming {outdir} at epoch {trainer.state.epoch + 1}, update {trainer.state.step}")
    else:
        log(f"training {name}: n={model_config.order} m={model_config.m} h={model_config.h} "
            f"direct={model_config.direct}{' tied' if model_config.tied else ''}, "
            f"{model_config.num_parameters():,} parameters, "
            f"|V| = {len(vocab):,}, {len(train_stream):,} training tokens")
    result = trainer.fit(train_stream, valid_stream, max_steps=max_steps,
                         checkpoint_every=checkpoint_every)
    if result["interrupted"]:
        log(f"stopped after {result['step']} updates; continue with --resume")
    else:
        log(f"done: best validation perplexity {result['best_valid']:.2f}; "
            f"model in {outdir / 'model.safetensors'}")
    (outdir / "state" / "result.json").write_text(json.dumps(result, indent=1) + "\n")
    return result

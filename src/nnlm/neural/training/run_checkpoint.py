"""``CKPT/state/``: the latest state of a training run, from which ``--resume`` continues
exactly.

It holds three files, replaced together in one atomic rename:

- ``model.safetensors``: every parameter, gathered whole (whatever the parallel scheme);
- ``optimizer.safetensors``: the optimizer's tensors (Adam's moments; under the
  output-parallel scheme each rank's, as ``rank{r}.NAME``) and the random generators'
  states (``__torch_rng__``, ``__cuda_rng__``, ``__noise_rng__``);
- ``trainer.json``: the loop's counters (:data:`TRAINER_JSON`), the optimizer's JSON
  state, the run's binding and the layout of the processes that saved it.

Both weights files carry the run's binding (:func:`nnlm.model_files.array_binding`), so a state
from another run is refused by name instead of loaded.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ...base.errors import NnlmError
from ...lm import LanguageModel
from ...model_files import write_header
from ...text.fileio import atomic_path
from ...text.jsonfiles import Fields, Float, Int, Optional, read_json
from ..networks.checkpoint import read_safetensors, save_safetensors, write_tensors
from ..networks.network import Network
from ..parallel.schemes import Scheme
from ..settings import TrainConfig
from .averaging import WeightAverage
from .metrics_log import write_metrics
from .parts import Parts

# state/trainer.json, as save writes it: checked field by field when read back
TRAINER_JSON = {
    "trainer": Fields({"epoch": Int(min=0), "step_in_epoch": Int(min=0), "step": Int(min=0),
                       "best_valid": Float(min=0, infinite=True), "bad_epochs": Int(min=0),
                       "elapsed": Float(min=0), "history": list, "train_nll": Float(min=0),
                       "train_tokens": Int(min=0), "note": Optional(str)}),
    "optimizer": dict, "binding": Optional(str),
    "world": Optional(Fields({"size": Optional(Int(min=1)), "output_parallel": Optional(bool)}))}


@dataclass
class TrainState:
    """The training loop's counters, as trainer.json holds them (:data:`TRAINER_JSON`)."""

    epoch: int = 0  # epochs completed
    step_in_epoch: int = 0  # updates done in the current epoch
    step: int = 0  # updates done in all
    best_valid: float = math.inf
    bad_epochs: int = 0
    elapsed: float = 0.0  # seconds of training
    history: list = field(default_factory=list)  # one dict per finished epoch
    train_nll: float = 0.0  # running sums for the current epoch
    train_tokens: int = 0
    note: str = ""  # what changed on resume, for the next metrics.csv row


class RunCheckpoint:
    """The ``state/`` folder of the run in ``outdir``, and the run's other files, written
    under ``scheme`` (which gathers tensors over ranks; its main process writes)."""

    def __init__(self, outdir: Path, scheme: Scheme):
        self.outdir = Path(outdir)
        self.folder = self.outdir / "state"
        self.scheme = scheme

    def exists(self) -> bool:
        return (self.folder / "trainer.json").exists()

    def saved_step(self) -> int | None:
        """The update at which the last good state was saved (None: none, or unreadable)."""
        try:
            return read_json(self.folder / "trainer.json", TRAINER_JSON)["trainer"]["step"] \
                if self.exists() else None
        except NnlmError:
            return None

    def save(self, *, binding: str, model: dict[str, torch.Tensor],
             optimizer_info: dict, optimizer: dict[str, torch.Tensor], trainer: dict,
             layout: dict) -> None:
        """Write the three files at once (``optimizer`` includes the generators)."""
        with atomic_path(self.folder) as tmp:
            tmp.mkdir()
            save_safetensors(model, tmp / "model.safetensors", binding)
            save_safetensors(optimizer, tmp / "optimizer.safetensors", binding)
            info = {"trainer": trainer, "optimizer": optimizer_info, "binding": binding,
                    "world": layout}
            (tmp / "trainer.json").write_text(json.dumps(info, indent=1) + "\n")

    def capture(self, parts: Parts, counters: TrainState, *, device: torch.device,
                binding: str, average: WeightAverage | None, before_write=None) -> None:
        """Save the run's state: the whole network and the optimizer of ``parts`` gathered
        over the ranks, which every rank calls, then written by rank 0 with the
        generators, ``average``'s weights and the loop's ``counters``. ``before_write``
        runs on every rank after the gathers (the trainer reseeds there)."""
        scheme = self.scheme
        model = scheme.full_tensors(parts.model)
        opt_info, tensors = parts.optimizer.state()
        tensors = scheme.gather_optimizer(
            {k: v.detach().contiguous().cpu() for k, v in tensors.items()})
        if before_write is not None:
            before_write()
        if not scheme.is_main:
            return
        tensors.update(generator_tensors(device, parts.objective))
        if average is not None:
            tensors.update(average.tensors(parts.model))
        self.save(binding=binding, model=model, optimizer_info=opt_info, optimizer=tensors,
                  trainer=asdict(counters), layout=scheme.record())

    # -- the run's other files: config.json, the best weights, metrics -----------------------
    def write_header(self, lm: LanguageModel, model_id: str, preset: str | None,
                     config: TrainConfig) -> None:
        """config.json: the model's kind and config, its vocabulary's fingerprint, its id
        and the training settings (rank 0 writes)."""
        if self.scheme.is_main:
            write_header(self.outdir, lm.kind, lm.vocab, lm.config(), model_id,
                         train={"preset": preset, **asdict(config)})

    def write_model(self, model: Network, binding: str, bias_shift: float = 0.0) -> None:
        """The network's current weights to model.safetensors (every rank calls it; rank 0
        writes); ``bias_shift`` is subtracted from the output biases b (a self-normalized
        network's mean log Z on validation text)."""
        tensors = self.scheme.full_tensors(model)
        if bias_shift:  # the network says which biases move (the energy model's differ)
            tensors["b"] = self.scheme.shifted_biases(tensors, model, bias_shift)
        if self.scheme.is_main:
            write_tensors(tensors, self.outdir / "model.safetensors", binding)

    def write_metrics(self, history: list[dict]) -> None:
        """metrics.csv and the learning curve (rank 0)."""
        if self.scheme.is_main:
            write_metrics(history, self.outdir)

    def restore(self, parts: Parts, *, device: torch.device, binding: str | None,
                average: WeightAverage | None, optimizer_name: str) -> TrainState:
        """Put the saved state into ``parts`` (the network, optimizer and objective's
        generator), torch's generators and ``average``, checked to belong to the run of
        ``binding``; returns the loop's counters. A state that does not fit is one
        line."""
        info, model_tensors, tensors = self.load(binding)
        parts.model.load_named_tensors(self.scheme.own_tensors(model_tensors),
                                       str(self.folder / "model.safetensors"))
        average = average or WeightAverage(0.0)  # (a state's average is never the
        average.restore(parts.model, tensors)    # optimizer's, whatever --average)
        tensors = self.scheme.own_optimizer(info.get("world") or {}, tensors, self.folder,
                                            optimizer_name)
        try:
            parts.optimizer.load_state(info["optimizer"], tensors)
            restore_generators(tensors, device, parts.objective)
            return TrainState(**info["trainer"])
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError, IndexError) as e:
            raise NnlmError(f"{self.folder}: the saved state does not fit this run "
                            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else e!r})"
                            "; it was damaged or edited") from None

    def load(self, binding: str | None) -> tuple[dict, dict, dict]:
        """(trainer.json, model tensors, optimizer tensors), checked to belong to the run
        of ``binding`` (None: a format-1 checkpoint, which has none)."""
        if not self.exists():
            raise NnlmError(f"{self.folder}: no training state to resume; start without "
                            "resume=True")
        where = self.folder / "trainer.json"
        info = read_json(where, TRAINER_JSON, "the training state")
        if binding is not None and info.get("binding") != binding:
            raise NnlmError(f"{where}: belongs to another training run; restore this run's "
                            "state/ or train into a new directory")
        model = read_safetensors(self.folder / "model.safetensors", binding)
        optimizer = read_safetensors(self.folder / "optimizer.safetensors", binding)
        return info, model, optimizer


# -- the random generators a state carries ---------------------------------------------------
def generator_tensors(device: torch.device, objective) -> dict[str, torch.Tensor]:
    """The generators' states, as a saved state holds them: torch's, the GPU's (dropout
    there draws from its own) and the objective's noise sampler's (NCE)."""
    out = {"__torch_rng__": torch.get_rng_state()}
    if device.type == "cuda":
        out["__cuda_rng__"] = torch.cuda.get_rng_state(device)
    if hasattr(objective, "generator"):
        out["__noise_rng__"] = objective.generator.get_state()
    return out


def restore_generators(tensors: dict[str, torch.Tensor], device: torch.device,
                       objective) -> None:
    """Set the generators from a saved state's ``tensors`` (removing their entries); a
    missing torch state is a KeyError, which the caller reports as a damaged state."""
    torch.set_rng_state(tensors.pop("__torch_rng__"))
    cuda_rng = tensors.pop("__cuda_rng__", None)
    if cuda_rng is not None and device.type == "cuda":
        torch.cuda.set_rng_state(cuda_rng, device)
    if "__noise_rng__" in tensors:
        objective.generator.set_state(tensors.pop("__noise_rng__"))

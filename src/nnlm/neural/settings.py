"""A training run's settings, importable without torch: :class:`TrainConfig` with its
ranges, and the optimizers, devices and objectives by name.

The command line derives its choices and field lists from here (``nnlm.cli``), so they
cannot drift from what the library accepts; the library checks every value again for
callers that are not the command line. Errors name the parameters (``lr=-1``); the
command line shows them as its flags (``--lr -1``).

Each objective's entry says what it can do, so that no module branches on its name:

- ``settings``: the TrainConfig fields that belong to it alone;
- ``needs_counts``: it needs the training counts of the outputs (NCE's noise);
- ``likelihood``: its training loss is -log p over the whole vocabulary, so a training
  perplexity means something;
- ``sampled``: it scores a few output rows per step (so K must stay well below |V_out|).

The classes that compute them are in ``objectives.py``.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields

from ..base.checks import integer, number
from ..base.errors import NnlmError

OPTIMIZERS = ("sgd", "adam", "adamw")
@dataclass(frozen=True)
class Setting:
    """One numeric or switch setting as both the command line and the library take it:
    its type and range (ends closed unless ``low_open``/``high_open``). ``nnlm train``'s
    flags are made from these, and :func:`check_settings` checks a library caller's
    values against the same, so the two cannot drift."""

    kind: type  # int, float or bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] = ()  # str settings: one of these


def _fraction() -> Setting:  # dropout: [0, 1)
    return Setting(float, 0, 1, high_open=True)


# the network's settings a run may give over its preset's (``nnlm train``'s architecture
# flags, ``nnlm.train``'s keywords): each is a field of some network's config
ARCH_SETTINGS = {
    "order": Setting(int, 2, 4097), "m": Setting(int, 1), "h": Setting(int, 0),
    "direct": Setting(bool), "tied": Setting(bool), "dropout_x": _fraction(),
    "dropout_h": _fraction(), "word_dropout": _fraction(), "shortlist": Setting(int, 1),
    "history": Setting(int, 0, 1024), "context": Setting(str, choices=("window", "fofe")),
    "fofe_alpha": Setting(float, 0, 1, low_open=True, high_open=True),
    "far": Setting(str, choices=("learned", "mean", "fofe", "none")),
    "far_spans": Setting(int, 1, 16), "layers": Setting(int, 0, 64),
    "residual": Setting(bool), "layer_norm": Setting(bool), "span": Setting(int, 1, 4096),
    "v_per_word": Setting(bool), "dropout_e": _fraction(), "dropout_w": _fraction(),
    "dropout_l": _fraction(), "locked": Setting(bool), "ar": Setting(float, 0),
    "tar": Setting(float, 0)}
ARCH_FIELDS = tuple(ARCH_SETTINGS)
# how a run is run (``nnlm train``'s run flags, ``nnlm.train``'s keywords)
RUN_SETTINGS = {"max_steps": Setting(int, 1), "threads": Setting(int, 1),
                "checkpoint_every": Setting(int, 0), "min_count": Setting(int, 1),
                "max_size": Setting(int, 4), "workers": Setting(int, 1),
                "worker_timeout": Setting(float, 0, low_open=True)}


def check_setting(name: str, value, setting: Setting):
    """``value`` of the setting ``name`` as its kind (numpy's integers are integers, an
    int is taken as a float; True is not an int, 8.0 not an int), in range; one line
    naming it otherwise."""
    if setting.kind is bool:
        if not isinstance(value, bool):
            raise NnlmError(f"{name}={value!r}: True or False")
        return value
    if setting.kind is str:
        if value not in setting.choices:
            raise NnlmError(f"{name}={value!r}: choose from {', '.join(setting.choices)}")
        return value
    if setting.kind is int:  # (integer settings have closed ends)
        return integer(value, name, setting.low, setting.high)
    return number(value, name, setting.low, setting.high, setting.low_open,
                  setting.high_open)


def check_settings(values: dict, table: dict) -> dict:
    """Every given (not None) value of ``values`` checked against ``table``'s setting of
    its name (:func:`check_setting`); names outside the table pass as they are."""
    return {k: check_setting(k, v, table[k]) if k in table and v is not None else v
            for k, v in values.items()}


DEVICES = ("cpu", "cuda", "auto")


@dataclass(frozen=True)
class ObjectiveSpec:
    """What an objective is and can do (see the module docstring)."""

    summary: str
    settings: tuple[str, ...] = ()
    needs_counts: bool = False
    likelihood: bool = False
    sampled: bool = False


OBJECTIVES = {
    "softmax": ObjectiveSpec("the full softmax: exact -log p (Bengio et al. 2003)",
                             likelihood=True),
    "nce": ObjectiveSpec("noise-contrastive estimation (Mnih & Teh 2012)",
                         ("noise_samples", "noise_power", "noise_per_position"),
                         needs_counts=True, sampled=True),
    "selfnorm": ObjectiveSpec("-log p + alpha (log Z)^2 (Devlin et al. 2014)",
                              ("selfnorm_alpha",)),
}


@dataclass
class TrainConfig:
    """How to train. Fields that change the result are checked on ``--resume``."""

    optimizer: str = "sgd"  # sgd (the paper's), adam, adamw
    lr: float = 1e-3  # eps_0: per example for sgd; the step size for adam(w)
    lr_decay: float = 1e-8  # r in eps_t = eps_0 / (1 + r t) (sgd)
    weight_decay: float = 1e-4  # on C, H, U, W; never on the biases b, d
    batch_size: int = 256
    epochs: int = 20
    patience: int = 2  # stop after this many epochs without validation improvement
    plateau_decay: float = 0.5  # multiply the learning rate by this on a bad epoch (1 = off)
    clip: float = 0.0  # clip the gradient norm to this (0 = off)
    bf16: bool = False  # bfloat16 for the |V|-wide matrix products
    seed: int = 0
    objective: str = "softmax"  # softmax, nce, selfnorm (see OBJECTIVES)
    noise_samples: int = 25  # NCE: K noise words per batch (or per position)
    noise_power: float = 0.75  # NCE: q proportional to count^power
    noise_per_position: bool = False  # NCE: K samples for each position instead of shared
    selfnorm_alpha: float = 0.1  # self-normalization: weight of (log Z)^2
    # a in [0, 1): validation and the saved model use an exponential moving average of
    # the weights over the updates, a per update (Polyak & Juditsky 1992); 0 = off
    average: float = 0.0

    def __post_init__(self):
        if self.optimizer not in OPTIMIZERS:
            raise NnlmError(f"optimizer={self.optimizer!r}: choose from "
                            f"{', '.join(OPTIMIZERS)}")
        if self.objective not in OBJECTIVES:
            raise NnlmError(f"objective={self.objective!r}: choose from "
                            f"{', '.join(OBJECTIVES)}")
        for name, kind, low, high in TRAIN_RANGES:
            value = getattr(self, name)
            if kind in (int, float) and isinstance(value, numbers.Real) and \
                    not isinstance(value, bool) and (kind is float or
                                                     isinstance(value, numbers.Integral)):
                value = kind(value)  # numpy's numbers as Python's (config.json holds them)
                setattr(self, name, value)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise NnlmError(f"{name}={value!r}: should be {kind.__name__}")
            if not (math.isfinite(value) and low(value) and high(value)):
                raise NnlmError(f"{name}={value!r} is out of range")

    @property
    def spec(self) -> ObjectiveSpec:
        return OBJECTIVES[self.objective]


#: every field of TrainConfig, in order: what ``nnlm train`` passes on from its flags
TRAIN_FIELDS = tuple(f.name for f in fields(TrainConfig))


def _gt(x):
    return lambda v: v > x


def _ge(x):
    return lambda v: v >= x


def _le(x):
    return lambda v: v <= x


def _lt(x):
    return lambda v: v < x


_ANY = lambda v: True  # noqa: E731
TRAIN_RANGES = [  # (field, type, lower test, upper test): the CLI's ranges, for any caller
    ("lr", float, _gt(0), _ANY), ("lr_decay", float, _ge(0), _ANY),
    ("weight_decay", float, _ge(0), _ANY), ("batch_size", int, _ge(1), _ANY),
    ("epochs", int, _ge(1), _ANY), ("patience", int, _ge(1), _ANY),
    ("plateau_decay", float, _gt(0), _le(1)), ("clip", float, _ge(0), _ANY),
    ("bf16", bool, _ANY, _ANY), ("seed", int, _ge(0), _lt(2**32)),
    ("noise_samples", int, _ge(1), _ANY), ("noise_power", float, _ge(0), _le(1)),
    ("noise_per_position", bool, _ANY, _ANY), ("selfnorm_alpha", float, _ge(0), _ANY),
    ("average", float, _ge(0), _lt(1)),
]


def check_objective_settings(given: dict, outputs: int) -> None:
    """The settings given for a run (``given``: the TrainConfig fields set) must belong to
    its objective, and a sampled objective's K must fit the output layer."""
    objective = given.get("objective", TrainConfig.objective)
    spec = OBJECTIVES[objective]
    for name, other in OBJECTIVES.items():
        for key in other.settings:
            if key in given and name != objective:
                raise NnlmError(f"{key}= applies to objective={name}, not to {objective}")
    samples = given.get("noise_samples", TrainConfig.noise_samples)
    if spec.sampled and samples >= outputs - 1:
        raise NnlmError(f"objective={objective} with {samples} noise samples for an output "
                        f"layer of {outputs} words: it saves work only with K well below "
                        "|V_out|; use the full softmax")

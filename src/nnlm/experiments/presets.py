"""Named settings for Table 1 of Bengio et al. (2003) on Brown, and a modern one.

The paper's rows (n, h, m, direct connections, mixed with the trigram)::

    MLP1  n=5 h=50  m=60 direct      MLP2  = MLP1 mixed with the trigram
    MLP3  n=5 h=0   m=60 direct      MLP4  = MLP3 mixed
    MLP5  n=5 h=50  m=30 direct      MLP6  = MLP5 mixed
    MLP7  n=3 h=50  m=30 direct      MLP8  = MLP7 mixed
    MLP9  n=5 h=100 m=30 no direct   MLP10 = MLP9 mixed

The even presets train the same network as the odd one before them; the mixture with the
deleted-interpolation trigram is made afterwards (``nnlm mix``). Training follows the
paper: SGD, eps_0 = 1e-3 per example, r = 1e-8, weight decay 1e-4 on weights only, early
stopping on validation. ``modern`` keeps the NPLM architecture and trains it with today's
habits: AdamW, dropout, learning-rate decay on plateau, bf16 products.
"""

from __future__ import annotations

PAPER_TRAINING = {"optimizer": "sgd", "lr": 1e-3, "lr_decay": 1e-8, "weight_decay": 1e-4,
                  "batch_size": 256, "epochs": 30, "patience": 2, "plateau_decay": 0.5}

_ARCH = {
    "mlp1": {"order": 5, "h": 50, "m": 60, "direct": True},
    "mlp3": {"order": 5, "h": 0, "m": 60, "direct": True},
    "mlp5": {"order": 5, "h": 50, "m": 30, "direct": True},
    "mlp7": {"order": 3, "h": 50, "m": 30, "direct": True},
    "mlp9": {"order": 5, "h": 100, "m": 30, "direct": False},
}

PRESETS: dict[str, dict] = {}
for _i, (_name, _arch) in enumerate(_ARCH.items()):
    _odd = 2 * _i + 1
    PRESETS[f"mlp{_odd}"] = {"model": dict(_arch), "train": dict(PAPER_TRAINING), "mix": False}
    PRESETS[f"mlp{_odd + 1}"] = {"model": dict(_arch), "train": dict(PAPER_TRAINING), "mix": True}

PRESETS["modern"] = {
    "model": {"order": 5, "h": 200, "m": 100, "direct": True, "dropout_x": 0.2,
              "dropout_h": 0.3},
    "train": {"optimizer": "adamw", "lr": 2e-3, "lr_decay": 0.0, "weight_decay": 0.05,
              "batch_size": 512, "epochs": 20, "patience": 2, "plateau_decay": 0.5,
              "bf16": True},
    "mix": False,
}

PRESETS["tiny"] = {  # for the demo and tests: seconds on the toy world
    "model": {"order": 3, "h": 16, "m": 8, "direct": True},
    "train": {"optimizer": "adam", "lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0,
              "batch_size": 64, "epochs": 8, "patience": 2, "plateau_decay": 0.5},
    "mix": False,
}

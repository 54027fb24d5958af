"""Named settings of the neural family: architectures from Table 1 of Bengio et al.
(2003) and others, and training recipes.

The paper's rows (n, h, m, direct connections, mixed with the trigram)::

    MLP1  n=5 h=50  m=60 direct      MLP2  = MLP1 mixed with the trigram
    MLP3  n=5 h=0   m=60 direct      MLP4  = MLP3 mixed
    MLP5  n=5 h=50  m=30 direct      MLP6  = MLP5 mixed
    MLP7  n=3 h=50  m=30 direct      MLP8  = MLP7 mixed
    MLP9  n=5 h=100 m=30 no direct   MLP10 = MLP9 mixed

The even presets train the same network as the odd one before them; the mixture with the
deleted-interpolation trigram is made afterwards (``nnlm mix``, ``nnlm reproduce``).

Recipes say how to train:

- ``paper``: the paper's procedure. SGD, eps_0 = 1e-3 per example, r = 1e-8, weight decay
  1e-4 on the weights only, sparse updates of C, early stopping. Faithful, but slow on two
  cores: mlp1 stood at validation perplexity 225 after 5 epochs (about 5 minutes).
- ``fast`` (the default for mlp1 ... mlp10): the same networks trained with AdamW (lr 1e-3,
  decoupled decay 0.01), dropout 0.25 on x and 0.1 on the hidden layer, bf16 products,
  halving the rate on a plateau. mlp1 reaches validation 165 in 4 epochs (about 5 minutes).
- ``modern``: the ``modern`` preset's own: AdamW (decay 0.05), dropout 0.3 on x and on
  the hidden layer, up to 20 epochs.

The ``modern`` preset is the best NPLM we found for Brown within the paper's family:
n = 6, m = h = 256, no direct connections, and the output weights tied to the word
features (U = C, Press & Wolf 2017), so each word has one vector for reading and for
predicting it. 3.9 M parameters against mlp1's 5.0 M, and a 256-wide output product
(mlp1: 290). On Brown it reaches validation 149.6 and test 138.4 (12 epochs, 16 minutes on
two cores). Tried beside it (validation perplexity, same recipe): n=6 m=100 h=200 with
direct connections, 11.4 M parameters, 163.0 after 3 epochs where the tied model had
159.7; n=8 m=h=384 tied with dropout 0.35, best 152.4: bigger tied models overfit sooner.

The ``lbl`` preset is the log-bilinear model of Mnih & Hinton (2007) in this family:
n = 5, m = 100, no non-linearity, the predicted word represented by a feature vector of
its own (``--tied`` shares it with C); AdamW with dropout 0.2 on the context vectors.

The ``energy`` preset is the paper's energy-minimization variant (``energy.py``): n = 5,
m = 60, h = 50 as mlp1, the target word read through C too, v shared (``--energy-v
per-word`` gives each word its own v, as many parameters as mlp1's U). Its full softmax
costs a tanh for every (row, word, unit): train it with ``--objective nce``.
"""

from __future__ import annotations

RECIPES: dict[str, dict] = {
    "paper": {"model": {"dropout_x": 0.0, "dropout_h": 0.0},
              "train": {"optimizer": "sgd", "lr": 1e-3, "lr_decay": 1e-8, "weight_decay": 1e-4,
                        "batch_size": 256, "epochs": 40, "patience": 2, "plateau_decay": 0.5,
                        "bf16": True}},
    "fast": {"model": {"dropout_x": 0.25, "dropout_h": 0.1},
             "train": {"optimizer": "adamw", "lr": 1e-3, "lr_decay": 0.0, "weight_decay": 0.01,
                       "batch_size": 256, "epochs": 12, "patience": 2, "plateau_decay": 0.5,
                       "bf16": True}},
    "modern": {"model": {"dropout_x": 0.3, "dropout_h": 0.3},
               "train": {"optimizer": "adamw", "lr": 1e-3, "lr_decay": 0.0,
                         "weight_decay": 0.05, "batch_size": 256, "epochs": 20, "patience": 2,
                         "plateau_decay": 0.5, "bf16": True}},
    "lbl": {"model": {"dropout_x": 0.2},
            "train": {"optimizer": "adamw", "lr": 1e-3, "lr_decay": 0.0, "weight_decay": 0.01,
                      "batch_size": 256, "epochs": 12, "patience": 2, "plateau_decay": 0.5,
                      "bf16": True}},
    "energy": {"model": {"dropout_x": 0.25},
               "train": {"optimizer": "adamw", "lr": 1e-3, "lr_decay": 0.0,
                         "weight_decay": 0.01, "batch_size": 256, "epochs": 12, "patience": 2,
                         "plateau_decay": 0.5, "bf16": False}},
    # dropout 0.1 and the weights' moving average (docs/deep.md's full Brown runs; 0.3
    # without the average: test 133.2 in 71 minutes, 0.1 without it 131.5)
    "deep": {"model": {"dropout_x": 0.1, "dropout_h": 0.1},
             "train": {"optimizer": "adamw", "lr": 1e-3, "lr_decay": 0.0,
                       "weight_decay": 0.05, "batch_size": 256, "epochs": 12, "patience": 2,
                       "plateau_decay": 0.5, "bf16": True, "average": 0.999}},
    # the weights' moving average over about 100 updates (a quarter of an epoch of these
    # batches): test 105.4 against 107.8 without it (docs/deep.md)
    "lstm": {"model": {"dropout_x": 0.3, "dropout_h": 0.4},
             "train": {"optimizer": "adamw", "lr": 2e-3, "lr_decay": 0.0,
                       "weight_decay": 0.05, "batch_size": 2048, "epochs": 12, "patience": 2,
                       "plateau_decay": 0.5, "clip": 1.0, "bf16": True, "average": 0.99}},
    # AWD-LSTM's regularizers (Merity et al. 2018) with lstm's optimizer: locked dropout
    # on x and a_t, embedding dropout, DropConnect on W_hh, AR and TAR (docs/deep.md)
    "awd": {"model": {"dropout_x": 0.4, "dropout_h": 0.4, "dropout_e": 0.1, "dropout_w": 0.5,
                      "locked": True, "ar": 2.0, "tar": 1.0},
            "train": {"optimizer": "adamw", "lr": 2e-3, "lr_decay": 0.0,
                      "weight_decay": 0.05, "batch_size": 2048, "epochs": 60, "patience": 3,
                      "plateau_decay": 0.5, "clip": 1.0, "bf16": True, "average": 0.99}},
    "tiny": {"model": {},
             "train": {"optimizer": "adam", "lr": 1e-2, "lr_decay": 0.0, "weight_decay": 0.0,
                       "batch_size": 64, "epochs": 8, "patience": 2, "plateau_decay": 0.5}},
}

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
    PRESETS[f"mlp{_odd}"] = {"model": dict(_arch), "recipe": "fast", "mix": False}
    PRESETS[f"mlp{_odd + 1}"] = {"model": dict(_arch), "recipe": "fast", "mix": True}
PRESETS["modern"] = {"model": {"order": 6, "h": 256, "m": 256, "direct": False, "tied": True},
                     "recipe": "modern", "mix": False}
PRESETS["lbl"] = {"model": {"network": "lbl", "order": 5, "m": 100}, "recipe": "lbl",
                  "mix": False}
PRESETS["energy"] = {"model": {"network": "energy", "order": 5, "m": 60, "h": 50},
                     "recipe": "energy", "mix": False}
PRESETS["deep"] = {"model": {"network": "deep", "order": 6, "m": 256, "history": 58,
                             "far": "learned", "h": 512, "layers": 2, "tied": True},
                   "recipe": "deep", "mix": False}
PRESETS["lstm"] = {"model": {"network": "lstm", "order": 1025, "m": 256, "h": 512,
                             "layers": 1, "tied": True, "span": 256},
                   "recipe": "lstm", "mix": False}
PRESETS["awd"] = {"model": {"network": "lstm", "order": 1025, "m": 256, "h": 1024,
                            "layers": 1, "tied": True, "span": 256},
                  "recipe": "awd", "mix": False}
PRESETS["tiny"] = {"model": {"order": 3, "h": 16, "m": 8, "direct": True}, "recipe": "tiny",
                   "mix": False}


# settings that change with the objective, per recipe (adaptive optimizers only). NCE
# updates only the sampled output rows, so each row sees few, noisy steps: it wants larger
# steps and overfits sooner. Measured on Brown with mlp1 and K = 100 (validation
# perplexity): lr 1e-3 193.6 after 3 epochs, 3e-3 175.2, 1e-2 226 after 2; with lr 3e-3,
# dropout 0.25/0.1 stopped at 174.2 (epoch 4) where 0.4/0.25 reached 169.4 at epoch 7.
OBJECTIVE_OVERRIDES: dict[str, dict[str, dict]] = {
    "fast": {"nce": {"train": {"lr": 3e-3}, "model": {"dropout_x": 0.4, "dropout_h": 0.25}}},
    "modern": {"nce": {"train": {"lr": 3e-3}}},
    "deep": {"nce": {"train": {"lr": 3e-3}}},
    "lbl": {"nce": {"train": {"lr": 3e-3}}},
    "energy": {"nce": {"train": {"lr": 3e-3}}},
}


def resolved(preset: str, recipe: str | None = None,
             objective: str | None = None) -> tuple[dict, dict]:
    """(model settings, training settings) of a preset under a recipe (its own by default)
    for an objective (its overrides apply to the adaptive optimizers).

    A recipe's model settings that the preset's network lacks (the LBL has no hidden
    layer to drop out) are left out."""
    from dataclasses import fields

    from .networks.registry import NETWORKS

    base = PRESETS[preset]
    rec = RECIPES[recipe or base["recipe"]]
    known = {f.name for f in fields(NETWORKS[base["model"].get("network", "nplm")][0])}
    train = dict(rec["train"])
    extra = {}
    if train["optimizer"] != "sgd":
        extra = OBJECTIVE_OVERRIDES.get(recipe or base["recipe"], {}).get(objective or "", {})
        train.update(extra.get("train", {}))
    model = {**base["model"], **{k: v for k, v in {**rec["model"], **extra.get("model", {})}.items()
                                 if k in known}}
    return model, train

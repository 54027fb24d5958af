"""The optimizers (the paper's SGD, Adam and its lazy and weight-decayed forms, with the
gradient clipping and scaling every scheme uses) and their compiled updates."""

from .optimizers import (  # noqa: F401 - the names the trainer and the schemes use
    AdamOptimizer,
    LazyAdam,
    PaperSGD,
    clip_gradients,
    scale_gradients,
)

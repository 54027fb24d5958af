"""A batch of line pieces for a recurrent network: what it reads in one pass.

Row r reads ``inputs[r, :lengths[r]]`` from a zero state: its line's ``<s>`` and the
words after it, or (a piece of a longer line) the word before the piece and the piece's
words but its last. Position j predicts the word after ``inputs[r, j]``, so the row's
targets are the piece's words, ``</s>`` last where the piece ends the line::

    line:     <s>  the  jury  said  </s>
    inputs:   <s>  the  jury  said          lengths = 4
    targets:  the  jury said  </s>

The z of every position read comes out in row order (``mask``), which is the order of the
targets, so the objectives see (N, k) and (N,) as from any other network.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Spans:
    """``inputs`` (B, T) int64 word ids, padded after each row's end; ``lengths`` (B,)."""

    inputs: torch.Tensor
    lengths: torch.Tensor

    def mask(self) -> torch.Tensor:
        """(B, T) bool: the positions read."""
        T = self.inputs.shape[1]
        return torch.arange(T, device=self.inputs.device)[None, :] < self.lengths[:, None]

    def to(self, device, non_blocking: bool = False) -> Spans:
        return Spans(self.inputs.to(device, non_blocking=non_blocking),
                     self.lengths.to(device, non_blocking=non_blocking))

    def pin_memory(self) -> Spans:
        return Spans(self.inputs.pin_memory(), self.lengths.pin_memory())

    def __len__(self) -> int:
        """Positions read (= targets)."""
        return int(self.lengths.sum())

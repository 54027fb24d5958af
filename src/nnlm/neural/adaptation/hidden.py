"""z (the output layer's input) and log p for the slots of some lines of a stream, with
gradients where the caller enables them: what the cache keeps and dynamic evaluation
learns from.

A recurrent network reads each line's first n - 1 slots in one pass from its ``<s>``
(a :class:`~nnlm.neural.networks.spans.Spans` row) and any later slot through its window
of n - 1 words, exactly as ``NeuralLM.logprobs`` scores them; any other network reads
each slot's context.
"""

from __future__ import annotations

import numpy as np
import torch

from ...text.stream import Stream
from ..segments import by_length, spans

ROWS = 256  # rows per output product when turning z into log-probabilities
LATE_ROWS = 64  # windows of slots past a recurrent network's n - 1 words read at once


def lines_hidden(lm, stream: Stream, lines: np.ndarray) -> torch.Tensor:
    """z (S, k), float32, for the slots of ``lines`` (ascending line indices), in slot
    order: the lines' slots one after the other. A recurrent network's slots past its
    n - 1 words carry no gradient: dynamic evaluation learns from the rest."""
    net = lm.model
    starts = stream.offsets[lines]
    lengths = stream.offsets[lines + 1] - starts
    within = _ramp(lengths)  # each slot's place in its line
    slots = np.repeat(starts, lengths) + within
    if not net.recurrent:
        return net.hidden_input(lm._tensor(lm._net_contexts(stream.contexts(lm.order, slots))))
    k = lm.order - 1
    first = np.minimum(lengths, k)
    inputs, _ = spans(stream, starts, first)
    z_first = net.hidden_input(inputs.to(net.device))
    if (lengths <= k).all():
        return z_first
    # slots n - 1 or more words into a longer line: their windows of n - 1 words, each
    # read whole, LATE_ROWS at a time and without gradients (a window's graph would hold
    # n - 1 steps of the network for every such slot)
    late = within >= k
    with torch.no_grad():
        z_late = torch.cat([net.hidden_input(lm._tensor(stream.contexts(lm.order, part)))
                            for part in np.array_split(slots[late],
                                                       -(-int(late.sum()) // LATE_ROWS))])
    at_first = torch.from_numpy(np.flatnonzero(~late)).to(net.device)
    at_late = torch.from_numpy(np.flatnonzero(late)).to(net.device)
    z = z_first.new_zeros(len(slots), z_first.shape[1])
    return z.index_copy(0, at_first, z_first).index_copy(0, at_late, z_late)


def line_slots(stream: Stream, lines: np.ndarray) -> np.ndarray:
    """The slots of ``lines``, in the order :func:`lines_hidden` returns them."""
    starts = stream.offsets[lines]
    lengths = stream.offsets[lines + 1] - starts
    return np.repeat(starts, lengths) + _ramp(lengths)


def target_logprobs(net, z: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor,
                                                                          np.ndarray]:
    """(log p(target) float32 with gradients, the same in float64 without): the softmax
    over every output of y = b + U z, normalized in float64 for the reported numbers."""
    out32, out64 = [], []
    for i in range(0, len(z), ROWS):
        y = net.output_logits(z[i : i + ROWS])
        t = targets[i : i + ROWS, None]
        out32.append(y.log_softmax(1).gather(1, t).squeeze(1))
        y64 = y.detach().double()
        out64.append((y64.gather(1, t).squeeze(1) - torch.logsumexp(y64, 1)).cpu().numpy())
    if not out32:
        return z.new_zeros(0), np.zeros(0)
    return torch.cat(out32), np.concatenate(out64)


def _ramp(lengths: np.ndarray) -> np.ndarray:
    """0, 1, ..., L - 1 for each length L, concatenated."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)


@torch.no_grad()
def stream_hidden(lm, stream: Stream, tokens: int = 8192) -> torch.Tensor:
    """z of every slot of ``stream`` (N, k), float32, in slot order: lines of like length
    read together, about ``tokens`` padded positions a pass."""
    lm.model.eval()
    lengths = np.diff(stream.offsets)
    out = None
    for batch in by_length(np.minimum(lengths, lm.order - 1), tokens):
        lines = np.sort(batch)
        z = lines_hidden(lm, stream, lines)
        if out is None:
            out = z.new_empty(len(stream), z.shape[1])
        out[torch.from_numpy(line_slots(stream, lines)).to(z.device)] = z
    return out if out is not None else torch.zeros(0, 0)

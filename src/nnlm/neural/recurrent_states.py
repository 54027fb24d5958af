"""A recurrent network's state after each line prefix a decoder has asked about, so that
the next word costs one step instead of a read of the whole prefix.

``nnlm.Decoder`` (and generation) hand a model the words of each hypothesis, as for every
model. For the LSTM those words name a hidden state: the state after reading them from
the line's ``<s>``. This cache keeps that state for the prefixes it has seen (least
recently used first out), so a hypothesis that grows by one word is continued from its
parent's state by one step, and two hypotheses with the same words share one state. It
gives exactly the numbers of reading each prefix whole (the tests check it); the cache is
dropped whenever the weights change (training), which torch's version counters tell.
"""

from __future__ import annotations

from collections import OrderedDict

import torch

CACHE_STATES = 4096  # prefixes kept: (2 L + 1) h floats each, 25 MB for L = 1, h = 512


class StateCache:
    """States by prefix (the bytes of its word ids): (a, c) as (L, h) each, and the top
    layer's a after the prefix's last word."""

    def __init__(self, size: int = CACHE_STATES):
        self.size, self.states, self.version = size, OrderedDict(), None

    def _check(self, net) -> None:
        version = tuple(p._version for p in net.parameters())
        if version != self.version:
            self.states.clear()
            self.version = version

    @torch.no_grad()
    def hidden_input(self, net, contexts: torch.Tensor, bf16: bool = False) -> torch.Tensor:
        """z for each row of contexts (B, K), as ``net.hidden_input`` gives it (``bf16``:
        a step's products in bfloat16)."""
        self._check(net)
        inputs, count = net.line_words(contexts)
        count = count.tolist()
        rows = contexts.cpu().numpy()
        K = contexts.shape[1]
        keys = [rows[r, K - n :].tobytes() for r, n in enumerate(count)]
        a = torch.empty(len(rows), net.config.h, device=contexts.device)
        step, whole = [], []
        for r, key in enumerate(keys):
            if key in self.states:
                self.states.move_to_end(key)
                a[r] = self.states[key][2]
            elif count[r] > 1 and key[:-8] in self.states:
                step.append(r)
            else:
                whole.append(r)
        if step:  # one step from the parent's state
            parents = [self.states[keys[r][:-8]] for r in step]
            state = (torch.stack([p[0] for p in parents], 1),
                     torch.stack([p[1] for p in parents], 1))
            words = contexts[step, K - 1 :]
            top, (h, c) = net.step(words[:, 0], state, bf16)
            self._store(keys, step, top, h, c, a)
        if whole:  # read from the line's <s> (left-aligned, as hidden_input does)
            n = torch.tensor([count[r] for r in whole])
            top, (h, c) = net.read_states(inputs[whole, : int(n.max())], n)
            self._store(keys, whole, top, h, c, a)
        return net.output(a)

    def _store(self, keys, rows, top, h, c, a) -> None:
        for i, r in enumerate(rows):
            a[r] = top[i]
            self.states[keys[r]] = (h[:, i].clone(), c[:, i].clone(), top[i].clone())
        while len(self.states) > self.size:
            self.states.popitem(last=False)

"""What a mixture of softmaxes (Yang et al. 2018) would cost the ``awd`` network's training
step on this machine: the step's parts timed at the preset's sizes, forward and backward.

The awd step on Brown reads B = 2048 target words (8 pieces of 256) through an LSTM
(m = 256 -> h = 1024) and scores every word of |V| = 14,118 through the tied output
layer y = b + C P a_t. A mixture of K softmaxes replaces that layer by

    pi_t = softmax(W_pi a_t)                       # (B, K) mixture weights
    z_tk = tanh(W_k a_t)                           # (B, K, m) one context vector each
    p(w | t) = sum_k pi_tk softmax(b + C z_tk)_w   # K output products instead of one

so its cost grows with K times the output product. This times, in alternating rounds in
one process, the LSTM's part, the one-softmax output layer and the K-softmax one (bf16
autocast for the output products, as the preset trains), and writes JSON with each
part's median and the step's length with K softmaxes over its length with one.

    python bench/neural/mos_cost.py --threads 2 --out bench/results/mos_cost.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path


def seconds_of(fn) -> float:
    """Seconds one call of ``fn`` takes."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=14118)
    ap.add_argument("--k", type=int, nargs="*", default=[2, 5, 10])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    if a.threads < 1 or a.vocab < 2 or a.rounds < 1 or any(k < 1 for k in a.k):
        ap.error("--threads, --rounds and each K must be >= 1, --vocab >= 2")
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rows, T, m, h, V = 8, 256, 256, 1024, a.vocab
    lstm = nn.LSTM(m, h, batch_first=True)
    x = torch.randn(rows, T, m, requires_grad=True)
    C = nn.Parameter(torch.randn(V, m) * 0.05)
    b = nn.Parameter(torch.zeros(V))
    P = nn.Linear(h, m, bias=False)
    a_t = torch.randn(rows * T, h, requires_grad=True)
    targets = torch.randint(0, V, (rows * T,))
    heads = {k: (nn.Linear(h, k, bias=False), nn.Linear(h, k * m)) for k in a.k}

    def step_lstm():
        out, _ = lstm(x)
        out.sum().backward()

    def step_softmax():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = F.linear(P(a_t), C, b)
        F.cross_entropy(y.float(), targets).backward()

    def step_mos(k):
        W_pi, W_z = heads[k]

        def run():
            log_pi = F.log_softmax(W_pi(a_t), dim=-1)  # (B, K)
            z = torch.tanh(W_z(a_t)).view(-1, k, m)  # (B, K, m)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                y = F.linear(z, C, b)  # (B, K, V)
            logp = torch.logsumexp(F.log_softmax(y.float(), dim=-1) + log_pi[..., None], dim=1)
            F.nll_loss(logp, targets).backward()
        return run

    parts = {"lstm": step_lstm, "softmax": step_softmax,
             **{f"mos{k}": step_mos(k) for k in a.k}}
    for fn in parts.values():  # warm-up: allocations, kernels chosen
        fn()
    seconds = {name: [] for name in parts}
    for _ in range(a.rounds):  # alternating: each round times every part once
        for name, fn in parts.items():
            seconds[name].append(seconds_of(fn))
    median = {name: sorted(s)[len(s) // 2] for name, s in seconds.items()}
    base = median["lstm"] + median["softmax"]
    result = {"threads": a.threads, "batch_words": rows * T, "m": m, "h": h, "vocab": V,
              "seconds": {k: round(v, 4) for k, v in median.items()},
              "step_softmax": round(base, 4),
              "output_share": round(median["softmax"] / base, 3),
              "step_ratio": {f"mos{k}": round((median["lstm"] + median[f"mos{k}"]) / base, 2)
                             for k in a.k}}
    print(json.dumps(result, indent=1))
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(a.out, result)


if __name__ == "__main__":
    main()

"""The energy-minimization variant: what its scoring costs, and how it trains.

``speed`` times, in one run on this machine, at Brown's size (|V| = 14,118, n = 5,
m = 60, h = 50, B = 256):

- the (B, |V|) energies -v . tanh(a + G): torch.tanh in float32 and bf16, against the
  exponential form nnlm uses (tanh(x) = 1 - 2 / (1 + e^{2a} e^{2G}), no transcendental
  per value), at several block sizes;
- a training step (forward + backward) under the full softmax, self-normalization and
  NCE (K = 100 shared), v shared and per word, as words/s.

    python bench/neural/energy.py speed [--threads 2] [--out bench/results/energy_speed.json]
    python bench/neural/energy.py speed --device cuda --out bench/results/energy_speed_cuda.json

On CUDA the block sweep goes up to 2^28 values (1 GB in float32): a GPU wants few,
large blocks, where a CPU core wants its cache's worth.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from pathlib import Path

import numpy as np
import torch

from nnlm.neural.networks import energy
from nnlm.neural.networks.energy import EnergyConfig, EnergyNetwork
from nnlm.neural.objectives import NCE, FullSoftmax, SelfNormalized

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

V, N, M, H, B = 14118, 5, 60, 50, 256


def fastest_call(fn, rounds: int = 3) -> float:
    """Fastest of ``rounds`` calls after a warm-up; GPU work included (synchronized)."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else None
    harness.timed(fn, sync=sync)
    return harness.best_of(rounds, fn, sync)[1]


def tanh_blocked(a, G, v, dtype, block: int):
    out = torch.empty(len(a), len(G), device=a.device)
    a_, G_, v_ = a.to(dtype), G.to(dtype), v.to(dtype)
    step = max(1, block // (len(a) * a.shape[1]))
    for j in range(0, len(G), step):
        T = torch.tanh(a_[:, None, :] + G_[None, j : j + step])
        out[:, j : j + step] = -(T @ v_).float()
    return out


def train_step(net, obj, ctx, tgt, sparse: bool) -> None:
    net.zero_grad()
    obj.loss(net, ctx, tgt, sparse=sparse).backward()


def speed(args) -> dict:
    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    a, G = torch.randn(B, H, generator=g).to(dev), torch.randn(V, H, generator=g).to(dev)
    v = torch.randn(H, generator=g).to(dev)
    kernels = []
    blocks = range(16, 23, 2) if dev.type == "cpu" else range(20, 29, 2)
    default_block = energy.block_elements(dev)
    # what energy_logits forms on this device (energy._exponentials says why)
    ours = "exp form fp32 (nnlm)" if dev.type == "cpu" else "sigmoid form fp32 (nnlm)"
    for block in (1 << k for k in blocks):
        for name, dtype in (("torch.tanh fp32", torch.float32),
                            ("torch.tanh bf16", torch.bfloat16)):
            fn = partial(tanh_blocked, a, G, v, dtype, block)
            kernels.append({"kernel": name, "block": block, "seconds": fastest_call(fn)})
        energy.BLOCK_ELEMENTS = block
        kernels.append({"kernel": ours, "block": block,
                        "seconds": fastest_call(lambda: energy.energy_logits(a, G, v))})
    energy.BLOCK_ELEMENTS = None  # back to each device's default
    ref = tanh_blocked(a, G, v, torch.float64, default_block)
    err = float((energy.energy_logits(a, G, v).double() - ref.double()).abs().max())
    bf = float((tanh_blocked(a, G, v, torch.bfloat16, default_block).double() - ref)
               .abs().max())
    counts = np.arange(V, 0, -1, dtype=np.float64)
    steps = []
    for per_word in (False, True):
        for obj_name, obj in (("softmax", FullSoftmax()), ("selfnorm", SelfNormalized(0.1)),
                              ("nce K=100", NCE(counts, samples=100))):
            net = EnergyNetwork(EnergyConfig(vocab_size=V, order=N, m=M, h=H,
                                             v_per_word=per_word))
            with torch.no_grad():
                net.v.normal_(generator=g)
            net.to(dev)
            ctx = torch.randint(3, V, (B, N - 1), generator=g).to(dev)
            tgt = torch.randint(3, V, (B,), generator=g).to(dev)
            sparse = obj_name.startswith("nce")
            obj = obj.to(dev)

            s = fastest_call(partial(train_step, net, obj, ctx, tgt, sparse))
            steps.append({"objective": obj_name, "v": "per word" if per_word else "shared",
                          "seconds_per_step": s, "words_per_second": B / s})
    return {"device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu",
            "default_block": default_block,
            "machine_threads": args.threads, "shape": {"V": V, "n": N, "m": M, "h": H, "B": B},
            "energies_max_abs_error": {ours: err, "torch.tanh bf16": bf},
            "energies": kernels, "training_steps": steps}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sp = sub.add_parser("speed")
    sp.add_argument("--threads", type=int, default=2)
    sp.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    sp.add_argument("--out", type=Path, default=Path("bench/results/energy_speed.json"))
    args = ap.parse_args()
    out = speed(args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()

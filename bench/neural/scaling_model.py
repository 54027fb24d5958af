"""A model of computation and communication per update for each parallel scheme, checked
against bench/results/parallel.json (P = 2 on this machine) and applied to larger corpora,
vocabularies and machines. Prints the tables of docs/scaling.md and writes JSON.

    python bench/neural/scaling_model.py  # after bench/neural/parallel.py, collectives.py

Per update of a global batch of B examples, for a network whose output layer has |V| rows
of k inputs (the NPLM: k = (n-1)m with direct connections + h), P processes:

    compute per example   f = 6 |V| k (output layer, forward and backward) + 6 h (n-1) m
    async (Hogwild)       each worker t1 per example, no messages: words/s = P / t1
    sync data-parallel    t = (B/P) t1 + allreduce(4 S)       S: parameters with dense grads
    output-parallel       t = B t1 (f_out / P + f_rest) / f
                              + allreduce(4 B) + allreduce(8 B) + allreduce(4 B k)
                              [+ allgather(4 |V| k) when U = C]
    ring allreduce(x)     = 2 (P-1) a + 2 (P-1)/P x / beta
    ring allgather(x)     = (P-1) a + (P-1)/P x / beta

t1 (seconds per example on one thread) and a, beta (gloo on this machine) are measured;
the larger machines' figures are assumptions, stated in ASSUMED below.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

RESULTS = Path("bench/results")

# the networks: (|V|, n, m, h, direct, tied)
NETWORKS = {
    "mlp1 on Brown": (14118, 5, 60, 50, True, False),
    "modern on Brown": (14118, 6, 256, 256, False, True),
    "mlp1-shape, AP News (|V| 17,964)": (17964, 5, 60, 50, True, False),
    "mlp1-shape, 1B words (|V| 100k)": (100_000, 5, 60, 50, True, False),
    "modern-shape, 1B words (|V| 100k)": (100_000, 6, 256, 256, False, True),
}
CORPUS_WORDS = {"AP News": 14e6, "1B words": 1e9}

# the machines the model is applied to. flops: effective rate of these products per
# worker; beta: bytes/s per link; alpha: seconds per message hop. Assumptions, not
# measurements, except the H100's compute: measured on one H100 (bench/neural/gpu.py --shapes;
# 14 to 95 TFLOP/s effective, far below the chip's dense peak at these narrow products).
# NVLink within a node of 8; InfiniBand NDR across nodes; a 1 Gb/s Ethernet cluster of CPUs
# like this machine's cores.
ASSUMED = {
    "H100, NVLink (P <= 8) / InfiniBand 400 Gb/s (P = 64)": {
        "flops": "measured",  # bench/results/gpu.json's shapes, by network, |V| and batch
        "beta": {2: 400e9, 8: 400e9, 64: 50e9},
        "alpha": {2: 10e-6, 8: 10e-6, 64: 20e-6}},
    "CPU cores like this machine's, 1 Gb/s Ethernet (async: one P-core machine)": {
        "flops": None, "beta": {2: 125e6, 8: 125e6, 64: 125e6},
        "alpha": {2: 50e-6, 8: 50e-6, 64: 50e-6}},
}


def gpu_rate(shapes: list[dict], net_name: str, V: int, B: int) -> float:
    """Effective FLOP/s of one H100 on this network's update at batch B: measured
    (bench/neural/gpu.py --shapes) for the same network at the nearest measured |V|,
    interpolated log-log between the measured batches (clamped at the ends)."""
    import math

    preset = "modern" if net_name.startswith("modern") else "mlp1"
    rows = [r for r in shapes if r["preset"] == preset]
    vocab = min({r["vocab"] for r in rows}, key=lambda v: abs(math.log(v / V)))
    pts = sorted((r["batch"], r["effective_tflops"] * 1e12) for r in rows
                 if r["vocab"] == vocab)
    if B <= pts[0][0]:
        return pts[0][1]
    for (b0, r0), (b1, r1) in zip(pts, pts[1:]):
        if B <= b1:
            w = math.log(B / b0) / math.log(b1 / b0)
            return math.exp((1 - w) * math.log(r0) + w * math.log(r1))
    return pts[-1][1]


def shape(net):
    V, n, m, h, direct, tied = net
    k = (n - 1) * m * direct + h if not tied else h
    f_out = 6 * V * k
    f_rest = 6 * h * (n - 1) * m
    C = V * m
    dense = (0 if tied else V * k) + V + h * ((n - 1) * m + 1) + C  # AdamW: C is dense too
    return {"V": V, "k": k, "f_out": f_out, "f_rest": f_rest, "dense_params": dense,
            "tied": tied}


def allreduce(x, P, a, beta):
    return 2 * (P - 1) * a + 2 * (P - 1) / P * x / beta


def allgather(x, P, a, beta):
    return (P - 1) * a + (P - 1) / P * x / beta


def step_seconds(scheme, s, B, P, t1, a, beta):
    """Seconds per update of B examples (async: per B examples over all workers)."""
    if scheme == "async":
        return B * t1 / P
    if scheme == "sync":
        return (B / P) * t1 + allreduce(4 * s["dense_params"], P, a, beta)
    f = s["f_out"] + s["f_rest"]
    t = B * t1 * (s["f_out"] / P + s["f_rest"]) / f
    t += allreduce(4 * B, P, a, beta) + allreduce(8 * B, P, a, beta)
    t += allreduce(4 * B * s["k"], P, a, beta)
    if s["tied"]:
        t += allgather(4 * s["V"] * s["k"], P, a, beta)
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULTS / "scaling_model.json")
    args = ap.parse_args()
    measured = [r for name in ("parallel.json", "parallel_1thread.json")
                if (RESULTS / name).exists()
                for r in json.loads((RESULTS / name).read_text())["rows"]]
    coll = json.loads((RESULTS / "collectives.json").read_text())["fit"]["all_reduce"]
    a2, beta = coll["alpha_seconds"] / 2, coll["beta_bytes_per_second"]
    out = {"check": [], "projection": []}
    print("## P = 2 on this machine: model against measurement\n")
    print("| network | scheme | model words/s | measured words/s | measured / model |")
    print("|---|---|---:|---:|---:|")
    names = {"async, 2 workers": "async", "sync DDP, 2 ranks": "sync",
             "output-parallel, 2 ranks": "output"}
    t1s = {}
    for preset, net in (("mlp1", "mlp1 on Brown"), ("modern", "modern on Brown")):
        rows = {r["scheme"]: r for r in measured if r["preset"] == preset}
        if "single (1 thread)" not in rows:
            continue
        t1 = 1 / rows["single (1 thread)"]["words_per_second"]
        t1s[net] = t1
        s = shape(NETWORKS[net])
        for scheme, key in names.items():
            if scheme not in rows:
                continue
            model = 256 / step_seconds(key, s, 256, 2, t1, a2, beta)
            got = rows[scheme]["words_per_second"]
            out["check"].append({"network": net, "scheme": scheme, "model": model,
                                 "measured": got})
            print(f"| {net} | {scheme} | {model:,.0f} | {got:,.0f} | {got / model:.2f} |")
    # projections: hours per epoch, 256 examples per worker: async workers take their own
    # batches of 256; the synchronous schemes an update of B = 256 P (weak scaling)
    gpu = RESULTS / "gpu.json"
    shapes = json.loads(gpu.read_text()).get("shapes", []) if gpu.exists() else []
    flops_here = None
    if "mlp1 on Brown" in t1s:
        s = shape(NETWORKS["mlp1 on Brown"])
        flops_here = (s["f_out"] + s["f_rest"]) / t1s["mlp1 on Brown"]
    print("\n## Hours per epoch (model)\n")
    print("| corpus, network | machine | P | async | sync DDP | output-parallel |")
    print("|---|---|---:|---:|---:|---:|")
    for net_name in ("mlp1-shape, AP News (|V| 17,964)", "mlp1-shape, 1B words (|V| 100k)",
                     "modern-shape, 1B words (|V| 100k)"):
        words = CORPUS_WORDS["AP News" if "AP" in net_name else "1B words"]
        s = shape(NETWORKS[net_name])
        for machine, m in ASSUMED.items():
            flops = m["flops"] or flops_here
            if flops is None or (flops == "measured" and not shapes):
                continue
            for P in (2, 8, 64):
                a, b = m["alpha"][P], m["beta"][P]
                hours = {}
                for key in ("async", "sync", "output"):
                    B = 256 if key == "async" else 256 * P
                    if key == "async" and "H100" in machine:
                        hours[key] = None  # one process per GPU: no shared memory
                        continue
                    # a GPU's rate grows with the rows of its products: 256 per rank
                    # under DDP, all B = 256 P under output-parallel
                    rate = flops if flops != "measured" else gpu_rate(
                        shapes, net_name, s["V"], 256 if key == "sync" else B)
                    t1 = (s["f_out"] + s["f_rest"]) / rate
                    per = step_seconds(key, s, B, P, t1, a, b) / B
                    hours[key] = words * per / 3600
                out["projection"].append({"network": net_name, "machine": machine, "P": P,
                                          "hours_per_epoch": hours})
                cells = [("n/a" if hours.get(k) is None else f"{hours[k]:,.3g}")
                         for k in ("async", "sync", "output")]
                print(f"| {net_name} | {machine} | {P} | " + " | ".join(cells) + " |")
    harness.write_record(args.out, out)


if __name__ == "__main__":
    main()

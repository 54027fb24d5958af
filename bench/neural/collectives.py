"""The cost of torch.distributed's collectives on this machine (gloo, 2 processes, one
thread each): time of an all-reduce and an all-gather against the message size, fitted to
t = alpha + bytes / beta. docs/scaling.md's model of each parallel scheme takes alpha and
beta from here. One run, JSON out:

    python bench/neural/collectives.py --out bench/results/collectives.json

Never run by the tests.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness

SIZES = [16, 256, 4096, 65536, 262144, 1048576, 4194304]  # float32 values


def _rank(rank: int, size: int, port: int, out) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=size)
    rows = []
    for n in SIZES:
        x = torch.ones(n)
        parts = [torch.empty(n) for _ in range(size)]
        for name, op in (("all_reduce", lambda x=x: dist.all_reduce(x)),
                         ("all_gather", lambda x=x, parts=parts: dist.all_gather(parts, x))):
            reps = max(5, min(200, 2_000_000 // n))
            op()
            dist.barrier()
            t = time.perf_counter()
            for _ in range(reps):
                op()
            rows.append({"op": name, "values": n, "bytes": 4 * n,
                         "seconds": (time.perf_counter() - t) / reps})
    if rank == 0:
        out.put(rows)
    dist.destroy_process_group()


def fit(rows: list[dict], op: str) -> dict:
    """Least squares of seconds = alpha + bytes / beta."""
    b = np.array([r["bytes"] for r in rows if r["op"] == op], float)
    t = np.array([r["seconds"] for r in rows if r["op"] == op], float)
    slope, alpha = np.polyfit(b, t, 1)
    return {"alpha_seconds": alpha if alpha > 0 else float(t.min()),
            "beta_bytes_per_second": 1 / slope}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("bench/results/collectives.json"))
    args = ap.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    rows = out.get(timeout=600)
    for p in procs:
        p.join()
    fits = {op: fit(rows, op) for op in ("all_reduce", "all_gather")}
    for r in rows:
        print(f"{r['op']:10} {r['bytes']:>10,} bytes  {r['seconds'] * 1e6:10.1f} us")
    for op, f in fits.items():
        print(f"{op}: alpha {f['alpha_seconds'] * 1e6:.0f} us, "
              f"beta {f['beta_bytes_per_second'] / 1e9:.2f} GB/s")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, {"backend": "gloo", "processes": 2, "rows": rows,
                                    "fit": fits})


if __name__ == "__main__":
    main()

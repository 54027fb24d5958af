"""Parallel training schemes on Brown v1, one run, JSON out: one process with 2
threads against asynchronous workers (Hogwild), synchronous data-parallel ranks and
output-parallel ranks under torchrun, each on the whole machine; and the ceiling of any
data-parallel scheme here, two one-thread processes that train at once and share nothing.

    python bench/neural/parallel.py --data data/brown --out bench/results/parallel.json
    python bench/neural/parallel.py --data data/brown --presets mlp1 --epochs 1 \
        --schemes "single (2 threads)" "async, 2 workers" "independent, 2 x 1 thread" \
        --seeds 0 1 2 --out bench/results/parallel_epoch_seeds.json

Every scheme trains the same preset from the same seed on the same batches (--max-steps
updates of --batch-size, or whole epochs with --epochs), through the real command line.
Reported per run: training words/s (trainer.json's training seconds, start-up and
validation excluded), validation perplexity of the weights at the end, and the bytes of
output-layer parameters each rank holds. Never run by the tests.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness

SCHEMES = {
    "single (2 threads)": {"prefix": [], "args": ["--threads", "2"]},
    "single (1 thread)": {"prefix": [], "args": ["--threads", "1"]},
    "async, 2 workers": {"prefix": [], "args": ["--workers", "2"]},
    # the ceiling of data parallelism on this machine: two one-thread processes training at
    # once and sharing nothing (no lock, no shared pages, no communication); their words/s
    # add up. What a data-parallel scheme can gain over one process with P threads is
    # bounded by this, whatever the scheme does
    "independent, 2 x 1 thread": {"prefix": [], "args": ["--threads", "1"], "copies": 2},
    "sync DDP, 2 ranks": {"prefix": "torchrun", "args": []},
    "output-parallel, 2 ranks": {"prefix": "torchrun", "args": ["--output-parallel"]},
}


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(data: Path, preset: str, scheme: str, out: Path, steps: list[str]) -> dict:
    spec = SCHEMES[scheme]
    cmd = [sys.executable, "-m", "nnlm"]
    if spec["prefix"] == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", str(_port()), "-m", "nnlm"]
    cmd += ["train", str(data / "train.txt"), "--valid", str(data / "valid.txt"), "--preset",
            preset, "-o", str(out), "--checkpoint-every", "0", *steps, *spec["args"]]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS",)}
    env["NNLM_PROGRESS_SECONDS"] = "600"
    copies = spec.get("copies", 1)
    outs = [out] + [out.with_name(f"{out.name}-copy{i}") for i in range(1, copies)]
    procs = [subprocess.Popen([*cmd[:cmd.index("-o") + 1], str(o), *cmd[cmd.index("-o") + 2:]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env=env) for o in outs]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"{scheme} failed:\n{err[-3000:]}")
    config = json.loads((out / "config.json").read_text())
    states = [json.loads((o / "state" / "trainer.json").read_text())["trainer"] for o in outs]
    state = states[0]
    words = state["step"] * config["train"]["batch_size"]
    # copies: the words/s of all of them together (each trains the same words)
    words_per_second = sum(words / s["elapsed"] for s in states)
    ev = subprocess.run([sys.executable, "-m", "nnlm", "eval", str(out),
                         str(data / "valid.txt"), "--json"], capture_output=True, text=True,
                        check=True)
    c = config["config"]
    out_rows = c["vocab_size"] * ((0 if c.get("tied") else
                                   (c["order"] - 1) * c["m"] * c.get("direct", 0) + c["h"]) + 1)
    ranks = 2 if "output-parallel" in scheme else 1
    return {"preset": preset, "scheme": scheme, "updates": state["step"], "words": words,
            "train_seconds": state["elapsed"], "words_per_second": words_per_second,
            "valid_ppl": json.loads(ev.stdout)["perplexity"],
            "output_layer_bytes_per_rank": 4 * out_rows // ranks}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=Path("bench/results/parallel.json"))
    ap.add_argument("--presets", nargs="+", default=["mlp1", "modern"])
    ap.add_argument("--schemes", nargs="+", choices=list(SCHEMES),
                    default=[s for s in SCHEMES if s != "single (1 thread)"],
                    help="the first is the baseline of the ratios (default: all but one "
                    "thread; docs/scaling.md's model needs that one too)")
    ap.add_argument("--max-steps", type=int, default=300)
    ap.add_argument("--epochs", type=int, default=None,
                    help="train whole epochs instead of --max-steps updates")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0],
                    help="train each scheme once per seed (the baseline too): the spread "
                    "of one scheme over seeds says how large a difference between schemes "
                    "means something")
    ap.add_argument("--rounds", type=int, default=1,
                    help="train every scheme this many times per seed, the schemes taking "
                    "turns; speed ratios are taken within a round and their median "
                    "reported (this machine's speed drifts by 30%% between minutes: a "
                    "scheme run once lands wherever the drift is)")
    args = ap.parse_args()
    steps = (["--epochs", str(args.epochs)] if args.epochs else
             ["--max-steps", str(args.max_steps)])
    rows = []
    work = Path(tempfile.mkdtemp(prefix="nnlm-parallel-"))
    try:
        for preset in args.presets:
            for seed, round_ in itertools.product(args.seeds, range(args.rounds)):
                for scheme in args.schemes:
                    r = run(args.data, preset, scheme, work / f"{preset}-{len(rows)}",
                            [*steps, "--seed", str(seed)])
                    r["seed"], r["round"] = seed, round_
                    base = next((x for x in rows if x["preset"] == preset
                                 and x["seed"] == seed and x["round"] == round_), r)
                    r["speedup"] = r["words_per_second"] / base["words_per_second"]
                    r["valid_ppl_ratio"] = r["valid_ppl"] / base["valid_ppl"]
                    rows.append(r)
                    print(f"{preset:7} seed {seed} round {round_} {scheme:26} "
                          f"{r['words_per_second']:9,.0f} "
                          f"words/s ({r['speedup']:.2f}x)  valid ppl {r['valid_ppl']:8.2f} "
                          f"({r['valid_ppl_ratio']:.3f})  after {r['words']:,} words",
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = []
    for preset in args.presets:
        for scheme in args.schemes:
            runs = [r for r in rows if r["preset"] == preset and r["scheme"] == scheme]
            ppl = [r["valid_ppl"] for r in runs]
            summary.append({"preset": preset, "scheme": scheme, "seeds": len(runs),
                            "valid_ppl_mean": sum(ppl) / len(ppl), "valid_ppl_min": min(ppl),
                            "valid_ppl_max": max(ppl),
                            "words_per_second_mean":
                                sum(r["words_per_second"] for r in runs) / len(runs),
                            "speedup_median": statistics.median(r["speedup"] for r in runs),
                            "speedup_min": min(r["speedup"] for r in runs),
                            "speedup_max": max(r["speedup"] for r in runs)})
            base = next(x for x in summary if x["preset"] == preset)
            summary[-1]["valid_ppl_mean_ratio"] = (summary[-1]["valid_ppl_mean"]
                                                   / base["valid_ppl_mean"])
            print(f"{preset:7} {scheme:26} over {len(runs)} runs: valid ppl "
                  f"{summary[-1]['valid_ppl_mean']:.2f} ({min(ppl):.2f}-{max(ppl):.2f}), "
                  f"{summary[-1]['valid_ppl_mean_ratio']:.3f} of the baseline's mean; speed "
                  f"{summary[-1]['speedup_median']:.3f}x the baseline's in the median round "
                  f"({summary[-1]['speedup_min']:.3f}-{summary[-1]['speedup_max']:.3f})",
                  flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, {"corpus": "Brown v1", "cores": os.cpu_count(),
                                    "steps": steps, "seeds": args.seeds,
                                    "rounds": args.rounds, "rows": rows, "summary": summary})


if __name__ == "__main__":
    main()

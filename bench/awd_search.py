"""Variants of the awd recipe trained side by side under one time limit each, then scored
on test: which regularizer, size or rate buys what within a fixed budget.

On one GPU several small LSTMs share the card (each mostly waits on its own 256
sequential steps), so one loan trains a handful of recipes to the number of epochs two
CPU threads would reach in hours. Each variant is ``nnlm train --preset awd`` with its
flags; a run still going at the limit is stopped with Ctrl-C's signal, which keeps its
best model and metrics. Writes JSON: each variant's command, its validation curve, its
best epoch and its test perplexity.

    python bench/awd_search.py --device cuda --seconds 420 --out awd_search.json
    python bench/awd_search.py --only base stronger --seconds 60    # a CPU smoke run
    python bench/awd_search.py --plot-only bench/results/awd_search_h100.json \
        --plot docs/awd_search.png
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

STRONGER = ["--dropout-x", "0.5", "--dropout-h", "0.5", "--dropout-w", "0.6",
            "--weight-decay", "0.1", "--average", "0.999", "--plateau-decay", "1.0"]

VARIANTS = {
    "base": [],
    "stronger": STRONGER,
    "stronger_lr1e-3": STRONGER + ["--lr", "0.001"],
    "stronger_b1024": STRONGER + ["--batch-size", "1024"],
    "strongest": ["--dropout-x", "0.6", "--dropout-h", "0.6", "--dropout-w", "0.7",
                  "--dropout-e", "0.15", "--weight-decay", "0.2", "--average", "0.999",
                  "--plateau-decay", "1.0"],
    "m400": ["--m", "400"],
    "stronger_m400": STRONGER + ["--m", "400"],
    "stronger_2layers": STRONGER + ["--layers", "2", "--dropout-l", "0.3"],
    "awd_dims": STRONGER + ["--m", "400", "--h", "1150", "--layers", "3", "--dropout-l", "0.25"],
}


def curve(run: Path) -> list[dict]:
    path = run / "metrics.csv"
    if not path.exists():
        return []
    with path.open() as f:
        return [{"epoch": int(r["epoch"]), "valid_ppl": round(float(r["valid_ppl"]), 2),
                 "train_ppl": round(float(r["train_ppl"]), 2),
                 "words_per_second": round(float(r["words_per_second"])),
                 "elapsed_seconds": round(float(r["elapsed_seconds"]), 1)}
                for r in csv.DictReader(f) if r["epoch"]]


def plot(variants: dict, path: str) -> None:
    """Validation perplexity against epoch, one line a variant, the best marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    for name, row in sorted(variants.items(), key=lambda kv: kv[1].get("best_valid", 1e9)):
        epochs = row["epochs"]
        if not epochs:
            continue
        line, = ax.plot([e["epoch"] for e in epochs], [e["valid_ppl"] for e in epochs],
                        marker=".", label=f"{name} ({row.get('best_valid')})")
        ax.plot(row["best_epoch"], row["best_valid"], "o", color=line.get_color(), mfc="none")
    ax.set_ylim(105, 180)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_title("awd variants on Brown v1 (best validation in brackets)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def from_json(path: str) -> dict:
    """A results file's variants; where several runs trained one variant, the longest."""
    data = json.loads(Path(path).read_text())
    merged: dict = {}
    for run in data.get("runs", [data]):
        for name, row in run["variants"].items():
            if len(row["epochs"]) >= len(merged.get(name, {}).get("epochs", [])):
                merged[name] = row
    return merged


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="data/brown", help="folder with train/valid/test.txt")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seconds", type=int, default=420, help="each variant's training limit")
    ap.add_argument("--only", nargs="*", choices=sorted(VARIANTS), help="these variants")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per variant")
    ap.add_argument("--runs", default="/tmp/awd_search", help="folder for the models")
    ap.add_argument("--out", default="bench/results/awd_search.json")
    ap.add_argument("--plot", metavar="PNG", help="also draw the validation curves")
    ap.add_argument("--plot-only", metavar="JSON", help="train nothing: draw JSON's curves")
    a = ap.parse_args()
    if a.plot_only:
        plot(from_json(a.plot_only), a.plot or "awd_search.png")
        return 0
    if a.seconds < 1 or a.threads < 1:
        ap.error("--seconds and --threads must be >= 1")
    data, runs = Path(a.data), Path(a.runs)
    runs.mkdir(parents=True, exist_ok=True)
    names = a.only or list(VARIANTS)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    procs, commands = {}, {}
    for name in names:
        out = runs / name
        cmd = [sys.executable, "-m", "nnlm", "train", str(data / "train.txt"),
               "--valid", str(data / "valid.txt"), "--preset", "awd", *VARIANTS[name],
               "--device", a.device, "--threads", str(a.threads), "-o", str(out)]
        commands[name] = "nnlm train ... --preset awd " + " ".join(VARIANTS[name])
        log = (runs / f"{name}.log").open("w")
        procs[name] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    start = time.monotonic()
    while any(p.poll() is None for p in procs.values()):
        if time.monotonic() - start > a.seconds:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)
            for p in procs.values():
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
            break
        time.sleep(2)
    results = {}
    for name in names:
        out = runs / name
        epochs = curve(out)
        row = {"command": commands[name], "epochs": epochs}
        if epochs:
            best = min(epochs, key=lambda e: e["valid_ppl"])
            row.update(best_epoch=best["epoch"], best_valid=best["valid_ppl"])
        if (out / "model.safetensors").exists():
            r = subprocess.run([sys.executable, "-m", "nnlm", "eval", str(out),
                                str(data / "test.txt"), "--device", a.device, "--json"],
                               capture_output=True, text=True, env=env)
            if r.returncode == 0:
                row["test_ppl"] = round(json.loads(r.stdout)["perplexity"], 2)
        results[name] = row
        print(f"{name:18s} epochs {len(epochs):3d}  best valid {row.get('best_valid')}"
              f" (epoch {row.get('best_epoch')})  test {row.get('test_ppl')}", flush=True)
    Path(a.out).write_text(json.dumps({"device": a.device, "seconds": a.seconds,
                                       "variants": results}, indent=1) + "\n")
    if a.plot:
        plot(results, a.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())

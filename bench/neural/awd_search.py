"""Variants of the awd recipe trained side by side under one time limit each, then scored
on test: which regularizer, size or rate buys what within a fixed budget.

``--ablation`` trains the preset and the preset with each of AWD-LSTM's pieces taken out
(DropConnect, locked masks, embedding dropout, AR and TAR, tied weights, the weights'
average), and the preset from another seed, which says how large a difference the seed
alone makes; ``--train-tokens`` and ``--valid-tokens`` cut the texts to their first lines,
so that on two CPU threads every variant runs to its early stop within minutes, and
``--parallel`` trains that many at once (on a GPU: all of them, the default).

On one GPU several small LSTMs share the card (each mostly waits on its own 256
sequential steps), so one loan trains a handful of recipes to the number of epochs two
CPU threads would reach in hours. Each variant is ``nnlm train --preset awd`` with its
flags; a run still going at the limit is stopped with Ctrl-C's signal, which keeps its
best model and metrics. Writes JSON: each variant's command, its validation curve, its
best epoch and its test perplexity.

    python bench/neural/awd_search.py --device cuda --seconds 420 --out awd_search.json
    python bench/neural/awd_search.py --only base stronger --seconds 60    # a CPU smoke run
    python bench/neural/awd_search.py --ablation --train-tokens 100000 --valid-tokens 50000 \
        --parallel 2 --threads 1 --epochs 30 --seconds 1200 \
        --out bench/results/awd_ablation_100k.json
    python bench/neural/awd_search.py --plot-only bench/results/awd_search_h100.json \
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness

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
    # the ablation: the preset with one of AWD-LSTM's pieces taken out (``--ablation``)
    "no_dropconnect": ["--dropout-w", "0"],
    "unlocked": ["--no-locked"],
    "no_embedding_dropout": ["--dropout-e", "0"],
    "no_ar_tar": ["--ar", "0", "--tar", "0"],
    "untied": ["--no-tied"],
    "no_average": ["--average", "0"],
    "another_seed": ["--seed", "1"],  # the preset again: how far apart two seeds land
    "no_dropout": ["--dropout-x", "0", "--dropout-h", "0", "--dropout-e", "0",
                   "--dropout-w", "0"],
}
ABLATION = ["base", "no_dropconnect", "unlocked", "no_embedding_dropout", "no_ar_tar",
            "untied", "no_average", "another_seed"]


def head(source: Path, tokens: int, target: Path) -> Path:
    """The first whole lines of ``source`` that hold about ``tokens`` tokens (each line's
    words and its </s>), written to ``target``."""
    count, lines = 0, []
    with source.open(encoding="utf-8") as f:
        for line in f:
            lines.append(line)
            count += len(line.split()) + 1
            if count >= tokens:
                break
    target.write_text("".join(lines), encoding="utf-8")
    return target


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


def plot(variants: dict, path: str, title: str = "awd variants on Brown v1") -> None:
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
    best = min((row["best_valid"] for row in variants.values() if row.get("epochs")),
               default=100)
    ax.set_ylim(best * 0.95, best * 1.6)
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation perplexity")
    ax.set_title(f"{title} (best validation in brackets)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)


def title_of(run: dict) -> str:
    """The picture's title: the variants, and the part of Brown they trained on."""
    tokens = run.get("train_tokens")
    return ("awd variants on Brown v1" if not tokens
            else f"awd ablation, Brown v1's first {tokens:,} training tokens")


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
    ap.add_argument("--ablation", action="store_true",
                    help="the preset and each of its pieces taken out: " + ", ".join(ABLATION))
    ap.add_argument("--epochs", type=int, help="at most this many epochs (the preset's: 60)")
    ap.add_argument("--train-tokens", type=int,
                    help="train on the first lines of train.txt that hold this many tokens")
    ap.add_argument("--valid-tokens", type=int,
                    help="validate on the first lines of valid.txt that hold this many tokens")
    ap.add_argument("--parallel", type=int, default=0,
                    help="train at most this many variants at once (default: all)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads per variant")
    ap.add_argument("--runs", default="/tmp/awd_search", help="folder for the models")
    ap.add_argument("--out", default="bench/results/awd_search.json")
    ap.add_argument("--plot", metavar="PNG", help="also draw the validation curves")
    ap.add_argument("--plot-only", metavar="JSON", help="train nothing: draw JSON's curves")
    ap.add_argument("--collect", action="store_true",
                    help="train nothing: score the variants already trained in --runs")
    a = ap.parse_args()
    if a.plot_only:
        data = json.loads(Path(a.plot_only).read_text())
        plot(from_json(a.plot_only), a.plot or "awd_search.png", title_of(data))
        return 0
    if a.seconds < 1 or a.threads < 1 or a.parallel < 0 or any(
            x is not None and x < 1 for x in (a.epochs, a.train_tokens, a.valid_tokens)):
        ap.error("--seconds, --threads, --epochs and the token counts must be >= 1, "
                 "--parallel >= 0")
    data, runs = Path(a.data), Path(a.runs)
    runs.mkdir(parents=True, exist_ok=True)
    train, valid = data / "train.txt", data / "valid.txt"
    if a.train_tokens and not a.collect:
        train = head(train, a.train_tokens, runs / "train.txt")
    if a.valid_tokens and not a.collect:
        valid = head(valid, a.valid_tokens, runs / "valid.txt")
    names = a.only or (ABLATION if a.ablation else list(VARIANTS))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    extra = ["--epochs", str(a.epochs)] if a.epochs else []
    commands = {name: "nnlm train ... --preset awd " + " ".join(VARIANTS[name] + extra)
                for name in names}

    def start(name):
        cmd = [sys.executable, "-m", "nnlm", "train", str(train),
               "--valid", str(valid), "--preset", "awd", *VARIANTS[name], *extra,
               "--device", a.device, "--threads", str(a.threads), "-o", str(runs / name)]
        log = (runs / f"{name}.log").open("w")
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)

    # each variant trains until its own limit (or its early stop), at most --parallel at once
    waiting, running = ([] if a.collect else list(names)), {}
    while waiting or running:
        while waiting and (not a.parallel or len(running) < a.parallel):
            name = waiting.pop(0)
            running[name] = (start(name), time.monotonic())
        for name, (p, began) in list(running.items()):
            if p.poll() is not None:
                del running[name]
            elif time.monotonic() - began > a.seconds:
                p.send_signal(signal.SIGINT)  # keeps the best model and metrics
                try:
                    p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                del running[name]
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
    harness.write_record(a.out, {"device": a.device, "seconds": a.seconds,
                                 "epochs": a.epochs, "data": a.data,
                                 "train_tokens": a.train_tokens,
                                 "valid_tokens": a.valid_tokens, "threads": a.threads,
                                 "parallel": a.parallel, "variants": results})
    if a.plot:
        plot(results, a.plot, title_of(vars(a)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What each ingredient of the ``deep`` preset buys: the preset trained with
one ingredient taken out or changed at a time, on Brown v1, at an equal budget.

    python bench/neural/deep.py run   --data data/brown [--epochs 3] [--only deep,no_far,...]
    python bench/neural/deep.py table  # the markdown table of docs/deep.md from the JSON
    python bench/neural/deep.py record --run runs/X --name NAME --command "nnlm train ..." \
        --out bench/results/deep_full_runs.json   # a full run's curve and test perplexity

``run`` trains each variant with the preset's recipe (AdamW, dropout, early stopping) for
at most ``--epochs`` epochs, then scores the test text exactly. Results merge into the
JSON (``--out``) as each run ends, so an interrupted bench resumes where it stopped.
Models go to ``--workdir``. The variants:

- ``deep``: the preset as the ablation ran it (n = 6: the last 5 words; S = 58 earlier
  words of the line averaged with learned weights; h = 512; L = 2 residual pre-LN blocks;
  tied; dropout 0.3 and no moving average of the weights, which the preset has had since:
  ``ABLATION_BASE`` keeps the table reproducible);
- the window: ``window3`` (n = 4), ``window9`` (n = 10);
- the distant context: ``no_far`` (S = 0), ``far_mean`` (plain mean), ``far_fofe``
  (FOFE code, alpha 0.7);
- depth: ``layers0``, ``layers1``, ``layers4``;
- ``no_residual``, ``no_layer_norm``, ``no_dropout``, ``untied``;
- references: ``modern`` (the best one-hidden-layer NPLM), ``modern_fofe`` (the same
  with FOFE codes in the window's slots, reaching 32 words back) and ``lstm`` (the
  recurrent g, at the same budget of epochs);
- the ``awd`` preset's regularizers, one taken out at a time: ``awd_no_dropconnect``,
  ``awd_unlocked`` (a fresh dropout mask at every position), ``awd_no_embedding_dropout``,
  ``awd_no_ar_tar``; and its size: ``awd_h512``, ``awd_two_layers`` (h = 768, L = 2).

Never run by the tests.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

VARIANTS: dict[str, tuple[str, dict]] = {
    "deep": ("deep", {}),
    "window3": ("deep", {"order": 4}),
    "window9": ("deep", {"order": 10}),
    "no_far": ("deep", {"history": 0, "far": "none"}),
    "far_mean": ("deep", {"far": "mean"}),
    "far_fofe": ("deep", {"far": "fofe"}),
    "layers0": ("deep", {"layers": 0}),
    "layers1": ("deep", {"layers": 1}),
    "layers4": ("deep", {"layers": 4}),
    "no_residual": ("deep", {"residual": False}),
    "no_layer_norm": ("deep", {"layer_norm": False}),
    "no_dropout": ("deep", {"dropout_x": 0.0, "dropout_h": 0.0}),
    "untied": ("deep", {"tied": False}),
    "modern": ("modern", {}),
    "modern_fofe": ("modern", {"context": "fofe", "history": 32}),
    "lstm": ("lstm", {}),
    # the awd preset with one regularizer taken out at a time (``--only awd,awd_...``)
    "awd": ("awd", {}),
    "awd_no_dropconnect": ("awd", {"dropout_w": 0.0}),
    "awd_unlocked": ("awd", {"locked": False}),
    "awd_no_embedding_dropout": ("awd", {"dropout_e": 0.0}),
    "awd_no_ar_tar": ("awd", {"ar": 0.0, "tar": 0.0}),
    "awd_h512": ("awd", {"h": 512}),
    "awd_two_layers": ("awd", {"h": 768, "layers": 2}),
}


# the deep preset's settings when the ablation ran (since then: dropout 0.1, --average 0.999)
ABLATION_BASE = ({"dropout_x": 0.3, "dropout_h": 0.3}, {"average": 0.0})


def run(args) -> None:
    from nnlm import evaluate, load_model, read_stream
    from nnlm.neural.training.run import train_from_files

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    names = args.only.split(",") if args.only else list(VARIANTS)
    for name in names:
        if name in results and results[name].get("epochs") == args.epochs:
            print(f"{name}: done before ({results[name]['test_ppl']:.1f})")
            continue
        preset, arch = VARIANTS[name]
        out = args.workdir / name
        # a run stopped part-way (the bench was killed) continues from its checkpoint;
        # its minutes then count the resumed part only
        resumed = (out / "config.json").exists()
        t = time.perf_counter()
        curve = []
        base_arch, base_train = ABLATION_BASE if preset == "deep" else ({}, {})
        settings = {"resume": True} if resumed else {
            "preset": preset, "arch": {**base_arch, **arch},
            "train": {**base_train, "epochs": args.epochs}}
        train_from_files(args.data / "train.txt", args.data / "valid.txt", out, **settings,
                         log=lambda line, name=name, curve=curve: (
                             print(f"{name}: {line}", flush=True), curve.append(line)))
        seconds = time.perf_counter() - t
        lm = load_model(out)
        test = evaluate(lm, read_stream(args.data / "test.txt", lm.vocab)).perplexity
        valid = evaluate(lm, read_stream(args.data / "valid.txt", lm.vocab)).perplexity
        results[name] = {"preset": preset, "arch": arch, "epochs": args.epochs,
                         "parameters": lm.model.config.num_parameters(),
                         "valid_ppl": round(valid, 2), "test_ppl": round(test, 2),
                         "train_seconds": round(seconds, 1), "resumed": resumed,
                         "log": [line for line in curve if line.startswith("epoch")]}
        args.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(args.out, results)
        print(f"{name}: test {test:.1f}, valid {valid:.1f}, {seconds / 60:.1f} min", flush=True)


def table(args) -> None:
    results = json.loads(args.out.read_text())
    base = results.get("deep", {}).get("test_ppl")
    print("| variant | change | parameters | valid | test | test vs deep | minutes |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        change = ", ".join(f"{k}={v}" for k, v in r["arch"].items()) or "(the preset)"
        if r["preset"] != "deep":
            change = f"preset {r['preset']} " + ("" if not r["arch"] else change)
        ratio = f"{r['test_ppl'] / base:.3f}" if base else ""
        print(f"| {name} | {change} | {r['parameters'] / 1e6:.2f} M | {r['valid_ppl']:.1f} | "
              f"{r['test_ppl']:.1f} | {ratio} | {r['train_seconds'] / 60:.0f} |")


def record(args) -> None:
    """A run trained by ``nnlm train`` to early stopping: its settings, its curve
    (metrics.csv), its minutes of training and its exact valid and test perplexity."""
    import csv

    from nnlm import evaluate, load_model, read_stream

    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    header = json.loads((args.run / "config.json").read_text())
    with open(args.run / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    epochs = [{"epoch": int(r["epoch"]), "train_ppl": round(float(r["train_ppl"]), 2),
               "valid_ppl": round(float(r["valid_ppl"]), 2), "lr": float(r["lr"]),
               "elapsed_seconds": round(float(r["elapsed_seconds"]), 1)} for r in rows]
    best = min(epochs, key=lambda e: e["valid_ppl"])
    lm = load_model(args.run)
    test = evaluate(lm, read_stream(args.data / "test.txt", lm.vocab)).perplexity
    results[args.name] = {
        "command": args.command, "machine": args.machine, "network": header["config"],
        "train": header.get("train"), "parameters": lm.model.config.num_parameters(),
        "epochs": epochs, "best_epoch": best["epoch"], "best_valid_ppl": best["valid_ppl"],
        "test_ppl": round(test, 2), "train_minutes": round(epochs[-1]["elapsed_seconds"] / 60, 1),
        "test_command": f"nnlm eval {args.run} {args.data / 'test.txt'}"}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, results)
    print(f"{args.name}: best epoch {best['epoch']}, valid {best['valid_ppl']}, test {test:.2f}, "
          f"{results[args.name]['train_minutes']} min")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["run", "table", "record"])
    parser.add_argument("--run", type=Path, help="record: the run's folder")
    parser.add_argument("--name", help="record: its name in the JSON")
    parser.add_argument("--command", help="record: the command that trained it")
    parser.add_argument("--machine", default="2-core AMD EPYC (AVX2), one thread; the other "
                        "core ran another run")
    parser.add_argument("--data", type=Path, default=Path("data/brown"))
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--only", help="comma-separated variants (default: all)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/nnlm-deep"))
    parser.add_argument("--out", type=Path, default=Path("bench/results/deep.json"))
    args = parser.parse_args()
    if args.what == "record" and args.out == parser.get_default("out"):
        args.out = Path("bench/results/deep_full_runs.json")
    {"run": run, "table": table, "record": record}[args.what](args)


if __name__ == "__main__":
    main()

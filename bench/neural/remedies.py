"""The output-layer remedies side by side on Brown: what each buys in speed and costs in
perplexity (full softmax, NCE, self-normalization, short-lists, the log-bilinear model).

    python bench/neural/remedies.py speed   --data data/brown --backoff runs/kn5
    python bench/neural/remedies.py quality --data data/brown --backoff runs/kn5 [--only nce100,...]
    python bench/neural/remedies.py plot    # docs/remedies.png from the JSON
    python bench/neural/remedies.py table   # the README's table from the JSON

``speed``: one run, alternating rounds (each version keeps its best, so a slow spell of a
shared machine hits all): training words/s of one update on fixed Brown batches, mlp1's
shape (n=5, m=60, h=50, direct), batch 256, bf16 products, for each objective with the
paper's SGD and with AdamW; scoring words/s exact (fp32, bf16), self-normalized (raw
scores), and with short-lists (exact, their n-gram share included).

``quality``: trains each configuration with the ``fast`` recipe (AdamW, dropout, bf16)
to early stopping (at most ``--epochs``), then scores the test text exactly; NCE and
self-normalized models also get their raw-score perplexity and log Z statistics.
Results merge into the JSON file as each run ends, so an interrupted bench resumes.
Models go to ``--workdir``. Never run by the tests.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

from nnlm import Vocabulary, count_words, evaluate, read_stream
from nnlm.lm import evaluation_from_logprobs
from nnlm.models import load_model
from nnlm.neural.networks.network import LBLConfig, NPLMConfig
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.runtime import prepare_process
from nnlm.neural.training.run import train_from_files
from nnlm.neural.training.train import TrainConfig, Trainer, output_counts

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

# configurations whose training step costs what another's does (alpha changes no work)
SAME_SPEED = {"selfnorm_a03": "selfnorm", "selfnorm_a1": "selfnorm"}
# name -> (preset, architecture overrides, training overrides)
CONFIGS = {
    "softmax": ("mlp1", {}, {}),
    "nce25": ("mlp1", {}, {"objective": "nce", "noise_samples": 25}),
    "nce100": ("mlp1", {}, {"objective": "nce", "noise_samples": 100}),
    "selfnorm": ("mlp1", {}, {"objective": "selfnorm"}),
    "selfnorm_a03": ("mlp1", {}, {"objective": "selfnorm", "selfnorm_alpha": 0.3}),
    "selfnorm_a1": ("mlp1", {}, {"objective": "selfnorm", "selfnorm_alpha": 1.0}),
    "shortlist1k": ("mlp1", {"shortlist": 1000}, {}),
    "shortlist2k": ("mlp1", {"shortlist": 2000}, {}),
    "shortlist4k": ("mlp1", {"shortlist": 4000}, {}),
    "shortlist8k": ("mlp1", {"shortlist": 8000}, {}),
    "lbl": ("lbl", {}, {}),
}


def merge_json(path: Path, update: dict, section: str | None = None) -> dict:
    """Read, update and rewrite ``path`` under a lock (benches may run side by side);
    with ``section``, ``update`` goes inside that key."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = json.loads(path.read_text()) if path.exists() else {}
        (data.setdefault(section, {}) if section else data).update(update)
        harness.write_record(path, data, indent=2)
    return data


def speed(args) -> None:
    vocab = Vocabulary.from_counts(count_words(args.data / "train.txt"))
    train = read_stream(args.data / "train.txt", vocab)
    test = read_stream(args.data / "test.txt", vocab)
    backoff = load_model(args.backoff)
    V, n, B = len(vocab), 5, 256
    rng = np.random.default_rng(0)
    pos = rng.permutation(len(train))[: 40 * B]
    batches = [(torch.from_numpy(train.contexts(n, p).astype(np.int64)),
                torch.from_numpy(train.ids[p].astype(np.int64))) for p in np.split(pos, 40)]
    counter = iter(range(10**12))
    out = {"vocab": V, "batch": B, "threads": args.threads, "torch": torch.__version__}

    trainers = {}
    for name, (_, arch, objective) in CONFIGS.items():
        if name in SAME_SPEED:
            continue
        for optimizer in ("sgd", "adamw"):
            shortlist = arch.get("shortlist")
            if name == "lbl":
                cfg = LBLConfig(vocab_size=V, order=n, m=100)
            else:
                cfg = NPLMConfig(vocab_size=V, order=n, m=60, h=50, direct=True,
                                 output_size=shortlist + 1 if shortlist else None)
            tc = TrainConfig(optimizer=optimizer, lr=1e-3, batch_size=B, bf16=True,
                             **objective)
            trainers[f"{name}_{optimizer}"] = Trainer.build(
                vocab, cfg, tc, Path("/tmp/bench_remedies"), log=lambda s: None,
                train_counts=output_counts(train, cfg), backoff=backoff if shortlist else None)

    def step(trainer):
        trainer.train_step(*batches[next(counter) % len(batches)])
        trainer.state.step += 1

    # scoring: the softmax network (untrained weights made non-trivial), 40,000 test words
    ctx, tgt = test.contexts(n)[:40000], test.ids[:40000]
    with torch.no_grad():
        for t in trainers.values():
            t.model.output_matrix.normal_(0, 0.01)
    scorers = {
        "exact_fp32": NeuralLM(vocab, trainers["softmax_sgd"].model),
        "exact_bf16": NeuralLM(vocab, trainers["softmax_sgd"].model, bf16=True),
        "self_normalized": NeuralLM(vocab, trainers["softmax_sgd"].model,
                                    self_normalized=True),
    }
    for k in (1000, 2000, 4000, 8000):
        scorers[f"shortlist{k // 1000}k_bf16"] = NeuralLM(
            vocab, trainers[f"shortlist{k // 1000}k_sgd"].model, bf16=True, backoff=backoff)
    scorers["lbl_bf16"] = NeuralLM(vocab, trainers["lbl_sgd"].model, bf16=True)

    def score(lm):
        t = time.perf_counter()
        lm.target_logprobs(ctx, tgt)
        return len(tgt) / (time.perf_counter() - t)

    best: dict[str, float] = {}
    for _ in range(args.rounds):
        for key, trainer in trainers.items():
            k = f"train_words_per_second_{key}"
            best[k] = max(best.get(k, 0.0), B * harness.rate(lambda t=trainer: step(t), 3))
            print(k, round(best[k]), flush=True)
        for key, lm in scorers.items():
            k = f"score_words_per_second_{key}"
            best[k] = max(best.get(k, 0.0), score(lm))
            print(k, round(best[k]), flush=True)
    out.update(best)
    for key in trainers:
        opt = key.rsplit("_", 1)[1]
        out[f"train_speedup_{key}"] = (out[f"train_words_per_second_{key}"]
                                       / out[f"train_words_per_second_softmax_{opt}"])
    for key in scorers:
        out[f"score_speedup_{key}_over_exact_bf16"] = (
            out[f"score_words_per_second_{key}"] / out["score_words_per_second_exact_bf16"])
    out["shortlist_coverage_of_test"] = {
        f"{k // 1000}k": float(np.mean(test.ids < k)) for k in (1000, 2000, 4000, 8000)}
    merge_json(args.out, {"speed": out})
    print(json.dumps(out, indent=2))


def quality(args) -> None:
    names = args.only.split(",") if args.only else list(CONFIGS)
    done = json.loads(args.out.read_text()).get("quality", {}) if args.out.exists() else {}
    for name in names:
        if name in done and not args.again:
            print(f"{name}: done already", flush=True)
            continue
        preset, arch, objective = CONFIGS[name]
        outdir = args.workdir / name
        if args.rescore:  # score a finished run again (as the current code would save it)
            result = json.loads((outdir / "state" / "result.json").read_text())
            seconds = result.get("elapsed", math.nan)
        else:
            # sampled objectives are cheap: they run to early stopping (up to 3x the epochs)
            epochs = args.epochs * (3 if objective.get("objective") == "nce" else 1)
            started = time.perf_counter()
            result = train_from_files(
                args.data / "train.txt", args.data / "valid.txt", outdir, preset=preset,
                arch=dict(arch), train={"epochs": epochs, **objective}, threads=args.threads,
                checkpoint_every=0, shortlist_backoff=args.backoff if "shortlist" in arch else None,
                log=lambda s, name=name: print(f"[{name}] {s}", flush=True))
            seconds = time.perf_counter() - started
        row = score_run(args, outdir, name, result, seconds)
        merge_json(args.out, {name: row}, section="quality")
        print(f"{name}: {json.dumps(row)}", flush=True)


def plot(args) -> None:
    """docs/remedies.png: exact test perplexity against training words/s (AdamW, from the
    speed part), one point per configuration; the short-lists joined as a curve."""
    from nnlm.plots import perplexity_axis, png_figure

    data = json.loads(args.out.read_text())
    speed, quality = data["speed"], data["quality"]
    points = {name: (speed[f"train_words_per_second_{SAME_SPEED.get(name, name)}_adamw"],
                     row["test_ppl"]) for name, row in quality.items()}
    with png_figure(args.plot, size=(7, 4.5), dpi=110) as (fig, ax):
        curve = sorted(v for k, v in points.items() if k.startswith("shortlist"))
        if curve:
            ax.plot(*zip(*curve), "-", color="tab:gray", alpha=0.5, zorder=1)
        ax.set_xscale("log")
        for x, y in points.values():
            ax.scatter([x], [y], zorder=2)
        fig.canvas.draw()  # the data-to-pixel transform of the final axes
        placed: list[tuple[float, float]] = []
        for name, (x, y) in sorted(points.items(), key=lambda kv: -kv[1][1]):
            px, py = ax.transData.transform((x, y))
            # a label above-right of its point, unless another label already sits there:
            # then below-right (NCE K = 25 and K = 100 lie a few pixels apart)
            crowded = any(abs(px - qx) < 45 and abs(py - qy) < 14 for qx, qy in placed)
            ax.annotate(name, (x, y), fontsize=8, xytext=(4, -11 if crowded else 4),
                        textcoords="offset points")
            placed.append((px, py - 15 if crowded else py))
        ax.set_xlabel("training words/s (mlp1 shape, AdamW, bf16, 2 threads)")
        perplexity_axis(ax, "exact test perplexity (Brown)")
        ax.set_title("output-layer remedies: speed against perplexity")
    print(f"{args.plot}: {len(points)} configurations")


LABELS = {"softmax": "full softmax (mlp1)", "nce25": "NCE, K = 25", "nce100": "NCE, K = 100",
          "selfnorm": "self-normalized, alpha = 0.1",
          "selfnorm_a03": "self-normalized, alpha = 0.3",
          "selfnorm_a1": "self-normalized, alpha = 1", "shortlist1k": "short-list 1k + KN5",
          "shortlist2k": "short-list 2k + KN5", "shortlist4k": "short-list 4k + KN5",
          "shortlist8k": "short-list 8k + KN5", "lbl": "LBL (n=5, m=100)"}


def table(args) -> None:
    """The README's Markdown table from the JSON."""
    data = json.loads(args.out.read_text())
    speed, quality = data.get("speed", {}), data.get("quality", {})
    base = quality.get("softmax", {}).get("test_ppl")
    print("| model | train words/s (SGD / AdamW) | x softmax | epochs (best) | valid | "
          "test | test / softmax | notes |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, label in LABELS.items():
        row = quality.get(name)
        if row is None:
            continue
        sp = SAME_SPEED.get(name, name)
        sgd = speed.get(f"train_words_per_second_{sp}_sgd")
        adamw = speed.get(f"train_words_per_second_{sp}_adamw")
        ratios = [speed.get(f"train_speedup_{sp}_{opt}") for opt in ("sgd", "adamw")]
        notes = []
        if "test_coverage" in row:
            notes.append(f"list covers {row['test_coverage']:.1%} of test tokens")
        if "test_ppl_raw_scores" in row:
            notes.append(f"raw scores {row['test_ppl_raw_scores']:.1f}; log Z "
                         f"{row['log_z_mean']:+.3f} +- {row['log_z_std']:.3f}, mean abs "
                         f"{row['log_z_mean_abs']:.3f}")
        words = f"{sgd:,.0f} / {adamw:,.0f}" if sgd else ""
        ratio = " / ".join(f"{r:.1f}" for r in ratios) if all(ratios) else ""
        print(f"| {label} | {words} | {ratio} | "
              f"{row['epochs']} ({row['best_epoch']}) | {row['best_valid_ppl']:.1f} | "
              f"{row['test_ppl']:.1f} | {row['test_ppl'] / base:.3f} | {'; '.join(notes)} |"
              if base else "")
    print("\n| scoring (40,000 Brown test words) | words/s | x exact bf16 |\n|---|---:|---:|")
    for key, label in (("exact_fp32", "exact, fp32 products, float64 sums"),
                       ("exact_bf16", "exact, bf16 products"),
                       ("self_normalized", "self-normalized (raw y_w, no sum)"),
                       ("shortlist1k_bf16", "short-list 1k, exact (n-gram share included)"),
                       ("shortlist2k_bf16", "short-list 2k"), ("shortlist4k_bf16", "short-list 4k"),
                       ("shortlist8k_bf16", "short-list 8k"), ("lbl_bf16", "LBL, exact, bf16")):
        if f"score_words_per_second_{key}" in speed:
            print(f"| {label} | {speed[f'score_words_per_second_{key}']:,.0f} | "
                  f"{speed[f'score_speedup_{key}_over_exact_bf16']:.2f} |")


def score_run(args, outdir: Path, name: str, result: dict, seconds: float) -> dict:
    """The quality row of a finished run: exact test perplexity and, for self-normalizing
    objectives, raw-score perplexity and log Z statistics on the whole test text."""
    preset, arch, objective = CONFIGS[name]
    lm = load_model(outdir)
    test = read_stream(args.data / "test.txt", lm.vocab)
    with open(outdir / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    row = {"preset": preset, **arch, **objective,
           "test_ppl": evaluate(lm, test).perplexity,
           "best_valid_ppl": result["best_valid"], "epochs": result["epochs"],
           "best_epoch": 1 + int(np.argmin([float(r["valid_ppl"]) for r in rows])),
           "valid_ppl_by_epoch": [float(r["valid_ppl"]) for r in rows],
           "train_words_per_second": float(np.median(
               [float(r["words_per_second"]) for r in rows])),
           "train_seconds": seconds, "parameters": lm.model.num_parameters()}
    if lm.shortlist is not None:
        row["test_coverage"] = lm.coverage(test.ids)
    if objective.get("objective") in ("nce", "selfnorm"):
        # what the Trainer does when it saves: centre log Z on validation text
        # (a no-op for models saved by the current code)
        valid = read_stream(args.data / "valid.txt", lm.vocab)
        shift = lm.log_z_stats(valid.contexts(lm.order)).mean
        with torch.no_grad():
            lm.model.b -= shift
        row["valid_log_z_shift"] = shift
        lm.self_normalized = True
        row["test_ppl_raw_scores"] = evaluation_from_logprobs(test, lm.logprobs(test)).perplexity
        row.update(lm.log_z_stats(test.contexts(lm.order), sample=len(test)).to_dict())
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("part", choices=["speed", "quality", "plot", "table"])
    ap.add_argument("--data", type=Path, default=Path("data/brown"))
    ap.add_argument("--backoff", type=Path, default=Path("runs/kn5"),
                    help="the short-lists' n-gram model (KN5 on the same train.txt)")
    ap.add_argument("--out", type=Path, default=Path("bench/results/remedies.json"))
    ap.add_argument("--workdir", type=Path, default=Path("runs/remedies"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--only", default=None)
    ap.add_argument("--again", action="store_true", help="rerun configurations already done")
    ap.add_argument("--rescore", action="store_true",
                    help="score finished runs in --workdir again, without training")
    ap.add_argument("--plot", type=Path, default=Path("docs/remedies.png"))
    args = ap.parse_args()
    prepare_process(args.threads)
    {"speed": speed, "quality": quality, "plot": plot, "table": table}[args.part](args)


if __name__ == "__main__":
    main()

"""nnlm mix, reproduce and demo: experiments over the model families."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..base.argtypes import (
    positive_int,
    unit_interval,
)
from .common import add_speed_arguments


def add_parsers(sub) -> None:
    mix = sub.add_parser(
        "mix", help="mix models: fixed weights, EM on validation, or per context bucket",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Mix MODELs (same vocabulary): p = sum_k a_k p_k. Weights are fixed "
        "(--weights),\nlearned by EM on VALID (default), or learned per context-frequency "
        "bucket\n(--per-bucket TRAIN: the deleted-interpolation trigram's buckets).",
        epilog="examples:\n"
        "  nnlm mix --valid data/brown/valid.txt runs/mlp1 runs/delint3 -o runs/mlp2\n"
        "  nnlm mix --valid data/brown/valid.txt runs/mlp1 runs/delint3 --weights 0.5 0.5 "
        "-o runs/mlp2-fixed\n"
        "  nnlm mix --valid data/brown/valid.txt runs/deep runs/kn5 --bf16 -o runs/deep+kn5")
    mix.add_argument("models", type=Path, nargs="+", metavar="MODEL")
    mix.add_argument("--valid", dest="valid_path", type=Path, required=True, metavar="VALID",
                     help="held-out text: EM fits the weights on it; perplexities reported")
    mix.add_argument("-o", "--output", type=Path, required=True, metavar="MIXTURE",
                     help="the mixture's model directory to write")
    mix.add_argument("--weights", type=unit_interval, nargs="+", metavar="A",
                     help="fixed weights, one per model, summing to 1 (no EM)")
    mix.add_argument("--per-bucket", type=Path, metavar="TRAIN",
                     help="one weight vector per context-frequency bucket, counted on TRAIN")
    mix.add_argument("--iterations", type=positive_int, default=30,
                     help="EM iterations (default: 30)")
    add_speed_arguments(mix.add_argument_group("neural models"))

    rep = sub.add_parser(
        "reproduce", help="reproduce Table 1 of the paper on Brown, side by side",
        description="Train the paper's baselines and neural presets on Brown, evaluate them, "
        "and write report.md (the paper's table beside ours), results.json and a plot of "
        "validation perplexity against training time. Resumable: models already trained "
        "are reused.")
    rep.add_argument("corpus", choices=["brown"])
    rep.add_argument("--workdir", type=Path, default=Path("runs/reproduce"),
                     help="data, models and reports (default: runs/reproduce)")
    rep.add_argument("--only", default=None, metavar="ROWS",
                     help="comma-separated rows, e.g. kn5,mlp1,mlp2 (their dependencies too)")
    rep.add_argument("--quick", action="store_true",
                     help="a reduced run (delint3, kn3, kn5, class150, mlp7, mlp8; 2 epochs): "
                     "about 6 minutes on 2 cores")
    rep.add_argument("--extended", action="store_true",
                     help="also the networks beyond the paper (modern, deep) and their "
                     "mixtures with KN5 and each other, in a second table")
    rep.add_argument("--paper-cut", action="store_true",
                     help="count rare words over the whole corpus, as the paper did")
    rep.add_argument("--threads", type=positive_int, default=None,
                     help="torch threads (default: all cores)")

    # demo ----------------------------------------------------------------------------
    demo = sub.add_parser("demo", help="the toy world end to end, in about a minute",
                          description="Prepare the toy-world corpus, train models, and show "
                          "their perplexities and what they make of held-out sentences.")
    demo.add_argument("--workdir", type=Path, default=Path("runs/demo"),
                      help="where data and models go (default: runs/demo)")
    demo.add_argument("--epochs", type=positive_int, default=6, help="NPLM epochs (default: 6)")


def cmd_mix(args) -> None:
    from ..experiments.mixing import mix_models

    done = mix_models(args.models, args.valid_path, args.output, args.weights, args.per_bucket,
                      args.iterations, speed=args)
    for path, ppl in zip(args.models, done.component_perplexities):
        print(f"{str(path):<40} valid perplexity {ppl:.2f}")
    mean = done.mixture.weights.mean(axis=0)
    print(f"{str(args.output):<40} valid perplexity {done.perplexity:.2f}  weights "
          + " ".join(f"{w:.3f}" for w in mean)
          + (" (mean over buckets)" if done.mixture.buckets is not None else ""))


def cmd_reproduce(args) -> None:
    from ..experiments.reproduce import reproduce

    only = [x.strip() for x in args.only.split(",")] if args.only else None
    reproduce(args.workdir, only=only, quick=args.quick, paper_cut=args.paper_cut,
              threads=args.threads, extended=args.extended)


def cmd_demo(args) -> None:
    from ..experiments.demo import run_demo

    run_demo(args.workdir, epochs=args.epochs)


HANDLERS = {"mix": cmd_mix, "reproduce": cmd_reproduce, "demo": cmd_demo}
# (inputs, outputs) of each command: see nnlm.cli.main
PATHS = {
    "mix": lambda a: ([*a.models, a.valid_path, a.per_bucket], [a.output]),
    "reproduce": lambda a: ([], [a.workdir]),
    "demo": lambda a: ([], [a.workdir]),
}

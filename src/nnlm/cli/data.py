"""nnlm prepare: corpora into train/valid/test.txt."""

from __future__ import annotations

from pathlib import Path

from ..base.argtypes import (
    nonnegative_int,
    open_fraction,
    positive_int,
    seed,
)
from ..base.errors import NnlmError


def add_parsers(sub) -> None:
    # prepare ------------------------------------------------------------------------
    prep = sub.add_parser("prepare", help="write train.txt, valid.txt, test.txt for a corpus",
                          description="Write train.txt, valid.txt and test.txt into OUTDIR.")
    prep_sub = prep.add_subparsers(dest="corpus", metavar="CORPUS", required=True)
    brown = prep_sub.add_parser(
        "brown", help="the Brown corpus through NLTK, split as Bengio et al. 2003 (protocol v1)",
        description="Brown, protocol v1: one paragraph a line; train until 800,000 tokens, "
        "valid until 1,000,000, the rest test; tokens seen <= 3 times in train become <unk>. "
        "Byte-for-byte reproducible.")
    brown.add_argument("outdir", type=Path, metavar="OUTDIR")
    brown.add_argument("--paper-cut", action="store_true",
                       help="count rare words over the whole corpus, as the paper did "
                       "(default: over train only)")
    brown.add_argument("--no-download", action="store_true",
                       help="never try to download Brown through NLTK")
    toy = prep_sub.add_parser("toy", help="the built-in toy-world corpus (seeded grammar)",
                              description="Sentences from a small grammar with word classes; "
                              "some (subject, activity) pairs appear only in test.")
    toy.add_argument("outdir", type=Path, metavar="OUTDIR")
    toy.add_argument("--seed", type=seed, default=0, help="random seed (default: 0)")
    toy.add_argument("--train-sentences", type=positive_int, default=4000, metavar="N",
                     help="sentences in train (default: 4000; valid and test get 500)")
    text = prep_sub.add_parser("text", help="split a plain-text file (one sentence a line)",
                               description="Split FILE in order by token counts, then replace "
                               "rare words with <unk>.")
    text.add_argument("file", type=Path, metavar="FILE")
    text.add_argument("outdir", type=Path, metavar="OUTDIR")
    text.add_argument("--valid-fraction", type=open_fraction, default=0.1, metavar="F",
                      help="share of tokens for valid (default: 0.1)")
    text.add_argument("--test-fraction", type=open_fraction, default=0.1, metavar="F",
                      help="share of tokens for test (default: 0.1)")
    text.add_argument("--unk-max-count", type=nonnegative_int, default=0, metavar="K",
                      help="tokens seen K times or fewer in train become <unk> "
                      "(default: 0, none; Brown uses 3)")


def _print_split_stats(outdir: Path, stats) -> None:
    for name, s in stats.items():
        print(f"{outdir / (name + '.txt')}: {s.lines:,} lines, {s.tokens:,} tokens, "
              f"{s.types:,} types")


def cmd_prepare(args) -> None:
    from ..text import corpus

    if (args.outdir / "config.json").is_file():  # before the work, not after it
        raise NnlmError(f"{args.outdir}: holds a model (config.json); the splits would go "
                        "into its directory. Choose a data folder of their own")
    if args.corpus == "brown":
        parts = corpus.prepare_brown(paper_cut=args.paper_cut, download=not args.no_download)
    elif args.corpus == "toy":
        from ..text.toyworld import toy_world

        parts = toy_world(seed=args.seed, n_train=args.train_sentences)
    else:
        if not 0 <= args.valid_fraction < 1 or not 0 <= args.test_fraction < 1 or \
                args.valid_fraction + args.test_fraction >= 1:
            raise NnlmError("--valid-fraction and --test-fraction must be in [0, 1) and sum to "
                            "less than 1")
        lines = corpus.read_lines(args.file)
        total = sum(len(line.split()) for line in lines)
        train_tokens = round(total * (1 - args.valid_fraction - args.test_fraction))
        parts = corpus.split_text(lines, train_tokens, round(total * args.valid_fraction),
                                  args.unk_max_count)
    stats = corpus.write_splits(args.outdir, parts)
    _print_split_stats(args.outdir, stats)


def _splits(outdir):
    return [outdir / f"{name}.txt" for name in ("train", "valid", "test")]


HANDLERS = {"prepare": cmd_prepare}
# (inputs, outputs) of each command: see nnlm.cli.main
PATHS = {
    "prepare": lambda a: ([getattr(a, "file", None)], _splits(a.outdir)),
}

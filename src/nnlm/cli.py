"""The ``nnlm`` command: parses arguments and dispatches to the library; no logic here.

Every user error prints one line, ``nnlm: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .errors import NnlmError

EPILOG = """\
examples:
  nnlm demo                                   # toy world, end to end, about a minute
  nnlm prepare brown data/brown               # Brown, protocol v1: train/valid/test.txt
  nnlm ngram train data/brown/train.txt --method addk --order 2 -o runs/addk
  nnlm eval runs/addk data/brown/test.txt     # perplexity, NLL, tokens, <unk> count

conventions: natural logs inside; <s> is context only; </s> is predicted and counted;
unknown words map to <unk> and are counted (as KenLM does).
"""


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="nnlm",
        description="Neural probabilistic language models (Bengio et al. 2003) and the "
        "count-based models they are measured against.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nnlm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

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
    toy.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    toy.add_argument("--train-sentences", type=int, default=4000, metavar="N",
                     help="sentences in train (default: 4000; valid and test get 500)")
    text = prep_sub.add_parser("text", help="split a plain-text file (one sentence a line)",
                               description="Split FILE in order by token counts, then replace "
                               "rare words with <unk>.")
    text.add_argument("file", type=Path, metavar="FILE")
    text.add_argument("outdir", type=Path, metavar="OUTDIR")
    text.add_argument("--valid-fraction", type=float, default=0.1, metavar="F",
                      help="share of tokens for valid (default: 0.1)")
    text.add_argument("--test-fraction", type=float, default=0.1, metavar="F",
                      help="share of tokens for test (default: 0.1)")
    text.add_argument("--unk-max-count", type=int, default=0, metavar="K",
                      help="tokens seen K times or fewer in train become <unk> "
                      "(default: 0, none; Brown uses 3)")

    # ngram ---------------------------------------------------------------------------
    ngram = sub.add_parser("ngram", help="train count-based models")
    ngram_sub = ngram.add_subparsers(dest="ngram_command", metavar="ACTION", required=True)
    train = ngram_sub.add_parser("train", help="fit an n-gram model on a text file",
                                 description="Fit a count-based model on TRAIN and save it "
                                 "as a model directory.")
    train.add_argument("train", type=Path, metavar="TRAIN")
    train.add_argument("-o", "--output", type=Path, required=True, metavar="MODEL",
                       help="model directory to write")
    train.add_argument("--method", choices=["addk"], default="addk",
                       help="smoothing method (default: addk)")
    train.add_argument("--order", type=int, default=2, help="n (default: 2)")
    train.add_argument("--k", type=float, default=1.0, help="add-k constant (default: 1)")
    vocab_group = train.add_argument_group("vocabulary")
    vocab_group.add_argument("--min-count", type=int, default=1, metavar="N",
                             help="keep words seen at least N times (default: 1)")
    vocab_group.add_argument("--max-size", type=int, default=None, metavar="N",
                             help="short-list: keep the N-3 most frequent words")

    # eval ----------------------------------------------------------------------------
    ev = sub.add_parser("eval", help="perplexity of a model on a text file",
                        description="Perplexity, NLL, predicted tokens and <unk> count of "
                        "MODEL on TEXT. </s> is predicted and counted; <s> is context only.")
    ev.add_argument("model", type=Path, metavar="MODEL")
    ev.add_argument("text", type=Path, metavar="TEXT")
    ev.add_argument("--json", action="store_true", help="print one JSON object")

    # demo ----------------------------------------------------------------------------
    demo = sub.add_parser("demo", help="the toy world end to end, in about a minute",
                          description="Prepare the toy-world corpus, train models, and show "
                          "their perplexities and what they make of held-out sentences.")
    demo.add_argument("--workdir", type=Path, default=Path("runs/demo"),
                      help="where data and models go (default: runs/demo)")
    return parser


# -- handlers ---------------------------------------------------------------------------
def _print_split_stats(outdir: Path, stats) -> None:
    for name, s in stats.items():
        print(f"{outdir / (name + '.txt')}: {s.lines:,} lines, {s.tokens:,} tokens, "
              f"{s.types:,} types")


def cmd_prepare(args) -> None:
    from . import corpus

    if args.corpus == "brown":
        parts = corpus.prepare_brown(paper_cut=args.paper_cut, download=not args.no_download)
    elif args.corpus == "toy":
        from .toyworld import toy_world

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


def cmd_ngram(args) -> None:
    from .corpus import count_words, read_stream
    from .models import save_model
    from .ngram import AddK
    from .vocab import Vocabulary

    vocab = Vocabulary.from_counts(count_words(args.train), args.min_count, args.max_size)
    stream = read_stream(args.train, vocab)
    try:
        model = AddK(vocab, order=args.order, k=args.k).fit(stream)
    except ValueError as e:
        raise NnlmError(str(e)) from None
    save_model(model, args.output)
    print(f"{args.output}: {args.method} {args.order}-gram, |V| = {len(vocab):,}, "
          f"trained on {len(stream):,} tokens")


def cmd_eval(args) -> None:
    from .corpus import read_stream
    from .lm import evaluate
    from .models import load_model

    model = load_model(args.model)
    stream = read_stream(args.text, model.vocab)
    result = evaluate(model, stream)
    if args.json:
        print(json.dumps({"model": str(args.model), "text": str(args.text), **result.to_dict()}))
        return
    print(f"model:       {args.model}\ntext:        {args.text}")
    print(f"sentences:   {result.sentences:,}")
    print(f"tokens:      {result.tokens:,} predicted (words + </s>), {result.unk:,} <unk>")
    print(f"NLL:         {result.nll:,.2f} nats ({result.nll / result.tokens:.4f} per token)")
    print(f"perplexity:  {result.perplexity:.3f}  "
          f"(without <unk> tokens: {result.perplexity_without_unk:.3f})")


def cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(args.workdir)


HANDLERS = {"prepare": cmd_prepare, "ngram": cmd_ngram, "eval": cmd_eval, "demo": cmd_demo}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        HANDLERS[args.command](args)
    except NnlmError as e:
        print(f"nnlm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nnlm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())

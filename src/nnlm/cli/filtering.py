"""nnlm filter: perplexity filtering of document corpora (score, train)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.argtypes import ranged
from ..base.errors import NnlmError


def add_parsers(sub) -> None:
    group = sub.add_parser(
        "filter", help="score and filter documents by perplexity (cc_net, DataTrove)",
        description="Perplexity filtering of document corpora under a reference n-gram "
        "model, with cc_net's and DataTrove's normalization and formula.")
    filter_sub = group.add_subparsers(dest="filter_command", metavar="ACTION", required=True)
    score = filter_sub.add_parser(
        "score", help="each document's perplexity, and buckets",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Score each document of INPUT (JSON Lines, plain, .gz or .zst; Parquet; "
        "or text, a document a line or between blank lines) under MODEL as cc_net and "
        "DataTrove do: normalize, cut into SentencePiece pieces, score each line with "
        "<s> and </s>, perplexity = 10^(-sum / (pieces + lines)). Each input becomes "
        "one file in OUTDIR, of its format (JSON Lines for text), its records with "
        "perplexity and bucket added.",
        epilog="examples:\n"
        "  nnlm filter score shard-*.jsonl.gz -m models/en.arpa.bin -o scored/\n"
        "  nnlm filter score docs.jsonl -m en.arpa.bin --normalize datatrove -o out/\n"
        "  nnlm filter score a.jsonl -m en.bin --tokenizer en.sp.model --cutoffs "
        "cutoff.csv --language en --keep head,middle -o kept/\n"
        "  nnlm filter score a.jsonl.zst -m en.arpa.bin --cutoffs-from 10000 --split "
        "-o buckets/ --json")
    score.add_argument("inputs", type=Path, nargs="+", metavar="INPUT",
                       help="document files, read in the order given (- reads stdin)")
    score.add_argument("-m", "--model", type=Path, required=True,
                       help="the reference model: a KenLM binary or ARPA file (cc_net's "
                       "LANG.arpa.bin), nnlm's one-file model or model directory")
    score.add_argument("--tokenizer", metavar="SP",
                       help="its SentencePiece model (default: LANG.sp.model beside a "
                       "cc_net-style MODEL; 'none': score the text's own words)")
    score.add_argument("--normalize", choices=("ccnet", "datatrove", "none"), default="ccnet",
                       help="the normalization the model was trained under (default: ccnet)")
    score.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR",
                       help="the folder of output files, one an input")
    docs = score.add_argument_group("documents")
    docs.add_argument("--format", choices=("auto", "jsonl", "parquet", "lines", "paragraphs"),
                      default="auto", help="JSON Lines, Parquet, a document a line, or "
                      "documents between blank lines (default: auto, from the name or "
                      "first bytes)")
    docs.add_argument("--text-field", default="text", metavar="NAME",
                      help="the records' text field (default: text; cc_net's: raw_content)")
    docs.add_argument("--on-error", choices=("stop", "skip"), default="stop",
                      help="a bad record (not JSON, no text, empty): stop naming it "
                      "(default), or skip and count it")
    keep = score.add_argument_group("buckets and filtering")
    keep.add_argument("--cutoffs", type=Path, metavar="CSV",
                      help="cc_net's cutoff table (a percentile a row, a language a column)")
    keep.add_argument("--language", help="the table's column (with --cutoffs)")
    keep.add_argument("--cutoffs-from", type=ranged(int, 1, name="cutoffs-from"),
                      metavar="N", help="cutoffs from the first N documents' perplexities")
    keep.add_argument("--head-percentile", type=ranged(int, 0, 100, name="head-percentile"),
                      default=30, metavar="P", help="head below it (default: 30, cc_net's)")
    keep.add_argument("--tail-percentile", type=ranged(int, 0, 100, name="tail-percentile"),
                      default=60, metavar="P", help="tail from it (default: 60, cc_net's)")
    keep.add_argument("--keep", metavar="BUCKETS",
                      help="write only these buckets (head, middle, tail, all), comma-separated")
    keep.add_argument("--max-perplexity", type=ranged(float, 0, low_open=True,
                                                      name="max-perplexity"),
                      metavar="X", help="write only documents at or below X")
    keep.add_argument("--bad-model", type=Path, metavar="MODEL",
                      help="a model of text to keep out, of the same pieces (filter train "
                      "--bad): each record gets ratio = ln ppl - ln ppl_bad")
    keep.add_argument("--max-ratio", type=ranged(float, name="max-ratio"), metavar="R",
                      help="with --bad-model: write only documents whose ratio is at most R")
    keep.add_argument("--split", action="store_true",
                      help="one output folder a bucket: OUTDIR/head, middle, tail, all")
    _add_run_options(score)
    _add_train(filter_sub)


def _add_run_options(score) -> None:
    score.add_argument("--digits", type=ranged(int, 0, 17, name="digits"), default=1,
                       help="perplexity rounded to this many decimals (default: 1, as "
                       "cc_net and DataTrove)")
    score.add_argument("--workers", type=ranged(int, 1, 256, name="workers"), default=1,
                       help="input files scored at once, one a process (default: 1)")
    score.add_argument("--cluster", metavar="SPEC",
                       help="input files as tasks on a Dask cluster: local:N worker "
                       "processes here, or a scheduler's address (workers must see the "
                       "files and OUTDIR; the distributed extra)")
    score.add_argument("--restart", action="store_true",
                       help="score every input again (default: skip the inputs a run with "
                       "the same model and settings finished into OUTDIR)")
    score.add_argument("--plot", type=Path, metavar="PNG",
                       help="draw the perplexities' histogram (and the cutoffs) to PNG")
    score.add_argument("--json", action="store_true", help="print the summary as JSON")
    score.add_argument("--force", action="store_true",
                       help="replace an existing --plot file even if nnlm did not draw it")


def _add_train(filter_sub) -> None:
    train = filter_sub.add_parser(
        "train", help="a reference model from your good text (cc_net's recipe)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train the pair nnlm filter score (and cc_net, DataTrove, the kenlm "
        "module) reads from TEXT, a document or sentence a line: each line normalized, a "
        "SentencePiece unigram model, a KN n-gram model of its pieces. OUTDIR gets "
        "LANG.sp.model and LANG.arpa.bin (KenLM's probing file: cc_net's pair, which "
        "DataTrove and cc_net load), and LANG.arpa.",
        epilog="examples:\n"
        "  nnlm filter train wiki-en.txt -o models/en\n"
        "  nnlm filter train good-*.txt.gz -o models/mine --language xx --vocab-size 32000\n"
        "  nnlm filter score docs.jsonl -m models/en/en.arpa.bin -o scored/")
    train.add_argument("texts", type=Path, nargs="+", metavar="TEXT",
                       help="the good text, a document or sentence a line")
    train.add_argument("-o", "--output", type=Path, required=True, metavar="OUTDIR",
                       help="the folder to write (a new one, or one this command wrote)")
    train.add_argument("--language", default="en", help="the files' prefix (default: en)")
    train.add_argument("--vocab-size", type=ranged(int, 16, 1 << 20, name="vocab-size"),
                       default=65536, metavar="N",
                       help="SentencePiece pieces, at most (default: 65536, cc_net's)")
    train.add_argument("--order", type=ranged(int, 2, 12, name="order"), default=5,
                       help="the n-gram order (default: 5)")
    train.add_argument("--bad", type=Path, nargs="+", metavar="TEXT",
                       help="text to keep out: a second model of the same pieces "
                       "(LANG.bad.arpa.bin), for score --bad-model")
    train.add_argument("--normalize", choices=("ccnet", "datatrove", "none"),
                       default="ccnet", help="as the texts to score will be (default: ccnet)")


def _keep(text: str | None):
    if text is None:
        return None
    buckets = frozenset(b.strip() for b in text.split(",") if b.strip())
    unknown = buckets - {"head", "middle", "tail", "all"}
    if unknown or not buckets:
        raise NnlmError(f"--keep {text!r}: buckets are head, middle, tail and all")
    return buckets


def cmd_filter(args) -> None:
    if args.filter_command == "train":
        from ..filter.train import train_reference

        made = train_reference(args.texts, args.output, args.language, args.vocab_size,
                               args.order, args.normalize,
                               log=lambda m: print(m, file=sys.stderr), bad=args.bad)
        print(f"{args.output}: {made['pieces']:,} pieces, KN {made['order']}-gram on "
              f"{made['lines']:,} lines: {', '.join(made['files'])}", file=sys.stderr)
        return
    _score(args)


def _score(args) -> None:
    from ..filter import (
        DocumentScorer,
        Settings,
        filter_files,
        pair_tokenizer,
        plot_histogram,
        read_cutoff_table,
        sample_cutoffs,
        sample_perplexities,
    )

    if args.cutoffs and args.cutoffs_from:
        raise NnlmError("--cutoffs and --cutoffs-from: give one")
    if args.cutoffs and not args.language:
        raise NnlmError("--cutoffs needs --language (the table's column)")
    if args.head_percentile > args.tail_percentile:
        raise NnlmError("--head-percentile must be at most --tail-percentile")
    keep = _keep(args.keep)
    tokenizer = args.tokenizer
    if tokenizer is None:
        tokenizer = pair_tokenizer(args.model)
    elif tokenizer == "none":
        tokenizer = None
    if args.cluster and args.workers > 1:
        raise NnlmError("--cluster and --workers: give one (a cluster's workers are its own)")
    if args.max_ratio is not None and args.bad_model is None:
        raise NnlmError("--max-ratio needs --bad-model")
    scorer = DocumentScorer(args.model, tokenizer, args.normalize, args.bad_model)
    settings = Settings(fmt=args.format, text_field=args.text_field, digits=args.digits,
                        keep=keep, max_perplexity=args.max_perplexity,
                        max_ratio=args.max_ratio, split=args.split,
                        on_error=args.on_error)
    cutoffs = None
    if args.cutoffs:
        cutoffs = read_cutoff_table(args.cutoffs, args.language, args.head_percentile,
                                    args.tail_percentile)
    elif args.cutoffs_from:
        cutoffs = sample_cutoffs(sample_perplexities(scorer, args.inputs, args.cutoffs_from,
                                                     settings),
                                 args.head_percentile, args.tail_percentile)
    summary = filter_files(scorer, args.inputs, args.output, settings._replace(cutoffs=cutoffs),
                           workers=args.workers, resume=not args.restart,
                           cluster=args.cluster)
    histogram = summary.pop("histogram")
    if args.plot:
        plot_histogram(histogram, args.plot, cutoffs, f"{args.model.name}: "
                       f"{summary['documents']:,} documents")
    summary = {"model": str(args.model), "tokenizer": str(tokenizer) if tokenizer else None,
               "normalize": args.normalize,
               "cutoffs": None if cutoffs is None else cutoffs._asdict(), **summary}
    if args.json:
        print(json.dumps(summary, indent=1))
        return
    rate = summary["tokens_per_second"]
    if summary["skipped_inputs"]:
        print(f"{summary['skipped_inputs']:,} inputs finished before (their records in "
              f"{args.output}/.nnlm-filter; --restart scores them again)", file=sys.stderr)
    print(f"{summary['documents']:,} documents, {summary['tokens']:,} tokens in "
          f"{summary['seconds']:.1f} s ({rate or 0:,} tokens/s); kept {summary['kept']:,}, "
          f"filtered {summary['filtered']:,}, bad records {summary['bad_records']:,}",
          file=sys.stderr)
    if summary["buckets"]:
        print("buckets: " + ", ".join(f"{b} {n:,}" for b, n in summary["buckets"].items()),
              file=sys.stderr)


HANDLERS = {"filter": cmd_filter}
PATHS = {
    "filter score": lambda a: ([*a.inputs, a.model, a.cutoffs, a.bad_model,
                                None if a.tokenizer in (None, "none") else Path(a.tokenizer)],
                               [a.output, a.plot]),
    "filter train": lambda a: ([*a.texts, *(a.bad or [])], [a.output]),
}
FILE_OUTPUTS = {"filter score": lambda a: [(a.plot, "png")]}

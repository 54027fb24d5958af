"""nnlm ngram: count-based models (train, cluster, prune, convert, export-arpa)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.argtypes import (
    memory_size,
    nonnegative_int,
    positive_float,
    positive_int,
    ranged,
    unit_interval,
)
from ..base.errors import NnlmError
from ..file_kinds import is_arpa_name, is_file_name
from ..ngram.estimate.methods import MAX_ORDER
from .common import (
    METHODS,
    add_force,
    add_vocabulary_arguments,
    fixed_vocabulary,
    load_model_as,
)


def path_or_url(text: str):
    """A local path, or a URL (s3://...) kept as written (a Path would fold its //)."""
    return text if "://" in text else Path(text)

def add_parsers(sub) -> None:
    # ngram ---------------------------------------------------------------------------
    ngram = sub.add_parser("ngram", help="train count-based models, cluster words, export ARPA",
                           description="Count-based language models: the baselines of "
                           "Bengio et al. 2003.")
    ngram_sub = ngram.add_subparsers(dest="ngram_command", metavar="ACTION", required=True)
    train = ngram_sub.add_parser(
        "train", help="fit an n-gram model on a text file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fit a count-based model on TRAIN and save it as a model directory.\n\n"
        "methods:\n" + "\n".join(f"  {name:<13} {m.summary}" for name, m in METHODS.items()),
        epilog="examples:\n"
        "  nnlm ngram train data/brown/train.txt --order 5 -o runs/kn5 --arpa runs/kn5.arpa\n"
        "  nnlm ngram train data/brown/train.txt --method interpolated --order 3 \\\n"
        "      --valid data/brown/valid.txt -o runs/delint3\n"
        "  nnlm ngram train data/brown/train.txt --method class --classes 500 -o runs/class500\n"
        "  nnlm ngram train text.txt --tokenizer spm.model --nemo-encoding --order 6 \\\n"
        "      -o runs/bpe6 --arpa bpe6.arpa   # NeMo's subword n-gram\n"
        "  nnlm ngram train big.txt --order 5 --memory 4G --temp /scratch -o runs/big"
        "   # 1B tokens on 2 cores: 4 min, 3.5 GB")
    train.add_argument("train", type=path_or_url, nargs="+", metavar="TRAIN",
                       help="the training text; several files (shards, compressed or not) "
                       "are one corpus, read in the order given (with --cluster also "
                       "fsspec URLs the workers can read)")
    train.add_argument("-o", "--output", type=Path, required=True, metavar="MODEL",
                       help="model directory to write")
    train.add_argument("--method", choices=list(METHODS), default="kn",
                       help="smoothing method (default: kn)")
    train.add_argument("--order", type=ranged(int, 1, MAX_ORDER), default=3, metavar="N",
                       help=f"n, 1 to {MAX_ORDER} (add-k: 1 or 2; default: 3)")
    train.add_argument("--valid", dest="valid_path", type=Path, metavar="VALID",
                       help="held-out text (required by --method interpolated)")
    train.add_argument("--arpa", type=Path, metavar="FILE",
                       help="also write an ARPA file (kn only; with --cluster, streamed "
                       "from the workers' partitions)")
    train.add_argument("--tokenizer", type=Path, metavar="SPM",
                       help="a SentencePiece model: the text is read as its subword tokens, "
                       "and the model keeps a copy to read text with everywhere")
    train.add_argument("--nemo-encoding", action="store_true",
                       help="with --tokenizer: spell token i as chr(i + 100), as NeMo's "
                       "train_kenlm.py does, so the ARPA file loads in NeMo's decoding")
    add_force(train)
    dist = train.add_argument_group(
        "distributed (kn only; needs the distributed extra: pip install \"nnlm[distributed]\")")
    dist.add_argument("--cluster", metavar="SPEC",
                      help="estimate on a Dask cluster: local:N starts N worker processes "
                      "here; an address (tcp://host:8786) joins a running scheduler, whose "
                      "workers each read their own shards (files they can open, or fsspec "
                      "URLs: s3://, gs://, hdfs://). The model equals the one-process "
                      "model to the bit")
    dist.add_argument("--partitions", type=positive_int, metavar="P",
                      help="ranges of last words the n-grams are cut into, each a task "
                      "(default: one a worker; fewer where one word outweighs a range)")
    kn = train.add_argument_group("kneser-ney")
    kn.add_argument("--discount-fallback", nargs="*", type=positive_float, metavar="D",
                    help="when counts-of-counts leave discounts undefined (tiny data), use "
                    "D1 D2 D3+ (default 0.5 1 1.5; 0 < Dk < k) instead of stopping")
    kn.add_argument("--prune", dest="prune_counts", nargs="+", type=nonnegative_int, metavar="T",
                    help="count pruning, like lmplz --prune: drop n-grams of order k seen at "
                    "most T_k times (one threshold per order from unigrams, which must be 0; "
                    "non-decreasing; the last repeats), then renormalize")
    kn.add_argument("--memory", type=memory_size, metavar="SIZE",
                    help="bound memory, like lmplz -S (e.g. 1G, 500M, 40%%). Where the text "
                    "needs more in memory (0.4 GB and 50 bytes a token), shards of it are counted "
                    "and the model estimated a partition at a time, with the pieces in files "
                    "in --temp, on the cores this process may use; otherwise counting's "
                    "arrays go to --temp. Default: no limit")
    kn.add_argument("--compress", action="store_true",
                    help="store the values as the counts they come from instead of float32 "
                    "(the same numbers to the bit; about 0.4x KenLM's trie on disk). Not "
                    "with --prune, --cluster, or a --memory the text does not fit in")
    kn.add_argument("--temp", type=Path, metavar="DIR",
                    help="folder for --memory's files, deleted when done (default: $TMPDIR "
                    "or /tmp)")
    cls = train.add_argument_group("class-based")
    cls.add_argument("--classes", type=positive_int, default=500, metavar="C",
                     help="number of word classes (default: 500)")
    cls.add_argument("--clustering", type=Path, metavar="TSV",
                     help="reuse a clustering (classes.tsv of an earlier class model, or the "
                     "output of `nnlm ngram cluster`) instead of clustering again")
    addk = train.add_argument_group("add-k")
    addk.add_argument("--k", type=positive_float, default=1.0,
                      help="add-k constant, > 0 (default: 1)")
    stupid = train.add_argument_group("stupid backoff")
    stupid.add_argument("--alpha", type=ranged(float, 0, 1, low_open=True), default=None,
                        metavar="A", help="the score's factor for each order backed off, in "
                        "(0, 1] (default: 0.4, Brants et al.'s)")
    unbounded = train.add_argument_group("unbounded (infgram)")
    unbounded.add_argument("--discount", type=ranged(float, 0, 1, low_open=True), default=None,
                           metavar="D", help="absolute discount of the counts above --order, "
                           "in (0, 1] (default: 1, chosen on Brown's valid text)")
    add_vocabulary_arguments(train.add_argument_group("vocabulary"))

    cluster = ngram_sub.add_parser("cluster", help="cluster words with the exchange algorithm",
                                   description="Cluster TRAIN's words into C classes "
                                   "(Kneser & Ney 1993) and write word<TAB>class lines.")
    cluster.add_argument("train", type=Path, metavar="TRAIN")
    cluster.add_argument("--classes", type=positive_int, default=500, metavar="C",
                         help="word classes, besides <unk>, <s> and </s> (default: 500)")
    cluster.add_argument("--iterations", type=positive_int, default=15, metavar="N",
                         help="at most N passes over the vocabulary (default: 15)")
    cluster.add_argument("-o", "--output", type=Path, required=True, metavar="TSV",
                         help="word<TAB>class lines to write")
    add_force(cluster)

    pr = ngram_sub.add_parser(
        "prune", help="entropy-prune a back-off model (Stolcke 1998, SRILM's -prune)",
        description="Drop every n-gram whose removal alone raises the model's perplexity by "
        "less than THRESHOLD (relative; all judged on the unpruned model), then renormalize "
        "the back-off weights. MODEL: a kn or backoff model directory, or an ARPA file.",
        epilog="examples:\n  nnlm ngram prune runs/kn5 --threshold 1e-7 -o runs/kn5-p7 "
        "--arpa runs/kn5-p7.arpa.gz")
    pr.add_argument("model", type=Path, metavar="MODEL")
    pr.add_argument("--threshold", type=positive_float, required=True, metavar="THETA",
                    help="relative perplexity growth below which an n-gram goes (SRILM's "
                    "-prune value; 1e-8 keeps almost everything, 1e-6 prunes hard)")
    pr.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                    help="the pruned model directory to write")
    pr.add_argument("--arpa", type=Path, metavar="FILE", help="also write an ARPA file")
    add_force(pr)

    conv = ngram_sub.add_parser(
        "convert", help="convert a back-off model: ARPA <-> nnlm's mapped format",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Convert the back-off model IN into OUT.\n\n"
        "IN:  an ARPA file (plain, .gz, .bz2, .xz), or a kn/backoff model directory\n"
        "     (also one saved by an older nnlm, with arrays.npz).\n"
        "OUT: an ARPA file if its name ends in .arpa (or .gz, .bz2, .xz); nnlm's one-file\n"
        "     model for .nnlm, .bin or .binary; KenLM's probing file with --kenlm (any\n"
        "     other name, e.g. cc_net's en.arpa.bin); otherwise a\n"
        "     model directory in nnlm's mapped format: a trie of bit-packed word ids\n"
        "     and pointers with float32 values, which opens without being read (memory\n"
        "     grows with the pages that queries touch, and processes share them).",
        epilog="examples:\n"
        "  nnlm ngram convert lm.arpa.gz runs/lm          # ARPA -> nnlm, float32\n"
        "  nnlm ngram convert lm.arpa runs/lm-q8 --quantize 8 8   # as build_binary -q 8 -b 8\n"
        "  nnlm ngram convert runs/lm lm.arpa            # back to ARPA\n"
        "  nnlm ngram convert lm.arpa en.arpa.bin --kenlm   # as build_binary probing")
    conv.add_argument("input", type=Path, metavar="IN")
    conv.add_argument("output", type=Path, metavar="OUT")
    conv.add_argument("--quantize", nargs=2, type=ranged(int, 1, 25), metavar=("P", "B"),
                      help="store probabilities in P bits and back-off weights in B bits "
                      "(1-25; per-order equal-count bins, as KenLM's build_binary -q P -b B; "
                      "unigrams stay float32). Default: float32, lossless for back-offs")
    conv.add_argument("--strict", action="store_true",
                      help="refuse an ARPA file whose probabilities sum above 1 (KenLM loads "
                      "it, and so does nnlm by default, with a warning)")
    conv.add_argument("--kenlm", action="store_true",
                      help="write OUT in KenLM's probing format, as `build_binary probing` "
                      "would from the model's ARPA file: for tools that load models only "
                      "through the kenlm module (DataTrove, cc_net); any name but an ARPA one")
    conv.add_argument("--json", action="store_true", help="print one JSON object")
    add_force(conv)

    ver = ngram_sub.add_parser(
        "verify", help="check a model file whole: every section against its checksum",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Read MODEL whole and check it: for nnlm's mapped files (a model "
        "directory,\n.nnlm/.bin) every section against the CRC-32 written with it; for "
        "ARPA files and\nKenLM's binaries, which carry no checksums, what loading checks "
        "(header, sizes,\nnumbers). Exit 0 if it is whole, 1 if it loads but carries no "
        "checksum to check\n(ARPA, KenLM binaries, files written before nnlm kept them), "
        "2 with one line naming\nthe damaged part.",
        epilog="examples:\n  nnlm ngram verify runs/kn5.bin\n"
        "  nnlm ngram verify runs/kn5 --json")
    ver.add_argument("model", type=Path, metavar="MODEL")
    ver.add_argument("--json", action="store_true", help="print one JSON object")

    mg = ngram_sub.add_parser(
        "merge", help="interpolate back-off models into one back-off model (SRILM -mix-lm)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Merge MODELs (kn or backoff directories, ARPA files, KenLM binaries) "
        "into one\nback-off model: the union of their n-grams and vocabularies, each with "
        "the\nprobability sum_i a_i p_i(w | h), and back-off weights that make every\n"
        "distribution sum to 1. Equal to the runtime mixture (nnlm mix) on every stored\n"
        "n-gram; one file any KenLM-reading decoder loads. Weights: --weights, or EM on\n"
        "--valid.",
        epilog="examples:\n"
        "  nnlm ngram merge runs/news runs/chat --weights 0.7 0.3 -o runs/merged --arpa "
        "merged.arpa\n"
        "  nnlm ngram merge a.arpa b.arpa --valid dev.txt -o runs/merged")
    mg.add_argument("models", type=Path, nargs="+", metavar="MODEL")
    mg.add_argument("--weights", type=unit_interval, nargs="+", metavar="A",
                    help="one weight per model, summing to 1")
    mg.add_argument("--valid", dest="valid_path", type=Path, metavar="VALID",
                    help="held-out text: EM fits the weights on it (when --weights is not "
                    "given)")
    mg.add_argument("-o", "--output", type=Path, required=True, metavar="OUT",
                    help="the merged model directory to write")
    mg.add_argument("--arpa", type=Path, metavar="FILE", help="also write an ARPA file")
    add_force(mg)

    export = ngram_sub.add_parser("export-arpa", help="write a back-off model as an ARPA file",
                                  description="Write MODEL (kn or backoff) as ARPA: log10 "
                                  "probabilities and back-off weights, readable by KenLM.")
    export.add_argument("model", type=Path, metavar="MODEL")
    export.add_argument("output", type=Path, metavar="OUT.arpa")
    add_force(export)


def _backoff_model(path, doing: str):
    """The back-off model at ``path`` (a kn or backoff directory, or an ARPA file)."""
    from ..ngram.backoff import BackoffNgram

    return load_model_as(path, BackoffNgram, "back-off form",
                         f"{doing} needs a kn or backoff model, or an ARPA file")


def _tokenizer(args):
    if args.tokenizer is None:
        if args.nemo_encoding:
            raise NnlmError("--nemo-encoding spells a tokenizer's tokens: give --tokenizer")
        return None
    from ..text.tokenizer import SubwordTokenizer

    return SubwordTokenizer(args.tokenizer, "nemo" if args.nemo_encoding else "pieces")


def cmd_train(args) -> None:
    from ..fit import run_ngram_job
    from ..model_files import check_model_output
    from ..ngram.estimate.methods import NgramJob

    fallback = args.discount_fallback
    if fallback is not None:
        if len(fallback) == 0:
            fallback = True
        elif len(fallback) != 3:
            raise NnlmError("--discount-fallback takes three discounts, D1 D2 D3+, or none")
    urls = [p for p in args.train if isinstance(p, str)]
    if urls and args.cluster is None:
        raise NnlmError(f"{urls[0]}: a URL is read by a cluster's workers; give --cluster "
                        "(local:N works too), or download it first")
    job = NgramJob(args.train, args.method, args.order, valid_path=args.valid_path,
                   vocab=fixed_vocabulary(args), min_count=args.min_count,
                   max_size=args.max_size, n_classes=args.classes,
                   clustering_path=args.clustering, discount_fallback=fallback, k=args.k,
                   alpha=args.alpha, prune_counts=args.prune_counts, memory=args.memory,
                   temp=args.temp, cluster=args.cluster, partitions=args.partitions,
                   arpa=args.arpa, tokenizer=_tokenizer(args), discount=args.discount,
                   compress=args.compress)
    job.check()  # before the work, not after it
    check_model_output(args.output, args.method)
    def log(message: str) -> None:
        print(message, file=sys.stderr)

    # saved as it is estimated: from a cluster's partitions, or from the pieces on disk
    # where --memory is below what the text needs in memory; the model is never gathered
    model = run_ngram_job(job, log=log, output=args.output)
    print(f"{args.output}: {args.method} {args.order}-gram, |V| = {len(model.vocab):,}")
    if hasattr(model, "num_ngrams"):  # as lmplz reports them: what each order holds
        print("n-grams per order: " + ", ".join(f"{k}: {n:,}" for k, n in
                                                enumerate(model.num_ngrams(), start=1)))
    discounts = getattr(model, "discounts", None)
    if discounts is not None:  # modified Kneser-Ney's D1, D2, D3+ per order
        print("discounts D1 D2 D3+: " + "; ".join(
            f"{k}: " + " ".join(f"{d:.4f}" for d in row)
            for k, row in enumerate(discounts, start=1)))
    if args.arpa:
        print(f"{args.arpa}: ARPA")


def cmd_cluster(args) -> None:
    from ..fit import cluster_words
    from ..ngram.estimate.classes import save_classes

    vocab, word_class = cluster_words(args.train, args.classes, max_iterations=args.iterations)
    save_classes(word_class, vocab, args.output)
    print(f"{args.output}: {len(vocab):,} words in {args.classes} classes "
          "(+ one each for <unk>, <s>, </s>)")


def cmd_prune(args) -> None:
    from ..model_files import check_model_output
    from ..models import save_model
    from ..ngram.estimate.prune import prune_entropy

    check_model_output(args.output, "backoff")
    model = _backoff_model(args.model, "pruning")
    pruned = prune_entropy(model, args.threshold)
    save_model(pruned, args.output)
    before, after = sum(model.num_ngrams()[1:]), sum(pruned.num_ngrams()[1:])
    print(f"{args.output}: kept {after:,} of {before:,} n-grams of orders 2-{model.order} "
          f"({after / max(before, 1):.1%})")
    if args.arpa:
        from ..ngram.formats.arpa_write import write_arpa

        write_arpa(pruned, args.arpa)
        print(f"{args.arpa}: ARPA")


def cmd_convert(args) -> None:
    from ..models import convert

    done = convert(args.input, args.output, tuple(args.quantize) if args.quantize else None,
                   strict=args.strict, force=args.force, kenlm=args.kenlm)
    if args.json:
        print(json.dumps(done))
    else:
        print(f"{done['target']}: {done['format']}, orders 1-{done['order']}, "
              f"{done['ngrams']:,} n-grams, {done['bytes'] / 1e6:.1f} MB "
              f"({done['bytes_per_ngram']:.2f} bytes an n-gram)")


def cmd_verify(args) -> int:
    from ..models import verify_model

    done = verify_model(args.model)
    print(json.dumps(done) if args.json else done["summary"])
    return 0 if done["ok"] else 1  # nothing could be checked: not verified


def cmd_merge(args) -> None:
    from ..fit import merge_ngram_models
    from ..model_files import check_model_output
    from ..models import save_model

    check_model_output(args.output, "backoff")
    if len(args.models) < 2:
        raise NnlmError("merge needs at least two models")
    if args.weights is None and args.valid_path is None:
        raise NnlmError("merge needs --weights (one per model) or --valid (EM fits them)")
    if args.weights is not None and args.valid_path is not None:
        raise NnlmError("--weights fixes the weights: drop --valid")
    models = [_backoff_model(p, "merging") for p in args.models]
    merged, weights = merge_ngram_models(models, args.weights, args.valid_path)
    save_model(merged, args.output)
    counts = merged.num_ngrams()
    print(f"{args.output}: weights " + " ".join(f"{w:.3f}" for w in weights)
          + f", |V| = {len(merged.vocab):,}, n-grams per order: "
          + ", ".join(f"{k}: {n:,}" for k, n in enumerate(counts, start=1)))
    if args.arpa:
        from ..ngram.formats.arpa_write import write_arpa

        write_arpa(merged, args.arpa)
        print(f"{args.arpa}: ARPA")


def cmd_export_arpa(args) -> None:
    from ..ngram.formats.arpa_write import write_arpa

    model = _backoff_model(args.model, "ARPA export")
    write_arpa(model, args.output)
    print(f"{args.output}: ARPA, orders 1-{model.order}")


NGRAM_HANDLERS = {"train": cmd_train, "cluster": cmd_cluster, "prune": cmd_prune,
                  "convert": cmd_convert, "verify": cmd_verify, "export-arpa": cmd_export_arpa,
                  "merge": cmd_merge}


def cmd_ngram(args) -> int | None:
    return NGRAM_HANDLERS[args.ngram_command](args)


HANDLERS = {"ngram": cmd_ngram}
# (inputs, outputs) of each command: see nnlm.cli.main
PATHS = {
    "ngram train": lambda a: ([*(p for p in a.train if isinstance(p, Path)), a.valid_path,
                               a.clustering, a.vocab, a.tokenizer],
                              [a.output, a.arpa]),
    "ngram cluster": lambda a: ([a.train], [a.output]),
    "ngram export-arpa": lambda a: ([a.model], [a.output]),
    "ngram convert": lambda a: ([a.input], [a.output]),
    "ngram prune": lambda a: ([a.model], [a.output, a.arpa]),
    "ngram verify": lambda a: ([a.model], []),
    "ngram merge": lambda a: ([*a.models, a.valid_path], [a.output, a.arpa]),
}
# the file outputs of each command and their kinds: each may replace only a file of its
# kind (nnlm.file_kinds), unless --force
FILE_OUTPUTS = {
    "ngram train": lambda a: [(a.arpa, "arpa")],
    "ngram prune": lambda a: [(a.arpa, "arpa")],
    "ngram merge": lambda a: [(a.arpa, "arpa")],
    "ngram cluster": lambda a: [(a.output, "classes")],
    "ngram export-arpa": lambda a: [(a.output, "arpa")],
    "ngram convert": lambda a: [(a.output, "arpa")] if is_arpa_name(a.output) else
    [(a.output, "model-file")] if is_file_name(a.output) or a.kenlm else [],
}

"""The ``nnlm`` command: parses arguments and dispatches to the library; no logic here.

Every user error prints one line, ``nnlm: error: ...``, and exits with status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
import warnings
from pathlib import Path

from .argtypes import (
    finite_float,
    fraction,
    nonnegative_float,
    nonnegative_int,
    open_fraction,
    positive_float,
    positive_int,
    ranged,
    seed,
    unit_interval,
)
from .errors import NnlmError, NnlmWarning
from .fileio import check_distinct, os_error_message, output_lock, public_path
from .neural.presets import PRESETS, RECIPES
from .ngram.train import METHODS

DEVICES = ("cpu", "cuda", "auto")  # nnlm.neural.runtime.DEVICES, without importing torch
OBJECTIVES = ("softmax", "nce", "selfnorm")  # nnlm.neural.objectives.OBJECTIVES

PRESET_NAMES = list(PRESETS)

EPILOG = """\
examples:
  nnlm demo                                   # toy world, end to end, about a minute
  nnlm prepare brown data/brown               # Brown, protocol v1: train/valid/test.txt
  nnlm ngram train data/brown/train.txt --order 5 -o runs/kn5
  nnlm eval runs/kn5 data/brown/test.txt      # perplexity, NLL, tokens, <unk> count
  echo "the jury said" | nnlm score runs/kn5  # per-sentence log10 probability
  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 -o runs/mlp1
  nnlm reproduce brown --quick                # the paper's Table 1, reduced (minutes)

conventions: natural logs inside; <s> is context only; </s> is predicted and counted;
unknown words map to <unk> and are counted (as KenLM does); a blank line is not a
sentence. Text and ARPA files may be gzip, bzip2 or xz compressed; - reads stdin.
Outputs are written atomically and never over an input; errors are one line, exit 2.
"""


def add_vocabulary_arguments(group) -> None:
    """--min-count, --max-size and --vocab, the same for every command that builds one."""
    group.add_argument("--vocab", type=Path, metavar="FILE",
                       help="fix the vocabulary: a vocab.txt of another nnlm model (same ids: "
                       "the models can be mixed) or a word list, one word a line; other words "
                       "become <unk>")
    group.add_argument("--min-count", type=positive_int, default=1, metavar="N",
                       help="keep words seen at least N times (default: 1)")
    group.add_argument("--max-size", type=ranged(int, 4), default=None, metavar="N",
                       help="short-list: keep the N-3 most frequent words")


class Parser(argparse.ArgumentParser):
    """argparse with the project's error format: one line, ``nnlm: error: ...``, exit 2."""

    def error(self, message):
        command = self.prog.removeprefix("nnlm").strip()  # "train", "ngram train", ...
        where = f"{command}: " if command else ""
        sys.stderr.write(f"nnlm: error: {where}{message} (see {self.prog} --help)\n")
        sys.exit(2)


def add_device_argument(parser) -> None:
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where neural models run: cpu (default), cuda, or auto (cuda "
                        "when there is one); count-based models always run on the CPU")


def add_sentence_arguments(parser) -> None:
    from .neural.sentence import DEFAULT_BUCKETS, DEFAULT_HASH_FRACTION

    parser.add_argument("--normalize", action="store_true",
                        help="lowercase and drop punctuation first")
    parser.add_argument("--buckets", type=positive_int, default=DEFAULT_BUCKETS, metavar="N",
                        help=f"hash buckets shared by rare and unknown words (default: "
                        f"{DEFAULT_BUCKETS})")
    parser.add_argument("--hash-fraction", type=fraction, default=DEFAULT_HASH_FRACTION,
                        metavar="F", help="the rarest fraction of the vocabulary that goes "
                        f"to the buckets too, in [0, 1) (default: {DEFAULT_HASH_FRACTION})")


def add_neural_scoring_arguments(parser) -> None:
    group = parser.add_argument_group("neural models")
    group.add_argument("--bf16", action="store_true",
                       help="bfloat16 products, about 4x faster; perplexity within about "
                       "0.01%% (per-token log-probabilities within ~0.05)")
    group.add_argument("--self-normalized", action="store_true",
                       help="score each word by its raw output y_w, without the sum over the "
                       "vocabulary (Devlin et al. 2014): 20x faster or more, right only for a "
                       "model trained to keep log Z near 0 (--objective selfnorm or nce). "
                       "Reports the mean and spread of log Z measured on the text")
    add_device_argument(group)
    group.add_argument("--threads", type=positive_int, default=None,
                       help="torch threads (default: all cores)")


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = Parser(
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

    # ngram ---------------------------------------------------------------------------
    ngram = sub.add_parser("ngram", help="train count-based models, cluster words, export ARPA",
                           description="Count-based language models: the baselines of "
                           "Bengio et al. 2003.")
    ngram_sub = ngram.add_subparsers(dest="ngram_command", metavar="ACTION", required=True)
    train = ngram_sub.add_parser(
        "train", help="fit an n-gram model on a text file",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fit a count-based model on TRAIN and save it as a model directory.\n\n"
        "methods:\n" + "\n".join(f"  {name:<13} {text}" for name, text in METHODS.items()),
        epilog="examples:\n"
        "  nnlm ngram train data/brown/train.txt --order 5 -o runs/kn5 --arpa runs/kn5.arpa\n"
        "  nnlm ngram train data/brown/train.txt --method interpolated --order 3 \\\n"
        "      --valid data/brown/valid.txt -o runs/delint3\n"
        "  nnlm ngram train data/brown/train.txt --method class --classes 500 -o runs/class500")
    train.add_argument("train", type=Path, metavar="TRAIN")
    train.add_argument("-o", "--output", type=Path, required=True, metavar="MODEL",
                       help="model directory to write")
    train.add_argument("--method", choices=list(METHODS), default="kn",
                       help="smoothing method (default: kn)")
    train.add_argument("--order", type=ranged(int, 1, 9), default=3, metavar="N",
                       help="n, 1 to 9 (default: 3)")
    train.add_argument("--valid", type=Path, metavar="VALID",
                       help="held-out text (required by --method interpolated)")
    train.add_argument("--arpa", type=Path, metavar="FILE",
                       help="also write an ARPA file (kn only)")
    kn = train.add_argument_group("kneser-ney")
    kn.add_argument("--discount-fallback", nargs="*", type=positive_float, metavar="D",
                    help="when counts-of-counts leave discounts undefined (tiny data), use "
                    "D1 D2 D3+ (default 0.5 1 1.5; 0 < Dk < k) instead of stopping")
    kn.add_argument("--prune", nargs="+", type=nonnegative_int, metavar="T",
                    help="count pruning, like lmplz --prune: drop n-grams of order k seen at "
                    "most T_k times (one threshold per order from unigrams, which must be 0; "
                    "non-decreasing; the last repeats), then renormalize")
    cls = train.add_argument_group("class-based")
    cls.add_argument("--classes", type=positive_int, default=500, metavar="C",
                     help="number of word classes (default: 500)")
    cls.add_argument("--clustering", type=Path, metavar="TSV",
                     help="reuse a clustering (classes.tsv of an earlier class model, or the "
                     "output of `nnlm ngram cluster`) instead of clustering again")
    addk = train.add_argument_group("add-k")
    addk.add_argument("--k", type=positive_float, default=1.0,
                      help="add-k constant, > 0 (default: 1)")
    add_vocabulary_arguments(train.add_argument_group("vocabulary"))

    cluster = ngram_sub.add_parser("cluster", help="cluster words with the exchange algorithm",
                                   description="Cluster TRAIN's words into C classes "
                                   "(Kneser & Ney 1993) and write word<TAB>class lines.")
    cluster.add_argument("train", type=Path, metavar="TRAIN")
    cluster.add_argument("--classes", type=positive_int, default=500, metavar="C")
    cluster.add_argument("--iterations", type=positive_int, default=15, metavar="N",
                         help="at most N passes over the vocabulary (default: 15)")
    cluster.add_argument("-o", "--output", type=Path, required=True, metavar="TSV")

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
    pr.add_argument("-o", "--output", type=Path, required=True, metavar="OUT")
    pr.add_argument("--arpa", type=Path, metavar="FILE", help="also write an ARPA file")

    export = ngram_sub.add_parser("export-arpa", help="write a back-off model as an ARPA file",
                                  description="Write MODEL (kn or backoff) as ARPA: log10 "
                                  "probabilities and back-off weights, readable by KenLM.")
    export.add_argument("model", type=Path, metavar="MODEL")
    export.add_argument("output", type=Path, metavar="OUT.arpa")

    # score ---------------------------------------------------------------------------
    score = sub.add_parser("score", help="per-sentence log10 probability and perplexity",
                           description="Score each line of FILE (default: stdin) as one "
                           "sentence, like KenLM's query: log10 probability with </s> included, "
                           "token count, OOVs, perplexity. A summary goes to stderr. A blank "
                           "line is not a sentence (as everywhere in nnlm): it gets a row with "
                           "0 tokens and perplexity '-', so rows stay aligned with the input "
                           "lines.")
    score.add_argument("model", type=Path, metavar="MODEL", help="model directory or ARPA file")
    score.add_argument("file", type=Path, nargs="?", metavar="FILE")
    score.add_argument("--per-token", action="store_true",
                       help="also print word, log10 p, n-gram length used and OOV per token")
    add_neural_scoring_arguments(score)

    # rescore -------------------------------------------------------------------------
    rs = sub.add_parser(
        "rescore", help="add a model's score to n-best lists and re-rank them",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Rescore NBEST (Moses 'id ||| hypothesis ||| features ||| score', or "
        "'id<TAB>score<TAB>hypothesis'; - reads stdin)\nwith MODEL: new = score + "
        "lm_weight * LM + word_penalty * words, LM the log10\nprobability (</s> included). "
        "Within each id, best first. Moses output gains the feature 'nnlm= LM'.",
        epilog="examples:\n"
        "  nnlm rescore runs/kn5 nbest.txt --lm-weight 0.5 --word-penalty -0.1 -o rescored.txt\n"
        "  nnlm rescore runs/mlp1 nbest.txt --best --bf16      # the best hypothesis per id")
    rs.add_argument("model", type=Path, metavar="MODEL")
    rs.add_argument("nbest", type=Path, metavar="NBEST")
    rs.add_argument("-o", "--output", type=Path, metavar="OUT",
                    help="write here (atomically) instead of stdout")
    rs.add_argument("--lm-weight", type=finite_float, default=1.0, metavar="W",
                    help="weight of the model's log10 probability (default: 1)")
    rs.add_argument("--word-penalty", type=finite_float, default=0.0, metavar="P",
                    help="added once per word; negative favours short hypotheses (default: 0)")
    rs.add_argument("--best", action="store_true",
                    help="print only the best hypothesis of each id, one line per id")
    add_neural_scoring_arguments(rs)

    # eval ----------------------------------------------------------------------------
    ev = sub.add_parser("eval", help="perplexity of a model on a text file",
                        description="Perplexity, NLL, predicted tokens and <unk> count of "
                        "MODEL on TEXT. </s> is predicted and counted; <s> is context only.")
    ev.add_argument("model", type=Path, metavar="MODEL")
    ev.add_argument("text", type=Path, metavar="TEXT")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--open-vocab", action="store_true",
                    help="neural models: give each new word a feature vector, the expected "
                    "C under the model's prediction where it occurs (Bengio et al. 2003), and "
                    "add it to the vocabulary as the text is read; its first occurrence is "
                    "scored as <unk>, later ones with its own row")
    add_neural_scoring_arguments(ev)

    # train (neural) ------------------------------------------------------------------
    tr = sub.add_parser(
        "train", help="train a neural probabilistic language model (NPLM)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train y = b + W x + U tanh(d + H x) (Bengio et al. 2003) on TRAIN, with "
        "early stopping on VALID.\nThe checkpoint directory holds config.json, vocab.txt, "
        "model.safetensors (best on VALID),\nmetrics.csv, learning_curve.png and state/ "
        "(to --resume).\n\npresets: " + ", ".join(PRESET_NAMES) + "\n"
        "  mlp1-mlp10: the networks of Table 1 of the paper; modern: n=6, m=h=256, output\n"
        "  weights tied to C (U = C), dropout, AdamW; lbl: the log-bilinear model of Mnih &\n"
        "  Hinton 2007; energy: the paper's energy-minimization variant (the target read\n"
        "  through C too; train it with --objective nce); tiny: the toy world.\n"
        "  --recipe paper trains with the paper's SGD.\n\n"
        "The output layer is where the time goes; --objective nce samples it instead of "
        "summing it,\n--objective selfnorm teaches it to need no sum when scoring, and "
        "--shortlist K shrinks it.",
        epilog="examples:\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      -o runs/mlp1            # add --resume to continue an interrupted run\n"
        "  nnlm train data/toy/train.txt --valid data/toy/valid.txt --preset tiny -o runs/tiny\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      --objective nce --noise-samples 100 -o runs/mlp1-nce\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      --shortlist 4000 --shortlist-backoff runs/kn5 -o runs/mlp1-sl4k\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset lbl -o runs/lbl\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset energy \\\n"
        "      --objective nce --noise-samples 100 -o runs/energy")
    tr.add_argument("train", type=Path, metavar="TRAIN")
    tr.add_argument("--valid", type=Path, required=True, metavar="VALID",
                    help="validation text (early stopping, learning-rate decay)")
    tr.add_argument("-o", "--output", type=Path, required=True, metavar="CKPT",
                    help="checkpoint directory")
    tr.add_argument("--preset", default=None, metavar="NAME",
                    help="start from a named architecture (default: mlp1)")
    tr.add_argument("--recipe", default=None, choices=list(RECIPES),
                    help="how to train: paper (the paper's SGD), fast (AdamW + dropout, the "
                    "default for mlp presets), modern, tiny")
    tr.add_argument("--resume", action="store_true",
                    help="continue an interrupted run in CKPT with its saved settings; only "
                    "--lr, --clip, --epochs and --patience may change (say, to recover from a "
                    "divergence); the change is logged and noted in metrics.csv")
    arch = tr.add_argument_group("architecture (override the preset)")
    arch.add_argument("--order", type=ranged(int, 2, 20), metavar="N",
                      help="n: condition on N-1 words (2 to 20)")
    arch.add_argument("--m", type=positive_int, metavar="M",
                      help="feature vector size (columns of C)")
    arch.add_argument("--h", type=nonnegative_int, metavar="H",
                      help="hidden units (0: no hidden layer)")
    arch.add_argument("--direct", action=argparse.BooleanOptionalAction, default=None,
                      help="direct connections W from x to the output")
    arch.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None,
                      help="U = C: the output layer reuses the word features (needs h = m, "
                           "--no-direct; fewer parameters, often lower perplexity)")
    arch.add_argument("--energy-v", choices=["shared", "per-word"],
                      help="energy preset: one v for all words, or one per target word (the "
                      "paper's suggestion: as many parameters as U)")
    arch.add_argument("--dropout-x", type=fraction, metavar="P", help="dropout on x, in [0, 1)")
    arch.add_argument("--dropout-h", type=fraction, metavar="P",
                      help="dropout on the hidden layer, in [0, 1)")
    opt = tr.add_argument_group("optimization (override the preset)")
    opt.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                     help="sgd: the paper's (sparse rows of C, decay on weights only)")
    opt.add_argument("--lr", type=positive_float, metavar="EPS",
                     help="eps_0 > 0 (per example for sgd)")
    opt.add_argument("--lr-decay", type=nonnegative_float, metavar="R",
                     help="r >= 0 in eps_0 / (1 + r t)")
    opt.add_argument("--weight-decay", type=nonnegative_float, metavar="L",
                     help="on C, H, U, W only (>= 0)")
    opt.add_argument("--batch-size", type=positive_int, metavar="B")
    opt.add_argument("--epochs", type=positive_int, metavar="E")
    opt.add_argument("--patience", type=positive_int, metavar="K",
                     help="stop after K epochs without validation improvement")
    opt.add_argument("--plateau-decay", type=ranged(float, 0, 1, low_open=True), metavar="F",
                     help="multiply the learning rate by F in (0, 1] after a bad epoch "
                     "(1: off)")
    opt.add_argument("--clip", type=nonnegative_float, metavar="NORM",
                     help="clip the gradient norm to NORM (0: off)")
    opt.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                     help="bfloat16 for the |V|-wide matrix products")
    opt.add_argument("--seed", type=seed, help="random seed, 0 to 2^32-1")
    obj = tr.add_argument_group(
        "objective (how the output layer learns; evaluation is always exact)")
    obj.add_argument("--objective", choices=OBJECTIVES,
                     help="softmax: maximum likelihood over all |V| outputs (default); nce: "
                     "noise-contrastive estimation (Mnih & Teh 2012), K sampled words per "
                     "batch instead of |V|, ~10x faster training; selfnorm: softmax plus "
                     "alpha (log Z)^2 (Devlin et al. 2014), so the model can be scored fast "
                     "with --self-normalized")
    obj.add_argument("--noise-samples", type=positive_int, metavar="K",
                     help="nce: noise words per batch (default: 25)")
    obj.add_argument("--noise-power", type=unit_interval, metavar="P",
                     help="nce: noise q proportional to count^P (default: 0.75)")
    obj.add_argument("--noise-per-position", action=argparse.BooleanOptionalAction,
                     default=None, help="nce: draw K noise words for each position instead of "
                     "K shared by the batch (slower)")
    obj.add_argument("--selfnorm-alpha", type=nonnegative_float, metavar="A",
                     help="selfnorm: weight of (log Z)^2 (default: 0.1)")
    sl = tr.add_argument_group("short-list (Schwenk 2007)")
    sl.add_argument("--shortlist", type=positive_int, metavar="K",
                    help="the network predicts only the K most frequent words (the specials "
                    "included) and one 'elsewhere' output; the n-gram model scores the rest")
    sl.add_argument("--shortlist-backoff", type=Path, metavar="MODEL",
                    help="n-gram model (directory or ARPA, same vocabulary) for the words "
                    "outside the short-list; copied into the checkpoint")
    run_group = tr.add_argument_group("running")
    run_group.add_argument("--threads", type=positive_int, default=None,
                           help="torch threads (default: all cores)")
    add_device_argument(run_group)
    run_group.add_argument("--max-steps", type=positive_int, default=None, metavar="N",
                           help="stop (and checkpoint) after N updates in all")
    run_group.add_argument("--checkpoint-every", type=nonnegative_int, default=500, metavar="N",
                           help="save the training state every N updates (default: 500; 0: "
                           "at epoch ends only). A state is saved only while the loss is "
                           "sane, so a diverging run keeps its last good one")
    add_vocabulary_arguments(tr.add_argument_group("vocabulary"))

    gen = sub.add_parser("generate", help="sample sentences from a model",
                         description="Sample sentences from MODEL (any model): temperature, "
                         "top-k, an optional prompt.")
    gen.add_argument("model", type=Path, metavar="MODEL")
    gen.add_argument("-n", type=positive_int, default=5, help="sentences (default: 5)")
    gen.add_argument("--prompt", default="", help="words to continue")
    gen.add_argument("--temperature", type=positive_float, default=1.0,
                     help="divide log-probabilities by T > 0: below 1 sharper, above 1 "
                     "flatter (default: 1)")
    gen.add_argument("--top-k", type=nonnegative_int, default=0,
                     help="sample among the K likeliest (0: all)")
    gen.add_argument("--max-words", type=positive_int, default=50,
                     help="stop a sentence after N words (default: 50)")
    gen.add_argument("--seed", type=seed, default=None, help="random seed (default: random)")

    nb = sub.add_parser("neighbors", help="nearest words by their feature vectors C",
                        description="The words whose feature vectors (rows of C) are most "
                        "similar (cosine) to each WORD.")
    nb.add_argument("model", type=Path, metavar="MODEL", help="neural checkpoint")
    nb.add_argument("words", nargs="+", metavar="WORD")
    nb.add_argument("-k", type=positive_int, default=10, help="neighbours per word (default: 10)")

    pe = sub.add_parser("plot-embeddings", help="a 2D map of chosen words' feature vectors",
                        description="Project the feature vectors of WORDs to 2D (PCA or "
                        "t-SNE) and write a PNG.")
    pe.add_argument("model", type=Path, metavar="MODEL", help="neural checkpoint")
    pe.add_argument("words", nargs="*", metavar="WORD",
                    help="words to show (default: the 100 most frequent)")
    pe.add_argument("-o", "--output", type=Path, required=True, metavar="PNG")
    pe.add_argument("--method", choices=["pca", "tsne"], default="pca")

    em = sub.add_parser(
        "embed", help="sentence embeddings: one vector per line, from the word features C",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write one vector per line of FILE (default: stdin) to OUT.npy (float32, "
        "lines x m):\nthe sum of the words' rows of C over the square root of their number "
        "(a blank line:\nthe zero vector). The rarest words and every unknown word share "
        "hash buckets, each\nstarting as the mean of the vectors of the words that hash to "
        "it. In Python:\nNeuralLM.load(MODEL).embed(sentences).",
        epilog="examples:\n"
        "  nnlm embed runs/modern data/brown/test.txt -o test.npy\n"
        "  nnlm embed runs/mlp1 notes.txt.gz --normalize -o notes.npy\n"
        "  nnlm similar runs/modern \"the jury said\" data/brown/test.txt -k 5")
    em.add_argument("model", type=Path, metavar="MODEL", help="neural checkpoint")
    em.add_argument("file", type=Path, nargs="?", default=Path("-"), metavar="FILE",
                    help="text, one sentence a line (.gz/.bz2/.xz; default or -: stdin)")
    em.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.npy")
    add_sentence_arguments(em)
    si = sub.add_parser(
        "similar", help="the lines of a file most similar to a sentence",
        description="List the K lines of FILE whose embeddings (see nnlm embed) are nearest "
        "to SENTENCE by cosine, best first: similarity, line number, line.")
    si.add_argument("model", type=Path, metavar="MODEL", help="neural checkpoint")
    si.add_argument("sentence", metavar="SENTENCE")
    si.add_argument("file", type=Path, metavar="FILE")
    si.add_argument("-k", type=positive_int, default=10, help="lines to list (default: 10)")
    si.add_argument("--json", action="store_true", help="one JSON object per line")
    add_sentence_arguments(si)

    mix = sub.add_parser(
        "mix", help="mix models: fixed weights, EM on validation, or per context bucket",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Mix MODELs (same vocabulary): p = sum_k a_k p_k. Weights are fixed "
        "(--weights),\nlearned by EM on VALID (default), or learned per context-frequency "
        "bucket\n(--per-bucket TRAIN: the deleted-interpolation trigram's buckets).",
        epilog="examples:\n"
        "  nnlm mix --valid data/brown/valid.txt runs/mlp1 runs/delint3 -o runs/mlp2\n"
        "  nnlm mix --valid data/brown/valid.txt runs/mlp1 runs/delint3 --weights 0.5 0.5 "
        "-o runs/mlp2-fixed")
    mix.add_argument("models", type=Path, nargs="+", metavar="MODEL")
    mix.add_argument("--valid", type=Path, required=True, metavar="VALID",
                     help="held-out text: EM fits the weights on it; perplexities reported")
    mix.add_argument("-o", "--output", type=Path, required=True, metavar="MIXTURE")
    mix.add_argument("--weights", type=unit_interval, nargs="+", metavar="A",
                     help="fixed weights, one per model, summing to 1 (no EM)")
    mix.add_argument("--per-bucket", type=Path, metavar="TRAIN",
                     help="one weight vector per context-frequency bucket, counted on TRAIN")
    mix.add_argument("--iterations", type=positive_int, default=30,
                     help="EM iterations (default: 30)")

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
                     "about 10 minutes")
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
    from .models import load_model, save_model
    from .ngram import train as ngram_train

    if args.ngram_command == "cluster":
        from .ngram.classes import save_classes

        vocab, word_class = ngram_train.cluster_words(args.train, args.classes,
                                                      max_iterations=args.iterations)
        save_classes(word_class, vocab, args.output)
        print(f"{args.output}: {len(vocab):,} words in {args.classes} classes "
              "(+ one each for <unk>, <s>, </s>)")
        return
    if args.ngram_command == "prune":
        from .ngram.backoff import BackoffNgram
        from .ngram.prune import prune_entropy

        model = load_model(args.model)
        if not isinstance(model, BackoffNgram):
            raise NnlmError(f"{args.model}: a {model.kind} model; pruning needs a back-off "
                            "model (kn, backoff, or an ARPA file)")
        pruned = prune_entropy(model, args.threshold)
        save_model(pruned, args.output)
        before, after = sum(model.num_ngrams()[1:]), sum(pruned.num_ngrams()[1:])
        print(f"{args.output}: kept {after:,} of {before:,} n-grams of orders 2-{model.order} "
              f"({after / max(before, 1):.1%})")
        if args.arpa:
            from .ngram.arpa import write_arpa

            write_arpa(pruned, args.arpa)
            print(f"{args.arpa}: ARPA")
        return
    if args.ngram_command == "export-arpa":
        from .ngram.arpa import write_arpa
        from .ngram.backoff import BackoffNgram

        model = load_model(args.model)
        if not isinstance(model, BackoffNgram):
            raise NnlmError(f"{args.model}: a {model.kind} model has no back-off form; "
                            "ARPA export needs a kn or backoff model")
        write_arpa(model, args.output)
        print(f"{args.output}: ARPA, orders 1-{model.order}")
        return
    fallback = args.discount_fallback
    if fallback is not None:
        if len(fallback) == 0:
            fallback = True
        elif len(fallback) != 3:
            raise NnlmError("--discount-fallback takes three discounts, D1 D2 D3+, or none")
    if args.prune and args.method != "kn":
        raise NnlmError("--prune needs --method kn")
    if args.arpa and args.method != "kn":
        raise NnlmError("--arpa needs --method kn (the other methods have no back-off form)")
    model = ngram_train.train_ngram(
        args.train, args.method, args.order, valid_path=args.valid, vocab=fixed_vocabulary(args),
        min_count=args.min_count,
        max_size=args.max_size, n_classes=args.classes, clustering_path=args.clustering,
        discount_fallback=fallback, k=args.k, prune_counts=args.prune)
    save_model(model, args.output)
    print(f"{args.output}: {args.method} {args.order}-gram, |V| = {len(model.vocab):,}")
    if args.arpa:
        from .ngram.arpa import write_arpa

        write_arpa(model, args.arpa)
        print(f"{args.arpa}: ARPA")


def fixed_vocabulary(args):
    """The --vocab vocabulary, or None; it excludes --min-count and --max-size."""
    if args.vocab is None:
        return None
    if args.min_count != 1 or args.max_size is not None:
        raise NnlmError("--vocab fixes the vocabulary: drop --min-count and --max-size")
    from .vocab import Vocabulary

    return Vocabulary.read(args.vocab)


def cmd_score(args) -> None:
    from .fileio import iter_lines
    from .scoring import score_sentences

    model, parts = load_for_scoring(args)
    source = str(args.file) if args.file is not None else "<stdin>"
    lines = iter_lines(args.file if args.file is not None else sys.stdin.buffer, source)
    total, tokens, oov, sentences = 0.0, 0, 0, 0
    out = sys.stdout
    if not args.per_token:
        out.write("log10_prob\ttokens\toov\tperplexity\tsentence\n")
    seen: list = []  # (contexts, targets) of the first chunks, for the neural report
    for s in score_sentences(model, lines, source, seen if parts else None):
        total += s.log10_prob
        tokens += len(s.log10_probs)
        oov += int(s.oov.sum())
        if s.blank:  # not a sentence: a row (or an empty block) keeps the lines aligned
            out.write("\n" if args.per_token else "0.000000\t0\t0\t-\t\n")
            continue
        sentences += 1
        if args.per_token:
            for i, (w, p, o) in enumerate(zip(s.words, s.log10_probs, s.oov)):
                order = "" if s.orders is None else f"\t{s.orders[i]}"
                out.write(f"{w}\t{p:.6f}{order}\t{'OOV' if o else ''}\n".replace("\t\n", "\n"))
            out.write(f"Total: {s.log10_prob:.6f}\n\n")
        else:
            out.write(f"{s.log10_prob:.6f}\t{len(s.log10_probs)}\t{int(s.oov.sum())}\t"
                      f"{s.perplexity:.4f}\t{' '.join(s.words[:-1])}\n")
    if sentences:
        print(f"{sentences:,} sentences, {tokens:,} tokens (</s> included), {oov:,} OOV, "
              f"log10 prob {total:.4f}, perplexity {10 ** (-total / tokens):.4f}",
              file=sys.stderr)
    if parts and seen:
        import numpy as np

        from .neural.nplm_lm import describe_report, scoring_report

        report, warnings = scoring_report(parts, np.concatenate([c for c, _ in seen]),
                                          np.concatenate([t for _, t in seen]))
        for line in [*describe_report(report), *(f"nnlm: warning: {w}" for w in warnings)]:
            print(line, file=sys.stderr)


def load_for_scoring(args):
    """The model of ``args.model``, its networks placed and set up as the options say;
    returns (model, its neural parts)."""
    from .models import load_model

    model = load_model(args.model)
    parts = []
    if args.device != "cpu" or args.bf16 or args.self_normalized or model.neural_parts():
        from .neural.runtime import configure_for_scoring

        parts = configure_for_scoring(model, args.device, args.bf16, args.self_normalized,
                                      args.threads)
    return model, parts


def cmd_rescore(args) -> None:
    from .fileio import atomic_write_text
    from .rescore import format_ranked, read_nbest, rescore

    model, _ = load_for_scoring(args)
    hypotheses, moses = read_nbest(args.nbest)
    groups = rescore(model, hypotheses, args.lm_weight, args.word_penalty)
    lines = format_ranked(groups, moses, args.best)
    if args.output is None:
        for line in lines:
            print(line)
    else:
        atomic_write_text(args.output, "".join(line + "\n" for line in lines))
        print(f"{args.output}: {len(hypotheses):,} hypotheses of {len(groups):,} ids, rescored",
              file=sys.stderr)


def cmd_eval(args) -> None:
    from .corpus import read_stream
    from .lm import evaluate

    model, parts = load_for_scoring(args)
    if args.open_vocab:
        return _eval_open_vocab(args, model)
    stream = read_stream(args.text, model.vocab)
    result = evaluate(model, stream).to_dict()
    if parts:
        from .neural.nplm_lm import scoring_report

        report, warnings = scoring_report(parts, stream.contexts(model.order), stream.ids)
        result.update(report)
        for w in warnings:
            print(f"nnlm: warning: {w}", file=sys.stderr)
    if args.json:  # strict JSON: a non-finite number becomes null
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                  for k, v in result.items()}
        print(json.dumps({"model": str(args.model), "text": str(args.text), **finite},
                         allow_nan=False))
        return
    print(f"model:       {args.model}\ntext:        {args.text}")
    print(f"sentences:   {result['sentences']:,}")
    print(f"tokens:      {result['tokens']:,} predicted (words + </s>), {result['unk']:,} <unk>")
    print(f"NLL:         {result['nll']:,.2f} nats ({result['nll'] / result['tokens']:.4f} per "
          "token)")
    scoring = " (self-normalized: raw scores, no sum over the vocabulary)" \
        if args.self_normalized else ""
    print(f"perplexity:  {result['perplexity']:.3f}  "
          f"(without <unk> tokens: {result['perplexity_without_unk']:.3f}){scoring}")
    if parts:
        from .neural.nplm_lm import describe_report

        print("\n".join(describe_report(result)))


def _eval_open_vocab(args, model) -> None:
    from .neural.open_vocab import score_open_vocab

    result = score_open_vocab(model, args.text).to_dict()
    if args.json:
        print(json.dumps({"model": str(args.model), "text": str(args.text), **result}))
        return
    print(f"model:       {args.model}\ntext:        {args.text}")
    print(f"sentences:   {result['sentences']:,}")
    print(f"tokens:      {result['tokens']:,} predicted (words + </s>)")
    print(f"perplexity:  {result['perplexity']:.3f}  (open vocabulary)")
    print(f"new words:   {result['words_added']:,} added; {result['first_occurrences']:,} first "
          f"occurrences scored as <unk>, {result['later_occurrences']:,} later ones with "
          "their own rows")


ARCH_FIELDS = ("order", "m", "h", "direct", "tied", "dropout_x", "dropout_h", "shortlist")
TRAIN_FIELDS = ("optimizer", "lr", "lr_decay", "weight_decay", "batch_size", "epochs",
                "patience", "plateau_decay", "clip", "bf16", "seed", "objective",
                "noise_samples", "noise_power", "noise_per_position", "selfnorm_alpha")


def cmd_train(args) -> None:
    from .neural.run import train_from_files

    arch = {k: getattr(args, k) for k in ARCH_FIELDS if getattr(args, k) is not None}
    if args.energy_v is not None:
        arch["v_per_word"] = args.energy_v == "per-word"
    train = {k: getattr(args, k) for k in TRAIN_FIELDS if getattr(args, k) is not None}
    train_from_files(args.train, args.valid, args.output, preset=args.preset, arch=arch,
                     train=train, recipe=args.recipe, resume=args.resume, threads=args.threads,
                     max_steps=args.max_steps, checkpoint_every=args.checkpoint_every,
                     min_count=args.min_count, max_size=args.max_size, device=args.device,
                     vocab=fixed_vocabulary(args),
                     shortlist_backoff=args.shortlist_backoff)


def cmd_generate(args) -> None:
    from .models import load_model

    model = load_model(args.model)
    for sentence in model.generate(args.n, args.prompt, temperature=args.temperature,
                                   top_k=args.top_k, max_words=args.max_words, seed=args.seed):
        print(sentence)


def _load_neural(path: Path):
    from .neural.nplm_lm import NeuralLM

    return NeuralLM.load(path)


def cmd_neighbors(args) -> None:
    model = _load_neural(args.model)
    for word in args.words:
        if word not in model.vocab:
            raise NnlmError(f"{word!r} is not in the model's vocabulary ({len(model.vocab):,} "
                            "words); rare words were merged into <unk>")
        print(f"{word}: " + ", ".join(f"{w} ({s:.2f})" for w, s in model.neighbors(word, args.k)))


def cmd_plot_embeddings(args) -> None:
    from .neural.embeddings import plot_embeddings

    model = _load_neural(args.model)
    words = args.words or model.vocab.words[3:103]
    missing = [w for w in words if w not in model.vocab]
    if missing:
        raise NnlmError(f"not in the model's vocabulary: {', '.join(missing[:5])}")
    plot_embeddings(model, words, args.output, args.method)
    print(f"{args.output}: {len(words)} words, {args.method.upper()}")


def _sentence_model(path: Path):
    from .models import load_model
    from .neural.nplm_lm import NeuralLM

    model = load_model(path)
    if not isinstance(model, NeuralLM):
        raise NnlmError(f"{path}: a {model.kind} model has no word feature vectors C; "
                        "embeddings need a neural checkpoint (nnlm train)")
    return model


def _sentence_settings(args) -> dict:
    return {"normalize": args.normalize, "buckets": args.buckets,
            "hash_fraction": args.hash_fraction}


def cmd_embed(args) -> None:
    from .neural.sentence import embed_file

    n, m = embed_file(_sentence_model(args.model), args.file, args.output,
                      **_sentence_settings(args))
    print(f"{args.output}: {n:,} vectors of {m}", file=sys.stderr)


def cmd_similar(args) -> None:
    from .neural.sentence import similar_lines

    found = similar_lines(_sentence_model(args.model), args.sentence, args.file, args.k,
                          **_sentence_settings(args))
    for line_no, sim, line in found:
        if args.json:
            print(json.dumps({"similarity": sim, "line": line_no, "text": line}))
        else:
            print(f"{sim:.4f}\t{line_no}\t{line}")


def cmd_mix(args) -> None:
    from .corpus import read_stream
    from .lm import evaluation_from_logprobs
    from .mixture import ContextBuckets, Mixture
    from .models import load_model

    models = [load_model(p) for p in args.models]
    buckets = None
    if args.per_bucket:
        buckets = ContextBuckets.from_stream(read_stream(args.per_bucket, models[0].vocab),
                                             len(models[0].vocab))
    if args.weights and len(args.weights) != len(models):
        raise NnlmError(f"--weights needs one weight per model ({len(models)})")
    mixture = Mixture(models, weights=args.weights, buckets=buckets)
    valid = read_stream(args.valid, mixture.vocab)
    lp = mixture.component_logprobs(valid)  # once: for the report, EM and the mixture
    for path, row in zip(args.models, lp):
        ppl = evaluation_from_logprobs(valid, row).perplexity
        print(f"{str(path):<40} valid perplexity {ppl:.2f}")
    if not args.weights:
        mixture.fit_weights(valid, args.iterations, component_logprobs=lp)
    result = evaluation_from_logprobs(valid, mixture.mix(lp, valid.contexts(mixture.order)))
    mixture.save(args.output, args.models)
    mean = mixture.weights.mean(axis=0)
    print(f"{str(args.output):<40} valid perplexity {result.perplexity:.2f}  weights "
          + " ".join(f"{w:.3f}" for w in mean) + (" (mean over buckets)" if buckets else ""))


def cmd_reproduce(args) -> None:
    from .experiments.reproduce import reproduce

    only = [x.strip() for x in args.only.split(",")] if args.only else None
    reproduce(args.workdir, only=only, quick=args.quick, paper_cut=args.paper_cut,
              threads=args.threads)


def cmd_demo(args) -> None:
    from .demo import run_demo

    run_demo(args.workdir, epochs=args.epochs)


HANDLERS = {
    "prepare": cmd_prepare, "ngram": cmd_ngram, "eval": cmd_eval, "score": cmd_score,
    "rescore": cmd_rescore, "train": cmd_train, "generate": cmd_generate,
    "neighbors": cmd_neighbors,
    "plot-embeddings": cmd_plot_embeddings, "embed": cmd_embed, "similar": cmd_similar,
    "mix": cmd_mix, "reproduce": cmd_reproduce,
    "demo": cmd_demo,
}


def _splits(outdir):
    return [outdir / f"{name}.txt" for name in ("train", "valid", "test")]


# each command's (inputs, outputs): outputs are locked while it runs and may never
# replace, hold or lie inside an input (nnlm.fileio.check_distinct)
PATHS = {
    "prepare": lambda a: ([getattr(a, "file", None)], _splits(a.outdir)),
    "ngram train": lambda a: ([a.train, a.valid, a.clustering, a.vocab], [a.output, a.arpa]),
    "ngram cluster": lambda a: ([a.train], [a.output]),
    "ngram export-arpa": lambda a: ([a.model], [a.output]),
    "ngram prune": lambda a: ([a.model], [a.output, a.arpa]),
    "score": lambda a: ([a.model, a.file], []),
    "eval": lambda a: ([a.model, a.text], []),
    "rescore": lambda a: ([a.model, a.nbest], [a.output]),
    "train": lambda a: ([a.train, a.valid, a.shortlist_backoff, a.vocab], [a.output]),
    "plot-embeddings": lambda a: ([a.model], [a.output]),
    "embed": lambda a: ([a.model, a.file], [a.output]),
    "mix": lambda a: ([*a.models, a.valid, a.per_bucket], [a.output]),
    "reproduce": lambda a: ([], [a.workdir]),
    "demo": lambda a: ([], [a.workdir]),
}


def command_paths(args) -> tuple[list, list]:
    key = args.command + (f" {args.ngram_command}" if args.command == "ngram" else "")
    inputs, outputs = PATHS[key](args) if key in PATHS else ([], [])
    return [p for p in inputs if p is not None], [p for p in outputs if p is not None]


def _show_warning(message, category, *args, **kwargs) -> None:
    if issubclass(category, NnlmWarning):
        print(f"nnlm: warning: {message}", file=sys.stderr)
    else:  # a library's own warning: one line, not a traceback-like block
        print(f"nnlm: warning: {category.__name__}: {message}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, --version, or a bad option (one line, exit 2)
        return e.code if isinstance(e.code, int) else 2
    try:
        inputs, outputs = command_paths(args)
        check_distinct(inputs, outputs)
        with contextlib.ExitStack() as locks, warnings.catch_warnings():
            warnings.simplefilter("default", NnlmWarning)
            warnings.showwarning = _show_warning
            for path in outputs:
                locks.enter_context(output_lock(path))
            HANDLERS[args.command](args)
    except NnlmError as e:
        print(f"nnlm: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nnlm: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as e:  # an OS error no layer below anticipated: still one line
        where = public_path(e.filename) if e.filename else "(file)"
        print(f"nnlm: error: {os_error_message(where, e, 'failed')}", file=sys.stderr)
        return 2
    except MemoryError:
        print("nnlm: error: out of memory; try a smaller model, --batch-size or corpus",
              file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""nnlm train, generate, neighbors, plot-embeddings, embed and similar: the neural family."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.argtypes import (
    nonnegative_float,
    nonnegative_int,
    positive_float,
    positive_int,
    ranged,
    seed,
    unit_interval,
)
from ..base.errors import NnlmError, a
from ..neural.parallel.heartbeat import WORKER_TIMEOUT
from ..neural.settings import ARCH_SETTINGS, RUN_SETTINGS
from .common import (
    OBJECTIVES,
    PRESET_NAMES,
    RECIPES,
    add_device_argument,
    add_force,
    add_sentence_arguments,
    add_speed_arguments,
    add_vocabulary_arguments,
    configure_speed,
    fixed_vocabulary,
    load_model_as,
)
from .flags import as_flags


def setting_type(name: str):
    """The argparse type of a network or run setting, made from the declaration the
    library checks its callers against (:data:`nnlm.neural.settings.ARCH_SETTINGS`)."""
    s = {**ARCH_SETTINGS, **RUN_SETTINGS}[name]
    return ranged(s.kind, s.low, s.high, s.low_open, s.high_open,
                  name="integer" if s.kind is int else "number")


def add_parsers(sub) -> None:
    # train (neural) ------------------------------------------------------------------
    tr = sub.add_parser(
        "train", help="train a neural probabilistic language model (NPLM)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train y = b + W x + U tanh(d + H x) (Bengio et al. 2003) on TRAIN, with "
        "early stopping on VALID.\nThe checkpoint directory holds config.json, vocab.txt, "
        "model.safetensors (best on VALID),\nmetrics.csv, learning_curve.png and state/ "
        "(to --resume).\n\npresets: " + ", ".join(PRESET_NAMES) + "\n"
        "  mlp1-mlp10: the networks of Table 1 of the paper; modern: n=6, m=h=256, output\n"
        "  weights tied to C (U = C), dropout, AdamW; deep: Sun & Iyyer's 2021 network, the\n"
        "  last 5 words plus an average of the 58 before them, two residual blocks with\n"
        "  layer norm, tied; lstm: g as a recurrent network, an LSTM over the line (h=512,\n"
        "  m=256, dropout, tied; Zaremba et al. 2014); awd: that LSTM with h=1024 and\n"
        "  AWD-LSTM's regularizers (DropConnect on W_hh, locked and embedding dropout,\n"
        "  AR/TAR; Merity et al. 2018); lbl: the log-bilinear model of Mnih &\n"
        "  Hinton 2007; energy: the paper's energy-minimization variant (the target read\n"
        "  through C too; on a CPU train it with --objective nce, on a GPU the full\n"
        "  softmax is affordable and better); tiny: the toy world.\n"
        "  --recipe paper trains with the paper's SGD.\n\n"
        "The output layer is where the time goes; --objective nce samples it instead of "
        "summing it,\n--objective selfnorm teaches it to need no sum when scoring, and "
        "--shortlist K shrinks it.",
        epilog="examples:\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      -o runs/mlp1            # add --resume to continue an interrupted run\n"
        "  nohup nnlm train ... -o runs/big > big.log 2>&1 &   # stop it with kill (SIGTERM):\n"
        "                              # the last checkpoint is kept, --resume continues\n"
        "  nnlm train data/toy/train.txt --valid data/toy/valid.txt --preset tiny -o runs/tiny\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      --objective nce --noise-samples 100 -o runs/mlp1-nce\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset mlp1 \\\n"
        "      --shortlist 4000 --shortlist-backoff runs/kn5 -o runs/mlp1-sl4k\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset lbl -o runs/lbl\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset deep \\\n"
        "      -o runs/deep\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset lstm \\\n"
        "      -o runs/lstm\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset awd \\\n"
        "      -o runs/awd              # about 3 minutes an epoch on 2 cores\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset modern \\\n"
        "      --context fofe --fofe-alpha 0.7 --history 32 -o runs/fofe\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --preset energy \\\n"
        "      --objective nce --noise-samples 100 -o runs/energy\n"
        "  nnlm train data/brown/train.txt --valid data/brown/valid.txt --workers 2 -o runs/async\n"
        "  torchrun --nproc-per-node 2 -m nnlm train data/brown/train.txt \\\n"
        "      --valid data/brown/valid.txt -o runs/ddp   # --output-parallel: split U, W, b")
    tr.add_argument("train", type=Path, metavar="TRAIN")
    tr.add_argument("--valid", dest="valid_path", type=Path, required=True, metavar="VALID",
                    help="validation text (early stopping, learning-rate decay)")
    tr.add_argument("-o", "--output", type=Path, required=True, metavar="CKPT",
                    help="checkpoint directory")
    preset = tr.add_argument("--preset", default=None, metavar="NAME",
                             help="start from a named architecture (default: mlp1)")
    preset.completion_choices = PRESET_NAMES  # checked later, with a suggestion for a typo
    tr.add_argument("--recipe", default=None, choices=list(RECIPES),
                    help="how to train: paper (the paper's SGD), fast (AdamW + dropout, the "
                    "default for mlp presets), modern, tiny")
    tr.add_argument("--resume", action="store_true",
                    help="continue an interrupted run in CKPT with its saved settings; only "
                    "--lr, --clip, --epochs and --patience may change (say, to recover from a "
                    "divergence); the change is logged and noted in metrics.csv")
    arch = tr.add_argument_group("architecture (override the preset)")
    arch.add_argument("--order", type=setting_type("order"), metavar="N",
                      help="n: condition on N-1 words (the lstm: at most the last N-1 words "
                      "of the line; 1025 by default)")
    arch.add_argument("--m", type=setting_type("m"), metavar="M",
                      help="feature vector size (columns of C)")
    arch.add_argument("--h", type=setting_type("h"), metavar="H",
                      help="hidden units (0: no hidden layer)")
    arch.add_argument("--direct", action=argparse.BooleanOptionalAction, default=None,
                      help="direct connections W from x to the output")
    arch.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None,
                      help="U = C: the output layer reuses the word features (needs h = m, "
                           "--no-direct; fewer parameters, often lower perplexity)")
    arch.add_argument("--history", type=setting_type("history"), metavar="S",
                      help="also read the S words of the line before the window: averaged "
                      "(deep, see --far) or through FOFE codes (--context fofe)")
    arch.add_argument("--context", choices=ARCH_SETTINGS["context"].choices,
                      help="nplm: x holds the window's words (the paper), or in each slot the "
                      "FOFE code of the history up to that word (Zhang et al. 2015)")
    arch.add_argument("--fofe-alpha", type=setting_type("fofe_alpha"),
                      metavar="A", help="FOFE's forgetting factor, in (0, 1) (default 0.7)")
    arch.add_argument("--far", choices=ARCH_SETTINGS["far"].choices,
                      help="deep: how the --history words become one vector: learned weights "
                      "per distance, the plain mean, a FOFE code, or none (--history 0)")
    arch.add_argument("--far-spans", type=setting_type("far_spans"), metavar="K",
                      help="deep: average the --history words in K spans, the nearest "
                      "shortest and each twice the last, instead of as one (default 1)")
    arch.add_argument("--layers", type=setting_type("layers"), metavar="L",
                      help="deep: residual blocks above the first hidden layer; lstm: "
                      "stacked LSTM layers (at least 1)")
    arch.add_argument("--span", type=setting_type("span"), metavar="T",
                      help="lstm: training reads each line in pieces of at most T words, "
                      "each from a zero state (default 256)")
    arch.add_argument("--residual", action=argparse.BooleanOptionalAction, default=None,
                      help="deep: residual connections around each block")
    arch.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=None,
                      help="deep: layer normalization before each block and the output")
    arch.add_argument("--energy-v", choices=["shared", "per-word"],
                      help="energy preset: one v for all words, or one per target word (the "
                      "paper's suggestion: as many parameters as U)")
    arch.add_argument("--dropout-x", type=setting_type("dropout_x"), metavar="P",
                      help="dropout on x, in [0, 1)")
    arch.add_argument("--dropout-h", type=setting_type("dropout_h"), metavar="P",
                      help="dropout on the hidden layer, in [0, 1)")
    arch.add_argument("--word-dropout", type=setting_type("word_dropout"), metavar="P",
                      help="deep: in training, each context word becomes <unk> with chance "
                      "P (blank noising, Xie et al. 2017), in [0, 1)")
    arch.add_argument("--dropout-e", type=setting_type("dropout_e"), metavar="P",
                      help="lstm: embedding dropout, each word's whole vector C_w dropped "
                      "with chance P for a batch, in [0, 1)")
    arch.add_argument("--dropout-w", type=setting_type("dropout_w"), metavar="P",
                      help="lstm: DropConnect on the recurrent weights W_hh (AWD-LSTM), "
                      "in [0, 1)")
    arch.add_argument("--dropout-l", type=setting_type("dropout_l"), metavar="P",
                      help="lstm: dropout between stacked layers (default: --dropout-h)")
    arch.add_argument("--locked", action=argparse.BooleanOptionalAction, default=None,
                      help="lstm: one dropout mask a line piece, kept over its words "
                      "(variational dropout)")
    arch.add_argument("--ar", type=setting_type("ar"), metavar="ALPHA",
                      help="lstm: activation regularization, ALPHA mean(a_t^2) (>= 0)")
    arch.add_argument("--tar", type=setting_type("tar"), metavar="BETA",
                      help="lstm: temporal activation regularization, BETA "
                      "mean((a_t - a_{t-1})^2) (>= 0)")
    opt = tr.add_argument_group("optimization (override the preset)")
    opt.add_argument("--optimizer", choices=["sgd", "adam", "adamw"],
                     help="sgd: the paper's (sparse rows of C, decay on weights only)")
    opt.add_argument("--lr", type=positive_float, metavar="EPS",
                     help="eps_0 > 0 (per example for sgd)")
    opt.add_argument("--lr-decay", type=nonnegative_float, metavar="R",
                     help="r >= 0 in eps_0 / (1 + r t)")
    opt.add_argument("--weight-decay", type=nonnegative_float, metavar="L",
                     help="on C, H, U, W only (>= 0)")
    opt.add_argument("--batch-size", type=positive_int, metavar="B",
                     help="examples an update (the lstm: target words an update, in line "
                     "pieces of like length)")
    opt.add_argument("--epochs", type=positive_int, metavar="E",
                     help="at most E passes over the training text (the preset's; without "
                     "one, 20); early stopping may end sooner")
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
    opt.add_argument("--average", type=ranged(float, 0, 1, high_open=True), metavar="A",
                     help="validate and save an exponential moving average of the weights, "
                     "A per update (e.g. 0.999: about the last 1,000 updates; 0: off)")
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
    sl.add_argument("--shortlist", type=setting_type("shortlist"), metavar="K",
                    help="the network predicts only the K most frequent words (the specials "
                    "included) and one 'elsewhere' output; the n-gram model scores the rest")
    sl.add_argument("--shortlist-backoff", type=Path, metavar="MODEL",
                    help="n-gram model (directory or ARPA, same vocabulary) for the words "
                    "outside the short-list; copied into the checkpoint")
    run_group = tr.add_argument_group("running")
    run_group.add_argument("--threads", type=positive_int, default=None,
                           help="torch threads (default: all cores)")
    add_device_argument(run_group)
    run_group.add_argument("--max-steps", type=setting_type("max_steps"), default=None,
                           metavar="N",
                           help="stop (and checkpoint) after N updates in all")
    run_group.add_argument("--checkpoint-every", type=nonnegative_int, default=500, metavar="N",
                           help="save the training state every N updates (default: 500; 0: "
                           "at epoch ends only). A state is saved only while the loss is "
                           "sane, so a diverging run keeps its last good one")
    par = tr.add_argument_group(
        "parallel training (section 3 of the paper; docs/scaling.md says which to pick)")
    par.add_argument("--workers", type=positive_int, default=1, metavar="P",
                     help="asynchronous data-parallel training on this machine (the paper's "
                     "shared-memory scheme; Hogwild, Niu et al. 2011): P processes, one "
                     "thread each, update the shared parameters without locks (default: 1, "
                     "at most the cores)")
    par.add_argument("--worker-timeout", type=ranged(float, 1, 86400), default=None,
                     metavar="SECONDS",
                     help="--workers: stop the run (keeping its last checkpoint) when a worker "
                     "has not finished an update for this long: stopped, stuck or starved "
                     f"(default: {WORKER_TIMEOUT:g})")
    par.add_argument("--output-parallel", action="store_true",
                     help="under torchrun: split the output layer (U, W, b) by vocabulary "
                     "across the ranks, the paper's parameter-parallel scheme; every rank "
                     "trains on the whole batch. Without it, torchrun trains synchronous "
                     "data-parallel: each rank takes its share of every --batch-size batch "
                     "and the gradients are summed, as in one process")
    add_vocabulary_arguments(tr.add_argument_group("vocabulary"))

    gen = sub.add_parser("generate", help="sample sentences from a model",
                         description="Sample sentences from MODEL (any model): temperature, "
                         "top-k, an optional prompt.")
    gen.add_argument("model", type=Path, metavar="MODEL")
    gen.add_argument("-n", type=positive_int, default=5, help="sentences (default: 5)")
    gen.add_argument("--prompt", default="", help="words to continue (default: none, a new "
                     "sentence)")
    gen.add_argument("--temperature", type=positive_float, default=1.0,
                     help="divide log-probabilities by T > 0: below 1 sharper, above 1 "
                     "flatter (default: 1)")
    gen.add_argument("--top-k", type=nonnegative_int, default=0,
                     help="sample among the K likeliest (0: all)")
    gen.add_argument("--max-words", type=positive_int, default=50,
                     help="stop a sentence after N words (default: 50)")
    gen.add_argument("--seed", type=seed, default=None, help="random seed (default: random)")
    add_speed_arguments(gen.add_argument_group("neural models"))

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
    pe.add_argument("-o", "--output", type=Path, required=True, metavar="PNG",
                    help="the picture to write")
    pe.add_argument("--method", choices=["pca", "tsne"], default="pca",
                    help="the projection to 2D: pca (default) or tsne (needs scikit-learn)")
    add_force(pe)

    em = sub.add_parser(
        "embed", help="sentence embeddings: one vector per line, from the word features C",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write one vector per line of FILE (default: stdin) to OUT.npy (float32, "
        "lines x m):\nthe sum of the words' rows of C over the square root of their number "
        "(a blank line:\nthe zero vector). The rarest words and every unknown word share "
        "hash buckets, each\nstarting as the mean of the vectors of the words that hash to "
        "it. In Python:\nnnlm.load_model(MODEL).embed(sentences).",
        epilog="examples:\n"
        "  nnlm embed runs/modern data/brown/test.txt -o test.npy\n"
        "  nnlm embed runs/mlp1 notes.txt.gz --normalize -o notes.npy\n"
        "  nnlm similar runs/modern \"the jury said\" data/brown/test.txt -k 5")
    em.add_argument("model", type=Path, metavar="MODEL", help="neural checkpoint")
    em.add_argument("file", type=Path, nargs="?", default=Path("-"), metavar="FILE",
                    help="text, one sentence a line (.gz/.bz2/.xz; default or -: stdin)")
    em.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.npy",
                    help="the vectors, float32 (lines x m)")
    add_sentence_arguments(em)
    add_force(em)
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


def cmd_train(args) -> None:
    from ..models import load_model, save_model
    from ..neural.settings import ARCH_FIELDS, TRAIN_FIELDS
    from ..neural.training.run import train_from_files

    arch = {k: getattr(args, k) for k in ARCH_FIELDS if getattr(args, k, None) is not None}
    if args.energy_v is not None:
        arch["v_per_word"] = args.energy_v == "per-word"
    train = {k: getattr(args, k) for k in TRAIN_FIELDS if getattr(args, k) is not None}
    train_from_files(args.train, args.valid_path, args.output, preset=args.preset, arch=arch,
                     train=train, recipe=args.recipe, resume=args.resume, threads=args.threads,
                     max_steps=args.max_steps, checkpoint_every=args.checkpoint_every,
                     min_count=args.min_count, max_size=args.max_size, device=args.device,
                     vocab=fixed_vocabulary(args),
                     shortlist_backoff=args.shortlist_backoff, workers=args.workers,
                     worker_timeout=args.worker_timeout or WORKER_TIMEOUT,
                     output_parallel=args.output_parallel, load=load_model, save=save_model,
                     log=lambda message: print(as_flags(message, args.command_parser)))


def cmd_generate(args) -> None:
    from ..models import load_model

    model = load_model(args.model)
    configure_speed(model, args)
    for sentence in model.generate(args.n, args.prompt, temperature=args.temperature,
                                   top_k=args.top_k, max_words=args.max_words, seed=args.seed):
        print(sentence)


def _load_neural(path: Path):
    from ..models import load_model
    from ..neural.nplm_lm import NeuralLM

    model = load_model(path)
    if not isinstance(model, NeuralLM):
        raise NnlmError(f"{path}: {a(model.kind)} model, not a neural checkpoint")
    return model


def cmd_neighbors(args) -> None:
    model = _load_neural(args.model)
    for word in args.words:
        if word not in model.vocab:
            raise NnlmError(f"{word!r} is not in the model's vocabulary ({len(model.vocab):,} "
                            "words); rare words were merged into <unk>")
        print(f"{word}: " + ", ".join(f"{w} ({s:.2f})" for w, s in model.neighbors(word, args.k)))


def cmd_plot_embeddings(args) -> None:
    from ..neural.embeddings import plot_embeddings

    model = _load_neural(args.model)
    words = args.words or model.vocab.words[3:103]
    missing = [w for w in words if w not in model.vocab]
    if missing:
        raise NnlmError(f"not in the model's vocabulary: {', '.join(missing[:5])}")
    plot_embeddings(model, words, args.output, args.method)
    print(f"{args.output}: {len(words)} words, {args.method.upper()}")


def _sentence_model(path: Path):
    from ..neural.nplm_lm import NeuralLM

    return load_model_as(path, NeuralLM, "word feature vectors C",
                         "embeddings need a neural checkpoint (nnlm train)")


def _sentence_settings(args) -> dict:
    return {"normalize": args.normalize, "buckets": args.buckets,
            "hash_fraction": args.hash_fraction}


def cmd_embed(args) -> None:
    from ..neural.sentence import embed_file

    n, m = embed_file(_sentence_model(args.model), args.file, args.output,
                      **_sentence_settings(args))
    print(f"{args.output}: {n:,} vectors of {m}", file=sys.stderr)


def cmd_similar(args) -> None:
    from ..neural.sentence import similar_lines

    found = similar_lines(_sentence_model(args.model), args.sentence, args.file, args.k,
                          **_sentence_settings(args))
    for line_no, sim, line in found:
        if args.json:
            print(json.dumps({"similarity": sim, "line": line_no, "text": line}))
        else:
            print(f"{sim:.4f}\t{line_no}\t{line}")


HANDLERS = {
    "train": cmd_train, "generate": cmd_generate, "neighbors": cmd_neighbors,
    "plot-embeddings": cmd_plot_embeddings, "embed": cmd_embed, "similar": cmd_similar,
}
# (inputs, outputs) of each command: see nnlm.cli.main
PATHS = {
    "train": lambda a: ([a.train, a.valid_path, a.shortlist_backoff, a.vocab], [a.output]),
    "plot-embeddings": lambda a: ([a.model], [a.output]),
    "embed": lambda a: ([a.model, a.file], [a.output]),
}
# file outputs and their kinds (nnlm.file_kinds): see nnlm.cli.main
FILE_OUTPUTS = {
    "plot-embeddings": lambda a: [(a.output, "png")],
    "embed": lambda a: [(a.output, "npy")],
}

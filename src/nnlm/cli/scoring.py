"""nnlm score, eval and rescore: any model on a text."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from ..base.argtypes import (
    finite_float,
    ranged,
)
from ..base.errors import NnlmError
from .common import (
    add_force,
    add_neural_scoring_arguments,
    load_for_scoring,
)
from .flags import as_flags


def add_parsers(sub) -> None:
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
    score.add_argument("--json", action="store_true",
                       help="one JSON object per input line (with --per-token, its tokens)")
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
    add_force(rs)

    # eval ----------------------------------------------------------------------------
    ev = sub.add_parser("eval", help="perplexity of a model on a text file",
                        description="Perplexity, NLL, predicted tokens and <unk> count of "
                        "MODEL on TEXT. </s> is predicted and counted; <s> is context only.")
    ev.add_argument("model", type=Path, metavar="MODEL")
    ev.add_argument("text", type=Path, metavar="TEXT")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    ev.add_argument("--open-vocab", action="store_true",
                    help="neural models: give each new word a feature vector, a convex "
                    "combination of C under the model's prediction where it occurs (Bengio "
                    "et al. 2003), and add it to the vocabulary as the text is read; its "
                    "first occurrence is scored as <unk>, later ones with its own row")
    ev.add_argument("--oov-prior", choices=("types", "tokens"), default=None,
                    help="--open-vocab: the combination's weights: P(i | context) / P(i), "
                    "the words whose contexts look like this one (types, default), or the "
                    "paper's P(i | context), where frequent words win by frequency (tokens)")
    ev.add_argument("--oov-lr", type=ranged(float, 0, 10), default=None, metavar="RATE",
                    help="--open-vocab: after each scored stretch of text, one gradient step "
                    "of this rate, in [0, 10], on the new words' rows only (0: the combination "
                    "alone; default: 0.1, chosen on Brown valid)")
    add_adaptation_arguments(ev)
    add_neural_scoring_arguments(ev)


def add_adaptation_arguments(ev) -> None:
    """eval's --cache and --dynamic, and their settings."""
    adapt = ev.add_argument_group(
        "test-time adaptation (a network learns from the text it has scored; reported "
        "apart from the static number)")
    adapt.add_argument("--cache", action="store_true",
                       help="the neural cache (Grave et al. 2017): the last L positions' "
                       "hidden vectors vote for the words that followed them")
    adapt.add_argument("--cache-theta", type=ranged(float, 0, 1e6), metavar="THETA",
                       help="the cache's sharpness, exp(THETA z . z_t) (default: chosen on "
                       "--valid)")
    adapt.add_argument("--cache-lambda", type=ranged(float, 0, 1, high_open=True),
                       metavar="LAMBDA", help="the cache's weight, in [0, 1) (default: chosen "
                       "on --valid)")
    adapt.add_argument("--cache-size", type=ranged(int, 1, 10**6), metavar="L",
                       help="positions the cache keeps (default: chosen on --valid)")
    adapt.add_argument("--dynamic", action="store_true",
                       help="dynamic evaluation (Krause et al. 2018): after each segment is "
                       "scored, a gradient step on it, pulled back toward the trained weights")
    adapt.add_argument("--dynamic-lr", type=ranged(float, 0, 100), metavar="ETA",
                       help="its step (default: chosen on --valid)")
    adapt.add_argument("--dynamic-decay", type=ranged(float, 0, 1), metavar="D",
                       help="its pull toward the trained weights, in [0, 1] (default: "
                       "chosen on --valid)")
    adapt.add_argument("--dynamic-rule", choices=("rms", "sgd"), default=None,
                       help="rms (default): each weight's step and pull scaled by the root "
                       "mean square of its gradients on VALID (Krause et al.'s RMS rule); "
                       "sgd: one step size for every weight")
    adapt.add_argument("--dynamic-segment", type=ranged(int, 1, 10**6), default=None,
                       metavar="TOKENS", help="whole lines of at least TOKENS tokens a step "
                       "(default 100)")
    adapt.add_argument("--valid", type=Path, metavar="VALID",
                       help="the text the settings not given are chosen on")
    adapt.add_argument("--tune-tokens", type=ranged(int, 1000, 10**9), default=None,
                       metavar="N", help="--dynamic: choose its settings on the first N "
                       "tokens of VALID (default: all of it; each choice is a run over them)")


def cmd_score(args) -> None:
    from ..scoring import score_sentences
    from ..text.fileio import iter_lines, stdin_binary

    text = args.file if args.file is not None else stdin_binary()  # closed: say so first
    model, parts = load_for_scoring(args)
    source = str(args.file) if args.file is not None else "<stdin>"
    lines = iter_lines(text, source)
    total, tokens, oov, sentences = 0.0, 0, 0, 0
    out = sys.stdout
    if not args.per_token and not args.json:
        out.write("log10_prob\ttokens\toov\tperplexity\tsentence\n")
    seen: list = []  # the first chunks' streams, for the neural report
    normalized = getattr(model, "normalized", True)
    if not normalized:
        print(f"nnlm: note: a {model.kind} model gives scores, not probabilities: its log10 "
              "numbers rank hypotheses, and it has no perplexity", file=sys.stderr)
    for s in score_sentences(model, lines, source, seen if parts else None):
        total += s.log10_prob
        tokens += len(s.log10_probs)
        oov += int(s.oov.sum())
        if args.json:  # one object a line, blank lines too (the lines stay aligned)
            out.write(json.dumps(_sentence_json(s, normalized, args.per_token)) + "\n")
            sentences += not s.blank
            continue
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
            ppl = f"{s.perplexity:.4f}" if normalized else "-"
            out.write(f"{s.log10_prob:.6f}\t{len(s.log10_probs)}\t{int(s.oov.sum())}\t"
                      f"{ppl}\t{' '.join(s.words[:-1])}\n")
    out.flush()  # the rows before the summary, where stderr joins stdout (2>&1 | cat)
    if sentences:
        if not -total / tokens <= 300:  # each sentence was finite; their sum may not be
            raise NnlmError("the total log10 probability is beyond floating point: the model "
                            "is damaged")
        ppl = f", perplexity {10 ** (-total / tokens):.4f}" if normalized else ""
        print(f"{sentences:,} sentences, {tokens:,} tokens (</s> included), {oov:,} OOV, "
              f"log10 prob {total:.4f}{ppl}", file=sys.stderr)
    if parts and seen:
        from ..neural.nplm_lm import scoring_report

        report, warnings = scoring_report(parts, seen)
        for line in [*describe_report(report), *(f"nnlm: warning: {w}" for w in warnings)]:
            print(line, file=sys.stderr)


def _sentence_json(s, normalized: bool, per_token: bool) -> dict:
    """One sentence of ``nnlm score --json``: its total, counts and perplexity (null for a
    blank line or a model of scores), and with ``--per-token`` each token's numbers."""
    if s.blank:
        return {"log10_prob": 0.0, "tokens": 0, "oov": 0, "perplexity": None, "sentence": ""}
    out = {"log10_prob": s.log10_prob, "tokens": len(s.log10_probs), "oov": int(s.oov.sum()),
           "perplexity": s.perplexity if normalized else None,
           "sentence": " ".join(s.words[:-1])}
    if per_token:
        out["per_token"] = [{"word": w, "log10_prob": float(p), "oov": bool(o),
                             "ngram_length": None if s.orders is None else int(s.orders[i])}
                            for i, (w, p, o) in enumerate(zip(s.words, s.log10_probs, s.oov))]
    return out


def cmd_rescore(args) -> None:
    from ..decoding.rescore import format_ranked, read_nbest, rescore
    from ..text.fileio import atomic_write_text

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


def evaluation_signature(model, args, stream) -> dict:
    """What made a reported number, in sacrebleu's manner: nnlm's version, the model (its
    kind and identity: the model_id of a directory, which changes at every save, or the
    SHA-256 of a file), its vocabulary's fingerprint, the scored tokens' fingerprint (a
    SHA-256 of their ids, so the same text under another name matches) and how the
    networks scored. Two numbers with the same signature are comparable."""
    from ..base.digest import sha256_hex
    from ..base.version import __version__
    from ..model_files import model_identity

    identity = model_identity(args.model, model)
    text = sha256_hex(stream.ids.tobytes())[:12]
    scoring = "bf16" if args.bf16 else "fp32"
    if args.self_normalized:
        scoring += "+selfnorm"
    parts = [f"nnlm:{__version__}", f"model:{model.kind}:{identity.removeprefix('sha256:')[:12]}",
             f"vocab:{model.vocab.fingerprint[:12]}", f"text:{text}",
             f"tokens:{len(stream.ids)}", f"scoring:{scoring}"]
    return {"nnlm_version": __version__, "model_identity": identity,
            "vocab_fingerprint": model.vocab.fingerprint, "text_fingerprint": text,
            "signature": "|".join(parts)}


def cmd_eval(args) -> None:
    from ..lm import evaluate
    from ..text.corpus import read_stream

    if not args.open_vocab and (args.oov_lr is not None or args.oov_prior is not None):
        raise NnlmError("--oov-lr and --oov-prior apply only with --open-vocab")
    if args.open_vocab and args.self_normalized:
        raise NnlmError("--open-vocab scores and learns the new words through the full "
                        "softmax; drop --self-normalized")
    adapting = _adaptation_requested(args)
    model, parts = load_for_scoring(args)
    if args.open_vocab:
        return _eval_open_vocab(args, model)
    if adapting:
        return _eval_adapted(args, model)
    stream = read_stream(args.text, model.vocab)
    if parts:
        from ..neural.runtime import bf16_hint

        hint = bf16_hint(parts, len(stream))
        if hint:
            print(f"nnlm: note: {as_flags(hint, args.command_parser)}", file=sys.stderr)
    result = evaluate(model, stream).to_dict()
    if parts:
        from ..neural.nplm_lm import scoring_report

        report, warnings = scoring_report(parts, [stream])
        result.update(report)
        for w in warnings:
            print(f"nnlm: warning: {w}", file=sys.stderr)
    signature = evaluation_signature(model, args, stream)
    if args.json:  # strict JSON: a non-finite number becomes null
        finite = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                  for k, v in result.items()}
        print(json.dumps({"model": str(args.model), "text": str(args.text), **finite,
                          **signature}, allow_nan=False))
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
    print(f"signature:   {signature['signature']}")
    if parts:
        print("\n".join(describe_report(result)))


CACHE_FLAGS = ("cache_theta", "cache_lambda", "cache_size")
DYNAMIC_FLAGS = ("dynamic_lr", "dynamic_decay", "dynamic_rule", "dynamic_segment",
                 "tune_tokens")


def _adaptation_requested(args) -> bool:
    """True for --cache or --dynamic; their settings' flags, --valid and the modes they
    exclude checked first, in one line each."""
    for on, flags in (("cache", CACHE_FLAGS), ("dynamic", DYNAMIC_FLAGS)):
        given = [f for f in flags if getattr(args, f) is not None]
        if given and not getattr(args, on):
            raise NnlmError(f"--{given[0].replace('_', '-')} applies only with --{on}")
    if not (args.cache or args.dynamic):
        if args.valid is not None:
            raise NnlmError("--valid chooses the settings of --cache or --dynamic; add one")
        return False
    if args.open_vocab or args.self_normalized:
        raise NnlmError(f"--{'cache' if args.cache else 'dynamic'} scores through the full "
                        "softmax; drop --open-vocab and --self-normalized")
    choose = (args.cache and None in (args.cache_theta, args.cache_lambda, args.cache_size)) \
        or (args.dynamic and None in (args.dynamic_lr, args.dynamic_decay))
    if args.dynamic and args.valid is None and args.dynamic_rule != "sgd" and not choose:
        raise NnlmError("--dynamic's rms rule takes its gradient statistics on --valid "
                        "VALID: give it, or --dynamic-rule sgd")
    if choose and args.valid is None:
        raise NnlmError("--cache and --dynamic choose their settings on --valid VALID; give "
                        "it, or every setting (--cache-theta --cache-lambda --cache-size, "
                        "--dynamic-lr --dynamic-decay)")
    return True


def _eval_adapted(args, model) -> None:
    from ..lm import evaluation_from_logprobs
    from ..mixture import Mixture
    from ..neural.adaptation import adapted_logprobs, adapted_mixture_logprobs
    from ..text.corpus import read_stream

    mixed = isinstance(model, Mixture)
    if mixed and args.valid is None:
        raise NnlmError(f"{args.model}: a mixture; with its network adapted its weights are "
                        "fitted again, on --valid VALID: give it")
    lm = model if mixed else _one_network(args.model, model)
    stream = read_stream(args.text, model.vocab)
    valid = read_stream(args.valid, model.vocab) if args.valid is not None else None
    cache = {"theta": args.cache_theta, "lam": args.cache_lambda,
             "size": args.cache_size} if args.cache else None
    dynamic = {"lr": args.dynamic_lr, "decay": args.dynamic_decay,
               "segment": args.dynamic_segment, "rule": args.dynamic_rule} \
        if args.dynamic else None
    static_logprobs = lm.logprobs(stream)
    static = evaluation_from_logprobs(stream, static_logprobs, model.vocab,
                                      model.zero_means).to_dict()
    settings = dict(cache=cache, dynamic=dynamic, valid=valid,
                    tune_tokens=args.tune_tokens, log=_note)
    if mixed:
        logprobs, used = adapted_mixture_logprobs(lm, stream, **settings)
    else:
        logprobs, used = adapted_logprobs(lm, stream, static=static_logprobs, **settings)
    result = evaluation_from_logprobs(stream, logprobs, model.vocab, model.zero_means).to_dict()
    if args.json:
        print(json.dumps({"model": str(args.model), "text": str(args.text), **result,
                          "static_perplexity": static["perplexity"],
                          "valid": None if args.valid is None else str(args.valid), **used}))
        return
    print(f"model:       {args.model}\ntext:        {args.text}")
    print(f"tokens:      {result['tokens']:,} predicted (words + </s>)")
    print(f"static:      perplexity {static['perplexity']:.3f}")
    for name in ("dynamic", "cache"):
        if name in used:
            settings = ", ".join(f"{k} {v:g}" if isinstance(v, float | int) else f"{k} {v}"
                                 for k, v in used[name].items())
            how = "chosen on " + str(args.valid) if f"{name}_search" in used else "as given"
            print(f"{name + ':':<12} {settings} ({how})")
    if "mixture_weights" in used:
        print(f"mixture:     component {used['adapted_component'] + 1} adapted, weights "
              f"fitted again on {args.valid}")
    print(f"perplexity:  {result['perplexity']:.3f}  (adapted to the text as it is read)")


def _note(message: str) -> None:
    print(f"nnlm: {message}", file=sys.stderr)


def _one_network(path, model):
    """The model as one network that --cache and --dynamic can adapt, or one line why
    not."""
    from ..neural.nplm_lm import NeuralLM, ShortListLM

    if not isinstance(model, NeuralLM):
        raise NnlmError(f"{path}: a {model.kind} model; --cache and --dynamic adapt a "
                        "network (a neural model, or a mixture holding one)")
    if isinstance(model, ShortListLM) or not model.model.linear_output:
        raise NnlmError(f"{path}: --cache and --dynamic need a network whose output layer "
                        "is a softmax over every word (no short-list, not the energy model)")
    return model


def _eval_open_vocab(args, model) -> None:
    from ..neural.open_vocab import DEFAULT_LR, score_open_vocab

    lr = DEFAULT_LR if args.oov_lr is None else args.oov_lr
    prior = args.oov_prior or "types"
    result = {**score_open_vocab(model, args.text, lr, prior).to_dict(),
              "oov_prior": prior, "oov_lr": lr}
    if args.json:
        print(json.dumps({"model": str(args.model), "text": str(args.text), **result}))
        return
    print(f"model:       {args.model}\ntext:        {args.text}")
    print(f"sentences:   {result['sentences']:,}")
    print(f"tokens:      {result['tokens']:,} predicted (words + </s>)")
    print(f"perplexity:  {result['perplexity']:.3f}  (open vocabulary)")
    print(f"new words:   {result['words_added']:,} added; {result['first_occurrences']:,} first "
          f"occurrences scored as <unk>, {result['later_occurrences']:,} later ones with "
          f"their own rows (prior {prior}, step {lr:g})")


def describe_report(report: dict) -> list[str]:
    """Human-readable lines for the neural part of the report
    (:func:`nnlm.neural.nplm_lm.scoring_report`'s dict)."""
    lines = []
    for k, v in report.items():
        if k.startswith("shortlist_coverage"):
            lines.append(f"short-list:  {v:.2%} of the tokens inside the list")
        elif k.startswith("log_z_mean") and not k.startswith("log_z_mean_abs"):
            sfx = k[len("log_z_mean"):]
            lines.append(f"log Z:       mean {v:+.4f}, std {report['log_z_std' + sfx]:.4f}, "
                         f"mean |.| {report['log_z_mean_abs' + sfx]:.4f} (over "
                         f"{report['log_z_tokens' + sfx]:,} tokens)")
    return lines


HANDLERS = {"eval": cmd_eval, "score": cmd_score, "rescore": cmd_rescore}
# (inputs, outputs) of each command: see nnlm.cli.main
PATHS = {
    "score": lambda a: ([a.model, a.file], []),
    "eval": lambda a: ([a.model, a.text, a.valid], []),
    "rescore": lambda a: ([a.model, a.nbest], [a.output]),
}
# file outputs and their kinds (nnlm.file_kinds): see nnlm.cli.main
FILE_OUTPUTS = {"rescore": lambda a: [(a.output, "nbest")]}

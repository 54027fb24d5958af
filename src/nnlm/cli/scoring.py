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
    add_neural_scoring_arguments(ev)


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
    model, parts = load_for_scoring(args)
    if args.open_vocab:
        return _eval_open_vocab(args, model)
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
    "eval": lambda a: ([a.model, a.text], []),
    "rescore": lambda a: ([a.model, a.nbest], [a.output]),
}
# file outputs and their kinds (nnlm.file_kinds): see nnlm.cli.main
FILE_OUTPUTS = {"rescore": lambda a: [(a.output, "nbest")]}

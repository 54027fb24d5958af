"""What the command groups share: the parser class, argument groups, constants that
must not import torch, and the helpers that load models for scoring."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from ..base.argtypes import (
    fraction,
    positive_int,
    ranged,
)
from ..base.errors import NnlmError, a
from ..neural.presets import PRESETS, RECIPES
from ..neural.settings import DEVICES, OBJECTIVES
from ..ngram.estimate.methods import METHODS

DEFAULT_BUCKETS, DEFAULT_HASH_FRACTION = 1000, 0.025  # nnlm.neural.sentence's

PRESET_NAMES = list(PRESETS)
__all__ = ["DEVICES", "METHODS", "OBJECTIVES", "PRESET_NAMES", "RECIPES"]


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
    """argparse with the project's error format: one line, ``nnlm: error: ...``, exit 2.

    A negative number in scientific notation (``--threshold -1e-7``) or with a unit
    (``--memory -5M``, ``-10%``) is a value, not an option: argparse's own pattern knows
    only ``-1`` and ``-0.5``, so such a value got "expected one argument" instead of the
    option's range error. An option is never taken by a prefix of its name (argparse's
    default took ``--bf1`` as ``--bf16``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # --bf1 is no --bf16: a typo is an error
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?([A-Za-z]{1,3}|%)?$")

    def error(self, message):
        message = _suggest(message)
        command = self.prog.removeprefix("nnlm").strip()  # "train", "ngram train", ...
        where = f"{command}: " if command else ""
        sys.stderr.write(f"nnlm: error: {where}{message} (see {self.prog} --help)\n")
        sys.exit(2)


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<given>[^']*)' \(choose from (?P<choices>.*)\)$")


def _suggest(message: str) -> str:
    """argparse's "invalid choice" with a suggestion for a close miss (``nnlm trian``:
    did you mean train?) instead of every choice; the list stays where nothing is close."""
    import difflib

    m = _INVALID_CHOICE.search(message)
    if m is None:
        return message
    choices = re.findall(r"'([^']*)'", m.group("choices"))
    close = difflib.get_close_matches(m.group("given"), choices, n=1, cutoff=0.6)
    if not close:
        return message
    return message[:m.start()] + f"invalid choice: '{m.group('given')}'; did you mean " \
        f"'{close[0]}'?"


def walk_parsers(parser: argparse.ArgumentParser, path: list[str]):
    """(command path, parser) for ``parser`` and every subcommand under it, in order."""
    yield path, parser
    for action in parser._actions:  # argparse keeps its subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from walk_parsers(child, [*path, name])


def is_leaf(parser: argparse.ArgumentParser) -> bool:
    return not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def add_log_every(parser) -> None:
    parser.add_argument("--log-every", type=ranged(float, 0, name="seconds"), default=None,
                        metavar="SECONDS",
                        help="off a terminal, a progress line on stderr every SECONDS "
                        "(default: 60; 0: none). On a terminal long steps show a bar")


def add_force(parser) -> None:
    """--force: a file output may replace a file of another kind (nnlm.file_kinds)."""
    parser.add_argument("--force", action="store_true",
                        help="replace an existing output file even if it is not of the kind "
                        "this command writes (never a folder)")


def add_device_argument(parser) -> None:
    parser.add_argument("--device", choices=DEVICES, default="cpu",
                        help="where neural models run: cpu (default), cuda, or auto (cuda "
                        "when there is one); count-based models always run on the CPU")


def add_sentence_arguments(parser) -> None:
    parser.add_argument("--normalize", action="store_true",
                        help="lowercase and drop punctuation first")
    parser.add_argument("--buckets", type=positive_int, default=DEFAULT_BUCKETS, metavar="N",
                        help=f"hash buckets shared by rare and unknown words (default: "
                        f"{DEFAULT_BUCKETS})")
    parser.add_argument("--hash-fraction", type=fraction, default=DEFAULT_HASH_FRACTION,
                        metavar="F", help="the rarest fraction of the vocabulary that goes "
                        f"to the buckets too, in [0, 1) (default: {DEFAULT_HASH_FRACTION})")


def add_neural_scoring_arguments(parser) -> None:
    parser.add_argument("--strict", action="store_true",
                        help="refuse an ARPA file whose next-word distributions sum above 1 "
                        "(by default it loads as KenLM loads it, with a warning giving the "
                        "largest sum)")
    group = parser.add_argument_group("neural models")
    add_speed_arguments(group)
    group.add_argument("--self-normalized", action="store_true",
                       help="score each word by its raw output y_w, without the sum over the "
                       "vocabulary (Devlin et al. 2014): 20x faster or more, right only for a "
                       "model trained to keep log Z near 0 (--objective selfnorm or nce). "
                       "Reports the mean and spread of log Z measured on the text")


def add_speed_arguments(group) -> None:
    """--bf16, --device and --threads: the same speed flags on every command that runs a
    network (eval, score, rescore, mix, generate, serve)."""
    group.add_argument("--bf16", action="store_true",
                       help="bfloat16 products, about 4x faster; perplexity within about "
                       "0.01%% (per-token log-probabilities within ~0.05)")
    add_device_argument(group)
    group.add_argument("--threads", type=positive_int, default=None,
                       help="torch threads (default: all cores)")


def configure_speed(model, args) -> list:
    """Place ``model``'s networks as --device, --bf16, --threads (and, where the command
    has it, --self-normalized) say; its neural parts (an empty list, and nothing
    imported, for a count-based model on the CPU)."""
    self_normalized = getattr(args, "self_normalized", False)
    if args.device == "cpu" and not args.bf16 and not self_normalized \
            and not model.neural_parts():
        return []
    from ..neural.runtime import configure_for_scoring

    return configure_for_scoring(model, args.device, args.bf16, self_normalized, args.threads)


def fixed_vocabulary(args):
    """The --vocab vocabulary, or None; it excludes --min-count and --max-size."""
    if args.vocab is None:
        return None
    if args.min_count != 1 or args.max_size is not None:
        raise NnlmError("--vocab fixes the vocabulary: drop --min-count and --max-size")
    from ..text.vocab import Vocabulary

    return Vocabulary.read(args.vocab)


def load_for_scoring(args):
    """The model of ``args.model``, its networks placed and set up as the options say;
    returns (model, its neural parts)."""
    from ..models import load_model

    model = load_model(args.model, strict=args.strict)
    return model, configure_speed(model, args)


def load_model_as(path, cls, lacks: str, need: str):
    """The model at ``path``, which must be a ``cls``; otherwise one line saying what it
    lacks and what the command needs."""
    from ..models import load_model

    model = load_model(path)
    if not isinstance(model, cls):
        raise NnlmError(f"{path}: {a(model.kind)} model has no {lacks}; {need}")
    return model

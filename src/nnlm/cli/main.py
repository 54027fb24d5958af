"""The ``nnlm`` command: parses arguments and dispatches to the library; no logic here.
One module per command group; this one builds the parser, locks outputs and turns every
user error into one line, ``nnlm: error: ...``, with exit status 2.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from ..base.errors import NnlmError, NnlmWarning
from ..base.interrupts import Terminated, terminate_as_interrupt
from ..file_kinds import check_file_output
from ..ngram.store.trie_layout import verifying
from ..text.fileio import os_error_message, public_path
from . import data, experiments, filtering, index, neural, ngram, scoring, serve, shell
from .common import Parser, add_log_every, is_leaf, walk_parsers
from .examples import add_examples
from .flags import as_flags
from .guards import check_distinct, output_lock

# nnlm --help's order
GROUPS = (data, ngram, index, scoring, filtering, neural, experiments, serve, shell)

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


def build_parser() -> argparse.ArgumentParser:
    from ..base.version import __version__

    parser = Parser(
        prog="nnlm",
        description="Neural probabilistic language models (Bengio et al. 2003) and the "
        "count-based models they are measured against.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"nnlm {__version__}")
    parser.set_defaults(root_parser=parser)  # nnlm completion writes its script from it
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in GROUPS:
        group.add_parsers(sub)
    for path, command in walk_parsers(parser, []):
        if command is not parser and is_leaf(command):
            add_log_every(command)
            add_examples(" ".join(path), command)
            command.set_defaults(command_parser=command)  # for as_flags
    return parser


HANDLERS = {name: fn for group in GROUPS for name, fn in group.HANDLERS.items()}
# each command's (inputs, outputs): outputs are locked while it runs and may never
# replace, hold or lie inside an input (nnlm.cli.guards.check_distinct)
PATHS = {name: fn for group in GROUPS for name, fn in group.PATHS.items()}
# each command's file outputs and their kinds: each replaces only a file of its kind
# unless --force (nnlm.file_kinds)
FILE_OUTPUTS = {name: fn for group in GROUPS
                for name, fn in getattr(group, "FILE_OUTPUTS", {}).items()}


def _command_key(args) -> str:
    sub = getattr(args, f"{args.command}_command", None)  # nnlm ngram train, index build
    return args.command + (f" {sub}" if sub else "")


def command_paths(args) -> tuple[list, list]:
    key = _command_key(args)
    inputs, outputs = PATHS[key](args) if key in PATHS else ([], [])
    return [p for p in inputs if p is not None], [p for p in outputs if p is not None]


def check_file_outputs(args) -> None:
    """Each file output replaces only a file of the kind it writes, unless --force."""
    key = _command_key(args)
    for path, kind in FILE_OUTPUTS[key](args) if key in FILE_OUTPUTS else ():
        if path is not None:
            check_file_output(path, kind, getattr(args, "force", False))


def _warning_printer(command: argparse.ArgumentParser | None):
    def show(message, category, *args, **kwargs) -> None:
        if issubclass(category, NnlmWarning):
            print(f"nnlm: warning: {as_flags(str(message), command)}", file=sys.stderr)
        else:  # a library's own warning: one line, not a traceback-like block
            print(f"nnlm: warning: {category.__name__}: {message}", file=sys.stderr)

    return show


def _rank_prefix() -> str:
    """Under torchrun, errors of ranks other than 0 say which rank they come from."""
    rank = os.environ.get("RANK", "0") if "WORLD_SIZE" in os.environ else "0"
    return "" if rank in ("", "0") else f"[rank {rank}] "


def _bare_group(parser: argparse.ArgumentParser, argv: list[str]):
    """The parser a command line names without going further (``nnlm``, ``nnlm ngram``):
    its help is the answer, not an error; None for anything else."""
    for token in argv:
        groups = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not groups or token not in groups[0].choices:
            return None
        parser = groups[0].choices[token]
    return parser if any(isinstance(a, argparse._SubParsersAction)
                         for a in parser._actions) else None


def _note(interrupt: KeyboardInterrupt, command) -> str:
    note = str(interrupt)
    return f"; {as_flags(note, command)}" if note else ""


def unknown_arguments(command: argparse.ArgumentParser, extra: list[str]) -> None:
    """argparse's "unrecognized arguments" from the command that was given them, with
    the option a mistyped one was likely meant to be (``--bf1``: ``--bf16``)."""
    import difflib

    options = [s for a in command._actions for s in a.option_strings if s.startswith("--")]
    message = f"unrecognized arguments: {' '.join(extra)}"
    for word in extra:
        close = difflib.get_close_matches(word.split("=")[0], options, n=1, cutoff=0.6) \
            if word.startswith("--") else []
        if close:
            message += f"; did you mean {close[0]}?"
            break
    command.error(message)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    bare = _bare_group(parser, sys.argv[1:] if argv is None else [str(a) for a in argv])
    if bare is not None:  # a command group without its command: show what it offers
        bare.print_help()
        return 0
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # said by the command's own parser, with the option meant if one is close
            unknown_arguments(getattr(args, "command_parser", parser), extra)
    except SystemExit as e:  # --help, --version, or a bad option (one line, exit 2)
        return e.code if isinstance(e.code, int) else 2
    if getattr(args, "log_every", None) is not None:  # worker processes inherit it
        from ..base.progress import ENV

        os.environ[ENV] = f"{args.log_every:g}"
    command = getattr(args, "command_parser", None)
    try:
        inputs, outputs = command_paths(args)
        check_distinct(inputs, outputs)
        check_file_outputs(args)
        with contextlib.ExitStack() as locks, warnings.catch_warnings():
            warnings.simplefilter("default", NnlmWarning)
            warnings.showwarning = _warning_printer(command)
            for path in outputs if not _rank_prefix() else ():  # torchrun: rank 0 writes
                locks.enter_context(output_lock(path))
            locks.enter_context(terminate_as_interrupt())  # kill: cleaned up as Ctrl-C
            with verifying():  # every mapped file's sections against their checksums
                code = HANDLERS[args.command](args)  # None: 0; nnlm ngram verify: 1
    except NnlmError as e:
        print(f"nnlm: error: {_rank_prefix()}{as_flags(str(e), command)}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as e:  # an optional part that is not installed
        from ..base.extras import missing_extra

        error = missing_extra(e, f"nnlm {args.command}", args.command)
        if error is None:
            raise
        print(f"nnlm: error: {error}", file=sys.stderr)
        return 2
    except Terminated as e:  # a note: what a long run kept, and how to go on
        print(f"nnlm: terminated{_note(e, command)}", file=sys.stderr)
        return 143
    except KeyboardInterrupt as e:
        print(f"nnlm: interrupted{_note(e, command)}", file=sys.stderr)
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
    return code or 0


if __name__ == "__main__":
    sys.exit(main())

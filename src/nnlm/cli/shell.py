"""nnlm completion: a shell completion script written from the parser itself, so it
names every command, option and fixed choice that ``--help`` names, and cannot fall
behind it. nnlm doctor: what this installation has (:mod:`nnlm.base.doctor`)."""

from __future__ import annotations

import argparse
import json
import shlex


def add_parsers(sub) -> None:
    comp = sub.add_parser(
        "completion", help="print a shell completion script (bash or zsh)",
        description="Print a script that completes nnlm's commands, options and choices "
        "in bash or zsh (files elsewhere). Load it from your shell's start-up file.")
    comp.add_argument("shell", choices=("bash", "zsh"))
    doctor = sub.add_parser(
        "doctor", help="what this installation has: compiled parts, extras, slow paths",
        description="Say which of nnlm's compiled parts load (and why one does not), "
        "which optional packages are installed for which extra, which paths run slow, "
        "and the CPU's features that decide the speed.")
    doctor.add_argument("--json", action="store_true", help="one JSON object")


def cmd_completion(args) -> None:
    print(completion_script(args.root_parser, args.shell), end="")


def cmd_doctor(args) -> None:
    from ..base import doctor  # imports nothing heavy; only this command needs it

    data = doctor.report()
    print(json.dumps(data, indent=1) if args.json else doctor.render(data))


HANDLERS = {"completion": cmd_completion, "doctor": cmd_doctor}
PATHS = {"completion": lambda a: ([], []), "doctor": lambda a: ([], [])}


def _walk(parser: argparse.ArgumentParser, path: list[str]):
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _walk(child, [*path, name])


def _words(items) -> str:
    return shlex.quote(" ".join(sorted(items)))


def completion_script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The bash function ``_nnlm`` (zsh runs it through bashcompinit): at each word it
    finds the command path typed so far, then offers the subcommands, the options, an
    option's fixed choices, or files."""
    paths, cases, choices = [], [], []
    for path, p in _walk(parser, []):
        key = " ".join(path)
        subs = [name for a in p._actions if isinstance(a, argparse._SubParsersAction)
                for name in a.choices]
        opts = [o for a in p._actions for o in a.option_strings if o.startswith("--")]
        if path:
            paths.append(key)
        cases.append(f"    {shlex.quote(key)}) cmds={_words(subs)}; opts={_words(opts)};;")
        for a in p._actions:
            fixed = a.choices or getattr(a, "completion_choices", None)
            if fixed and a.option_strings and not isinstance(fixed, dict):
                for o in a.option_strings:
                    choices.append(f"    {shlex.quote(key + '|' + o)}) "
                                   f"COMPREPLY=($(compgen -W {_words(map(str, fixed))} "
                                   f"-- \"$cur\")); return;;")
            elif not a.option_strings and a.choices and not isinstance(
                    a, argparse._SubParsersAction):  # a positional with choices
                subs += list(map(str, a.choices))
                cases[-1] = (f"    {shlex.quote(key)}) cmds={_words(subs)}; "
                             f"opts={_words(opts)};;")
    known = "|".join(shlex.quote(k) for k in paths)
    script = f"""# nnlm's completion for {shell}, written by `nnlm completion {shell}`.
# Load it from your start-up file:  eval "$(nnlm completion {shell})"
_nnlm() {{
  local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local path="" next w i cmds="" opts=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${{COMP_WORDS[i]}}"
    [[ "$w" == -* ]] && continue
    next="${{path:+$path }}$w"
    case "$next" in
      {known}) path="$next";;
      *) break;;
    esac
  done
  case "$path|$prev" in
{chr(10).join(choices)}
  esac
  case "$path" in
{chr(10).join(cases)}
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  elif [[ -n "$cmds" ]]; then
    COMPREPLY=($(compgen -W "$cmds" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}}
"""
    if shell == "zsh":
        script += "autoload -U +X bashcompinit && bashcompinit\n"
    return script + "complete -o filenames -o bashdefault -F _nnlm nnlm\n"

"""A bench before and after a change, in one run: the same bench script run on two
source trees in alternating rounds, its numbers compared key by key.

    python bench/ab.py ed2eb87 -- bench/ngram/query.py --data data/brown --rounds 3
    python bench/ab.py ed2eb87 --rounds 3 --out bench/results/ab_store.json \\
        -- bench/ngram/store.py --data data/brown --rounds 1

The base is a commit (checked out into a temporary worktree, its C extensions built
there) or an existing tree (``--base-tree PATH``); the head is this checkout. Each round
runs the script (this checkout's copy, so both sides are measured the same way) once
on the base's ``src/`` and once on the head's, in turn, each writing its JSON to a file
of its own (the script must take ``--out``). Every numeric value the two sides' JSON
share is reported as the base's and the head's median over the rounds and the median
of the rounds' head/base ratios (each round's values kept beside them). Takes the
script's time, twice per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import harness

ROOT = harness.ROOT


def numbers(data, prefix: str = "") -> dict[str, float]:
    """Every numeric leaf of a JSON value, by its dotted path (the record left out)."""
    out = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if key != "record":
                out.update(numbers(value, f"{prefix}{key}."))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        out[prefix.rstrip(".")] = float(data)
    return out


def base_tree(commit: str, work: Path) -> Path:
    """A worktree of ``commit`` under ``work`` with its C extensions built in place."""
    tree = work / "base"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), commit], cwd=ROOT,
                   check=True, capture_output=True)
    subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-q"], cwd=tree,
                   check=True, capture_output=True)
    return tree


def run_side(tree: Path, script: list[str], out: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    subprocess.run([sys.executable, *script, "--out", str(out)], cwd=ROOT, env=env,
                   check=True)
    return json.loads(out.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("base", nargs="?", help="the commit before the change")
    parser.add_argument("--base-tree", type=Path, help="a tree of the base instead")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench/results/ab.json"))
    argv = sys.argv[1:]
    if "--" not in argv:
        parser.error("give -- and then the bench script and its arguments")
    cut = argv.index("--")
    args, script = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if not script or (args.base is None) == (args.base_tree is None):
        parser.error("give a base commit or --base-tree, then -- and a bench script")
    with tempfile.TemporaryDirectory(prefix="nnlm-ab-") as tmp:
        work = Path(tmp)
        base = args.base_tree or base_tree(args.base, work)
        sides = {"base": base, "head": ROOT}
        values: dict[str, dict[str, list[float]]] = {"base": {}, "head": {}}
        try:
            for r in range(args.rounds):
                for name, tree in sides.items():
                    found = numbers(run_side(tree, script, work / f"{name}{r}.json"))
                    for key, value in found.items():
                        values[name].setdefault(key, []).append(value)
        finally:
            if args.base_tree is None:
                subprocess.run(["git", "worktree", "remove", "--force", str(base)],
                               cwd=ROOT, capture_output=True)
    shared = sorted(set(values["base"]) & set(values["head"]))
    rows = {}
    for key in shared:
        b, h = values["base"][key], values["head"][key]
        ratios = [y / x for x, y in zip(b, h) if x]
        rows[key] = {"base": statistics.median(b), "head": statistics.median(h),
                     "head_over_base": statistics.median(ratios) if ratios else None,
                     "base_rounds": b, "head_rounds": h}
    harness.write_record(args.out, {"base": args.base or str(args.base_tree),
                                    "script": script, "rounds": args.rounds, "keys": rows})


if __name__ == "__main__":
    main()

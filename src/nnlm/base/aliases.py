"""nnlm's modules under other packages' names for a whole environment, so that tools
that ``import kenlm`` (DataTrove, cc_net, pyctcdecode, NeMo) or ``import pyctcdecode``
(transformers' ``Wav2Vec2ProcessorWithLM``) run on nnlm without a change to their code.

``python -m nnlm.kenlm install-alias`` writes two things into the environment's
site-packages (``--site`` for another folder):

- ``kenlm.py``, a module that puts :mod:`nnlm.kenlm` in its own place when imported
  (nothing is imported at the interpreter's start-up);
- ``kenlm-0.3.0+nnlm.dist-info``, the distribution's metadata, so that tools that look
  for the package by its metadata (``importlib.metadata.version("kenlm")``, as
  transformers does for pyctcdecode) find it; its RECORD lists both, so ``pip uninstall
  kenlm`` removes them too.

Each file is written under a temporary name and renamed. The alias refuses to go where
the real package is installed (a distribution of that name that nnlm did not write, or
a module or package of that name), and ``uninstall-alias`` removes only what nnlm wrote.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
import sysconfig
from pathlib import Path

from .errors import NnlmError

INSTALLER = "nnlm-alias"  # the dist-info's INSTALLER: written by nnlm, removed by nnlm
# package -> (nnlm's module in its place, the version it answers as)
ALIASES = {"kenlm": ("nnlm.kenlm", "0.3.0"), "pyctcdecode": ("nnlm.pyctcdecode", "0.5.0")}

MODULE = '''"""{name}, answered by {module} (written by `python -m {module} install-alias`;
`python -m {module} uninstall-alias` or `pip uninstall {name}` removes it)."""

import sys

import {module} as _module

sys.modules[__name__] = _module
'''


def _site(site: str | os.PathLike | None) -> Path:
    return Path(site) if site is not None else Path(sysconfig.get_paths()["purelib"])


def _paths(name: str, site: Path) -> tuple[Path, Path]:
    version = ALIASES[name][1]
    return site / f"{name}.py", site / f"{name}-{version}+nnlm.dist-info"


def _ours(dist_info: Path) -> bool:
    installer = dist_info / "INSTALLER"
    return installer.exists() and installer.read_text().strip() == INSTALLER


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.nnlm-tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _refuse_real(name: str, site: Path) -> None:
    """An NnlmError where the real package is installed in ``site`` (or seen by this
    interpreter)."""
    for entry in site.iterdir():
        if entry.name.lower().startswith(f"{name}-") and entry.suffix == ".dist-info" \
                and not _ours(entry):
            raise NnlmError(f"{entry}: the real {name} is installed here; uninstall it first "
                            f"(pip uninstall {name}), then install the alias again")
        stem = entry.name.split(".")[0]
        if stem == name and (entry.is_dir() or entry.suffix in (".so", ".pyd")):
            raise NnlmError(f"{entry}: a {name} package is installed here; uninstall it "
                            f"first (pip uninstall {name})")
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return
    if dist.read_text("INSTALLER") not in (INSTALLER, INSTALLER + "\n"):
        raise NnlmError(f"the real {name} {dist.version} is installed for this interpreter; "
                        f"uninstall it first (pip uninstall {name})")


def install(name: str, site: str | os.PathLike | None = None) -> list[Path]:
    """Put nnlm's module in ``name``'s place in ``site``; the paths written."""
    module, version = ALIASES[name]
    folder = _site(site)
    if not folder.is_dir():
        raise NnlmError(f"{folder}: no such folder to install the alias into")
    _refuse_real(name, folder)
    source, dist_info = _paths(name, folder)
    dist_info.mkdir(exist_ok=True)
    files = {source: MODULE.format(name=name, module=module),
             dist_info / "METADATA": (f"Metadata-Version: 2.1\nName: {name}\n"
                                      f"Version: {version}+nnlm\nSummary: {name}'s API, "
                                      f"answered by {module} (an alias nnlm wrote)\n"),
             dist_info / "INSTALLER": INSTALLER + "\n"}
    for path, text in files.items():
        _write(path, text)
    record = [f"{p.relative_to(folder)},," for p in files] + \
        [f"{(dist_info / 'RECORD').relative_to(folder)},,"]
    _write(dist_info / "RECORD", "\n".join(record) + "\n")
    return [*files, dist_info / "RECORD"]


def uninstall(name: str, site: str | os.PathLike | None = None) -> list[Path]:
    """Remove the alias of ``name`` from ``site`` (only what nnlm wrote); the paths
    removed."""
    folder = _site(site)
    source, dist_info = _paths(name, folder)
    if not _ours(dist_info):
        raise NnlmError(f"{folder}: no alias of {name} that nnlm wrote is installed here")
    removed = []
    for path in (source, *sorted(dist_info.iterdir())):
        path.unlink()
        removed.append(path)
    dist_info.rmdir()
    return [*removed, dist_info]


def main(name: str, argv: list[str]) -> int:
    """``python -m nnlm.<name> {install-alias,uninstall-alias} [--site DIR]``."""
    module = ALIASES[name][0]
    parser = argparse.ArgumentParser(
        prog=f"python -m {module}",
        description=f"Put {module} in {name}'s place for this environment (tools that "
        f"import {name} then run on nnlm), or take it away.")
    parser.add_argument("action", choices=("install-alias", "uninstall-alias"))
    parser.add_argument("--site", help="the folder to write into (default: this "
                        "interpreter's site-packages)")
    args = parser.parse_args(argv)
    try:
        done = (install if args.action == "install-alias" else uninstall)(name, args.site)
    except (NnlmError, OSError) as e:
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 2
    verb = "wrote" if args.action == "install-alias" else "removed"
    for path in done:
        print(f"{verb} {path}")
    return 0

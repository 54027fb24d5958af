"""The world the reliability tests run in (toy corpus, n-gram, ARPA, neural and mixture
models, built once per module) and the helpers that tamper with its files."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import numpy as np

from conftest import toy_world, write
from nnlm.cli import main


# -- the world -----------------------------------------------------------------------------
def build_world(tmp_path_factory) -> Path:
    """The toy world (conftest.toy_world) and an add-k bigram, a KN bigram and a mixture
    beside it: what each reliability module's ``world`` fixture holds."""
    w = toy_world(tmp_path_factory.mktemp("world"))
    train, valid = w / "toy/train.txt", w / "toy/valid.txt"
    assert main(["ngram", "train", str(train), "--method", "addk", "--order", "2",
                 "-o", str(w / "addk")]) == 0
    assert main(["ngram", "train", str(train), "--order", "2", "--discount-fallback",
                 "-o", str(w / "kn2")]) == 0
    assert main(["mix", str(w / "kn3"), str(w / "addk"), "--valid", str(valid),
                 "-o", str(w / "mix")]) == 0
    return w


def T(w):  # noqa: N802 - the training text
    return w / "toy/train.txt"


def V(w):  # noqa: N802 - the held-out text
    return w / "toy/valid.txt"


def snapshot(*roots: Path) -> dict[Path, str]:
    out = {}
    for root in roots:
        for p in Path(root).rglob("*"):
            if p.is_file() and not p.is_symlink():
                out[p] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


NUMBER = re.compile(r"(?<![\w.])[-+]?(?:nan|inf|infinity)(?![\w])", re.IGNORECASE)


def check_outcome(code: int, out: str, err: str, expect: str, match: str | None,
                  warns: str | None = None) -> None:
    """Exit 0 and finite numbers, or exit 2 and one error line (warnings aside)."""
    warnings_ = [x for x in err.split("\n") if x.startswith("nnlm: warning: ")]
    if warns:
        assert any(re.search(warns, w) for w in warnings_), err
    if expect == "ok":
        assert code == 0, err
        assert not NUMBER.search(out), f"a non-finite number on stdout:\n{out}"
        assert "Traceback" not in err
    else:
        assert code == 2, f"exit {code}\nstdout: {out}\nstderr: {err}"
        lines = [x for x in err.strip("\n").split("\n") if x not in warnings_]
        assert len(lines) == 1 and lines[0].startswith("nnlm: error: "), err
        if match:
            assert re.search(match, lines[0]), lines[0]


# -- tampering helpers -----------------------------------------------------------------------
def copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst) if src.is_dir() else shutil.copy(src, dst)
    return dst


def edit_json(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def arpa_lines(world) -> list[str]:
    return (world / "kn3.arpa").read_text().split("\n")


def tampered_arpa(world, t, edit) -> Path:
    lines = arpa_lines(world)
    edit(lines)
    return write(t / "bad.arpa", "\n".join(lines))


def first_line(lines, section: str, word_pattern: str = "") -> int:
    start = lines.index(section)
    for i in range(start + 1, len(lines)):
        if lines[i] and (not word_pattern or re.search(word_pattern, lines[i])):
            return i
    raise AssertionError


def set_field(lines, i: int, field_no: int, value: str) -> None:
    parts = lines[i].split("\t")
    parts[field_no] = value
    lines[i] = "\t".join(parts)


def npz_with(path: Path, change) -> None:
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    change(arrays)
    np.savez(path, **arrays)


def trie_with(path: Path, change) -> None:
    """Edit a mapped n-gram model's numbers in place: ``change`` gets its float sections
    by name (unigram_logp, logp_2, ...); a coded one (log_bow_2 of KN) is its table."""
    from nnlm.ngram.store.trie_map import read_trie_header

    header, start = read_trie_header(path)
    data = bytearray(path.read_bytes())
    arrays = {}
    for name, (off, _, dtype, count) in header["sections"].items():
        if dtype == "<f4":
            arrays[name.replace("_centers", "")] = np.frombuffer(data, np.float32, count,
                                                                 start + off)
    change(arrays)
    restamp_checksums(data, header, start)  # bad numbers a writer wrote: the numbers' checks
    path.write_bytes(bytes(data))


def restamp_checksums(data: bytearray, header: dict, start: int) -> None:
    """Write the checksums of ``data``'s sections as they now are into its header (padded
    to the same length): a file whose numbers are wrong but whole."""
    import zlib

    from nnlm.ngram.store.trie_layout import PREFIX, header_text

    header = {k: v for k, v in header.items() if k != "format_version"}
    header["checksums"] = {name: zlib.crc32(bytes(data[start + off:start + off + size]))
                           for name, (off, size, _, _) in header["sections"].items()}
    length = PREFIX.unpack_from(data)[3]
    text = header_text(header)
    assert len(text) <= length
    data[PREFIX.size:PREFIX.size + length] = text.ljust(length)


def safetensors_with(path: Path, change) -> None:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    from safetensors.torch import load_file, save_file  # the neural extra's

    tensors = load_file(str(path))
    change(tensors)
    save_file(tensors, str(path), metadata=meta)

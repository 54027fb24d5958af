"""Mapped files that are damaged, or changed under a reader: never a silently wrong number.

Every section of nnlm's trie file carries a CRC-32. A byte flipped in any of them is
refused in one line naming the section by ``nnlm ngram verify``, by every command that
opens the file (``eval``, ``score``, ``convert``) and by ``nnlm.kenlm.Model(...,
verify=True)``; the header's own checks (overlapping sections) are one check for every
path. The oracle is the undamaged file: a flip that no check catches must leave every
score as it was."""

from __future__ import annotations

import json
import struct
import warnings

import pytest

import nnlm
import nnlm.kenlm as nk
from conftest import serve_process, toy_world
from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.models import load_model
from nnlm.ngram.store import trie_layout as layout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = toy_world(tmp_path_factory.mktemp("mapped"), neural=False)
    assert main(["ngram", "convert", str(w / "kn3"), str(w / "kn3.nnlm")]) == 0
    assert main(["ngram", "convert", str(w / "kn3"), str(w / "kn3.q8.nnlm"),
                 "--quantize", "8", "8"]) == 0
    return w


LINES = ["the cat sees a dog", "a dog runs", "the quantum cat"]


def sections_of(path):
    header, start = layout.read_trie_header(path)
    return header, start, {name: (start + e[0], e[1]) for name, e in header["sections"].items()}


def flipped(src, dst, at):
    data = bytearray(src.read_bytes())
    data[at] ^= 0x5A
    dst.write_bytes(bytes(data))
    return dst


def one_error_line(err: str) -> str:
    lines = [x for x in err.strip().split("\n") if not x.startswith("nnlm: warning:")]
    assert len(lines) == 1 and lines[0].startswith("nnlm: error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("name", ["kn3.nnlm", "kn3.q8.nnlm"])
def test_every_section_is_checksummed_and_a_flip_in_any_is_named(world, tmp_path, capsys, name):
    src = world / name
    header, _, spans = sections_of(src)
    assert set(header["checksums"]) == set(spans)
    test_text = world / "toy/test.txt"
    assert main(["ngram", "verify", str(src)]) == 0
    assert "match their checksums" in capsys.readouterr().out
    for section, (at, size) in spans.items():
        if size == 0:
            continue
        bad = flipped(src, tmp_path / f"{section}.nnlm", at + size // 2)
        for argv in (["ngram", "verify", bad], ["eval", bad, test_text],
                     ["score", bad, test_text], ["ngram", "convert", bad, tmp_path / "o.arpa"]):
            assert main([str(a) for a in argv]) == 2, (section, argv)
            line = one_error_line(capsys.readouterr().err)
            assert f"section {section}" in line or (
                section.startswith("vocab") and "vocabulary" in line), (section, line)
        assert not (tmp_path / "o.arpa").exists()
        with pytest.raises(OSError, match=f"section {section}|vocabulary"):
            nk.Model(str(bad), verify=True)
        bad.unlink()


@pytest.fixture(scope="module")
def coded(world):
    """A coded one-file model (values as counts, trie format 4) beside the float ones."""
    out = world / "kn3c"
    assert main(["ngram", "train", str(world / "toy/train.txt"), "--order", "3",
                 "--discount-fallback", "--compress", "-o", str(out)]) == 0
    assert main(["ngram", "convert", str(out), str(world / "kn3c.nnlm")]) == 0
    return world / "kn3c.nnlm"


def _trie_of(path):
    return path / "ngrams.trie" if path.is_dir() else path


@pytest.mark.parametrize("name", ["kn3.nnlm", "kn3.q8.nnlm", "kn3", "kn3c.nnlm"])
def test_a_header_byte_cannot_switch_the_checksums_off(world, coded, tmp_path, capsys, name):
    """A renamed "checksums" entry plus a changed value byte: every entry point refuses
    the file, because the header checks itself (its own CRC-32 ends its JSON) and a
    file of format 3 or newer must have section checksums."""
    import shutil

    src = world / name
    bad = tmp_path / name
    shutil.copytree(src, bad) if src.is_dir() else shutil.copy(src, bad)
    trie = _trie_of(bad)
    _, _, spans = sections_of(trie)
    data = bytearray(trie.read_bytes())
    assert data.count(b'"checksums"') == 1
    data[data.index(b'"checksums"') + 9] = ord("r")  # "checksumr"
    value = next(n for n in spans if n.startswith(("logp_3", "acodes_3", "logp_codes_3")))
    data[spans[value][0] + 1] ^= 0x01
    trie.write_bytes(bytes(data))
    test_text = world / "toy/test.txt"
    for argv in (["ngram", "verify", bad], ["eval", bad, test_text],
                 ["score", bad, test_text]):
        assert main([str(a) for a in argv]) == 2, argv
        assert "checksum" in one_error_line(capsys.readouterr().err)
    for opened in (lambda: nk.Model(str(bad), verify=True), lambda: nk.Model(str(bad)),
                   lambda: nnlm.Decoder(str(bad)), lambda: load_model(bad)):
        with pytest.raises((OSError, NnlmError), match="checksum"):
            opened()


@pytest.mark.parametrize("name", ["kn3.nnlm", "kn3c.nnlm"])
def test_every_byte_of_the_header_is_covered(world, coded, tmp_path, name):
    """Any one byte of the header changed (its JSON text, its padding, the prefix's
    version and length) is refused before anything is mapped."""
    src = world / name
    header, start, _ = sections_of(src)
    data = bytearray(src.read_bytes())
    bad = tmp_path / "b.nnlm"
    refused = 0
    for at in [12, 16] + list(range(layout.PREFIX.size, start)):
        data[at] ^= 0x01 if at >= layout.PREFIX.size else 0x06
        bad.write_bytes(bytes(data))
        data[at] ^= 0x01 if at >= layout.PREFIX.size else 0x06
        try:
            layout.check_trie(bad, None, header["vocab_size"])
        except NnlmError:
            refused += 1
    assert refused == start - layout.PREFIX.size + 2


def test_a_model_directory_is_checked_too(world, tmp_path, capsys):
    import shutil

    d = tmp_path / "kn3"
    shutil.copytree(world / "kn3", d)
    trie = d / "ngrams.trie"
    _, _, spans = sections_of(trie)
    at, size = spans["logp_3"]
    flipped(trie, trie, at + size // 3)
    assert main(["eval", str(d), str(world / "toy/test.txt")]) == 2
    assert "section logp_3" in one_error_line(capsys.readouterr().err)
    with pytest.raises(OSError, match="section logp_3"):
        nk.Model(str(d), verify=True)
    # the fast open reads only what queries touch, as kenlm's: it opens (and says so in
    # its docstring); verify=True is the check
    nk.Model(str(d))


def test_verify_says_what_it_checked_in_json(world, capsys):
    assert main(["ngram", "verify", str(world / "kn3"), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["ok"] and done["sections"] > 10 and done["files"][0]["file"].endswith(
        "ngrams.trie")
    assert main(["ngram", "verify", str(world / "kn3.arpa"), "--json"]) == 1  # not verified
    done = json.loads(capsys.readouterr().out)
    assert done["files"] == [] and not done["ok"]  # ARPA: no checksums


def _rewrite_header(src, dst, edit, version=None):
    """``src`` with its JSON header edited by ``edit`` and padded to the same length
    (``version``: as a file of that format version, without the header's own CRC)."""
    data = bytearray(src.read_bytes())
    magic, mark, old_version, length = layout.PREFIX.unpack_from(data)
    header = json.loads(data[layout.PREFIX.size:layout.PREFIX.size + length])
    header.pop("header_crc32", None)
    edit(header)
    text = layout.header_text(header)  # restamped: a header a writer wrote this way
    if version is not None and version < 4:
        text = json.dumps(header).encode()
        struct.pack_into("<I", data, 12, version)
    assert len(text) <= length
    data[layout.PREFIX.size:layout.PREFIX.size + length] = text.ljust(length)
    dst.write_bytes(bytes(data))
    return dst


def test_overlapping_sections_are_refused_by_every_path(world, tmp_path, capsys):
    def overlap(header):
        table = header["sections"]
        table["word_3"][0] = table["logp_3"][0]  # two sections on the same bytes

    bad = _rewrite_header(world / "kn3.nnlm", tmp_path / "overlap.nnlm", overlap)
    with pytest.raises(NnlmError, match="overlap"):
        load_model(bad)
    with pytest.raises(OSError, match="overlap"):
        nk.Model(str(bad))
    assert main(["eval", str(bad), str(world / "toy/test.txt")]) == 2
    assert "overlap" in one_error_line(capsys.readouterr().err)


def test_damaged_checksums_in_the_header_are_one_line(world, tmp_path):
    def damage(header):
        header["checksums"]["logp_3"] = "x"

    bad = _rewrite_header(world / "kn3.nnlm", tmp_path / "sums.nnlm", damage)
    with pytest.raises(NnlmError, match="checksums are damaged"):
        load_model(bad)


def test_a_file_without_checksums_loads_and_verify_warns(world, tmp_path, capsys):
    """Files written before sections had checksums: loaded as before; verify says so."""
    old = _rewrite_header(world / "kn3.nnlm", tmp_path / "old.nnlm",
                          lambda h: h.pop("checksums"), version=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_model(old)
    assert main(["ngram", "verify", str(old)]) == 1  # loaded, but nothing verified
    out, err = capsys.readouterr()
    assert "written before nnlm kept a checksum" in err and "NOT VERIFIED" in out


def test_a_flip_the_fast_open_misses_is_caught_by_verify_only(world, tmp_path):
    """Without verify, nnlm.kenlm opens as kenlm does (no read of the whole file); the
    flip is in a value section, so the score changes: which is why verify exists."""
    src = world / "kn3.nnlm"
    _, _, spans = sections_of(src)
    at, size = spans["logp_3"]
    data = bytearray(src.read_bytes())
    before = [nk.Model(str(src)).score(line) for line in LINES]
    for i in range(0, size, 4):  # every 3-gram's log10 p one lower
        value = struct.unpack_from("<f", data, at + i)[0]
        struct.pack_into("<f", data, at + i, value - 1.0)
    bad = tmp_path / "v.nnlm"
    bad.write_bytes(bytes(data))
    assert [nk.Model(str(bad)).score(line) for line in LINES] != before
    with pytest.raises(OSError, match="section logp_3"):
        nk.Model(str(bad), verify=True)


# -- a served file that changes under the server ----------------------------------------
def _served(paths: dict):
    """``nnlm serve NAME=PATH ...`` in its own process (a SIGBUS there cannot stop the
    tests); returns (post, process)."""
    import httpx

    url, proc = serve_process(*(f"{k}={v}" for k, v in paths.items()))

    def post(model, text="the cat sees a dog"):
        return httpx.post(f"{url}/v1/score", timeout=30,
                          json={"model": model, "texts": [text], "tokens": False})

    return post, proc


def test_a_served_file_truncated_or_rewritten_in_place(world, tmp_path):
    """truncate: 503 for that model, the others served; cp over it in place: the new
    model's numbers (nnlm.kenlm on the new file), never a mix of the two."""
    import shutil

    pytest.importorskip("httpx", reason="the server's client is a dev package")
    pytest.importorskip("fastapi", reason="nnlm serve is the serve extra")

    served = tmp_path / "served.nnlm"
    shutil.copy(world / "kn3.nnlm", served)
    other = tmp_path / "other.nnlm"
    assert main(["ngram", "train", str(world / "toy/train.txt"), "--order", "2",
                 "--discount-fallback", "-o", str(tmp_path / "kn2")]) == 0
    assert main(["ngram", "convert", str(tmp_path / "kn2"), str(other)]) == 0
    old, new = (nk.Model(str(p)).score("the cat sees a dog") for p in (served, other))
    assert abs(old - new) > 1e-3
    post, proc = _served({"m": served, "k": world / "kn3.arpa"})
    try:
        assert post("m").json()["results"][0]["log10_prob"] == pytest.approx(old, abs=1e-4)
        with open(served, "r+b") as f:
            f.truncate(7200)
        r = post("m")
        assert r.status_code == 503 and "m" in r.json()["detail"], r.text
        assert post("k").status_code == 200  # the others keep serving
        assert post("m").status_code == 503  # and stays so while the file is broken
        with open(served, "r+b") as f:  # cp rewrites in place: the same inode
            f.write(other.read_bytes())
        r = post("m")
        assert r.status_code == 200, r.text
        assert r.json()["results"][0]["log10_prob"] == pytest.approx(new, abs=1e-4)
        tmp = tmp_path / "next.nnlm"  # replaced by rename: the documented way
        shutil.copy(world / "kn3.nnlm", tmp)
        tmp.rename(served)
        assert post("m").json()["results"][0]["log10_prob"] == pytest.approx(old, abs=1e-4)
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(30)


def test_serve_checks_the_sections_at_start(world, tmp_path, capsys):
    pytest.importorskip("fastapi", reason="nnlm serve is the serve extra")
    from nnlm.serve.registry import load_models

    _, _, spans = sections_of(world / "kn3.nnlm")
    at, size = spans["word_3"]
    bad = flipped(world / "kn3.nnlm", tmp_path / "bad.nnlm", at + size // 2)
    with pytest.raises(NnlmError, match="section word_3"):
        load_models([f"m={bad}"], 0.002, 100)
    assert main(["serve", f"m={bad}", "--port", "1"]) == 2
    assert "section word_3" in one_error_line(capsys.readouterr().err)


def test_verifying_contexts_are_their_own_across_threads(world):
    """A server checks a reloaded model in a worker thread while the command's own
    verifying() is open: the two contexts share nothing, close in any order, and the
    log of each holds what it opened (two equal empty logs once made one context
    remove the other's, and nnlm serve exited with a traceback on SIGTERM)."""
    import threading

    entered, leave = threading.Event(), threading.Event()
    seen = {}

    def reload_in_thread():
        with layout.verifying() as log:  # opened first, closed last
            entered.set()
            leave.wait(10)
            load_model(world / "kn3.nnlm")
            seen["thread"] = list(log)
        seen["after"] = layout.verify_requested()

    worker = threading.Thread(target=reload_in_thread)
    worker.start()
    entered.wait(10)
    with layout.verifying() as outer:
        pass
    assert not layout.verify_requested() and outer == []
    leave.set()
    worker.join(10)
    assert [f for f, n in seen["thread"]] == [str(world / "kn3.nnlm")] and not seen["after"]


@pytest.mark.parametrize("name", ["kn3.nnlm", "kn3"])
def test_nnlm_model_and_load_model_verify_by_default(world, tmp_path, name):
    """The library's two openings check what the commands check (verify=True), and say
    so; verify=False is nnlm.kenlm's fast opening, which reads only what queries touch."""
    import shutil

    src = world / name
    bad = tmp_path / name
    shutil.copytree(src, bad) if src.is_dir() else shutil.copy(src, bad)
    trie = _trie_of(bad)
    _, _, spans = sections_of(trie)
    at, size = spans["logp_3"]
    flipped(trie, trie, at + size // 2)
    for opened in (lambda **kw: nnlm.Decoder(bad, **kw), lambda **kw: load_model(bad, **kw),
                   lambda **kw: nnlm.load_model(bad, **kw)):
        with pytest.raises(NnlmError, match="section logp_3"):
            opened()
        opened(verify=False)  # the fast opening: the flip shows only in its numbers


def _checks_table() -> dict[str, str]:
    from pathlib import Path

    text = (Path(__file__).parents[1] / "docs/conventions.md").read_text()
    table = text.split("<!-- checks-table -->")[1].split("<!-- /checks-table -->")[0]
    rows = [r.split("|")[1:-1] for r in table.strip().splitlines()[2:]]
    return {r[0].strip(): r[2].strip().split(" ")[0] for r in rows}


def test_the_checks_table_is_the_code(world, tmp_path, capsys):
    """docs/conventions.md's table of which entry point checks every section: each row's
    entry point, given a file with one flipped value byte, refuses it (yes) or opens it
    (no) with its defaults, and does the opposite with the setting the table names."""
    import inspect

    for extra in ("pydivsufsort", "fastapi", "httpx"):  # rows for the index and the server
        pytest.importorskip(extra, reason="a row's entry point needs an extra")

    from nnlm.index import Index, build_index

    table = _checks_table()
    bad = flipped(world / "kn3.nnlm", tmp_path / "bad.nnlm",
                  sections_of(world / "kn3.nnlm")[2]["logp_3"][0] + 5)
    idx = tmp_path / "idx"
    build_index([world / "toy/train.txt"], idx)
    data = bytearray((idx / "table.0").read_bytes())
    data[len(data) // 2] ^= 0x01
    (idx / "table.0").write_bytes(bytes(data))
    python = {"`nnlm.load_model(path)`": (lambda **kw: load_model(bad, **kw), "verify"),
              "`nnlm.Decoder(path)`": (lambda **kw: nnlm.Decoder(bad, **kw), "verify"),
              "`nnlm.kenlm.Model(path)`": (lambda **kw: nk.Model(str(bad), **kw), "verify"),
              "`nnlm.Index.open(path)`": (lambda **kw: Index.open(idx, **kw), "verify")}
    defaults = {"`nnlm.load_model(path)`": inspect.signature(load_model),
                "`nnlm.Decoder(path)`": inspect.signature(nnlm.Decoder),
                "`nnlm.kenlm.Model(path)`": inspect.signature(nk.Model.__init__),
                "`nnlm.Index.open(path)`": inspect.signature(Index.open)}
    for row, (open_, setting) in python.items():
        checks = table[row] == "yes"
        assert defaults[row].parameters[setting].default is checks, row
        for verify in (checks, not checks):
            if verify:
                with pytest.raises((NnlmError, OSError)):
                    open_(**{setting: verify})
            else:
                open_(**{setting: verify})
    assert table["every command (`eval`, `score`, `mix`, `convert`, ...)"] == "yes"
    assert main(["eval", str(bad), str(world / "toy/test.txt")]) == 2
    assert table["`nnlm ngram verify`"] == "yes"
    assert main(["ngram", "verify", str(bad)]) == 2
    capsys.readouterr()

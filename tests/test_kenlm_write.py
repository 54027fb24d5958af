"""KenLM's probing files, written by nnlm (nnlm.ngram.formats.kenlm_write): build_binary's
own file byte for byte (a fixture it wrote, and any model where build_binary is on the
PATH), loaded by the kenlm module with the ARPA file's scores, and the compiled hash and
placement against their Python paths."""

from __future__ import annotations

import random
import shutil
import subprocess
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.ngram.formats import kenlm_write
from nnlm.ngram.formats.arpa_read import read_arpa
from nnlm.ngram.formats.kenlm_write import murmur64a, place, write_kenlm_probing

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"  # KenLM's own test models
WRITTEN = Path(__file__).parent / "fixtures" / "kenlm_write"  # nnlm's, and build_binary's
LINES = ["the cat sat on the mat", "naïve café über straße", "日本語 ok x y z",
         "supercalifragilisticexpialidocious dog", "never seen words here", "<unk> a", ""]


def kenlm_or_skip():
    return pytest.importorskip("kenlm", reason="the kenlm module is not installed")


@pytest.mark.parametrize("compiled", [True, False])
def test_the_file_is_build_binarys_byte_for_byte(tmp_path, monkeypatch, compiled):
    """nnlm_kn3.probing.bin is build_binary's of nnlm's ARPA file (its folder's README):
    nnlm writes the same bytes from the ARPA file, through the compiled parts and
    through the Python paths."""
    if not compiled:
        monkeypatch.setattr(kenlm_write, "_C", None)
    elif kenlm_write._C is None:
        pytest.skip("nnlm.ngram.formats._kenlm_build is not built")
    out = tmp_path / "en.arpa.bin"
    size = write_kenlm_probing(read_arpa(WRITTEN / "nnlm_kn3.arpa"), out)
    want = (WRITTEN / "nnlm_kn3.probing.bin").read_bytes()
    assert size == len(want) and out.read_bytes() == want


def test_the_command_writes_it_under_ccnets_name(tmp_path, capsys):
    """nnlm ngram convert --kenlm: cc_net's LANG.arpa.bin, not an ARPA file by its name."""
    out = tmp_path / "en.arpa.bin"
    assert main(["ngram", "convert", str(WRITTEN / "nnlm_kn3.arpa"), str(out),
                 "--kenlm"]) == 0
    assert "KenLM probing file" in capsys.readouterr().out
    assert out.read_bytes() == (WRITTEN / "nnlm_kn3.probing.bin").read_bytes()
    for bad, said in [(["--quantize", "8", "8"], "not quantized"),
                      ([], "give it a name that is not an ARPA file's")]:
        target = tmp_path / ("x.bin" if bad else "x.arpa")
        assert main(["ngram", "convert", str(WRITTEN / "nnlm_kn3.arpa"), str(target),
                     "--kenlm", *bad]) == 2
        assert said in capsys.readouterr().err and not target.exists()
    (tmp_path / "notes.txt").write_text("mine\n")
    assert main(["ngram", "convert", str(WRITTEN / "nnlm_kn3.arpa"),
                 str(tmp_path / "notes.txt"), "--kenlm"]) == 2
    assert (tmp_path / "notes.txt").read_text() == "mine\n"


@pytest.mark.parametrize("arpa", ["test.arpa", "test_nounk.arpa", "nnlm_kn3.arpa"])
def test_the_kenlm_module_scores_it_as_the_arpa_file(tmp_path, arpa):
    """KenLM's own test models (pruned: n-grams added as KenLM adds them; one without
    <unk>: KenLM's closed-vocabulary form) and nnlm's: the kenlm module gives the same
    scores, n-gram lengths and OOV flags over nnlm's binary as over the ARPA file, and
    nnlm.kenlm reads it back to the same numbers."""
    kenlm = kenlm_or_skip()
    import nnlm.kenlm

    out = tmp_path / "lm.bin"
    source = WRITTEN / arpa if arpa == "nnlm_kn3.arpa" else FIXTURES / arpa
    with pytest.warns(UserWarning) if arpa != "nnlm_kn3.arpa" else nullcontext():
        model = read_arpa(source)
    write_kenlm_probing(model, out)
    theirs, ours = kenlm.Model(str(source)), kenlm.Model(str(out))
    mine = nnlm.kenlm.Model(str(out))
    assert ours.order == theirs.order
    for line in LINES + _lines_of(source):
        want = list(theirs.full_scores(line))
        assert list(ours.full_scores(line)) == want
        assert [(p, n, o) for p, n, o in mine.full_scores(line)] == want


def test_a_model_in_memory_keeps_its_own_numbers(tmp_path):
    """A model estimated here (not read from ARPA) is written with its own float32 values:
    the kenlm module's scores over the file are nnlm's over the model to float32, with
    the n-gram lengths of the ARPA file nnlm writes for it."""
    kenlm = kenlm_or_skip()
    from nnlm.fit import train_ngram

    text = tmp_path / "toy.txt"
    rng = random.Random(3)
    vocab = "the cat sat on mat dog a of naïve café".split()
    text.write_text("\n".join(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 8)))
                              for _ in range(200)) + "\n", encoding="utf-8")
    model = train_ngram(text, "kn", 4, discount_fallback=True, arpa=str(tmp_path / "m.arpa"))
    write_kenlm_probing(model, tmp_path / "m.bin")
    binary, arpa = kenlm.Model(str(tmp_path / "m.bin")), kenlm.Model(str(tmp_path / "m.arpa"))
    for line in text.read_text(encoding="utf-8").splitlines()[:50] + LINES:
        got, want = list(binary.full_scores(line)), list(arpa.full_scores(line))
        assert [n for _, n, _ in got] == [n for _, n, _ in want]
        assert np.allclose([p for p, _, _ in got], [p for p, _, _ in want], atol=2e-6)


@pytest.mark.parametrize("order", [2, 3, 5])
def test_build_binary_where_it_is_found(tmp_path, order):
    """Models of several orders through nnlm's ARPA writer: build_binary's probing file
    and nnlm's are the same bytes (KenLM's build_binary on the PATH, else skipped)."""
    build_binary = shutil.which("build_binary")
    if build_binary is None:
        pytest.skip("KenLM's build_binary is not on the PATH")
    from nnlm.fit import train_ngram

    text = tmp_path / "toy.txt"
    rng = random.Random(order)
    words = [f"w{i}" * rng.randint(1, 6) for i in range(300)]
    text.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(1, 15)))
                              for _ in range(2000)) + "\n")
    train_ngram(text, "kn", order, discount_fallback=True, arpa=str(tmp_path / "m.arpa"))
    subprocess.run([build_binary, "-s", "probing", tmp_path / "m.arpa", tmp_path / "kenlm.bin"],
                   check=True, capture_output=True)
    write_kenlm_probing(read_arpa(tmp_path / "m.arpa"), tmp_path / "nnlm.bin")
    assert (tmp_path / "nnlm.bin").read_bytes() == (tmp_path / "kenlm.bin").read_bytes()


def test_the_compiled_hash_and_placement_are_the_python_ones():
    """MurmurHash64A over every tail length and multi-byte text, and linear probing with
    crowded tables that wrap around: the C and the Python paths agree."""
    if kenlm_write._C is None:
        pytest.skip("nnlm.ngram.formats._kenlm_build is not built")
    rng = random.Random(0)
    words = [bytes(rng.randrange(256) for _ in range(n)) for n in range(40)]
    words += [w.encode() for w in ["<unk>", "naïve", "日本語", ""]]
    hashes = kenlm_write.word_hashes(words)
    assert hashes.tolist() == [murmur64a(w) for w in words]
    assert len(set(hashes.tolist())) == len(set(words))
    for buckets in [5, 17, 1000]:
        keys = np.array(rng.sample(range(1, 1 << 62), buckets - 1), np.uint64)
        keys[:3] = [buckets - 1, 2 * buckets - 1, 3 * buckets - 1]  # all at the last bucket
        fast = place(keys, buckets)
        _c, kenlm_write._C = kenlm_write._C, None
        try:
            slow = place(keys, buckets)
        finally:
            kenlm_write._C = _c
        assert fast.tolist() == slow.tolist() and len(set(fast.tolist())) == len(keys)
        assert fast[:3].tolist() == [buckets - 1, 0, 1]  # wrapped around
    for c in [True, False]:
        _c = kenlm_write._C
        kenlm_write._C = _c if c else None
        try:
            with pytest.raises(NnlmError, match="hash alike"):
                place(np.array([5, 9, 5], np.uint64), 7)
            with pytest.raises(NnlmError, match="hash alike"):
                place(np.array([0], np.uint64), 7)
        finally:
            kenlm_write._C = _c


def test_what_kenlm_cannot_hold_is_refused(tmp_path):
    model = read_arpa(WRITTEN / "nnlm_kn3.arpa")
    for multiplier in [1.0, float("nan"), 0.5, 1e9]:
        with pytest.raises(NnlmError, match="probing multiplier"):
            write_kenlm_probing(model, tmp_path / "x.bin", multiplier)
    with pytest.raises(NnlmError, match="back-off n-gram models"):
        write_kenlm_probing(object(), tmp_path / "x.bin")
    assert not (tmp_path / "x.bin").exists()


def _lines_of(arpa: Path) -> list[str]:
    """Sentences made of the file's own words, a few of them."""
    words = [line.split("\t")[1] for line in arpa.read_text(encoding="utf-8").splitlines()
             if line.count("\t") >= 1 and line[:1] in "-0123456789"
             and " " not in line.split("\t")[1]][:30]
    words = [w for w in words if w not in ("<s>", "</s>")]
    return [" ".join(words[i:i + 6]) for i in range(0, len(words), 3)]

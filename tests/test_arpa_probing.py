"""ARPA files read straight into KenLM's probing layout (nnlm.ngram.formats.arpa_probing),
as nnlm.kenlm opens them: build_binary's own bytes (fixtures it wrote), however the file
is cut into windows and blocks, compressed or not; the kenlm module's scores over them;
and every file the stream cannot hold as it is (pruned, duplicated, deficient, refused)
read by the whole reader instead, with its warnings and errors."""

from __future__ import annotations

import gzip
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

import nnlm.kenlm as nk
from nnlm.ngram.formats import arpa_probing, arpa_read
from nnlm.ngram.formats.arpa_probing import probing_image

WRITTEN = Path(__file__).parent / "fixtures" / "kenlm_write"  # with build_binary's files
KENLM = Path(__file__).parent / "fixtures" / "kenlm"  # KenLM's own (pruned) test models
PAIRS = ["nnlm_kn3", "shuffled", "closed"]

pytestmark = pytest.mark.skipif(arpa_probing._C is None or arpa_probing._SCAN is None,
                                reason="nnlm's compiled parts are not built")


def _image(path) -> bytes | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        built = probing_image(path)
    return None if built is None else bytes(built[0])


@pytest.mark.parametrize("name", PAIRS)
@pytest.mark.parametrize("window", ["whole", "tiny"])
def test_the_image_is_build_binarys_file(name, window, monkeypatch):
    """Byte for byte the file build_binary wrote from the same ARPA file: ids in the
    file's order, <unk> anywhere or absent, sections in any order; with windows of 3
    lines and reads of 64 bytes too, so every line of the file meets a boundary."""
    if window == "tiny":
        monkeypatch.setattr(arpa_read, "WINDOW_ROWS", 3)
        monkeypatch.setattr(arpa_read, "STREAM_BYTES", 64)
    assert _image(WRITTEN / f"{name}.arpa") == (WRITTEN / f"{name}.probing.bin").read_bytes()


def test_a_compressed_file_gives_the_same_image(tmp_path):
    gz = tmp_path / "m.arpa.gz"
    gz.write_bytes(gzip.compress((WRITTEN / "shuffled.arpa").read_bytes()))
    assert _image(gz) == (WRITTEN / "shuffled.probing.bin").read_bytes()


@pytest.mark.parametrize("name", PAIRS)
def test_nnlm_kenlm_opens_an_arpa_file_in_that_layout(name):
    """nnlm.kenlm.Model over an ARPA file never loads the model, and gives the kenlm
    module's numbers, n-gram lengths, oov flags and states over the same file."""
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    path = str(WRITTEN / f"{name}.arpa")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = nk.Model(path)
    theirs = kenlm.Model(path)
    assert ours._model is None
    words = [w for w in ours.vocabulary() if w not in ("<s>", "</s>")]
    assert sorted(ours.vocabulary()) == sorted({"<unk>", *words, "<s>", "</s>"})
    rng = np.random.default_rng(0)
    for _ in range(200):
        line = " ".join(rng.choice(words + ["never-seen"], rng.integers(0, 12)))
        for bos in (True, False):
            assert list(ours.full_scores(line, bos=bos)) == list(theirs.full_scores(line, bos=bos))
    s, t = (nk.State(), nk.State()), (kenlm.State(), kenlm.State())
    ours.BeginSentenceWrite(s[0])
    theirs.BeginSentenceWrite(t[0])
    for w in map(str, rng.choice(words, 40)):
        a, b = ours.BaseFullScore(s[0], w, s[1]), theirs.BaseFullScore(t[0], w, t[1])
        assert (a.log_prob, a.ngram_length, a.oov) == (b.log_prob, b.ngram_length, b.oov)
        s, t = s[::-1], t[::-1]


def _edited(tmp_path, name: str, edit) -> Path:
    lines = (WRITTEN / name).read_text(encoding="utf-8").split("\n")
    out = tmp_path / f"edited-{name}"
    out.write_text("\n".join(edit(lines)), encoding="utf-8")
    return out


def _with_line(lines, old, new):
    return [new if x == old else x for x in lines]


def test_what_the_stream_cannot_hold_is_read_whole(tmp_path):
    """A pruned file (KenLM's test.arpa: contexts missing, unigrams summing to 1.0026)
    and a deficient one (a back-off weight off, so a context sums below 1) are read by
    the whole reader: nnlm.kenlm warns as every command does, and scores as before."""
    deficient = _edited(tmp_path, "closed.arpa",
                        lambda x: _with_line(x, "-0.30103\ta\t-0.30103", "-0.30103\ta\t-0.5"))
    for path in (KENLM / "test.arpa", deficient):
        assert _image(path) is None
        with pytest.warns(UserWarning) as caught:
            model = nk.Model(str(path))
        assert model._model is not None
        assert any("sum to" in str(w.message) for w in caught)


def test_bad_lines_are_still_named(tmp_path):
    """An n-gram twice, a number out of range, a word not among the unigrams: the stream
    gives up, and the whole reader names the line, as for any command."""
    twice = _edited(tmp_path, "closed.arpa",
                    lambda x: _with_line(x, "ngram 2=3", "ngram 2=4")[:-3]
                    + ["-0.30103\ta b", "", "\\end\\", ""])
    for path, line in ((twice, 15), (_edited(tmp_path, "shuffled.arpa", lambda x: _with_line(
            x, x[8], x[8].replace("-", "+", 1))), 9)):
        assert _image(path) is None
        with pytest.raises(OSError, match=f":{line}: "):
            nk.Model(str(path))


def test_the_table_steps_are_brute_forces():
    """place_into and find_in over a table of 12-byte buckets (KenLM's longest order):
    linear probing from key mod buckets, wrapping, as a dict-free brute force does; a
    repeated key is refused."""
    C = arpa_probing._C
    rng = np.random.default_rng(1)
    buckets = 37
    keys = rng.integers(1, 1 << 63, 30, dtype=np.uint64)
    keys[:5] = np.arange(5, dtype=np.uint64) * buckets + 36  # they all want the last bucket
    region = np.zeros(buckets * 12, np.uint8)
    slots = np.empty(len(keys), np.int64)
    C.place_into(keys, region, 12, slots)
    taken: list[int] = []
    for key, slot in zip(keys.tolist(), slots.tolist()):
        b = key % buckets
        while b in taken:
            b = (b + 1) % buckets
        taken.append(b)
        assert slot == b
    found = np.empty(len(keys) + 2, np.int64)
    C.find_in(np.concatenate([keys, np.array([123456789, 0], np.uint64)]), region, 12, found)
    assert found[:-2].tolist() == slots.tolist() and found[-2:].tolist() == [-1, -1]
    with pytest.raises(ValueError):
        C.place_into(keys[:1], region, 12, slots[:1])


@pytest.mark.skipif(shutil.which("build_binary") is None,
                    reason="KenLM's build_binary is not on the PATH")
@pytest.mark.parametrize("order", [2, 4])
def test_fresh_models_where_build_binary_is_found(tmp_path, order):
    import subprocess

    from nnlm.fit import train_ngram

    rng = np.random.default_rng(order)
    words = [f"w{i}" * int(rng.integers(1, 6)) for i in range(200)]
    text = tmp_path / "toy.txt"
    text.write_text("\n".join(" ".join(rng.choice(words, rng.integers(1, 15)))
                              for _ in range(1500)) + "\n")
    train_ngram(text, "kn", order, discount_fallback=True, arpa=str(tmp_path / "m.arpa"))
    subprocess.run([shutil.which("build_binary"), "-s", "probing", tmp_path / "m.arpa",
                    tmp_path / "kenlm.bin"], check=True, capture_output=True)
    assert _image(tmp_path / "m.arpa") == (tmp_path / "kenlm.bin").read_bytes()


def _pruned(tmp_path) -> Path:
    """nnlm_kn3.arpa with a bigram removed that a trigram ends with (as pruning does),
    its context's back-off weight renormalized, so only the missing suffix is odd."""
    lines = (WRITTEN / "nnlm_kn3.arpa").read_text(encoding="utf-8").split("\n")
    uni = {x.split("\t")[1]: x for x in lines if x.count("\t") == 2 and " " not in x}
    grams = [x.split("\t") for x in lines if "\t" in x]
    bigrams = {g[1]: float(g[0]) for g in grams if g[1].count(" ") == 1}
    trigram = next(g[1] for g in grams if g[1].count(" ") == 2 and "<" not in g[1])
    x, y = trigram.split()[1:]
    rest = {b: p for b, p in bigrams.items() if b.split()[0] == x and b != f"{x} {y}"}
    p_uni = {w: float(line.split("\t")[0]) for w, line in uni.items()}
    explicit = sum(10 ** p for p in rest.values())
    lower = sum(10 ** p_uni[b.split()[1]] for b in rest)
    bow = np.log10((1 - explicit) / (1 - lower))
    old_x = uni[x]
    new_x = "\t".join([*old_x.split("\t")[:2], f"{bow:.9f}"])
    out = [new_x if line == old_x else line.replace("ngram 2=217", "ngram 2=216")
           for line in lines if line.split("\t")[1:2] != [f"{x} {y}"]]
    path = tmp_path / "pruned.arpa"
    path.write_text("\n".join(out), encoding="utf-8")
    return path


def test_a_pruned_file_is_read_whole_and_scores_as_kenlm(tmp_path):
    """A suffix missing (a pruned file whose sums are right): the stream cannot place
    what KenLM would add there, so the whole reader adds it; the kenlm module's numbers."""
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    path = _pruned(tmp_path)
    assert _image(path) is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = nk.Model(str(path))
    theirs = kenlm.Model(str(path))
    words = [w for w in ours.vocabulary() if w not in ("<s>", "</s>", "<unk>")]
    rng = np.random.default_rng(3)
    for _ in range(300):
        line = " ".join(rng.choice(words, rng.integers(1, 10)))
        got, want = list(ours.full_scores(line)), list(theirs.full_scores(line))
        assert [g[1:] for g in got] == [w[1:] for w in want]
        assert np.allclose([g[0] for g in got], [w[0] for w in want], atol=1e-6)

"""KenLM's binary files (nnlm.ngram.formats.kenlm_binary). Oracles: the ARPA file each
fixture was built from (tests/fixtures/kenlm/README.md says how), and the kenlm module
reading the same binary where it is installed."""

import shutil
import struct
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pytest

from nnlm import NnlmError, Stream, load_model
from nnlm.ngram import read_arpa
from nnlm.ngram.formats import kenlm_binary, kenlm_header

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
TRIES = ["test.trie.bin", "test.q8.bin", "test.array.bin", "test.qa.bin"]
LINES = ["looking on a little more loin", "this is a sentence with unknown zzz words",
         "on a little more", "a little more loin looking", "more loin on a"]


def quiet_load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fixtures' odd sums, said by the ARPA tests
        return load_model(path)


def scores(model, lines):
    stream = Stream.from_lines([line.split() for line in lines], model.vocab)
    return model.logprobs(stream) / np.log(10)


@pytest.mark.parametrize("name", TRIES)
def test_every_trie_layout_scores_as_its_arpa_file(name):
    model = quiet_load(FIXTURES / name)
    arpa = quiet_load(FIXTURES / "test.arpa")
    assert model.num_ngrams() == arpa.num_ngrams()
    assert sorted(model.vocab.words) == sorted(arpa.vocab.words)  # KenLM orders by hash
    np.testing.assert_allclose(scores(model, LINES), scores(arpa, LINES), atol=1e-5)


@pytest.mark.parametrize("name", [*TRIES, "test_nounk.trie.bin"])
def test_every_trie_layout_scores_as_the_kenlm_module(name):
    kenlm = pytest.importorskip("kenlm")
    model = quiet_load(FIXTURES / name)
    theirs = kenlm.Model(str(FIXTURES / name))
    for line in LINES:
        want = [s[0] for s in theirs.full_scores(line)]
        np.testing.assert_allclose(scores(model, [line]), want, atol=1e-5)


def test_a_probing_file_scores_where_it_lies():
    model = quiet_load(FIXTURES / "test.probing.bin")
    arpa = quiet_load(FIXTURES / "test.arpa")
    assert sorted(model.vocab.words) == sorted(arpa.vocab.words)
    np.testing.assert_allclose(scores(model, LINES), scores(arpa, LINES), atol=1e-5)
    contexts = Stream.from_lines([line.split() for line in LINES], arpa.vocab).contexts(5)
    dist = model.next_logprobs(contexts[:6])
    assert np.allclose(np.exp(dist).sum(axis=1), np.exp(arpa.next_logprobs(
        contexts[:6])).sum(axis=1), atol=1e-5)  # the file's own (odd) sums, as its ARPA's


def test_a_probing_file_scores_as_the_kenlm_module():
    kenlm = pytest.importorskip("kenlm")
    model = quiet_load(FIXTURES / "test.probing.bin")
    theirs = kenlm.Model(str(FIXTURES / "test.probing.bin"))
    for line in LINES:
        np.testing.assert_allclose(scores(model, [line]),
                                   [s[0] for s in theirs.full_scores(line)], atol=1e-5)


def test_a_probing_file_through_the_kenlm_drop_in():
    import nnlm.kenlm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = nnlm.kenlm.Model(str(FIXTURES / "test.probing.bin"))
        arpa = nnlm.kenlm.Model(str(FIXTURES / "test.arpa"))
    for line in LINES:
        assert ours.score(line) == pytest.approx(arpa.score(line), abs=1e-4)


@pytest.mark.parametrize("name", ["test_nounk.probing.bin", "test_nounk.trie.bin"])
def test_a_closed_vocabulary_binary_opens_as_kenlm_opens_it(name, tmp_path, capsys):
    """Built from an ARPA file without <unk> (KenLM's lm/test_nounk.arpa): KenLM adds
    <unk> as word 0 and keeps the ARPA's unigram count in a probing file's header. Every
    load path opens it and scores as the kenlm module does (the oracle, where installed;
    the ARPA file it was built from otherwise)."""
    import nnlm
    import nnlm.kenlm
    from nnlm.cli import main

    path = FIXTURES / name
    model = quiet_load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        arpa = nnlm.kenlm.Model(str(FIXTURES / "test_nounk.arpa"))
    ours = nnlm.kenlm.Model(str(path))
    for line in LINES:
        assert ours.score(line) == pytest.approx(arpa.score(line), abs=1e-4)
        assert nnlm.Decoder(model).score(line) == pytest.approx(arpa.score(line), abs=1e-4)
    try:
        import kenlm
    except ImportError:
        kenlm = None
    if kenlm is not None:
        theirs = kenlm.Model(str(path))
        for line in LINES:
            assert list(ours.full_scores(line)) == list(theirs.full_scores(line))
            np.testing.assert_allclose(scores(model, [line]),
                                       [s[0] for s in theirs.full_scores(line)], atol=1e-5)
    text = tmp_path / "t.txt"
    text.write_text("\n".join(LINES) + "\n")
    assert main(["eval", str(path), str(text)]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv", [["{tmp}/out.arpa"], ["{tmp}/m"]])
def test_a_probing_file_cannot_be_converted_and_says_why(tmp_path, capsys, argv):
    from nnlm.cli import main

    code = main(["ngram", "convert", str(FIXTURES / "test.probing.bin"),
                 *(a.format(tmp=tmp_path) for a in argv)])
    err = capsys.readouterr().err
    assert code == 2 and "hashes of its n-grams" in err and "build_binary trie" in err
    assert not (tmp_path / "m").exists() and not (tmp_path / "out.arpa").exists()


def test_convert_a_trie_binary_to_arpa_and_to_nnlm(tmp_path, capsys):
    from nnlm.cli import main

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(["ngram", "convert", str(FIXTURES / "test.qa.bin"),
                     str(tmp_path / "out.arpa")]) == 0
        assert main(["ngram", "convert", str(FIXTURES / "test.qa.bin"),
                     str(tmp_path / "m")]) == 0
    want = scores(quiet_load(FIXTURES / "test.qa.bin"), LINES)
    np.testing.assert_allclose(scores(quiet_load(tmp_path / "out.arpa"), LINES), want,
                               atol=1e-6)
    np.testing.assert_allclose(scores(quiet_load(tmp_path / "m"), LINES), want, atol=1e-6)


def boundaries(path):
    """Every byte where a part of the file begins or ends: header, vocabulary table,
    quantization tables, unigrams, each order's arrays, the words."""
    data = path.read_bytes()
    header, start = kenlm_binary.read_header(path, data)
    layout = kenlm_header.TrieLayout(path, data, header, start)
    cuts = {8, 60, 100, start, layout.search, layout.unigrams, layout.end, layout.end + 3}
    for level in [*layout.middles, layout.longest]:
        cuts |= {level.base, level.base + level.size // 2, level.base + level.size}
    return sorted(c for c in cuts if 0 < c < len(data))


@pytest.mark.parametrize("name", ["test.trie.bin", "test.qa.bin"])
def test_truncation_at_every_boundary_is_one_line(tmp_path, name):
    data = (FIXTURES / name).read_bytes()
    for cut in boundaries(FIXTURES / name):
        path = tmp_path / f"cut{cut}.bin"
        path.write_bytes(data[:cut])
        with pytest.raises(NnlmError) as e:
            quiet_load(path)
        assert "\n" not in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b.replace(b"format version 5", b"format version 4", 1), "version 4"),
    (lambda b: b[:56] + b"\x00\x00\x80\x3f" + b[60:], "another byte order"),
    (lambda b: kenlm_header.INCOMPLETE + b[len(kenlm_header.INCOMPLETE):], "did not finish"),
    (lambda b: b[:96] + (9).to_bytes(4, "little") + b[100:], "model type 9"),
    (lambda b: b[:-40], "words"),
])
def test_damaged_binaries_are_named(tmp_path, damage, message):
    path = tmp_path / "bad.bin"
    path.write_bytes(damage((FIXTURES / "test.trie.bin").read_bytes()))
    with pytest.raises(NnlmError, match=message):
        quiet_load(path)


@pytest.mark.slow
def test_brown_kn5_binaries_score_as_the_kenlm_module(brown_dir, tmp_path):
    """Brown's KN5 through the layouts build_binary writes: the numbers kenlm gives for
    the same file, token by token, to 1e-5 (the goal of the mapped store)."""
    kenlm = pytest.importorskip("kenlm")
    build_binary = shutil.which("build_binary")
    if build_binary is None:
        pytest.skip("KenLM's build_binary is not on the PATH")
    from nnlm.ngram import KneserNey, write_arpa
    from nnlm.text.corpus import read_corpus

    vocab, train = read_corpus(brown_dir / "train.txt")
    write_arpa(KneserNey(vocab, 5).fit(train), tmp_path / "kn5.arpa")
    lines = [x for x in (brown_dir / "test.txt").read_text().splitlines() if x.strip()][:1500]
    for options in (["trie"], ["-q", "8", "-b", "8", "trie"], ["-a", "22", "trie"],
                    ["probing"]):
        out = tmp_path / f"kn5{''.join(options)}.bin"
        subprocess.run([build_binary, *options, tmp_path / "kn5.arpa", out],
                       check=True, capture_output=True)
        model = load_model(out)
        theirs = kenlm.Model(str(out))
        want = np.concatenate([[s[0] for s in theirs.full_scores(x)] for x in lines])
        np.testing.assert_allclose(scores(model, lines), want, atol=1e-5)
    assert read_arpa(tmp_path / "kn5.arpa").num_ngrams() == model.num_ngrams()  # probing


@pytest.mark.parametrize("multiplier", [float("nan"), float("inf"), -1.5, 0.0])
def test_a_damaged_probing_multiplier_is_one_line(tmp_path, multiplier):
    import nnlm.kenlm

    data = bytearray((FIXTURES / "test.probing.bin").read_bytes())
    at = len(kenlm_header.SANITY) + 4  # FIXED: the order's byte, 3 of padding, then it
    assert struct.unpack_from("<f", data, at)[0] == pytest.approx(1.5)
    struct.pack_into("<f", data, at, multiplier)
    bad = tmp_path / "bad.probing.bin"
    bad.write_bytes(bytes(data))
    with pytest.raises(NnlmError, match="probing multiplier .* damaged"):
        quiet_load(bad)
    with pytest.raises(OSError, match="probing multiplier"):
        nnlm.kenlm.Model(str(bad))


@pytest.mark.parametrize("name", ["test.probing.bin", "test.trie.bin", "test.q8.bin",
                                  "test.array.bin", "test.qa.bin"])
def test_a_kenlm_binary_opens_where_it_lies_without_numpy(name):
    """nnlm.kenlm opens KenLM's binaries as kenlm does: mapped, the probing buckets or the
    bit-packed trie (quantized, array-compressed pointers) queried in place by the
    compiled path, no model loaded and numpy never imported; the numbers are the loaded
    model's (and kenlm's: tests/test_kenlm_module.py)."""
    import sys

    import nnlm
    import nnlm.kenlm

    if nnlm.kenlm._fast is None:
        pytest.skip("the compiled queries were not built (no C compiler at install)")
    code = ("import sys, nnlm.kenlm as k\n"
            f"m = k.Model({str(FIXTURES / name)!r})\n"
            "print(m._fast is not None, m._model is None, round(m.score('looking on a "
            "little more'), 4), 'numpy' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    fast, unloaded, score, numpy_loaded = done.stdout.split()
    assert (fast, unloaded, numpy_loaded) == ("True", "True", "False"), done.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded = load_model(FIXTURES / name)
    assert float(score) == pytest.approx(loaded.sentence_logprob("looking on a little more")
                                         / np.log(10), abs=1e-4)
    ours = nnlm.kenlm.Model(str(FIXTURES / name))
    for line in LINES:
        for (a, n, o), (b, m, p) in zip(ours.full_scores(line),
                                        nnlm.Decoder(loaded).full_scores(line)):
            assert (n, o) == (m, p) and a == pytest.approx(b, abs=1e-4)

"""A KN model's values stored as the counts they come from (nnlm.ngram.store.value_codes,
``nnlm ngram train --compress``). Oracles: the float32 file of the same estimate, bit for
bit, through every reader (numpy's, the compiled bulk scorer, nnlm.kenlm's queries);
numpy's log for the readers' own; the distributions' sums."""

import subprocess
import sys

import numpy as np
import pytest

from conftest import zipf_corpus
from nnlm import NnlmError, Stream, Vocabulary, load_model, save_model
from nnlm.base.compiled import extension
from nnlm.ngram import KneserNey
from nnlm.ngram.store import trie, trie_map, value_codes

_trie = extension("nnlm.ngram.store._trie")


@pytest.fixture(scope="module")
def estimate():
    """A KN4 estimated with its counts kept, and a test text."""
    lines = zipf_corpus(n_sentences=500, n_words=80, max_words=13)
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line} | {"never": 1})
    model = KneserNey(vocab, 4, discount_fallback=True).fit(Stream.from_lines(lines, vocab),
                                                           keep_counts=True)
    test = Stream.from_lines(zipf_corpus(seed=5, n_sentences=80, n_words=80, max_words=13),
                             vocab)
    return model, test


def saved_pair(model, path):
    """The model saved twice: float32 values (``path / "f"``) and coded (``path / "c"``)."""
    model.store_compress = False
    save_model(model, path / "f")
    model.store_compress = True
    try:
        save_model(model, path / "c")
    finally:
        model.store_compress = False
    return load_model(path / "f"), load_model(path / "c")


def bits_of(a):
    return np.asarray(a, np.float32).view(np.uint32)


# -- the log every reader shares ------------------------------------------------------------
def test_exact_log_is_within_two_ulps_of_numpys_and_rounds_as_it_does():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.random(200_000), np.exp(-rng.random(200_000) * 700),
                        1 - rng.random(1000) * 1e-12, [1.0, 0.5, 2.0, 1e-300, 5e-324]])
    ours, ref = value_codes.exact_log(x), np.log(x)
    ulps = np.abs(ours.view(np.int64) - ref.view(np.int64))
    assert ulps.max() <= 2
    # once rounded to float32 (what a file holds), a disagreement is a coin's edge
    assert np.mean(ours.astype(np.float32) != ref.astype(np.float32)) < 1e-4
    assert value_codes.exact_log(np.array([0.0]))[0] == -np.inf
    assert np.isnan(value_codes.exact_log(np.array([-1.0, np.nan]))).all()


@pytest.mark.skipif(_trie is None, reason="nnlm.ngram.store._trie is not built")
def test_the_compiled_log_is_numpys_exact_log_to_the_bit():
    """Both readers must give one float32 for one p, on any machine: the same IEEE
    operations in the same order, no libm."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.random(300_000), np.exp(-rng.random(300_000) * 745),
                        [0.0, 1.0, np.inf, np.nan, -3.0, 5e-324, 0.7071067811865476]])
    out = np.empty_like(x)
    _trie.exact_log(x, out)
    assert np.array_equal(out.view(np.int64), value_codes.exact_log(x).view(np.int64))


# -- the codes -------------------------------------------------------------------------------
def test_symbols_round_trip_through_codes_and_escapes():
    rng = np.random.default_rng(2)
    rank = np.minimum(rng.geometric(0.3, 5000) - 1, 200)
    for bits in (1, 2, 3, 8):
        field = value_codes.Field(rank, bits)
        sym, place = value_codes.symbols(field.codes, bits, len(rank), field.flags,
                                         field.symbol, 201)
        assert np.array_equal(sym, rank) and (place == -1).all()
        some = rng.integers(0, len(rank), 300)
        assert np.array_equal(value_codes.symbols(field.codes, bits, len(rank), field.flags,
                                                  field.symbol, 201, some)[0], rank[some])
        assert field.block[-1] >= len(field.symbol) == np.count_nonzero(rank >= (1 << bits) - 1)


def test_the_width_balances_codes_against_escapes():
    counts = np.array([1000, 500, 10, 1, 1, 1])
    assert value_codes.code_width(counts, 32) == 2  # 3 direct symbols, 3 escapes
    assert value_codes.code_width(np.array([5, 5, 5]), 32) == 2  # all direct


# -- the file ---------------------------------------------------------------------------------
def test_every_value_is_the_float32_files_to_the_bit(tmp_path, estimate):
    model, _ = estimate
    f, c = saved_pair(model, tmp_path)
    header = trie_map.read_trie_header(tmp_path / "c" / "ngrams.trie")[0]
    assert header["format_version"] == trie.FORMAT_VERSION == 4 and "coded" in header
    for lf, lc in zip(f.levels, c.levels):
        assert np.array_equal(bits_of(lf.logp), bits_of(lc.logp))
        if lf.k < model.order:
            assert np.array_equal(bits_of(lf.log_bow), bits_of(lc.log_bow))  # -0.0 too
    # (a toy: the header's room and the vocabulary weigh as much as its values)
    assert (tmp_path / "c" / "ngrams.trie").stat().st_size < \
        0.8 * (tmp_path / "f" / "ngrams.trie").stat().st_size


@pytest.mark.parametrize("path", ["compiled", "numpy"])
def test_scores_are_the_float32_files_in_every_scorer(tmp_path, estimate, monkeypatch, path):
    model, test = estimate
    if path == "numpy":
        monkeypatch.setattr(trie, "_native", None)
    elif trie._native is None:
        pytest.skip("nnlm.ngram.store._trie is not built")
    f, c = saved_pair(model, tmp_path)
    assert np.array_equal(f.logprobs(test), c.logprobs(test))
    contexts = test.contexts(4)
    assert np.array_equal(f.target_logprobs(contexts, test.ids),
                          c.target_logprobs(contexts, test.ids))
    dist = c.next_logprobs(contexts[:50])
    assert np.array_equal(dist, f.next_logprobs(contexts[:50]))
    assert np.allclose(np.exp(dist.astype(np.float64)).sum(axis=1), 1, atol=1e-5)


def test_nnlm_kenlm_gives_the_float32_files_numbers(tmp_path, estimate):
    import nnlm.kenlm as kenlm

    model, test = estimate
    saved_pair(model, tmp_path)
    f, c = kenlm.Model(str(tmp_path / "f")), kenlm.Model(str(tmp_path / "c"))
    for line in zipf_corpus(seed=9, n_sentences=60, n_words=80, max_words=13):
        text = " ".join(line)
        assert list(f.full_scores(text)) == list(c.full_scores(text))
    # the State API, a state carried across calls, and one whose words are set by hand
    a, b, x, y = kenlm.State(), kenlm.State(), kenlm.State(), kenlm.State()
    f.BeginSentenceWrite(a)
    c.BeginSentenceWrite(x)
    for w in line:
        assert f.BaseScore(a, w, b) == c.BaseScore(x, w, y)
        a, b, x, y = b, a, y, x
    mine, theirs = kenlm.State(), kenlm.State()
    mine._words = theirs._words = x._words  # (back-offs 0) its contexts found from its words
    mine._owner, theirs._owner = x._owner, a._owner
    assert c.BaseScore(mine, line[0], y) == f.BaseScore(theirs, line[0], b)


def test_nnlm_kenlm_opens_a_coded_file_without_numpy(tmp_path, estimate):
    from nnlm.base.compiled import extension

    if extension("nnlm.decoding._kenlm_query") is None:
        pytest.skip("without the compiled query, nnlm.kenlm's Python path needs numpy")
    model, _ = estimate
    saved_pair(model, tmp_path)
    code = ("import sys, nnlm.kenlm as k; m = k.Model(sys.argv[1]); "
            "print(m.score('w1 w2 w3'), 'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "c")], check=True,
                         capture_output=True, text=True).stdout.split()
    ref = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f")], check=True,
                         capture_output=True, text=True).stdout.split()
    assert out == [ref[0], "False"]


def test_entries_whose_log_rounds_otherwise_keep_their_own_float32(tmp_path, estimate):
    """Where exact_log's float32 is not the stored one (rare: here forced by moving some
    stored values one ulp), the entry escapes with its own: still lossless everywhere."""
    model, test = estimate
    level = model.levels[1]
    saved = level.logp.copy()
    rng = np.random.default_rng(4)
    moved = rng.choice(len(saved), 200, replace=False)
    stored = saved.astype(np.float32)
    stored[moved] = np.nextafter(stored[moved], np.float32(0))
    level.logp = stored.astype(np.float64)
    try:
        f, c = saved_pair(model, tmp_path)
    finally:
        level.logp = saved
    assert np.array_equal(bits_of(f.levels[1].logp), bits_of(c.levels[1].logp))
    assert np.array_equal(f.logprobs(test), c.logprobs(test))
    import nnlm.kenlm as kenlm

    kf, kc = kenlm.Model(str(tmp_path / "f")), kenlm.Model(str(tmp_path / "c"))
    for line in zipf_corpus(seed=11, n_sentences=40, n_words=80, max_words=13):
        assert list(kf.full_scores(" ".join(line))) == list(kc.full_scores(" ".join(line)))


def test_a_model_without_counts_cannot_be_compressed(tmp_path, estimate):
    model, _ = estimate
    plain = KneserNey(model.vocab, 2, discount_fallback=True).fit(
        Stream.from_lines([["w1", "w2"], ["w2", "w1", "w3"]], model.vocab))
    plain.store_compress = True
    with pytest.raises(NnlmError, match="counts"):
        save_model(plain, tmp_path / "x")
    assert not (tmp_path / "x").exists()


# -- damaged files -----------------------------------------------------------------------------
def test_truncated_coded_files_are_one_line(tmp_path, estimate):
    from test_ngram_store import assert_truncations_are_one_line

    model, _ = estimate
    saved_pair(model, tmp_path)
    assert_truncations_are_one_line(tmp_path / "c", tmp_path)


@pytest.mark.parametrize("edit", [
    lambda h: h["coded"].pop("a_2"),
    lambda h: h["coded"]["c_1"].__setitem__(0, 40),
    lambda h: h["coded"]["a_3"].__setitem__(1, 0),
    lambda h: h.update(quantize=[8, 8]),
])
def test_a_damaged_coded_header_is_named(tmp_path, estimate, edit):
    from test_ngram_store import rewrite_header

    model, _ = estimate
    saved_pair(model, tmp_path)
    rewrite_header(tmp_path / "c" / "ngrams.trie", edit)
    with pytest.raises(NnlmError, match="damaged|wrong shape"):
        load_model(tmp_path / "c")


@pytest.mark.parametrize("scribble", ["codes", "flags", "block", "esc"])
def test_scribbled_codes_never_read_outside_the_file(tmp_path, estimate, scribble):
    """Random bytes over the codes, escape flags, blocks and symbols: wrong numbers, a
    NaN that the scorers refuse, or a one-line error; never a crash."""
    import nnlm.kenlm as kenlm

    model, test = estimate
    saved_pair(model, tmp_path)
    path = tmp_path / "c" / "ngrams.trie"
    header, start = trie_map.read_trie_header(path)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(5)
    for name, (off, size, _, _) in header["sections"].items():
        if name[1:].startswith(scribble) and size:
            data[start + off:start + off + size] = rng.bytes(size)
    path.write_bytes(bytes(data))
    mapped = load_model(tmp_path / "c", verify=False)  # the checks below the checksums
    for score in (lambda: mapped.logprobs(test),
                  lambda: mapped.target_logprobs(test.contexts(4), test.ids)):
        try:
            score()
        except NnlmError as e:
            assert "\n" not in str(e)
    lm = kenlm.Model(str(tmp_path / "c"))
    lm.score("w1 w2 w3 w4 w5")  # a number, maybe wrong: the file is damaged


# -- the command line ------------------------------------------------------------------------
def test_train_compress_end_to_end(tmp_path, capsys):
    from nnlm.cli import main

    text = tmp_path / "train.txt"
    text.write_text("\n".join(" ".join(line) for line in zipf_corpus(n_sentences=300,
                                                                     n_words=50)) + "\n")
    for name, extra in (("f", []), ("c", ["--compress"])):
        assert main(["ngram", "train", str(text), "--order", "3", "--discount-fallback",
                     "-o", str(tmp_path / name)] + extra) in (0, None)
    f, c = load_model(tmp_path / "f"), load_model(tmp_path / "c")
    stream = Stream.from_lines(zipf_corpus(seed=3, n_sentences=40, n_words=50), f.vocab)
    assert np.array_equal(f.logprobs(stream), c.logprobs(stream))


@pytest.mark.parametrize("extra, message", [
    (["--prune", "0", "1"], "compress"),
    (["--method", "addk", "--order", "2"], "compress"),
    (["--order", "1", "--discount-fallback"], "compress"),
])
def test_train_compress_refuses_what_it_cannot_store(tmp_path, capsys, extra, message):
    from nnlm.cli import main

    text = tmp_path / "train.txt"
    text.write_text("a b c\nb c a\n")
    try:
        code = main(["ngram", "train", str(text), "-o", str(tmp_path / "m"), "--compress"]
                    + extra)
    except SystemExit as e:  # argparse's refusals
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (tmp_path / "m").exists()


def test_a_coded_model_converted_stays_coded_unless_quantized(tmp_path, estimate, capsys):
    from nnlm.cli import main

    model, test = estimate
    f, _ = saved_pair(model, tmp_path)
    assert main(["ngram", "convert", str(tmp_path / "c"), str(tmp_path / "one.nnlm")]) == 0
    assert "coded as counts" in capsys.readouterr().out
    assert "coded" in trie_map.read_trie_header(tmp_path / "one.nnlm")[0]
    assert np.array_equal(load_model(tmp_path / "one.nnlm").logprobs(test), f.logprobs(test))
    assert main(["ngram", "convert", str(tmp_path / "c"), str(tmp_path / "q"),
                 "--quantize", "8", "8"]) == 0
    header = trie_map.read_trie_header(tmp_path / "q" / "ngrams.trie")[0]
    assert "coded" not in header and header["quantize"] == [8, 8]


# -- impossible values in the tables ----------------------------------------------------------
def _with_section(path, name, change):
    """Apply ``change`` to one section's array of a trie file, its checksums written
    again: a file whose numbers a writer got wrong, which no checksum catches."""
    from reliability_world import restamp_checksums

    header, start = trie_map.read_trie_header(path)
    data = bytearray(path.read_bytes())
    off, size, dtype, count = header["sections"][name]
    change(np.frombuffer(data, np.dtype(dtype), count, start + off))
    restamp_checksums(data, header, start)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("name, change, match", [
    ("cS_2", lambda a: a.__setitem__(a > 0, 1e-310), "denormal S"),
    ("cS_1", lambda a: a.__setitem__(0, -2.0), "negative or denormal S"),
    ("unigram_p", lambda a: a.__setitem__(5, -0.25), r"outside \(0, 1\]"),
    ("unigram_p", lambda a: a.__setitem__(5, 1.5), r"outside \(0, 1\]"),
    ("cgamma_2", lambda a: a.__setitem__(0, -0.5), "negative"),
    ("anum_3", lambda a: a.__setitem__(0, -1.0), "negative")])
def test_impossible_table_values_are_refused_at_opening(tmp_path, estimate, capsys, name,
                                                        change, match):
    """Tables a writer filled with values no estimate gives: every load path refuses the
    file in one line instead of handing inf or NaN to a decoder."""
    import nnlm
    import nnlm.kenlm as kenlm
    from nnlm.cli import main

    model, _ = estimate
    saved_pair(model, tmp_path)
    _with_section(tmp_path / "c" / "ngrams.trie", name, change)
    for opened in (lambda: load_model(tmp_path / "c"), lambda: nnlm.Decoder(tmp_path / "c"),
                   lambda: kenlm.Model(str(tmp_path / "c"))):
        with pytest.raises((NnlmError, OSError), match=match):
            opened()
    text = tmp_path / "t.txt"
    text.write_text("w1 w2 w3\n")
    assert main(["eval", str(tmp_path / "c"), str(text)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "damaged" in err[0]


def test_escapes_of_0xff_give_finite_numbers_on_every_path(tmp_path, estimate):
    """Every escape's symbol scribbled to 0xFFFFFFFF (an override whose float32 is NaN,
    and a symbol past the table): the readers agree on finite numbers."""
    import nnlm
    import nnlm.kenlm as kenlm

    model, test = estimate
    saved_pair(model, tmp_path)
    path = tmp_path / "c" / "ngrams.trie"
    header, _ = trie_map.read_trie_header(path)
    for name in header["sections"]:
        if name.startswith(("aesc_", "cesc_")) and not name.startswith("aesc_logp"):
            _with_section(path, name, lambda a: a.fill(0xFFFFFFFF))
    mapped = load_model(tmp_path / "c")
    assert np.isfinite(mapped.logprobs(test)).all()
    line = "w1 w2 w3 w4 w5 w6"
    scores = [kenlm.Model(str(tmp_path / "c")).score(line), nnlm.Decoder(mapped).score(line)]
    assert all(np.isfinite(scores)) and scores[0] == pytest.approx(scores[1], abs=1e-4)

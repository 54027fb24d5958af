"""nnlm's mapped n-gram trie (nnlm.ngram.store): bit packing, the file, its lookups and
its failures. Oracles: Python integers for the packing, the in-memory model (hash
index, float64) for every score, brute-force bins for quantization."""

import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import zipf_corpus
from nnlm import NnlmError, Stream, Vocabulary, load_model, save_model
from nnlm.lm import LanguageModel
from nnlm.ngram import BackoffNgram, KneserNey, read_arpa, write_arpa
from nnlm.ngram.store import bits, run_pointers, trie, trie_layout, trie_map, vocab_table
from nnlm.ngram.store import values as coding
from nnlm.text.vocab import BOS_ID


@pytest.fixture(scope="module")
def kn4():
    lines = zipf_corpus(n_sentences=400, n_words=60, max_words=13)
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line} | {"never": 1})
    stream = Stream.from_lines(lines, vocab)
    test = Stream.from_lines(zipf_corpus(seed=5, n_sentences=80, n_words=60, max_words=13), vocab)
    return KneserNey(vocab, 4, discount_fallback=True).fit(stream), test


@pytest.fixture(params=["packed", "linear"])
def layout(request, monkeypatch):
    """Run a test with the run pointers of every order bit-packed, and again in the
    linear layout (the writer picks per order; a toy model gets both only this way).
    The packed run also gives orders 2 and 3 their tables whatever their share (the
    toy model's trigrams are too many for one by default)."""
    from nnlm.ngram.store import trie_write

    monkeypatch.setattr(run_pointers, "choose_layout", lambda values: request.param)
    if request.param == "packed":
        monkeypatch.setattr(trie_write, "HASHED_SHARE", 1.0)
    return request.param


@pytest.fixture(params=["compiled", "numpy"])
def lookups(request, monkeypatch):
    """Run a test with the C lookups and again with the numpy ones."""
    if request.param == "numpy":
        monkeypatch.setattr(trie, "_native", None)
    elif trie._native is None:
        pytest.skip("nnlm.ngram.store._trie is not built (no C compiler at install)")
    return request.param


# -- run pointers ----------------------------------------------------------------------
@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 3), st.integers(0, 40), st.integers(0, 5000)),
                min_size=0, max_size=700), st.sampled_from(["packed", "linear", None]))
def test_run_pointers_round_trip_in_either_layout(steps, layout):
    """Pointers with runs of every length (a heavy context's thousands of extensions
    among ones of none) come back exactly, whichever layout holds them, decoded whole
    or one at a time; oracle: the numbers themselves."""
    values = np.concatenate([[0], np.cumsum(steps, dtype=np.int64)])
    coded = run_pointers.encode(values, layout)
    spec = run_pointers.header_entry(coded)
    count, top = len(values), int(values[-1])
    assert run_pointers.spec_ok(spec, count, top)
    arrays = dict(run_pointers.named_sections(coded, 1))
    assert {k: len(v) for k, v in arrays.items()} == run_pointers.sections(spec, 1, count, top)
    if spec[0] == "packed":
        stored = run_pointers.Packed(arrays["child_1"], spec[1], count, top)
    else:
        stored = run_pointers.Linear(arrays["child_lines_1"], arrays["child_exceptions_1"],
                                     spec[1], count, top)
    assert np.array_equal(stored.decode(), values)
    assert np.array_equal(stored.at(np.arange(count)), values)  # the lookups' numpy path


def test_a_one_file_model_without_a_mapped_vocabulary_still_loads(tmp_path):
    """tests/fixtures/trie_v2.nnlm: a one-file KN3 written by nnlm before trie files
    held a mapped vocabulary (commit fe5cfc6: words and offsets only, checked by the
    fingerprint), of the corpus rebuilt here; oracle: the model estimated in memory.
    Converting it gives a file whose vocabulary is mapped."""
    from pathlib import Path

    from nnlm.models import convert

    lines = zipf_corpus(n_sentences=300, n_words=40, max_words=10)
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line})
    model = KneserNey(vocab, 3, discount_fallback=True).fit(Stream.from_lines(lines, vocab))
    old = Path(__file__).parent / "fixtures" / "trie_v2.nnlm"
    assert "vocab" not in trie_map.read_trie_header(old)[0]
    mapped = load_model(old)
    assert not isinstance(mapped.vocab, vocab_table.MappedVocabulary)
    assert mapped.vocab == model.vocab
    test = Stream.from_lines(zipf_corpus(seed=7, n_sentences=50, n_words=40), vocab)
    np.testing.assert_allclose(mapped.logprobs(test), model.logprobs(test), atol=2e-6)
    convert(old, tmp_path / "new.nnlm")
    new = load_model(tmp_path / "new.nnlm")
    assert isinstance(new.vocab, vocab_table.MappedVocabulary) and new.vocab == model.vocab
    np.testing.assert_allclose(new.logprobs(test), model.logprobs(test), atol=2e-6)


def test_the_linear_layout_is_chosen_where_it_is_smaller_and_light():
    """Contexts of one or two extensions each (a top order's): 64 to a line, far under
    bit-packing; one context holding most n-grams (the unigrams'): packed."""
    rng = np.random.default_rng(0)
    light = np.concatenate([[0], np.cumsum(rng.integers(0, 4, 100_000))])
    assert run_pointers.choose_layout(light) == "linear"
    coded = run_pointers.encode(light)
    assert coded["lines"].nbytes < 0.5 * bits.pack(light, bits.width(int(light[-1]))).nbytes
    heavy = light.copy()
    heavy[5000:] += 10**6
    assert run_pointers.choose_layout(heavy) == "packed"


def test_a_file_of_format_1_still_loads_and_converts(tmp_path):
    """tests/fixtures/trie_v1: a KN3 directory saved by nnlm's first trie format
    (bit-packed run pointers), of the corpus rebuilt here; oracle: the same model
    estimated again in memory."""
    from pathlib import Path

    lines = zipf_corpus(n_sentences=300, n_words=40, max_words=10)
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line})
    model = KneserNey(vocab, 3, discount_fallback=True).fit(Stream.from_lines(lines, vocab))
    old = Path(__file__).parent / "fixtures" / "trie_v1"
    assert trie_map.read_trie_header(old / "ngrams.trie")[0]["format_version"] == 1
    mapped = load_model(old)
    assert all(isinstance(level.pointers, run_pointers.Packed) for level in mapped.levels)
    test = Stream.from_lines(zipf_corpus(seed=7, n_sentences=50, n_words=40), vocab)
    np.testing.assert_allclose(mapped.logprobs(test), model.logprobs(test), atol=2e-6)
    save_model(mapped, tmp_path / "new")  # what nnlm ngram convert OLD NEW does
    header = trie_map.read_trie_header(tmp_path / "new" / "ngrams.trie")[0]
    assert header["format_version"] == trie_layout.FORMAT_VERSION == 4
    np.testing.assert_allclose(load_model(tmp_path / "new").logprobs(test),
                               mapped.logprobs(test), atol=0)


# -- bit packing -----------------------------------------------------------------------
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.lists(st.integers(0, 2**64 - 1), max_size=200))
def test_packing_round_trips_any_width(width, raw):
    values = [v % (1 << width) for v in raw]
    packed = bits.pack(np.array(values, np.uint64), width)
    assert len(packed) == bits.packed_words(len(values), width)
    as_int = sum(int(x) << (64 * i) for i, x in enumerate(packed.tolist()))  # the oracle
    for i, v in enumerate(values):
        assert (as_int >> (i * width)) & ((1 << width) - 1) == v
    if values and width < 64:
        got = bits.unpack(packed, width, np.arange(len(values)))
        assert got.tolist() == values


def test_compiled_and_numpy_packing_agree(monkeypatch):
    rng = np.random.default_rng(4)
    for width in (1, 5, 14, 21, 32, 57, 63):
        values = rng.integers(0, 1 << width, 3001, dtype=np.uint64)
        ours = bits.pack(values, width)
        monkeypatch.setattr(bits, "_native", lambda: None)
        assert np.array_equal(bits.pack(values, width), ours)
        monkeypatch.undo()


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 63), st.lists(st.integers(0, 300), max_size=12), st.integers(0, 10**6))
def test_packing_a_stream_of_chunks_is_packing_them_whole(width, sizes, seed):
    """A section packed as its chunks come (a writer streaming pieces of any length) is
    the array packed whole, spare word included."""
    rng = np.random.default_rng(seed)
    chunks = [rng.integers(0, 1 << width, n, dtype=np.uint64).astype(np.int64) for n in sizes]
    whole = bits.pack(np.concatenate([np.zeros(0, np.int64), *chunks]), width)
    assert np.array_equal(np.concatenate(list(bits.pack_stream(chunks, width))), whole)


@pytest.mark.parametrize("layout", ["packed", "linear"])
def test_pointers_read_back_from_disk_in_slices_code_as_the_array_does(tmp_path, layout,
                                                                       monkeypatch):
    """The pointer coder reads an array on disk (a cluster's spilled pointers) a slice at
    a time, slices smaller than the blocks here, and codes what it codes of the array."""
    from nnlm.ngram.distributed.partitioned import SpilledPointers

    rng = np.random.default_rng(3)
    values = np.concatenate([[0], np.cumsum(rng.integers(0, 3, 5000))]).astype(np.int64)
    values[4000:] += 10_000  # a heavy context: an exception block in the linear layout
    whole = run_pointers.encode(values, layout)
    monkeypatch.setattr(run_pointers, "CHUNK", 3)  # 192 pointers a slice
    spilled = SpilledPointers(tmp_path / "p", np.array_split(values, 7))
    sliced = run_pointers.encode(spilled, layout)
    assert whole.keys() == sliced.keys()
    for key, a in whole.items():
        assert np.array_equal(a, sliced[key]), key
    assert run_pointers.choose_layout(spilled) == run_pointers.choose_layout(values)
    spilled.close()
    assert not (tmp_path / "p").exists()


def test_packing_refuses_a_value_too_wide():
    with pytest.raises(ValueError):
        bits.pack(np.array([8]), 3)


# -- the mapped model scores as the in-memory one ------------------------------------------
def test_mapped_model_equals_the_in_memory_model(tmp_path, kn4, lookups, layout):
    model, test = kn4
    save_model(model, tmp_path / "m")
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == [
        "config.json", "ngrams.trie", "vocab.txt"]
    mapped = load_model(tmp_path / "m")
    assert all(isinstance(level, trie.TrieLevel) for level in mapped.levels)
    kinds = {"packed": run_pointers.Packed, "linear": run_pointers.Linear}
    assert all(isinstance(level.pointers, kinds[layout]) for level in mapped.levels)
    if layout == "linear":  # lines, the step from one to the next, and exceptions
        assert all(level.pointers.n_exceptions >= 1 for level in mapped.levels)
        assert max(level.pointers.count for level in mapped.levels) > 10 * 64
    want, want_orders = model.logprobs_and_orders(test)
    got, got_orders = mapped.logprobs_and_orders(test)
    np.testing.assert_allclose(got, want, atol=2e-6)  # float32 storage
    assert np.array_equal(got_orders, want_orders)
    contexts = test.contexts(4)
    np.testing.assert_allclose(mapped.target_logprobs(contexts, test.ids),
                               model.target_logprobs(contexts, test.ids), atol=2e-6)
    assert np.array_equal(mapped.state_lengths(contexts, test.ids),
                          model.state_lengths(contexts, test.ids))


@pytest.mark.parametrize("quantize", [None, (8, 8)])
def test_the_compiled_scorer_gives_the_numpy_scorers_numbers_to_the_bit(tmp_path, kn4, layout,
                                                                        quantize):
    """store._trie.score_run does _score_run's lookups and sums in C, in the same order:
    equal floats, across batch boundaries (a batch of 37 tokens splits lines) and with
    the values as float32, lossless codes or quantized codes."""
    if trie._native is None:
        pytest.skip("nnlm.ngram.store._trie is not built (no C compiler at install)")
    model, test = kn4
    model.store_quantize = quantize
    try:
        save_model(model, tmp_path / "m")
    finally:
        model.store_quantize = None
    mapped = load_model(tmp_path / "m")
    assert mapped._fused_run() is not None
    for batch in (None, 37):
        fused = mapped.logprobs_and_orders(test, batch)
        mapped._fused_run = lambda: None  # the numpy passes
        numpy_path = mapped.logprobs_and_orders(test, batch)
        del mapped._fused_run
        assert np.array_equal(fused[0], numpy_path[0])
        assert np.array_equal(fused[1], numpy_path[1])
    assert np.all(np.isfinite(fused[0]))


def test_every_key_is_found_and_no_absent_one(kn4, tmp_path, lookups, layout):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    mapped = load_model(tmp_path / "m")
    V = len(model.vocab)
    rng = np.random.default_rng(0)
    for level, stored in zip(mapped.levels, model.levels):
        assert np.array_equal(level.find(stored.keys), np.arange(len(stored)))
        queries = rng.integers(0, level.n_prefixes * V, 5000)
        absent = ~np.isin(queries, stored.keys)
        assert np.all(level.find(queries[absent]) == -1)
        assert np.all(level.find(np.array([-1, -V])) == -1)
        assert np.all(level.find_pairs(np.array([0, level.n_prefixes + 5]),
                                       np.array([-1, 0])) == -1)


def test_mapped_distributions_sum_to_one(tmp_path, kn4, lookups):
    model, test = kn4
    save_model(model, tmp_path / "m")
    mapped = load_model(tmp_path / "m")
    rng = np.random.default_rng(1)
    seen = test.contexts(4)[rng.integers(0, len(test), 40)]
    unseen = rng.integers(0, len(model.vocab), size=(40, 3))
    for contexts in (seen, unseen):
        dist = mapped.next_logprobs(contexts)
        assert np.allclose(np.exp(dist).sum(axis=1), 1.0, rtol=0, atol=1e-6)
        assert np.all(dist[:, BOS_ID] == -np.inf)


def test_arpa_through_the_trie_and_back_gives_the_same_numbers(tmp_path, kn4):
    model, test = kn4
    write_arpa(model, tmp_path / "a.arpa")
    from_arpa = read_arpa(tmp_path / "a.arpa")
    save_model(from_arpa, tmp_path / "m")
    write_arpa(load_model(tmp_path / "m"), tmp_path / "b.arpa")
    again = read_arpa(tmp_path / "b.arpa")
    np.testing.assert_allclose(again.logprobs(test), model.logprobs(test), atol=3e-6)
    assert again.num_ngrams() == model.num_ngrams()


def test_kn_back_offs_are_coded_losslessly(tmp_path, kn4):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    header, _ = trie_map.read_trie_header(tmp_path / "m" / "ngrams.trie")
    coded = [k for k, v in header["values"].items() if v is not None]
    assert any(k.startswith("log_bow") for k in coded)
    mapped = load_model(tmp_path / "m")
    for level, stored in zip(mapped.levels[:-1], model.levels):
        assert np.array_equal(np.asarray(level.log_bow), stored.log_bow.astype(np.float32))


# -- quantization ----------------------------------------------------------------------
def test_bins_are_equal_count_means_as_kenlm_makes_them():
    rng = np.random.default_rng(2)
    values = rng.normal(-3, 1, 1000)
    centers = coding.make_centers(values, 16)
    v = np.sort(values)
    for i in range(16):  # KenLM's MakeBins: bin i holds sorted values [i*n/16, (i+1)*n/16)
        lo, hi = (1000 * i) // 16, (1000 * (i + 1)) // 16
        assert centers[i] == pytest.approx(v[lo:hi].mean(), rel=1e-6)
    codes = coding.encode(values, centers)
    nearest = np.abs(values[:, None] - centers[None, :].astype(np.float64)).argmin(axis=1)
    assert np.all(np.abs(values - centers[codes]) <= np.abs(values - centers[nearest]) + 1e-6)


def test_fewer_values_than_bins_leave_no_infinity_in_the_table():
    """An order of a small model has fewer n-grams than 2^8 bins: the leading bins are
    empty (KenLM's MakeBins makes them -inf), and the table must still load (it did not:
    its -inf was refused as a probability of 0)."""
    values = np.array([-5.0, -4.0, -3.5, -1.0])
    centers = coding.make_centers(values, 256)
    assert np.isfinite(centers).all() and np.all(np.diff(centers) >= 0)
    assert set(np.unique(centers)) == set(np.float32(values))  # each value its own bin
    assert np.array_equal(centers[coding.encode(values, centers)], values.astype(np.float32))


def test_quantized_model_is_smaller_and_close(tmp_path, kn4, lookups):
    model, test = kn4
    save_model(model, tmp_path / "full")
    model.store_quantize = (8, 8)
    try:
        save_model(model, tmp_path / "q")
    finally:
        model.store_quantize = None
    full = (tmp_path / "full" / "ngrams.trie").stat().st_size
    small = (tmp_path / "q" / "ngrams.trie").stat().st_size
    assert small < full
    quantized = load_model(tmp_path / "q")
    assert quantized.store_quantize == (8, 8)
    got, want = quantized.logprobs(test), model.logprobs(test)
    assert np.all(np.isfinite(got))
    assert abs(got.mean() - want.mean()) < 0.02  # perplexity within 2%
    # back-offs of exactly 1 stay exact, so which contexts extend does not change
    for k in range(1, model.order):
        assert np.array_equal(quantized.extends(k), model.extends(k))


# -- old directories, damaged files ------------------------------------------------------
def test_a_model_saved_before_the_trie_still_loads(tmp_path, kn4, monkeypatch):
    model, test = kn4
    monkeypatch.setattr(BackoffNgram, "save_files", LanguageModel.save_files)
    save_model(model, tmp_path / "old")
    assert (tmp_path / "old" / "arrays.npz").exists()
    monkeypatch.undo()
    assert np.array_equal(load_model(tmp_path / "old").logprobs(test), model.logprobs(test))


def section_bounds(path):
    header, start = trie_map.read_trie_header(path)
    return sorted({start + off for off, _, _, _ in header["sections"].values()}
                  | {start + off + size for off, size, _, _ in header["sections"].values()})


def assert_truncations_are_one_line(directory, work) -> None:
    """The model ``directory``'s trie cut at its start and just before every section's
    end (copies in ``work``): each load is one line naming the file."""
    path = directory / "ngrams.trie"
    data = path.read_bytes()
    cuts = [0, 4, 20, 30] + [b - 1 for b in section_bounds(path) if 0 < b <= len(data)]
    for cut in sorted(set(cuts)):
        shutil.copytree(directory, work / f"cut{cut}")
        (work / f"cut{cut}" / "ngrams.trie").write_bytes(data[:cut])
        with pytest.raises(NnlmError) as e:
            load_model(work / f"cut{cut}")
        assert "\n" not in str(e.value) and "ngrams.trie" in str(e.value)


def test_truncation_at_every_section_boundary_is_one_line(tmp_path, kn4, layout):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    assert_truncations_are_one_line(tmp_path / "m", tmp_path)


@pytest.mark.parametrize("damage, message", [
    (lambda b: b[:8] + bytes(reversed(b[8:12])) + b[12:], "other byte order"),
    (lambda b: b"XXXXXXXX" + b[8:], "not an nnlm trie"),
    (lambda b: b[:12] + (99).to_bytes(4, "little") + b[16:], "newer"),
    (lambda b: b[:24] + b"[" + b[25:], "header is damaged"),
])
def test_damaged_headers_are_named(tmp_path, kn4, damage, message):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    path = tmp_path / "m" / "ngrams.trie"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(NnlmError, match=message):
        load_model(tmp_path / "m")


def rewrite_header(path, edit) -> None:
    """Apply ``edit`` to a trie file's JSON header and write it back in its place, padded
    to its old length (so the sections start where they did)."""
    data = path.read_bytes()
    length = int.from_bytes(data[16:24], "little")
    header = json.loads(data[24:24 + length])
    header.pop("header_crc32")
    edit(header)
    text = trie_layout.header_text(header)  # as a writer wrote it: its own CRC matches
    assert len(text) <= length
    path.write_bytes(data[:24] + text + b" " * (length - len(text)) + data[24 + length:])


@pytest.mark.parametrize("edit", [lambda v: v.update(slots=v["slots"] * 2),
                                  lambda v: v.update(crc32="0"), lambda v: v.clear()])
def test_a_damaged_vocabulary_entry_is_named(tmp_path, kn4, edit):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    rewrite_header(tmp_path / "m" / "ngrams.trie", lambda header: edit(header["vocab"]))
    with pytest.raises(NnlmError, match="vocabulary entry is damaged"):
        load_model(tmp_path / "m")


def test_a_trie_from_another_model_is_refused(tmp_path, kn4):
    """Another estimate with the same vocabulary and settings (its id comes from its
    n-grams): its trie in this directory is refused; the same estimate's is the same."""
    model, _ = kn4
    lines = zipf_corpus(seed=3, n_sentences=400, n_words=60, max_words=13)
    other = KneserNey(model.vocab, 4, discount_fallback=True).fit(
        Stream.from_lines(lines, model.vocab))
    save_model(model, tmp_path / "a")
    save_model(other, tmp_path / "b")
    save_model(model, tmp_path / "c")
    assert (tmp_path / "a" / "ngrams.trie").read_bytes() == \
        (tmp_path / "c" / "ngrams.trie").read_bytes()
    shutil.copy(tmp_path / "a" / "ngrams.trie", tmp_path / "b" / "ngrams.trie")
    with pytest.raises(NnlmError, match="another model"):
        load_model(tmp_path / "b")


def test_header_sizes_that_disagree_with_the_sections_are_refused(tmp_path, kn4):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    rewrite_header(tmp_path / "m" / "ngrams.trie",
                   lambda header: header["counts"].__setitem__(2, header["counts"][2] + 1))
    with pytest.raises(NnlmError, match="damaged|wrong shape|truncated"):
        load_model(tmp_path / "m")


def test_scribbled_sections_never_read_outside_the_file(tmp_path, kn4, lookups, layout):
    """Random bytes over the words, pointers and tables: wrong numbers or a one-line
    error, never a crash (pointers are clamped to their order)."""
    model, test = kn4
    save_model(model, tmp_path / "m")
    path = tmp_path / "m" / "ngrams.trie"
    header, start = trie_map.read_trie_header(path)
    data = bytearray(path.read_bytes())
    rng = np.random.default_rng(3)
    for name, (off, size, _, _) in header["sections"].items():
        if name.startswith(("child_", "word_", "slots_", "vocab_slots")):
            data[start + off:start + off + size] = rng.bytes(size)
    path.write_bytes(bytes(data))
    mapped = load_model(tmp_path / "m", verify=False)  # the checks below the checksums
    try:
        mapped.logprobs(test)
        mapped.target_logprobs(test.contexts(4), test.ids)
    except NnlmError as e:
        assert "\n" not in str(e)
    assert all(mapped.vocab.index.get(w, -1) in range(-1, len(model.vocab))
               for w in model.vocab.words)  # a scribbled word table: wrong ids at worst


# -- nnlm ngram convert ------------------------------------------------------------------
def test_convert_between_arpa_and_the_trie(tmp_path, kn4, capsys):
    from nnlm.cli import main

    model, test = kn4
    write_arpa(model, tmp_path / "a.arpa.gz")
    assert main(["ngram", "convert", str(tmp_path / "a.arpa.gz"), str(tmp_path / "m"),
                 "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["ngrams"] == sum(model.num_ngrams())
    assert done["bytes"] == (tmp_path / "m" / "ngrams.trie").stat().st_size
    assert main(["ngram", "convert", str(tmp_path / "m"), str(tmp_path / "b.arpa")]) == 0
    assert "ARPA" in capsys.readouterr().out
    np.testing.assert_allclose(read_arpa(tmp_path / "b.arpa").logprobs(test),
                               model.logprobs(test), atol=3e-6)
    assert main(["ngram", "convert", str(tmp_path / "m"), str(tmp_path / "q"),
                 "--quantize", "8", "8"]) == 0
    assert load_model(tmp_path / "q").store_quantize == (8, 8)


@pytest.mark.parametrize("argv, message", [
    (["{arpa}", "{tmp}/x.arpa", "--quantize", "8", "8"], "--quantize applies"),
    (["{arpa}", "{tmp}/q", "--quantize", "0", "8"], "not in"),
    (["{arpa}", "{tmp}/q", "--quantize", "8", "26"], "not in"),
    (["{addk}", "{tmp}/q"], "no back-off form"),
    (["{arpa}", "{arpa}"], "input"),
])
def test_convert_refuses_with_one_line(tmp_path, kn4, capsys, argv, message):
    from nnlm.cli import main
    from nnlm.ngram import AddK

    model, _ = kn4
    write_arpa(model, tmp_path / "a.arpa")
    lines = [["w1", "w2"], ["w2", "w3", "w1"]]
    vocab = Vocabulary.from_counts({"w1": 1, "w2": 1, "w3": 1})
    save_model(AddK(vocab, 2).fit(Stream.from_lines(lines, vocab)), tmp_path / "addk")
    names = {"arpa": tmp_path / "a.arpa", "addk": tmp_path / "addk", "tmp": tmp_path}
    assert main(["ngram", "convert", *(a.format(**names) for a in argv)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


@pytest.mark.slow
def test_the_mapped_brown_kn5_equals_the_in_memory_one(brown_dir, tmp_path):
    """Per token on Brown's test text, the trie (and its ARPA round trip)
    against the model as estimated, in float64 with the hash index."""
    from nnlm.text.corpus import read_corpus, read_stream

    vocab, train = read_corpus(brown_dir / "train.txt")
    model = KneserNey(vocab, 5).fit(train)
    test = read_stream(brown_dir / "test.txt", vocab)
    want, want_orders = model.logprobs_and_orders(test)
    save_model(model, tmp_path / "m")
    mapped = load_model(tmp_path / "m")
    got, got_orders = mapped.logprobs_and_orders(test)
    np.testing.assert_allclose(got, want, atol=2e-6)
    assert np.array_equal(got_orders, want_orders)
    write_arpa(mapped, tmp_path / "m.arpa")
    np.testing.assert_allclose(read_arpa(tmp_path / "m.arpa").logprobs(test), want, atol=3e-6)


# -- one-file models -----------------------------------------------------------------
def test_a_one_file_model_scores_as_its_directory(tmp_path, kn4):
    import nnlm.kenlm
    from nnlm.models import convert

    model, test = kn4
    save_model(model, tmp_path / "m")
    done = convert(tmp_path / "m", tmp_path / "lm.bin")
    assert done["format"] == "nnlm one-file model"
    one = load_model(tmp_path / "lm.bin")
    assert type(one) is type(model) and one.vocab == model.vocab
    np.testing.assert_allclose(one.logprobs(test), load_model(tmp_path / "m").logprobs(test),
                               atol=0)
    drop_in = nnlm.kenlm.Model(str(tmp_path / "lm.bin"))  # what pyctcdecode opens
    assert drop_in.path == str(tmp_path / "lm.bin").encode()
    assert drop_in._fast is not None or nnlm.kenlm._fast is None
    sentence = " ".join(model.vocab.words[3:10])
    assert drop_in.score(sentence) == pytest.approx(
        nnlm.kenlm.Model(str(tmp_path / "m")).score(sentence), abs=1e-6)


def test_a_one_file_output_replaces_only_a_model_file(tmp_path, kn4, capsys):
    from nnlm.cli import main

    model, _ = kn4
    save_model(model, tmp_path / "m")
    (tmp_path / "notes.bin").write_text("my notes\n")
    (tmp_path / "dir.nnlm").mkdir()
    for target in ("notes.bin", "dir.nnlm"):
        assert main(["ngram", "convert", str(tmp_path / "m"), str(tmp_path / target)]) == 2
        assert "\n" not in capsys.readouterr().err.strip()
    assert (tmp_path / "notes.bin").read_text() == "my notes\n"
    assert main(["ngram", "convert", str(tmp_path / "m"), str(tmp_path / "lm.nnlm")]) == 0
    assert main(["ngram", "convert", str(tmp_path / "m"), str(tmp_path / "lm.nnlm"),
                 "--quantize", "8", "8"]) == 0  # a model file replaces a model file
    assert load_model(tmp_path / "lm.nnlm").store_quantize == (8, 8)


def test_a_damaged_one_file_model_is_one_line(tmp_path, kn4):
    from nnlm.models import convert

    model, _ = kn4
    save_model(model, tmp_path / "m")
    convert(tmp_path / "m", tmp_path / "lm.nnlm")
    data = bytearray((tmp_path / "lm.nnlm").read_bytes())
    header, start = trie_map.read_trie_header(tmp_path / "lm.nnlm")
    off = start + header["sections"]["vocab_words"][0]
    data[off] = ord("X") if data[off] != ord("X") else ord("Y")  # one letter of a word
    (tmp_path / "bad.nnlm").write_bytes(bytes(data))
    with pytest.raises(NnlmError, match="fingerprint|damaged"):
        load_model(tmp_path / "bad.nnlm")
    for cut in section_bounds(tmp_path / "lm.nnlm")[::3]:
        (tmp_path / "cut.nnlm").write_bytes(bytes(data[:cut]))
        with pytest.raises(NnlmError):
            load_model(tmp_path / "cut.nnlm")


# -- the mapped vocabulary ---------------------------------------------------------------
def test_fnv_1a_is_the_published_one():
    """FNV-1a's published 64-bit test vectors (Fowler, Noll and Vo): "" and "a"; the
    table's hash is that times the golden ratio."""
    blob = np.frombuffer(b"a", np.uint8)
    got = vocab_table.hashes(blob, np.array([0, 0, 1], np.int64))
    golden = 0x9E3779B97F4A7C15
    assert got.tolist() == [(0xCBF29CE484222325 * golden) % 2**64,
                            (0xAF63DC4C8601EC8C * golden) % 2**64]


@settings(max_examples=60, deadline=None)
@given(st.sets(st.text(st.characters(blacklist_categories=["Cs", "Zs", "Cc"]), min_size=1,
                       max_size=12), max_size=300),
       st.lists(st.text(max_size=6), max_size=20))
def test_the_word_table_finds_every_word_and_no_other(words, probes):
    """The table written with numpy (vocab_table.slots) read by the C WordIndex and by
    the dict fallback: every word at its id, any other string absent."""
    words = ["<unk>", "<s>", "</s>", *sorted(set(words) - {"<unk>", "<s>", "</s>"})]
    blob, offsets = vocab_table.word_bytes(words)
    table = vocab_table.slots(blob, offsets)
    assert len(table) >= 2 * len(words) and np.sort(table[table >= 0]).tolist() == \
        list(range(len(words)))
    vocab = vocab_table.MappedVocabulary(blob, offsets, table, "x")
    assert list(vocab.words) == words and vocab.words[-1] == words[-1]
    assert [vocab.index[w] for w in words] == list(range(len(words)))
    for p in probes + ["\ud800", 7, None]:  # a lone surrogate, not-a-str
        expected = words.index(p) if p in words else -1
        assert vocab.index.get(p, -1) == expected
        assert (p in vocab.index) == (expected >= 0)


def test_a_directory_maps_its_vocabulary_from_the_trie(tmp_path, kn4, monkeypatch):
    """No vocab.txt is read: the file's words, ids, counts and fingerprint are the
    model's; without the compiled part the index is a dict with the same ids."""
    import sys

    model, test = kn4
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert isinstance(loaded.vocab, vocab_table.MappedVocabulary)
    assert loaded.vocab == model.vocab and model.vocab == loaded.vocab
    assert loaded.vocab.fingerprint == model.vocab.fingerprint
    assert loaded.vocab.counts.tolist() == model.vocab.counts.tolist()
    assert [loaded.vocab.id(w) for w in model.vocab.words + ["never-seen"]] == \
        list(range(len(model.vocab))) + [0]
    np.testing.assert_allclose(loaded.logprobs(test), model.logprobs(test), atol=1e-6)
    monkeypatch.setitem(sys.modules, "nnlm.ngram.store._trie", None)
    fallback = load_model(tmp_path / "m")
    assert isinstance(fallback.vocab.index, dict) and fallback.vocab == model.vocab
    save_model(loaded, tmp_path / "again")  # saving writes vocab.txt from the mapping
    assert Vocabulary.load(tmp_path / "again" / "vocab.txt").counts.tolist() == \
        model.vocab.counts.tolist()


def test_a_damaged_vocabulary_section_is_one_line(tmp_path, kn4):
    model, _ = kn4
    save_model(model, tmp_path / "m")
    path = tmp_path / "m" / "ngrams.trie"
    header, start = trie_map.read_trie_header(path)
    for name in ("vocab_words", "vocab_offsets"):
        data = bytearray(path.read_bytes())
        data[start + header["sections"][name][0] + 1] ^= 0x10
        (tmp_path / "bad").mkdir(exist_ok=True)
        for f in ("config.json", "vocab.txt"):
            shutil.copy(tmp_path / "m" / f, tmp_path / "bad" / f)
        (tmp_path / "bad" / "ngrams.trie").write_bytes(bytes(data))
        with pytest.raises(NnlmError, match="vocabulary section is damaged"):
            load_model(tmp_path / "bad", verify=False)


def test_tables_go_to_minority_orders_below_the_top():
    from nnlm.ngram.store.trie_write import hashed_orders

    assert hashed_orders([14118, 272264, 592067, 700000, 800000], None) == [2, 3]
    assert hashed_orders([351775, 1797850, 3211119], None) == []  # a KN3: none
    assert hashed_orders([100, 200], None) == []  # the top order never
    assert hashed_orders([14118, 272264, 592067, 700000, 800000], (8, 8)) == []

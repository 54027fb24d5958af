"""Count-based models against independent oracles: hand-worked MLE, a loop-based modified
Kneser-Ney, brute-force objectives, KenLM itself where installed, and sums to 1."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import write, zipf_corpus
from kn_reference import modified_kn
from nnlm import NnlmError, Stream, Vocabulary, evaluate, load_model, save_model
from nnlm.ngram import (
    ClassNgram,
    DeletedInterpolation,
    KneserNey,
    exchange_clustering,
    read_arpa,
    write_arpa,
)
from nnlm.ngram.estimate.classes import load_classes, save_classes
from nnlm.ngram.estimate.counts import count_ngrams
from nnlm.ngram.estimate.kneser_ney import DiscountError
from nnlm.text.vocab import BOS, BOS_ID

TRACTOR = ["a tractor drove slow", "the red tractor drove fast", "the parrot flew fast",
           "the parrot flew slow", "the tractor slowed down"]


def stream_and_vocab(lines, extra=()):
    vocab = Vocabulary.from_counts({w: 1 for line in lines for w in line} | {w: 1 for w in extra})
    return Stream.from_lines(lines, vocab), vocab


# -- counting ----------------------------------------------------------------------------
def test_mle_bigrams_of_the_hand_worked_example():
    lines = [s.split() for s in TRACTOR]
    stream, vocab = stream_and_vocab(lines)
    tables = count_ngrams(stream, 2, len(vocab))
    V = len(vocab)
    uni = dict(zip(tables[0].keys.tolist(), tables[0].counts.tolist()))
    words = vocab.words

    def mle(w, h):  # c(h w) / c(h .): bigrams starting with h, over all next words
        t = tables[1]
        first, last = t.keys % V, tables[0].keys[t.suffix]
        c_hw = t.counts[(first == vocab.id(h)) & (last == vocab.id(w))].sum()
        return c_hw / t.counts[first == vocab.id(h)].sum()

    assert uni[vocab.id("the")] == 4 and words[0] == "<unk>"
    assert mle("red", "the") == 1 / 4 and mle("parrot", "the") == 1 / 2
    assert mle("tractor", "the") == 1 / 4
    assert mle("drove", "tractor") == 2 / 3 and mle("slowed", "tractor") == 1 / 3
    assert mle("tractor", "red") == 1 and mle("flew", "parrot") == 1
    # the deleted-interpolation bigram with all weight on p2 is exactly this MLE
    model = DeletedInterpolation(vocab, order=2).fit(stream, stream)
    model.weights[:] = [0.0, 0.0, 1.0]
    ctx = np.array([[vocab.id("the")]] * 3 + [[vocab.id("tractor")]] * 2)
    tgt = np.array([vocab.id(w) for w in ["red", "parrot", "tractor", "drove", "slowed"]])
    assert np.allclose(np.exp(model.target_logprobs(ctx, tgt)), [1 / 4, 1 / 2, 1 / 4, 2 / 3, 1 / 3])


def brute_force_counts(lines, order):
    """Every k-gram of ``<s> w1 .. wL </s>`` per line, counted with a Counter."""
    from collections import Counter

    out = [Counter() for _ in range(order)]
    for line in lines:
        seq = ["<s>", *line, "</s>"]
        for k in range(1, order + 1):
            out[k - 1].update(tuple(seq[i:i + k]) for i in range(len(seq) - k + 1))
    return out


@pytest.mark.parametrize("numba", [True, False])
@pytest.mark.parametrize("chunk,spill", [(1 << 21, False), (7, False), (50, True), (1, True)])
def test_counts_in_chunks_and_spilled_to_disk_equal_a_brute_force_count(tmp_path, chunk, spill,
                                                                         numba, monkeypatch):
    """With numba's radix sort and run merge, and with numpy's paths where numba is not
    installed (the core without the fast extra)."""
    from nnlm.ngram.estimate import counts, radix, run_merge

    if numba and not radix.HAVE_NUMBA:
        pytest.skip("numba is not installed")
    for module in (counts, radix, run_merge):
        monkeypatch.setattr(module, "HAVE_NUMBA", numba)
    lines = zipf_corpus(seed=3, n_sentences=120)
    stream, vocab = stream_and_vocab(lines)
    V = len(vocab)
    tables = count_ngrams(stream, 4, V, chunk=chunk, spill=tmp_path if spill else None)
    want = brute_force_counts(lines, 4)

    def words_of(k, i):  # the k-gram with id i, by walking its suffix chain
        if k == 1:
            return (vocab.words[tables[0].keys[i]],)
        t = tables[k - 1]
        return (vocab.words[t.keys[i] % V],) + words_of(k - 1, t.keys[i] // V)

    for k in range(1, 5):
        got = {words_of(k, i): int(c) for i, c in enumerate(tables[k - 1].counts)}
        assert got == dict(want[k - 1])
        if k > 1:  # each entry's prefix id names its first k-1 words
            t = tables[k - 1]
            assert all(words_of(k - 1, t.prefix[i]) == words_of(k, i)[:-1] for i in range(len(t)))
    assert list(tmp_path.iterdir()) == []  # the spill folder is gone


@pytest.mark.parametrize("fast", [False, True])
def test_unique_inverse_by_either_sort_equals_numpy(fast):
    from nnlm.ngram.estimate.counts import unique_inverse

    keys = np.random.default_rng(0).integers(0, 50, 1000) * 10**12  # wide, many repeats
    want = np.unique(keys, return_inverse=True, return_counts=True)
    got = unique_inverse(keys, fast)
    assert all(np.array_equal(a, b) for a, b in zip(got, want))
    assert np.array_equal(got[0][got[1]], keys)


@pytest.mark.parametrize("high", [1, 2, 1 << 15, 1 << 33, 1 << 47, 1 << 62])
def test_radix_unique_equals_numpy_for_every_number_of_digits(high):
    """One digit to four (keys under 2^63), repeats and a lone key included."""
    from nnlm.ngram.estimate.radix import radix_unique

    rng = np.random.default_rng(high % 1000)
    for keys in (rng.integers(0, high, 5000), rng.integers(0, high, 1), np.zeros(0, np.int64)):
        keys = np.concatenate([keys, keys[: len(keys) // 3]])  # repeats, out of order
        want = np.unique(keys, return_inverse=True, return_counts=True)
        got = radix_unique(keys)
        assert all(np.array_equal(a, b) for a, b in zip(got, want))
    with pytest.raises(ValueError, match="non-negative"):
        radix_unique(np.array([3, -1]))


def test_kneser_ney_under_a_memory_limit_equals_the_unlimited_fit(tmp_path, monkeypatch):
    import nnlm.ngram.estimate.counts as counts_mod

    lines = zipf_corpus(seed=4)
    stream, vocab = stream_and_vocab(lines)
    free = KneserNey(vocab, 4, discount_fallback=True).fit(stream)
    monkeypatch.setattr(counts_mod, "CHUNK_POSITIONS", 64)  # many runs to merge
    limited = KneserNey(vocab, 4, discount_fallback=True).fit(stream, memory=64 << 20,
                                                           temp=tmp_path)
    for a, b in zip(free.levels, limited.levels):
        for name in ("keys", "logp", "log_bow", "prefix", "last"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
    with pytest.raises(NnlmError, match="memory=10M is too small to make progress"):
        KneserNey(vocab, 4).fit(stream, memory=10 << 20, temp=tmp_path)


# -- Kneser-Ney against the loop-based reference -------------------------------------------
@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
def test_modified_kneser_ney_matches_an_independent_loop_implementation(order):
    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines, extra=["never_seen"])
    model = KneserNey(vocab, order, discount_fallback=True).fit(stream)
    prob, discounts = modified_kn(lines, vocab.words, order)
    assert np.allclose(model.discounts, [discounts[k] for k in range(1, order + 1)])
    test_lines = zipf_corpus(seed=1, n_sentences=30) + [["never_seen", "w1"], ["w1"]]
    test = Stream.from_lines(test_lines, vocab)
    contexts = test.contexts(order)
    got = np.exp(model.target_logprobs(contexts, test.ids))
    want = []
    for row, target in zip(contexts.tolist(), test.ids.tolist()):
        words = [vocab.words[i] for i in row]
        while words and words[0] == BOS and len(words) > 1 and words[1] == BOS:
            words = words[1:]  # the reference pads with a single <s>, as KenLM does
        want.append(prob(vocab.words[target], words))
    assert np.allclose(got, want, rtol=1e-10, atol=0)
    for batch_size in (3, 1 << 20):  # running text scored by one chain per token, in runs
        assert np.allclose(np.exp(model.logprobs(test, batch_size)), want, rtol=1e-10, atol=0)
    full = np.exp(model.next_logprobs(contexts[:20]))
    for r in range(20):
        words = [vocab.words[i] for i in contexts[r]]
        while len(words) > 1 and words[0] == BOS and words[1] == BOS:
            words = words[1:]
        assert np.allclose(full[r], [prob(w, words) for w in vocab.words], rtol=1e-10, atol=1e-15)


def test_tiny_data_gives_a_clear_discount_error_unless_fallback():
    stream, vocab = stream_and_vocab([["a", "b"]])
    with pytest.raises(DiscountError, match="discount_fallback=True"):
        KneserNey(vocab, 2).fit(stream)
    model = KneserNey(vocab, 2, discount_fallback=True).fit(stream)
    assert np.allclose(model.discounts, [[0.5, 1, 1.5]] * 2)


# -- every model sums to one -------------------------------------------------------------
def all_models(stream, vocab, valid):
    yield "kn1", KneserNey(vocab, 1, discount_fallback=True).fit(stream)
    yield "kn3", KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    yield "kn5", KneserNey(vocab, 5, discount_fallback=True).fit(stream)
    yield "delint3", DeletedInterpolation(vocab, 3).fit(stream, valid)
    yield "class3", ClassNgram(vocab, 3, n_classes=6).fit(stream)


@pytest.mark.parametrize("name", ["kn1", "kn3", "kn5", "delint3", "class3"])
def test_every_distribution_sums_to_one_seen_and_unseen_contexts(name):
    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines, extra=["never_seen"])
    valid = Stream.from_lines(zipf_corpus(seed=2, n_sentences=50), vocab)
    model = dict(all_models(stream, vocab, valid))[name]
    rng = np.random.default_rng(0)
    seen = stream.contexts(model.order)[rng.integers(0, len(stream), 40)]
    unseen = rng.integers(0, len(vocab), size=(40, model.order - 1))
    for contexts in (seen, unseen):
        dist = model.next_logprobs(contexts)
        assert dist.dtype == np.float64
        assert np.allclose(np.exp(dist).sum(axis=1), 1.0, rtol=0, atol=1e-9)
        assert np.all(dist[:, BOS_ID] == -np.inf)
        targets = rng.integers(0, len(vocab), len(contexts))
        targets[targets == BOS_ID] = 2
        assert np.allclose(model.target_logprobs(contexts, targets),
                           dist[np.arange(len(targets)), targets], atol=1e-12)


# -- deleted interpolation -----------------------------------------------------------------
def test_em_never_lowers_the_held_out_likelihood_and_beats_uniform_weights():
    stream, vocab = stream_and_vocab(zipf_corpus())
    valid = Stream.from_lines(zipf_corpus(seed=2, n_sentences=80), vocab)
    model = DeletedInterpolation(vocab, 3, iterations=1).fit(stream, valid)
    model.weights[:] = 0.25
    uniform_ll = model.logprobs(valid).mean()
    history = model.fit_weights(valid) + model.fit_weights(valid)
    model.iterations = 15
    history += model.fit_weights(valid)
    assert all(b >= a - 1e-12 for a, b in zip(history, history[1:]))
    assert model.logprobs(valid).mean() > uniform_ll
    assert np.allclose(model.weights.sum(axis=1), 1.0)


def test_bucket_formula():
    stream, vocab = stream_and_vocab(zipf_corpus())
    model = DeletedInterpolation(vocab, 3).fit(stream, stream)
    T = len(stream)
    for count in (0, 1, 5, 100):
        assert model.bucket(np.array([count]))[0] == math.ceil(-math.log((1 + count) / T))


# -- classes -----------------------------------------------------------------------------
def class_bigram_objective(stream, word_class):
    """F = sum f(M) - sum f(N_left) - sum f(N_right), by brute force over bigrams."""
    from collections import Counter

    prev = stream.contexts(2)[:, 0]
    pairs = Counter(zip(word_class[prev].tolist(), word_class[stream.ids].tolist()))
    left, right = Counter(), Counter()
    for (c, d), n in pairs.items():
        left[c] += n
        right[d] += n

    def f(x):
        return x * math.log(x)

    return sum(map(f, pairs.values())) - sum(map(f, left.values())) - sum(map(f, right.values()))


def test_exchange_clustering_improves_the_objective_and_groups_the_toy_world():
    from nnlm.text.toyworld import PLACES, toy_world

    lines = [s.split() for s in toy_world()[0]]
    stream, vocab = stream_and_vocab(lines)
    reported = []
    word_class = exchange_clustering(stream, vocab, 8, progress=lambda i, m, f: reported.append(f))
    initial = np.arange(len(vocab))
    initial[3:] = 3 + (np.arange(len(vocab) - 3) % 8)
    assert reported[-1] == pytest.approx(class_bigram_objective(stream, word_class))
    assert reported[-1] > class_bigram_objective(stream, initial)
    assert all(b >= a - 1e-6 for a, b in zip(reported, reported[1:]))
    assert len({word_class[vocab.id(w)] for w in PLACES}) == 1  # rooms end up together
    assert tuple(word_class[:3]) == (0, 1, 2)


def test_clustering_saves_loads_and_refuses_another_vocabulary(tmp_path):
    stream, vocab = stream_and_vocab(zipf_corpus())
    word_class = exchange_clustering(stream, vocab, 5)
    save_classes(word_class, vocab, tmp_path / "classes.tsv")
    assert np.array_equal(load_classes(tmp_path / "classes.tsv", vocab), word_class)
    other = Vocabulary.from_counts({"zebra": 1})
    with pytest.raises(NnlmError, match="another vocabulary"):
        load_classes(tmp_path / "classes.tsv", other)


# -- persistence and ARPA ------------------------------------------------------------------
@pytest.mark.parametrize("name", ["kn3", "delint3", "class3"])
def test_save_load_round_trip(tmp_path, name):
    stream, vocab = stream_and_vocab(zipf_corpus())
    model = dict(all_models(stream, vocab, stream))[name]
    save_model(model, tmp_path / "m")
    loaded = load_model(tmp_path / "m")
    assert type(loaded) is type(model)
    if name in ("kn3", "class3"):  # back-off models are stored in float32 (ngram.store)
        np.testing.assert_allclose(loaded.logprobs(stream), model.logprobs(stream), atol=2e-6)
    else:
        assert np.array_equal(loaded.logprobs(stream), model.logprobs(stream))


@pytest.mark.parametrize("read_bytes", [13, 1 << 24])  # lines and sections cross reads
def test_arpa_round_trip_and_format(tmp_path, monkeypatch, read_bytes):
    from nnlm.ngram.formats import arpa_read

    monkeypatch.setattr(arpa_read, "READ_BYTES", read_bytes)
    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines)
    model = KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    path = write_arpa(model, tmp_path / "m.arpa")
    text = path.read_text()
    assert text.startswith("\\data\\\nngram 1=") and text.rstrip().endswith("\\end\\")
    assert f"-99\t{BOS}\t" in text
    back = read_arpa(path)
    remap = np.array([back.vocab.index[w] for w in vocab.words])
    test = Stream(remap[stream.ids].astype(np.int32), stream.offsets)
    assert np.allclose(back.logprobs(test), model.logprobs(stream), atol=1e-6)
    assert load_model(path).order == 3  # an ARPA path loads like a model directory


@pytest.mark.parametrize("damage,message", [
    (lambda t: t.replace("\\end\\", ""), "no \\\\end\\\\ line"),
    (lambda t: t.replace("ngram 2=", "ngram 2=1"), "declares"),
    (lambda t: "hello\n", "not an ARPA file"),
])
def test_damaged_arpa_files(tmp_path, damage, message):
    stream, vocab = stream_and_vocab(zipf_corpus())
    write_arpa(KneserNey(vocab, 2, discount_fallback=True).fit(stream), tmp_path / "m.arpa")
    write(tmp_path / "bad.arpa", damage((tmp_path / "m.arpa").read_text()))
    with pytest.raises(NnlmError, match=message):
        read_arpa(tmp_path / "bad.arpa")


@pytest.mark.parametrize("read_bytes", [1, 7, 40, 1 << 24])  # sections cross reads
def test_bad_arpa_ngrams_are_refused_with_their_line(tmp_path, monkeypatch, read_bytes):
    from nnlm.ngram.formats import arpa_read

    monkeypatch.setattr(arpa_read, "READ_BYTES", read_bytes)
    head = ("\\data\\\nngram 1=4\nngram 2=2\n\n\\1-grams:\n"
            "-1\t<unk>\n-99\t<s>\t0\n-0.5\t</s>\n-0.3\ta\t0\n\n\\2-grams:\n-0.2\ta </s>\n\n")
    write(tmp_path / "bad.arpa", head + "-0.2\tb a\n\\end\\\n")  # line 14; a blank line before
    with pytest.raises(NnlmError, match=r"bad\.arpa:14: word not among the unigrams"):
        read_arpa(tmp_path / "bad.arpa")
    trigram = head.replace("ngram 2=2", "ngram 2=1\nngram 3=1").replace("\n\n\\2", "\n\\2")
    write(tmp_path / "bad.arpa", trigram + "\\3-grams:\n-0.1\ta a </s>\n\\end\\\n")  # no "a a"
    # a pruned file (no 'a a' for the trigram): the context is added as KenLM adds it, and
    # then this made-up file is refused for its probabilities when strict
    with pytest.raises(NnlmError, match=r"bad\.arpa: the 2-grams after 'a' have "
                       "probabilities summing to"):
        read_arpa(tmp_path / "bad.arpa", strict=True)


def kenlm_scores(path, lines):
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    model = kenlm.Model(str(path))
    return np.array([s[0] for line in lines for s in model.full_scores(" ".join(line))])


def test_kenlm_reads_our_arpa_and_agrees_per_token(tmp_path):
    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines)
    model = KneserNey(vocab, 4, discount_fallback=True).fit(stream)
    test_lines = zipf_corpus(seed=3, n_sentences=40)
    theirs = kenlm_scores(write_arpa(model, tmp_path / "m.arpa"), test_lines)
    ours = model.logprobs(Stream.from_lines(test_lines, vocab)) / math.log(10)
    assert np.allclose(ours, theirs, atol=1e-4)


@pytest.mark.slow
def test_kn5_on_brown_matches_kenlm_and_the_reference_perplexity(brown_dir, tmp_path):
    from nnlm import count_words, read_stream

    vocab = Vocabulary.from_counts(count_words(brown_dir / "train.txt"))
    model = KneserNey(vocab, 5).fit(read_stream(brown_dir / "train.txt", vocab))
    test = read_stream(brown_dir / "test.txt", vocab)
    result = evaluate(model, test)
    assert result.tokens == 164_060
    assert abs(result.perplexity / 188.7 - 1) < 0.01  # KenLM lmplz's figure on these files
    lines = [line.split() for line in (brown_dir / "test.txt").read_text().splitlines()]
    theirs = kenlm_scores(write_arpa(model, tmp_path / "kn5.arpa"), lines)
    assert np.abs(model.logprobs(test) / math.log(10) - theirs).max() < 1e-4


def test_unknown_sentence_boundaries_in_scored_text():
    from nnlm.scoring import score_sentences

    stream, vocab = stream_and_vocab(zipf_corpus())
    model = KneserNey(vocab, 2, discount_fallback=True).fit(stream)
    with pytest.raises(NnlmError, match=r"<input>:2: </s> may not occur"):
        list(score_sentences(model, ["w1 w2", "w1 </s>"]))
    scores = list(score_sentences(model, ["w1 w2", "", "zzz"]))
    assert [len(s.log10_probs) for s in scores] == [3, 0, 2]  # a blank line: no sentence
    assert scores[2].oov.tolist() == [True, False]
    assert scores[0].log10_prob == pytest.approx(model.sentence_logprob("w1 w2") / math.log(10))
    assert scores[1].blank and not scores[0].blank


@settings(max_examples=300, deadline=None)
@given(x=st.floats(min_value=-1e300, max_value=1e300, allow_nan=False),
       form=st.sampled_from(["{:.7g}", "{!r}", "{:e}", "{:+.3f}", "{:.20f}", "{:E}"]))
def test_the_arpa_number_reader_agrees_with_python_float(x, form):
    """Both scanners' rule (18 significant digits exactly, one power of ten) against
    Python's correctly rounded float; the compiled one against the Python one exactly."""
    from nnlm.ngram.formats.arpa_scan import _number

    text = form.format(x).encode()
    value = _number(text)
    assert value == pytest.approx(float(text), rel=1e-15, abs=1e-300)  # subnormals: abs
    if _scan_c() is not None:
        assert _scan_one(text + b" w") == (value, "read")


@pytest.mark.parametrize("text", [b"", b"-", b".", b"e5", b"1e", b"1e+", b"nan", b"inf",
                                  b"-inf", b"abc", b"1.5x", b"--1", b"1_0"])
def test_the_arpa_number_reader_refuses_what_is_no_decimal(text):
    from nnlm.ngram.formats.arpa_scan import _number

    assert _number(text) is None
    if _scan_c() is not None and text:
        assert _scan_one(text + b" w")[1] == "bad"


def _scan_c():
    from nnlm.ngram.formats import arpa_scan

    return arpa_scan._C


def _scan_one(line: bytes):
    """The compiled scanner's reading of one unigram line: (log10 p, how it ended)."""
    from nnlm.ngram.formats import arpa_scan

    buf = np.frombuffer(line + b"\n", np.uint8)
    logp, bow, lines = np.zeros(1), np.zeros(1), np.zeros(1, np.int64)
    ids = np.zeros((1, 2), np.int64)
    *_, m, status = arpa_scan._C.scan(buf, 0, len(buf), 1, 1, 0, logp, bow, ids, lines,
                                      np.zeros(1, np.uint8), np.zeros(1, np.int64),
                                      np.zeros(1, np.int64), np.full(16, -1, np.int64), 4,
                                      np.zeros(1, np.int64))
    return (float(logp[0]), "read") if m == 1 and status == 0 else (None, "bad")


_WORDS = [b"a", b"b", b"cc", b"<s>", "\u00e9".encode()]
_NUMBER = st.one_of(st.floats(-50, 0).map(lambda x: f"{x:.7g}".encode()),
                    st.sampled_from([b"-1.5", b"0", b"-2e-3", b"nan", b"-", b"1e", b"x"]))
_BLANK = st.sampled_from([b" ", b"\t", b"  ", b" \r", b"\x0b", b"\x0c"])


@st.composite
def _arpa_line(draw, k):
    """Mostly well formed: a number, k words (one may be unknown), a back-off or not;
    sometimes a word too few or too many, a blank line or a header."""
    kind = draw(st.sampled_from(["line"] * 6 + ["blank", "header"]))
    if kind == "blank":
        return draw(_BLANK) if draw(st.booleans()) else b""
    if kind == "header":
        return b"\\3-grams:"
    n = k + draw(st.sampled_from([0] * 6 + [-1, 1]))
    fields = [draw(_NUMBER), *draw(st.lists(st.sampled_from(_WORDS + [b"zz"]), min_size=n,
                                            max_size=n))]
    if draw(st.booleans()):
        fields.append(draw(_NUMBER))
    line = b"".join(f + draw(_BLANK) for f in fields)
    return (draw(_BLANK) if draw(st.booleans()) else b"") + line.rstrip(b" ")


@settings(max_examples=300, deadline=None)
@given(data=st.data(), k=st.integers(1, 3), newline=st.booleans())
def test_the_compiled_arpa_scanner_reads_as_the_python_one(data, k, newline):
    """Sections of lines, well formed or not (missing and extra fields, unknown words, bad
    numbers, blanks of every kind, blank lines, a header, no final newline): the compiled
    scanner and the Python one stop at the same place for the same reason with the same
    arrays."""
    from nnlm.ngram.formats import arpa_scan

    if arpa_scan._C is None:
        pytest.skip("the compiled scanner was not built")
    lines = data.draw(st.lists(_arpa_line(k), max_size=8))
    text = b"".join(line + b"\n" for line in lines)
    if text and not newline:
        text = text[:-1]  # the last line without its newline
    buf = np.frombuffer(text, np.uint8)
    flat = np.frombuffer(b"".join(_WORDS), np.uint8)
    lengths = np.array([len(w) for w in _WORDS], np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    remap = np.arange(10, 10 + len(_WORDS), dtype=np.int64)
    got = []
    for c in (arpa_scan._C, None):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(arpa_scan, "_C", c)
            slots, repeat = arpa_scan.word_table(flat, starts, lengths, 4)
            assert repeat == -1
            arrays = (np.zeros(4), np.zeros(4), np.zeros((4, 2 if k == 1 else k), np.int64),
                      np.zeros(4, np.int64))
            stop = arpa_scan.scan(buf, 0, len(buf), k, 7, 0, *arrays, flat, starts,
                                  lengths, slots, 4, remap)
            got.append((tuple(stop), [a[:stop[2]].tolist() for a in arrays]))
    assert got[0] == got[1]


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=40),
       queries=st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=40),
       compiled=st.booleans())
def test_the_row_table_finds_what_a_dict_finds(rows, queries, compiled):
    from nnlm.ngram.formats import arpa_scan

    if compiled and arpa_scan._C is None:
        pytest.skip("the compiled scanner was not built")
    first = {}
    for i, r in enumerate(rows):
        first.setdefault(r, i)
    table_rows = np.array(rows, np.int64).reshape(-1, 2)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arpa_scan, "_C", arpa_scan._C if compiled else None)
        slots = arpa_scan.rows_table(table_rows, 4 + 2)  # 64 slots: collisions, never full
        got = arpa_scan.find_rows(slots, 6, table_rows,
                                  np.array(queries, np.int64).reshape(-1, 2))
    assert got.tolist() == [first.get(q, -1) for q in queries]


def test_an_arpa_file_with_empty_higher_sections_scores_by_its_unigrams(tmp_path):
    text = ("\\data\\\nngram 1=4\nngram 2=0\nngram 3=0\n\n\\1-grams:\n-1\t<unk>\t0\n"
            "-99\t<s>\t0\n-0.5\t</s>\t0\n-0.3\ta\t0\n\n\\2-grams:\n\n\\3-grams:\n\n\\end\\\n")
    with pytest.warns(UserWarning, match="less than 1"):
        model = read_arpa(write(tmp_path / "m.arpa", text))
    assert model.order == 3 and model.num_ngrams() == [4, 0, 0]
    assert model.perplexity("a a") == pytest.approx(10 ** ((0.3 + 0.3 + 0.5) / 3))


def test_arpa_files_in_the_forms_other_tools_write_read_alike(tmp_path):
    """Blanks of any kind and number between fields, CRLF ends, a byte-order mark, no
    final newline, blank lines inside a section, omitted zero back-off weights and
    numbers in exponent form: the same model as the file nnlm writes."""
    stream, vocab = stream_and_vocab(zipf_corpus())
    model = KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    plain = write_arpa(model, tmp_path / "m.arpa").read_text().split("\n")
    out = []
    for i, line in enumerate(plain):
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0] != "":
            fields[0] = f"{float(fields[0]):e}"
            if len(fields) == 3 and float(fields[2]) == 0 and i % 2:
                fields.pop()  # a zero back-off weight may be left out
            line = (" \t " if i % 3 else "  ").join(fields) + (" " if i % 5 == 0 else "")
        out.append(line)
        if i % 17 == 0 and "\\" not in line and len(fields) >= 2:
            out.append("")  # a blank line inside a section
    text = "\ufeff" + "\r\n".join(out).rstrip()
    other = read_arpa(write(tmp_path / "other.arpa", text))
    back = read_arpa(tmp_path / "m.arpa")
    assert other.vocab.words == back.vocab.words
    test = Stream.from_lines(zipf_corpus(seed=4, n_sentences=50), back.vocab)
    assert np.allclose(other.logprobs(test), back.logprobs(test), rtol=0, atol=1e-12)


def test_a_large_arpa_section_with_misaligned_lines_is_refused_not_misread(tmp_path):
    words = [f"w{i}" for i in range(60)]
    unigrams = ["-1\t<unk>", "-99\t<s>\t0", "-1\t</s>"] + [f"-1\t{w}\t0" for w in words]
    bigrams = [f"-1\t{a} {b}" for a in words for b in words]  # 3,600 lines, 3 fields each
    bigrams[1] += "\t-0.5"  # 4 fields here ...
    bigrams[2] = "-1\tw0"  # ... 2 fields here: the totals still add up to 3 per line
    text = (f"\\data\\\nngram 1={len(unigrams)}\nngram 2={len(bigrams)}\n\n\\1-grams:\n"
            + "\n".join(unigrams) + "\n\n\\2-grams:\n" + "\n".join(bigrams) + "\n\n\\end\\\n")
    write(tmp_path / "big.arpa", text)
    bad_line = text.splitlines().index("-1\tw0") + 1
    with pytest.raises(NnlmError, match=rf"big\.arpa:{bad_line}: expected 'log10p"):
        read_arpa(tmp_path / "big.arpa")


def test_an_arpa_file_without_unk_scores_oov_words_as_kenlm_does(tmp_path):
    """KenLM substitutes log10 p(<unk>) = -100 for a file that lists no <unk>, and says so;
    nnlm must give its per-token numbers (a decoder compares them) and warn."""
    from nnlm.base.errors import NnlmWarning

    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines)
    model = KneserNey(vocab, 3, discount_fallback=True).fit(stream)
    text = write_arpa(model, tmp_path / "m.arpa").read_text().split("\n")
    unk = next(i for i, x in enumerate(text) if x.split("\t")[1:2] == ["<unk>"])
    del text[unk]
    text[1] = f"ngram 1={int(text[1].split('=')[1]) - 1}"
    path = write(tmp_path / "nounk.arpa", "\n".join(text))
    with pytest.warns(NnlmWarning, match="no <unk>.*-100"):
        ours_model = read_arpa(path)
    test_lines = [["w1", "zebra", "w2"], ["qqq"], ["w3", "w1", "xyz", "w2", "w5"]]
    ours = ours_model.logprobs(Stream.from_lines(test_lines, ours_model.vocab)) / math.log(10)
    theirs = kenlm_scores(path, test_lines)
    assert np.abs(ours - theirs).max() < 1e-5
    assert ours.min() < -100  # the OOV words really got KenLM's -100 (plus a back-off)


def test_a_pruned_arpa_file_loads_and_scores_as_kenlm_does(tmp_path):
    """Pruned files (SRILM -prune) lack n-grams that higher orders use as suffix. KenLM
    adds them with the probability of backing off and weight 1; nnlm must give its
    per-token numbers to 1e-5, and warn. (KenLM refuses a missing context;
    nnlm adds those the same way.)"""
    from nnlm.base.errors import NnlmWarning

    lines = zipf_corpus()
    stream, vocab = stream_and_vocab(lines)
    model = KneserNey(vocab, 4, discount_fallback=True).fit(stream)
    text = write_arpa(model, tmp_path / "m.arpa").read_text().split("\n")
    grams = {k: [i for i, x in enumerate(text) if x.count("\t") >= 1 and
                 len(x.split("\t")[1].split(" ")) == k] for k in (2, 3, 4)}
    def words(i):
        return tuple(text[i].split("\t")[1].split(" "))
    contexts = {k: {words(i)[:-1] for i in grams[k + 1]} for k in (2, 3)}
    suffixes = {k: {words(i)[1:] for i in grams[k + 1]} for k in (2, 3)}
    drop = set()
    for k in (2, 3):  # suffixes of higher orders that are no context (KenLM refuses those)
        drop |= set([i for i in grams[k] if words(i) in suffixes[k] - contexts[k]][::3])
    kept = [x for i, x in enumerate(text) if i not in drop]
    for k in (2, 3):
        n = next(j for j, x in enumerate(kept) if x.startswith(f"ngram {k}="))
        kept[n] = f"ngram {k}={len(grams[k]) - len([i for i in drop if i in grams[k]])}"
    path = write(tmp_path / "pruned.arpa", "\n".join(kept))
    assert len(drop) > 10
    with pytest.warns(NnlmWarning, match="pruned file"):
        ours_model = read_arpa(path)
    test_lines = zipf_corpus(seed=5, n_sentences=60)
    ours = ours_model.logprobs(Stream.from_lines(test_lines, ours_model.vocab)) / math.log(10)
    theirs = kenlm_scores(path, test_lines)
    assert np.abs(ours - theirs).max() < 1e-5


@pytest.mark.parametrize("threads", [1, 2, 3, 5])
@pytest.mark.parametrize("seed", range(4))
def test_merging_sorted_runs_equals_unique_over_their_concatenation(seed, threads,
                                                                     monkeypatch):
    """The k-way merge of counting's runs against np.unique of all run entries: the same
    distinct keys, counts summed over runs, and each entry's id naming its key. Runs may
    be empty or hold a single key; keys repeat across runs, never within one. On several
    threads the key space is cut into ranges (here from the first entry on, so that
    small runs are cut too, and keys equal to a cut sit in several runs)."""
    from nnlm.ngram.estimate import run_merge
    from nnlm.ngram.estimate.run_merge import merge_runs

    monkeypatch.setattr(run_merge, "PARALLEL_ENTRIES", 0)

    rng = np.random.default_rng(seed)
    keys = [np.unique(rng.integers(0, 2**40 if seed % 2 else 50, rng.integers(0, 40)))
            for _ in range(int(rng.integers(2, 12)))]
    seen = [rng.integers(1, 1000, len(k)).astype(np.int32) for k in keys]
    starts = np.concatenate([[0], np.cumsum([len(k) for k in keys])])
    uniq, counts, ids = merge_runs(np.concatenate(keys), np.concatenate(seen), starts,
                                   threads)
    want, inverse = np.unique(np.concatenate(keys), return_inverse=True)
    np.testing.assert_array_equal(uniq, want)
    np.testing.assert_array_equal(counts, np.bincount(inverse, np.concatenate(seen),
                                                      minlength=len(want)))
    assert counts.dtype == np.int32 and ids.dtype == np.int32
    np.testing.assert_array_equal(uniq[ids], np.concatenate(keys))


def test_the_sentence_sequence_reads_any_block_of_the_stream_with_its_starts():
    """Each block [a, b) of ``<s> w1 ... </s>`` per line, empty lines included, equals the
    same block of the whole sequence built at once."""
    from nnlm.ngram.estimate.counts import SentenceSequence

    stream, _ = stream_and_vocab(["a b c", "", "b", "c a a b", ""])
    whole = np.insert(stream.ids, stream.offsets[:-1], np.int32(BOS_ID))
    seq = SentenceSequence(stream)
    assert len(seq) == len(whole)
    for a in range(len(whole) + 1):
        for b in range(a, len(whole) + 1):
            got = seq.read(a, b)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, whole[a:b], err_msg=f"{a}:{b}")


def test_shards_train_the_model_their_concatenation_trains(tmp_path):
    """ngram train A B.gz: the shards are one corpus, read in order (compressed or not);
    the model equals the one trained on the concatenated file."""
    import gzip

    from nnlm.cli import main

    lines = [" ".join(s) + "\n" for s in zipf_corpus(seed=3, n_sentences=400)]
    write(tmp_path / "all.txt", "".join(lines))
    write(tmp_path / "a.txt", "".join(lines[:150]))
    with gzip.open(tmp_path / "b.txt.gz", "wt") as f:
        f.write("".join(lines[150:]))
    for method in ("kn", "stupid"):
        one, two = tmp_path / f"one-{method}", tmp_path / f"two-{method}"
        base = ["ngram", "train", "--method", method, "--order", "3"]
        extra = ["--discount-fallback"] if method == "kn" else []
        assert main([*base, str(tmp_path / "all.txt"), *extra, "-o", str(one)]) == 0
        assert main([*base, str(tmp_path / "a.txt"), str(tmp_path / "b.txt.gz"), *extra,
                     "-o", str(two)]) == 0
        m1, m2 = load_model(one), load_model(two)
        assert m1.vocab.words == m2.vocab.words
        stream = Stream.from_lines(zipf_corpus(seed=4, n_sentences=30), m1.vocab)
        assert np.array_equal(m1.logprobs(stream), m2.logprobs(stream))

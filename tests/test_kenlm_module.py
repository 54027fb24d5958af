"""``nnlm.kenlm`` is the kenlm module's API, checked against the kenlm module.

The oracle is kenlm itself where it is installed (scores, n-gram lengths, oov flags, and
which states are equal), and kenlm's own python/example.py, which must run unchanged but
for its import.
"""

from __future__ import annotations

import copy
import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import nnlm
import nnlm.kenlm as nk
from conftest import toy_kn
from nnlm.cli import main

FIXTURES = Path(__file__).parent / "fixtures" / "kenlm"
EXAMPLE = Path(__file__).parent / "fixtures" / "kenlm" / "example.py"  # kenlm's python/


@pytest.fixture(scope="module")
def toy_arpa(tmp_path_factory):
    """A toy-world KN 4-gram as ARPA: contexts of every length, some that cannot extend."""
    arpa, lines = toy_kn(tmp_path_factory.mktemp("toy"), 4)
    return arpa, lines[:60]


def _quiet_model(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return nk.Model(str(path))


def _walk(model, state_cls, sentence, bos):
    """Every (score, length, oov) and state of a word-by-word walk through ``sentence``."""
    state = state_cls()
    (model.BeginSentenceWrite if bos else model.NullContextWrite)(state)
    out, states = [], [state]
    for word in [*(w.decode() for w in sentence.encode().split()), "</s>"]:  # kenlm's split
        nxt = state_cls()
        r = model.BaseFullScore(state, word, nxt)
        out.append((round(r.log_prob, 4), r.ngram_length, r.oov))
        states.append(nxt)
        state = nxt
    return out, states


def _same_partition(ours, theirs):
    """Equal states in one list exactly where they are equal in the other."""
    n = len(ours)
    assert len(theirs) == n
    for i in range(n):
        for j in range(i + 1, n):
            assert (ours[i] == ours[j]) == (theirs[i] == theirs[j]), (i, j)
            assert (hash(ours[i]) == hash(ours[j])) or ours[i] != ours[j]


@pytest.fixture(params=["compiled", "python"])
def query_path(request, monkeypatch):
    """Both per-call paths of nnlm.kenlm: the compiled queries, and the Python one that
    networks use (and back-off models where no C compiler built the extension)."""
    if request.param == "python":
        monkeypatch.setattr(nk, "_model_query", lambda lm, serial: None)
        monkeypatch.setattr(nk, "_open_file", lambda text, serial: None)
    elif nk._fast is None:
        pytest.skip("the compiled queries were not built (no C compiler at install)")
    return request.param


# sentences kenlm splits on ASCII whitespace only: a no-break space, a line separator and
# an ideographic space are parts of words (so those words are unknown), \x0b and \x0c split
ODD_SPACES = ["looking\u00a0on a little\u2028more", "a\u3000little more", "on\x0ba\x0clittle",
              "\tmore  loin\r\n"]
FIXTURE_LINES = ["looking on a little the biarritz not_found more .",
                 "also would consider higher looking", "bugs bunny", "a sentence .",
                 *ODD_SPACES]
# KenLM's own binaries of tests/fixtures/kenlm/test.arpa, one per layout build_binary writes
# (probing is its default); kenlm reads the same file
KENLM_BINARIES = {"kenlm-probing": "test.probing.bin", "kenlm-trie": "test.trie.bin",
                  "kenlm-q8": "test.q8.bin", "kenlm-array": "test.array.bin",
                  "kenlm-qa": "test.qa.bin", "kenlm-nounk-trie": "test_nounk.trie.bin"}


@pytest.mark.parametrize("form", ["arpa", "mapped", "mapped-linear", "mapped-loaded",
                                  "one-file-q8", *KENLM_BINARIES])
def test_states_and_scores_equal_kenlms_word_by_word(toy_arpa, query_path, form, tmp_path,
                                                     monkeypatch):
    """One table, load path by load path: the same calls give kenlm's numbers, n-gram
    lengths, oov flags and equal States. ``form``: the ARPA file read into memory (hash
    indexes), or converted to nnlm's mapped trie and queried where it lies: a model
    directory opened from its trie file alone (``mapped``; ``mapped-linear``: every
    order's run pointers in the linear layout, which the writer keeps for large orders),
    the same directory loaded as a model first and handed over (``mapped-loaded``), a
    one-file model quantized 8/8 (``one-file-q8``, to 5e-2: the quantization's error);
    kenlm reads the ARPA file either way. ``kenlm-*``: a binary KenLM's build_binary
    wrote, which both read."""
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    from nnlm.models import convert
    from nnlm.ngram.store import run_pointers

    if form == "mapped-linear":
        monkeypatch.setattr(run_pointers, "choose_layout", lambda values: "linear")

    path, sentences = toy_arpa
    cases = [(path, sentences + ODD_SPACES)] + [(p, FIXTURE_LINES)
                                                for p in sorted(FIXTURES.glob("*.arpa"))]
    if form in KENLM_BINARIES:
        cases = [(FIXTURES / KENLM_BINARIES[form], FIXTURE_LINES)]
    for file, lines in cases:
        mine = file
        if form != "arpa" and form not in KENLM_BINARIES:
            mine = tmp_path / (file.stem + (".nnlm" if form == "one-file-q8" else ""))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                convert(file, mine, quantize=(8, 8) if form == "one-file-q8" else None)
        if form == "mapped-loaded":
            from nnlm.models import load_model

            ours = nk.Model(load_model(mine))
        else:
            ours = _quiet_model(mine)
        theirs = kenlm.Model(str(file))
        assert (ours._fast is not None) == (query_path == "compiled")
        # a trie file, nnlm's or KenLM's, or KenLM's probing file, is read where it lies,
        # the model never loaded (what keeps a decoder's process as small as kenlm's:
        # test_a_trie_file_opens_without_numpy and, in test_kenlm_binary.py,
        # test_a_kenlm_binary_opens_where_it_lies_without_numpy). An ARPA file is read into
        # KenLM's probing layout, unless it is odd (KenLM's fixtures are pruned and sum
        # above 1): then loaded whole, with the reader's warnings
        streamed = form == "arpa" and file == path
        assert (ours._model is None) == ((form in ("mapped", "mapped-linear", "one-file-q8")
                                          or form in KENLM_BINARIES or streamed)
                                         and query_path == "compiled")
        tol = 5e-2 if form == "one-file-q8" else 2e-4
        our_states, their_states = [], []
        for line in lines:  # whole sentences too, every bos/eos
            for bos in (True, False):
                for eos in (True, False):
                    a = list(ours.full_scores(line, bos=bos, eos=eos))
                    b = list(theirs.full_scores(line, bos=bos, eos=eos))
                    assert [x[1:] for x in a] == [x[1:] for x in b], (file, line)
                    assert [x[0] for x in a] == pytest.approx([x[0] for x in b], abs=tol)
                    assert ours.score(line, bos=bos, eos=eos) == pytest.approx(
                        theirs.score(line, bos=bos, eos=eos), abs=1e-3 if tol < 1e-2 else 0.5)
        for line in lines:
            for bos in (True, False):
                a, sa = _walk(ours, nk.State, line, bos)
                b, sb = _walk(theirs, kenlm.State, line, bos)
                assert [x[1:] for x in a] == [x[1:] for x in b], (file, line)
                assert [x[0] for x in a] == pytest.approx([x[0] for x in b], abs=tol)
                our_states += sa
                their_states += sb
        _same_partition(our_states, their_states)
        assert len(set(our_states)) == len(set(their_states)), file


PROBE = """
import sys, json
import nnlm.kenlm as kenlm
m = kenlm.Model(sys.argv[1])
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()
out = [list(m.full_scores(x)) for x in lines] + [m.score(x) for x in lines]
print(json.dumps({"numpy": "numpy" in sys.modules, "torch": "torch" in sys.modules,
                  "read": m._model is not None, "out": out}))
"""


@pytest.mark.skipif(nk._fast is None, reason="the compiled queries were not built")
@pytest.mark.parametrize("form", ["directory", "one-file", "one-file-q8"])
def test_a_trie_file_opens_without_numpy(toy_arpa, tmp_path, form):
    """A decoder's process that opens a trie file through nnlm.kenlm imports neither numpy
    nor torch and never loads the model (what keeps it as small as kenlm's own process:
    bench/ngram/store.py), and its numbers are those of the model loaded whole."""
    from nnlm.models import convert, load_model

    path, sentences = toy_arpa
    target = tmp_path / ("kn4" if form == "directory" else "kn4.nnlm")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(path, target, quantize=(8, 8) if form == "one-file-q8" else None)
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(sentences + ["unknownword the", "a b c d e f g"]) + "\n")
    run = subprocess.run([sys.executable, "-c", PROBE, str(target), str(text)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    got = json.loads(run.stdout)
    assert not got["numpy"] and not got["torch"] and not got["read"]
    whole = nk.Model(load_model(target))
    lines = text.read_text().splitlines()
    want = [[list(x) for x in whole.full_scores(x)] for x in lines] + \
        [whole.score(x) for x in lines]
    assert got["out"] == want


@pytest.mark.skipif(nk._fast is None, reason="the compiled queries were not built")
@pytest.mark.parametrize("damage,message", [
    ("unigram_logp", "NaN"),            # a number the model would refuse
    ("vocab_words", "vocabulary section is damaged"),  # the words' checksum
])
def test_a_damaged_trie_file_is_refused_as_the_model_refuses_it(toy_arpa, tmp_path, damage,
                                                                  message):
    """The numpy-free opening refuses what load_model refuses, with load_model's words."""
    import struct

    from nnlm.models import convert
    from nnlm.ngram.store.trie_layout import check_trie

    target = tmp_path / "kn4.nnlm"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(toy_arpa[0], target)
    header, start, _, _ = check_trie(target, None, json.loads(
        target.read_bytes()[24:24 + int.from_bytes(target.read_bytes()[16:24], "little")]
    )["vocab_size"])
    data = bytearray(target.read_bytes())
    at = start + header["sections"][damage][0] + 3 * 4  # a word's entry, past the specials
    data[at:at + 4] = struct.pack("<f", float("nan")) if damage == "unigram_logp" else b"zzzz"
    target.write_bytes(bytes(data))
    with pytest.raises(OSError, match=message):
        nk.Model(str(target))


def test_minimized_states_recombine_more_than_last_words(toy_arpa):
    """Without minimization every distinct last-3-words would be its own state."""
    path, sentences = toy_arpa
    model = _quiet_model(path)
    states, last_words = set(), set()
    for line in sentences:
        _, sts = _walk(model, nk.State, line, True)
        states.update(sts)
        words = ["<s>"] * 3 + line.split() + ["</s>"]
        last_words.update(tuple(words[i - 3:i]) for i in range(3, len(words) + 1))
    assert len(states) < len(last_words)


def test_kenlms_example_runs_with_the_import_changed(tmp_path):
    script = EXAMPLE.read_text().replace("import kenlm\n", "import nnlm.kenlm as kenlm\n")
    script = script.replace("LM = os.path.join(os.path.dirname(__file__), '..', 'lm', "
                            "'test.arpa')", f"LM = {str(FIXTURES / 'test.arpa')!r}")
    (tmp_path / "ours.py").write_text(script)
    ours = subprocess.run([sys.executable, "-W", "ignore", str(tmp_path / "ours.py")],
                          capture_output=True, text=True)
    assert ours.returncode == 0, ours.stderr
    assert "5-gram model" in ours.stdout and '"modeling" is an OOV' in ours.stdout
    try:
        import kenlm  # noqa: F401
    except ImportError:
        return
    (tmp_path / "theirs.py").write_text(script.replace("import nnlm.kenlm as kenlm\n",
                                                       "import kenlm\n"))
    theirs = subprocess.run([sys.executable, str(tmp_path / "theirs.py")],
                            capture_output=True, text=True)
    assert ours.stdout == theirs.stdout


def test_the_api_conventions_are_kenlms(query_path):
    model = _quiet_model(FIXTURES / "test.arpa")
    assert isinstance(model.path, bytes) and model.path.endswith(b"test.arpa")
    assert model.order == 5 and issubclass(nk.LanguageModel, nk.Model)
    assert "<unk>" not in model and "looking" in model and b"looking" in model
    assert "not_a_word" not in model
    # a fresh State is the null context; BeginSentenceWrite is <s>
    fresh, bos, out = nk.State(), nk.State(), nk.State()
    model.BeginSentenceWrite(bos)
    assert fresh != bos and fresh < bos and sorted([bos, fresh]) == [fresh, bos]
    # from the null context a word gets its unigram probability, after <s> its bigram
    assert model.BaseScore(fresh, "looking", out) == pytest.approx(-1.285941, abs=1e-6)
    assert model.BaseScore(bos, "looking", out) == pytest.approx(-0.4846522, abs=1e-6)
    null = nk.State()
    model.NullContextWrite(null)
    assert null == fresh and hash(null) == hash(fresh)
    assert model.BaseScore(null, ",", out) == pytest.approx(-1.383514, abs=1e-6)
    assert model.BaseScore(bos, ",", out) == pytest.approx(-1.383514 - 0.4149733, abs=1e-6)
    r = model.BaseFullScore(bos, "looking", out)
    assert (r.ngram_length, r.oov) == (2, False) and repr(r).startswith("FullScoreReturn(")
    assert copy.copy(out) == out and copy.deepcopy(out) == out
    # bytes: decoded where kenlm decodes them, refused where it refuses them
    assert model.score(b"looking on a little") == model.score("looking on a little")
    with pytest.raises(TypeError):
        model.BaseScore(bos, b"looking", out)
    for bad in (None, 3, ["a"]):
        with pytest.raises(TypeError):
            model.score(bad)
        with pytest.raises(TypeError):
            model.BaseScore(bos, bad, out)
    with pytest.raises(TypeError):
        model.BaseScore("not a state", "a", out)
    with pytest.raises(TypeError):
        nk.Model(None)
    with pytest.raises(OSError, match="Cannot read model"):
        nk.Model("/nonexistent/model.arpa")
    # a state of another model is refused
    other = _quiet_model(FIXTURES / "test_nounk.arpa")
    with pytest.raises(ValueError, match="another model"):
        other.BaseScore(out, "a", nk.State())
    # score sums float32 values in float32, as kenlm does
    total = sum(p for p, _, _ in model.full_scores("looking on a little"))
    assert abs(model.score("looking on a little") - total) < 1e-4
    assert pickle.loads(pickle.dumps(model)).path == model.path
    assert isinstance(nk.Config().load_method, int) and nk.LoadMethod.LAZY == 0
    assert model.perplexity("a") == pytest.approx(10 ** (-model.score("a") / 2))


@pytest.mark.slow
def test_brown_kn5_has_as_many_distinct_states_as_kenlms(brown_dir, tmp_path):
    """Every prefix of every Brown test sentence, walked word by word: the same number of
    distinct states as kenlm's, equal exactly where kenlm's are equal."""
    kenlm = pytest.importorskip("kenlm", reason="the kenlm module is not installed")
    assert main(["ngram", "train", str(brown_dir / "train.txt"), "--order", "5", "-o",
                 str(tmp_path / "kn5"), "--arpa", str(tmp_path / "kn5.arpa")]) == 0
    theirs = kenlm.Model(str(tmp_path / "kn5.arpa"))
    lines = [x for x in (brown_dir / "test.txt").read_text().split("\n") if x.strip()][:1500]
    for ours in (_quiet_model(tmp_path / "kn5.arpa"), _quiet_model(tmp_path / "kn5")):
        our_ids, their_ids = {}, {}  # the ARPA in memory, then the mapped trie
        pairs = set()
        for line in lines:
            a_scores, sa = _walk(ours, nk.State, line, True)
            b_scores, sb = _walk(theirs, kenlm.State, line, True)
            assert [x[1:] for x in a_scores] == [x[1:] for x in b_scores]
            assert [x[0] for x in a_scores] == pytest.approx([x[0] for x in b_scores],
                                                             abs=2e-4)
            for a, b in zip(sa, sb):
                pairs.add((our_ids.setdefault(a, len(our_ids)),
                           their_ids.setdefault(b, len(their_ids))))
        # a bijection: each of our states pairs with exactly one of kenlm's and back
        assert len(our_ids) == len(their_ids) == len(pairs)


def test_a_network_pays_one_pass_per_distinct_state(toy_arpa, tmp_path):
    """A beam search asks for many words after one State: the network's next-word
    distribution is computed once per State (an LRU cache), and word-by-word scores
    equal the batched full_scores."""
    pytest.importorskip("torch", reason="networks need nnlm's neural extra")
    toy = toy_arpa[0].parent / "toy"
    assert main(["train", str(toy / "train.txt"), "--valid", str(toy / "valid.txt"),
                 "--preset", "tiny", "--epochs", "1", "--threads", "1",
                 "-o", str(tmp_path / "nplm")]) == 0
    model = nk.Model(str(tmp_path / "nplm"))
    passes = []
    inner = model._lm.next_logprobs
    model._lm.next_logprobs = lambda contexts: (passes.append(len(contexts)), inner(contexts))[1]
    start = nk.State()
    model.BeginSentenceWrite(start)
    words = ["the", "cat", "dog", "man", "</s>", "the"]
    written = {start._words}
    outs = [nk.State() for _ in words]
    scores = [model.BaseScore(start, w, o) for w, o in zip(words, outs)]
    written |= {o._words for o in outs}
    assert passes == [1]  # one pass for six words after one state
    assert scores[0] == scores[-1]
    # a beam's new States, written in one step, are computed together at the next miss
    # (what a network on a GPU does; on the CPU it does not pay, and is off)
    assert not model._queue_rows
    model._queue_rows = True  # as if on a GPU: the six States just written wait together
    model._pending = {o._words: None for o in outs if o._words not in model._cache}
    nxt = nk.State()
    model.BaseScore(outs[1], "the", nxt)
    written.add(nxt._words)
    assert passes == [1, 5]  # cat's State and the 4 others written beside it: one pass
    lines = toy_arpa[1][:15]
    for line in lines:
        state, got = nk.State(), []
        model.BeginSentenceWrite(state)
        for w in [*line.split(), "</s>"]:
            nxt = nk.State()
            got.append(model.BaseScore(state, w, nxt))
            written.add(nxt._words)
            state = nxt
        want = [p for p, _, _ in model.full_scores(line)]
        assert got == pytest.approx(want, abs=1e-4)
    # every State's distribution computed once: those written and not yet read wait
    assert sum(passes) + len(model._pending) == len(written)


PYCTC = Path(__file__).parents[1] / ".venv-pyctcdecode" / "bin" / "python"


@pytest.mark.slow
def test_pyctcdecode_gives_kenlms_beams_with_nnlm_kenlm(toy_arpa, tmp_path):
    """pyctcdecode, in its own environment (``make pyctcdecode-env``), decodes the same
    synthetic CTC outputs with the kenlm module and with nnlm.kenlm installed under its
    name: the same best beams and LM scores, and its save/load works (Model.path)."""
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    arpa, _ = toy_arpa
    text = arpa.parent / "toy" / "test.txt"
    client = Path(__file__).parent / "pyctcdecode_client.py"
    runs = {}
    for which in ("kenlm", "nnlm"):
        done = subprocess.run([str(PYCTC), str(client), which, str(arpa), str(text), "12"],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        runs[which] = json.loads(done.stdout.strip().splitlines()[-1])
    ours, theirs = runs["nnlm"], runs["kenlm"]
    assert ours["texts"] == theirs["texts"]
    assert ours["lm_scores"] == pytest.approx(theirs["lm_scores"], abs=1e-3)
    assert ours["save_load_round_trip"] and theirs["save_load_round_trip"]


@pytest.mark.slow
def test_pyctcdecodes_own_class_over_nnlm_models(toy_arpa, tmp_path):
    """nnlm's PyctcdecodeLM (no kenlm module imported) decodes what pyctcdecode decodes
    with kenlm's model on the same ARPA file, and saves and reloads; over a network it
    decodes what nnlm.kenlm under kenlm's name decodes without batching (the batched
    passes change no beam)."""
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    arpa, _ = toy_arpa
    toy = arpa.parent / "toy"
    client = Path(__file__).parent / "pyctcdecode_client.py"

    def run(which, model):
        done = subprocess.run([str(PYCTC), str(client), which, str(model),
                               str(toy / "test.txt"), "10"], capture_output=True, text=True,
                              timeout=600)
        if which != "kenlm" and "No module named 'torch'" in done.stderr:
            pytest.skip("torch is not installed in the pyctcdecode environment")
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    theirs, ours = run("kenlm", arpa), run("class", arpa)
    assert ours["texts"] == theirs["texts"]
    assert ours["lm_scores"] == pytest.approx(theirs["lm_scores"], abs=1e-3)
    assert ours["save_load_round_trip"]
    assert main(["train", str(toy / "train.txt"), "--valid", str(toy / "valid.txt"),
                 "--preset", "tiny", "--epochs", "1", "--threads", "1",
                 "-o", str(tmp_path / "nplm")]) == 0
    unbatched, batched = run("shim0", tmp_path / "nplm"), run("class", tmp_path / "nplm")
    assert batched["texts"] == unbatched["texts"]
    assert batched["lm_scores"] == pytest.approx(unbatched["lm_scores"], abs=1e-3)
    assert batched["save_load_round_trip"]
    # a model of the whole line (kenlm's States cannot hold it): decodes, saves, reloads
    assert main(["train", str(toy / "train.txt"), "--valid", str(toy / "valid.txt"),
                 "--preset", "lstm", "--m", "16", "--h", "16", "--epochs", "1",
                 "--threads", "1", "-o", str(tmp_path / "lstm")]) == 0
    lstm = run("class", tmp_path / "lstm")
    assert len(lstm["texts"]) == 10 and lstm["save_load_round_trip"]


def test_config_takes_only_kenlms_enum_values():
    config = nk.Config()
    for name, top in (("load_method", 4), ("arpa_complain", 2)):
        setattr(config, name, top)
        assert getattr(config, name) == top
        for bad in (top + 1, -1, 99, "lazy", 1.0, True, None):
            with pytest.raises(ValueError, match=f"Config.{name}"):
                setattr(config, name, bad)
        assert getattr(config, name) == top
    assert nk.Config().load_method == nk.LoadMethod.POPULATE_OR_READ


@pytest.mark.skipif(nk._fast is None, reason="the compiled queries were not built")
def test_the_compiled_query_refuses_a_second_init_and_impossible_sizes(toy_arpa):
    """Query.__init__ runs once (a second call would leak and could overflow its array
    of held buffers); a vocabulary size outside 3 .. 2^31 - 1, or specials outside it,
    is refused before offsets[V] is read; packed sizes whose products overflow do not
    fit."""
    import numpy as np

    q = _quiet_model(toy_arpa[0])._fast
    with pytest.raises(TypeError, match="initialized once"):
        q.__init__(1, None, b"", np.zeros(1, np.int64), 0, 0, 1, 2, b"", [])
    blob, offsets = b"<unk><s></s>", np.array([0, 5, 8, 12], np.int64)
    pb = np.zeros(6, np.float32)
    for V, specials in ((-1, (1, 2, 0)), (3, (3, 2, 0)), (1 << 40, (1, 2, 0))):
        with pytest.raises(ValueError, match="a vocabulary of"):
            nk._fast.Query(1, {}, blob, offsets, V, *specials, pb, [])
    nk._fast.Query(1, {}, blob, offsets, 3, 1, 2, 0, pb, [])  # the same, sane: fine
    huge = ("trie", np.zeros(4, np.uint64), 64, (0, np.zeros(4, np.uint64), b"", 64, 0), 3,
            1 << 62, b"", 0, 0, np.zeros(4, np.float32), b"", 0, b"", b"", 0)
    with pytest.raises(ValueError):  # 2^62 words of 64 bits: no 32-byte array holds them
        nk._fast.Query(1, {}, blob, offsets, 3, 1, 2, 0, pb, [huge])


@pytest.mark.skipif(nk._fast is None, reason="the compiled queries were not built")
def test_one_switch_turns_every_compiled_path_off(toy_arpa, tmp_path):
    """NNLM_NO_C=1 (nnlm.base.compiled) sends nnlm.kenlm and the trie's lookups and bulk
    scoring to their Python paths, which give the compiled paths' numbers."""
    from nnlm.models import convert

    path, sentences = toy_arpa
    target = tmp_path / "m.nnlm"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        convert(path, target)
    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(sentences[:20]) + "\n", encoding="utf-8")
    script = ("import sys, json\n"
              "import nnlm.kenlm as kenlm\n"
              "from nnlm.ngram.store import trie\n"
              "from nnlm.models import load_model\n"
              "from nnlm.text.corpus import read_stream\n"
              "m = kenlm.Model(sys.argv[1])\n"
              "lm = load_model(sys.argv[1])\n"
              "text = open(sys.argv[2]).read().splitlines()\n"
              "bulk = lm.logprobs(read_stream(sys.argv[2], lm.vocab)).tolist()\n"
              "print(json.dumps({'c': [kenlm._fast is not None, trie._native is not None],\n"
              "                  'scores': [m.score(x) for x in text], 'bulk': bulk}))\n")
    runs = {}
    for switch in ("0", "1"):
        done = subprocess.run([sys.executable, "-c", script, str(target), str(lines)],
                              capture_output=True, text=True,
                              env={**os.environ, "NNLM_NO_C": switch})
        assert done.returncode == 0, done.stderr
        runs[switch] = json.loads(done.stdout)
    assert runs["0"]["c"] == [True, True] and runs["1"]["c"] == [False, False]
    assert runs["1"]["scores"] == pytest.approx(runs["0"]["scores"], abs=1e-4)
    assert runs["1"]["bulk"] == pytest.approx(runs["0"]["bulk"], abs=1e-9)


def test_a_library_users_warnings_are_one_line_each(tmp_path):
    """An odd ARPA file through nnlm.kenlm, as kenlm's example.py loads it: each warning is
    one line, ``nnlm: warning: ...``, once, without nnlm's source file and line."""
    done = subprocess.run([sys.executable, "-c", "import sys, nnlm.kenlm as kenlm\n"
                           "kenlm.Model(sys.argv[1]).score('a')\n",
                           str(FIXTURES / "test.arpa")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 3 and len(set(lines)) == 3, done.stderr
    assert all(line.startswith("nnlm: warning: ") for line in lines), done.stderr


@pytest.mark.parametrize("source", ["arpa", "dir", "nnlm"])
def test_s_as_a_word_scores_as_kenlm_scores_it(toy_arpa, query_path, source, tmp_path):
    """kenlm scores "<s>" where a decoder asks for it (an alphabet that can spell it):
    its stored log10 p of -99 plus the context's back-offs, length 1, and a state after
    it; nnlm.kenlm does the same on every path (nnlm.Decoder keeps refusing it: nnlm's own
    face predicts no <s>)."""
    kenlm = pytest.importorskip("kenlm")
    arpa, _ = toy_arpa
    path = {"arpa": arpa, "dir": arpa.parent / "kn4", "nnlm": tmp_path / "kn4.nnlm"}[source]
    if source == "nnlm":
        assert main(["ngram", "convert", str(arpa.parent / "kn4"), str(path)]) == 0
    ours, theirs = _quiet_model(path), kenlm.Model(str(arpa))
    for sentence in ("the <s> cat", "<s>", "<s> <s> the", "the cat <s>"):
        assert [(round(p, 3), n, o) for p, n, o in ours.full_scores(sentence)] == \
            [(round(p, 3), n, o) for p, n, o in theirs.full_scores(sentence)], sentence
        assert ours.score(sentence) == pytest.approx(theirs.score(sentence), abs=1e-3)
        assert ours.score(sentence, bos=False) == pytest.approx(
            theirs.score(sentence, bos=False), abs=1e-3)
    for begin in ("BeginSentenceWrite", "NullContextWrite"):
        s1, s2, o1, o2 = nk.State(), kenlm.State(), nk.State(), kenlm.State()
        getattr(ours, begin)(s1)
        getattr(theirs, begin)(s2)
        assert ours.BaseScore(s1, "<s>", o1) == pytest.approx(theirs.BaseScore(s2, "<s>", o2),
                                                              abs=1e-4)
        assert ours.BaseScore(o1, "the", nk.State()) == pytest.approx(
            theirs.BaseScore(o2, "the", kenlm.State()), abs=1e-4)
    with pytest.raises(ValueError, match="<s>"):
        nnlm.Decoder(arpa.parent / "kn4").score("the <s> cat")


def _python_blocks(page: Path, needle: str) -> list[str]:
    parts = page.read_text().split("```python\n")[1:]
    return [p.split("```")[0] for p in parts if needle in p.split("```")[0]]


@pytest.mark.slow
@pytest.mark.parametrize("page", ["README.md", "docs/guide/decoders.md"])
def test_the_pyctcdecode_recipes_decode_as_kenlm_does(toy_arpa, tmp_path, page):
    """The pages' pyctcdecode recipes run as a user runs them (in pyctcdecode's own
    environment, models at the paths they name) and decode what pyctcdecode decodes with
    the kenlm module on the model's ARPA file, whose unigrams it reads itself (written as
    build_ctcdecoder(labels, "runs/kn5.bin") alone, the recipe decoded Brown at 79% WER
    against kenlm's 13%)."""
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    arpa, _ = toy_arpa
    runs = tmp_path / "runs"
    runs.mkdir()
    assert main(["ngram", "convert", str(arpa.parent / "kn4"), str(runs / "kn5.bin")]) == 0
    assert main(["ngram", "convert", str(arpa.parent / "kn4"), str(runs / "kn5")]) == 0
    text = arpa.parent / "toy" / "test.txt"
    client = Path(__file__).parent / "pyctcdecode_client.py"
    done = subprocess.run([str(PYCTC), str(client), "kenlm", str(arpa), str(text), "10"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    theirs = json.loads(done.stdout.strip().splitlines()[-1])["texts"]
    blocks = [b for b in _python_blocks(Path(__file__).parents[1] / page,
                                        "decoder = build_ctcdecoder")
              if "asr_model" not in b and "AutoModelForCTC" not in b]  # acoustic models':
    assert blocks, page  # test_ctc_compiled.py runs those, on stand-ins
    for block in blocks:
        script = tmp_path / "recipe.py"
        script.write_text(
            "import sys, json, warnings, numpy as np\n"
            f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
            "from ctc_logits import LABELS as labels, logits_for\n"
            f"lines = [x.strip().lower() for x in open({str(text)!r}) if x.strip()][:10]\n"
            "rng = np.random.default_rng(0)\n"
            "matrices = [logits_for(line, rng) for line in lines]\n"
            "logits = matrices[0]\n"
            "warnings.simplefilter('error', UserWarning)  # pyctcdecode's no-unigrams one\n"
            + block +
            "\nprint(json.dumps([decoder.decode_beams(m, beam_width=50)[0][0] "
            "for m in matrices]))\n")
        done = subprocess.run([str(PYCTC), str(script)], cwd=tmp_path, capture_output=True,
                              text=True, timeout=600,  # nnlm.pyctcdecode as pyctcdecode to
                              env={**os.environ, "NNLM_PYCTCDECODE_EXACT": "1"})  # the bit
        assert done.returncode == 0, done.stderr[-3000:]
        assert json.loads(done.stdout.strip().splitlines()[-1]) == theirs


@pytest.mark.slow
def test_pyctcdecodes_class_refuses_weights_that_are_not_numbers(toy_arpa):
    """alpha, beta and unk_score_offset NaN or infinite (at construction or through
    pyctcdecode's reset_params) are one line naming them: a NaN made every score NaN."""
    if not PYCTC.exists():
        pytest.skip("no pyctcdecode environment: run `make pyctcdecode-env`")
    arpa, _ = toy_arpa
    script = (
        "import math, warnings\n"
        "warnings.simplefilter('ignore')\n"
        "from nnlm.decoding.pyctcdecode_lm import PyctcdecodeLM\n"
        "from nnlm.base.errors import NnlmError\n"
        f"lm = PyctcdecodeLM({str(arpa)!r})\n"
        "bad = 0\n"
        "for name in ('alpha', 'beta', 'unk_score_offset'):\n"
        "    for value in (math.nan, math.inf, 'x'):\n"
        "        for make in (lambda: PyctcdecodeLM(lm._kenlm_model._lm, **{name: value}),\n"
        "                     lambda: lm.reset_params(**{name: value})):\n"
        "            try:\n"
        "                make()\n"
        "            except NnlmError as e:\n"
        "                bad += name in str(e) and '\\n' not in str(e)\n"
        "lm.reset_params(alpha=0.7)\n"
        "print(bad, lm.alpha)\n")
    done = subprocess.run([str(PYCTC), "-c", script], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["18", "0.7"]

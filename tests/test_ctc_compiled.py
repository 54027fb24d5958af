"""The compiled CTC prefix search (``decoding/ctc/_prefix_search.c``) against its Python
reference (``PrefixSearch(..., use_compiled=False)``, pyctcdecode's search step for step,
itself held to pyctcdecode by tests/test_pyctcdecode_api.py): the same beams in the same
order, the same word frames, acoustic and combined scores equal to the bit, the same LM
states, over character and subword alphabets (word-starting ``▁``, ``▁⁇▁``-like labels
that force the next break, multi-character labels, repeated labels, more labels than the
per-word rows hold), with no LM, nnlm's compiled queries, and models called through
Python (the kenlm module, a combination, a subclass), hotwords, history pruning, a start
state, and an empty utterance. Where the compiled search cannot give the reference's
beams (a label holding whitespace, a hand-made hotword scorer) it declines."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from conftest import toy_kn
from ctc_logits import LABELS, logits_for
from nnlm.decoding.ctc import compiled
from nnlm.decoding.ctc.fusion import LanguageModel
from nnlm.decoding.ctc.hotwords import HotwordScorer, _Trie
from nnlm.decoding.ctc.prefix_search import PrefixSearch, log_probs
from nnlm.pyctcdecode.language_model import MultiLanguageModel

pytestmark = pytest.mark.skipif(not compiled.available(),
                                reason="the compiled search was not built")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctc_c")
    arpa, lines = toy_kn(d, 3, 300)
    return d, arpa, [x.lower() for x in lines]


def nnlm_lm(d, **kw):
    import nnlm.kenlm

    model = nnlm.kenlm.Model(str(d / "kn3"))
    words = [w for w in model.vocabulary() if w not in ("<s>", "</s>", "<unk>")]
    return LanguageModel(model, unigrams=kw.pop("unigrams", words), **kw)


def same_beams(labels, lm, logp, is_bpe=False, hot=(), prune=False, width=16,
               weight=10.0, start=None, token_min_logp=-5.0, log_add=True):
    """The compiled and the reference output beams, asserted equal; the compiled ones."""
    scorer = HotwordScorer.build_scorer(list(hot), weight)
    args = (logp, width, -10.0, token_min_logp, prune, scorer, start)
    fast = compiled.decode(PrefixSearch(labels, is_bpe, lm, log_add=log_add), *args)
    assert fast is not None, "the compiled search declined"
    ref = PrefixSearch(labels, is_bpe, lm, use_compiled=False, log_add=log_add).decode(*args)
    assert [b.text for b in ref] == [b[0] for b in fast]
    assert [b.text_frames for b in ref] == [b[2] for b in fast]
    assert [b.logit_score for b in ref] == [b[3] for b in fast]  # to the bit
    assert [b.lm_score for b in ref] == [b[4] for b in fast]
    assert [b.last_lm_state for b in ref] == [b[1] for b in fast]
    return fast


def char_logits(lines, seed=0, n=3):
    rng = np.random.default_rng(seed)
    return [log_probs(logits_for(line, rng)) for line in lines[:n]]


def test_set_order_is_this_pythons():
    assert compiled.set_order_matches(cases=500, seed=1)


@pytest.mark.parametrize("prune,hot", [(False, ()), (True, ()), (False, ("cat", "the dog")),
                                       (True, ("zqx", "a"))])
def test_characters_with_nnlms_compiled_queries(world, prune, hot):
    d, _, lines = world
    lm = nnlm_lm(d, alpha=0.7, beta=1.2)
    assert compiled._lm_spec(lm, lm.get_start_state())[0] == "query"
    for logp in char_logits([x[:40] for x in lines], n=4):
        same_beams(LABELS, lm, logp, hot=hot, prune=prune)


@pytest.mark.parametrize("unigrams,boundary", [(None, True), ([], False), ("model", False)])
def test_word_lists_and_boundaries(world, unigrams, boundary):
    d, _, lines = world
    kw = {} if unigrams == "model" else {"unigrams": unigrams}
    lm = nnlm_lm(d, score_boundary=boundary, unk_score_offset=-4.0, **kw)
    for logp in char_logits([x[:30] for x in lines], seed=2, n=2):
        same_beams(LABELS, lm, logp, prune=True)


def test_no_language_model_with_and_without_hotwords(world):
    _, _, lines = world
    for logp, hot, w in itertools.product(char_logits([x[:40] for x in lines], seed=3),
                                          ((), ("the", "of it")), (10.0, -2.5)):
        same_beams(LABELS, None, logp, hot=hot, weight=w)


class Subclassed(LanguageModel):
    """A LanguageModel whose word score is its own: called through Python."""

    def score(self, prev_state, word, is_last_word=False):
        score, state = super().score(prev_state, word, is_last_word)
        return score - 0.25 * len(word), state


def test_models_called_through_python(world):
    d, arpa, lines = world
    base = nnlm_lm(d)
    lms = [Subclassed(base._kenlm_model, unigrams=base.unigrams),
           MultiLanguageModel([nnlm_lm(d, alpha=0.3), nnlm_lm(d, beta=0.5)])]
    kenlm = pytest.importorskip("kenlm")
    lms.append(LanguageModel(kenlm.Model(str(arpa)), unigrams=base.unigrams))
    for lm in lms:
        assert compiled._lm_spec(lm, lm.get_start_state())[0] == "python"
        for logp in char_logits([x[:30] for x in lines], seed=4, n=2):
            same_beams(LABELS, lm, logp, hot=("the",), prune=True)


def test_a_start_state_and_an_empty_utterance(world):
    d, _, lines = world
    lm = nnlm_lm(d)
    logp = char_logits(lines, seed=5, n=1)[0]
    start = lm.get_start_state()
    after = type(start)()
    lm._kenlm_model.BaseScore(start, "the", after)
    same_beams(LABELS, lm, logp, start=after)
    out = same_beams(LABELS, lm, np.zeros((0, len(LABELS))))
    assert [b[0] for b in out] == [""]


def subword_logits(labels, pieces, rng, noise=0.6):
    """Frames spelling ``pieces`` (label indices), a blank between, noisy."""
    frames = [k for p in pieces for k in (p, 0)]
    x = rng.normal(scale=noise, size=(len(frames), len(labels)))
    x[np.arange(len(frames)), frames] += 3.0
    return log_probs(x.astype(np.float32))


def test_subword_labels(world):
    d, _, _ = world
    labels = ["", "▁the", "▁a", "t", "he", "▁", "s", "▁c", "at", "a", "▁⁇▁", "o", "g",
              "▁do", "og", "▁o", "f", "▁of", "the", "▁t"]  # multi-character: interned
    rng = np.random.default_rng(6)
    lm = nnlm_lm(d)
    for _ in range(4):
        pieces = rng.integers(1, len(labels), size=12)
        logp = subword_logits(labels, pieces, rng)
        for hot, prune in ((), False), (("cat", "the"), True):
            same_beams(labels, lm, logp, is_bpe=True, hot=hot, prune=prune)
            same_beams(labels, None, logp, is_bpe=True, hot=hot)


def test_repeated_labels_and_a_large_alphabet(world):
    d, _, lines = world
    lm = nnlm_lm(d)
    labels = LABELS + ["a", "e"]  # a repeat of a label is the same string
    logp = char_logits(lines, seed=7, n=1)[0]
    logp = np.concatenate([logp, logp[:, [3, 7]] - 0.5], axis=1)
    same_beams(labels, lm, logp, prune=True)
    rng = np.random.default_rng(8)  # past the per-word rows (512 labels): the tables
    many = ["", " "] + ["".join(rng.choice(list("abcdefghij"), size=rng.integers(1, 4)))
                        for _ in range(600)]
    many = list(dict.fromkeys(many))
    logp = subword_logits(many, rng.integers(1, len(many), size=10), rng, noise=1.5)
    same_beams(many, lm, logp, token_min_logp=-7.0)
    same_beams(many, None, logp, hot=("abc", "j"))


def test_the_orders_sent_from_python_give_the_same_beams(world, monkeypatch):
    d, _, lines = world
    monkeypatch.setattr(compiled, "_set_order_checked", [False])
    for logp in char_logits([x[:30] for x in lines], seed=9, n=2):
        same_beams(LABELS, nnlm_lm(d), logp, prune=True)


def test_what_it_declines(world):
    d, _, lines = world
    logp = char_logits(lines, n=1)[0]
    spaced = LABELS[:-1] + ["z z"]
    scorer = HotwordScorer.build_scorer(["cat"])
    assert compiled.decode(PrefixSearch(spaced, False, None), logp, 8, -10.0, -5.0, False,
                           scorer) is None
    hand_made = HotwordScorer(None, _Trie(["cat"]), 10.0, ["cat"])
    assert compiled.decode(PrefixSearch(LABELS, False, None), logp, 8, -10.0, -5.0, False,
                           hand_made) is None
    # and the decoder still answers, through the reference
    assert PrefixSearch(spaced, False, None).decode(logp, 8, -10.0, -5.0, False, scorer)


def test_a_kept_hotword_scorer_stays_in_its_process(world):
    """The decoder keeps the last hotword list's scorer (its trie is compiled); a pool's
    workers receive the decoder without it and build their own: the same beams."""
    import multiprocessing as mp

    from nnlm.pyctcdecode import build_ctcdecoder

    d, arpa, lines = world
    decoder = build_ctcdecoder(LABELS, str(arpa))
    xs = [logits_for(line[:40], np.random.default_rng(i)) for i, line in enumerate(lines[:2])]
    alone = [decoder.decode_beams(x, hotwords=["cat", "the dog"]) for x in xs]
    assert "_last_hotwords" in decoder.__dict__
    with mp.get_context("fork").Pool(2) as pool:
        pooled = decoder.decode_beams_batch(pool, xs, hotwords=["cat", "the dog"])
    assert [[b.get_mp_safe_beam() for b in beams] for beams in alone] == pooled


def streamed(decoder, x, chunk, compiled_search: bool, hotwords=None, cut_at=None):
    """Each chunk's beams of a streamed utterance (word breaks forced every third chunk;
    ``cut_at``: the chunk after which the caller keeps only its 5 best beams)."""
    saved = compiled._c
    if not compiled_search:
        compiled._c = None
    try:
        beams, cache, partial = decoder.get_starting_state()
        out = []
        for n, lo in enumerate(range(0, len(x), chunk)):
            last = lo + chunk >= len(x)
            beams = decoder.partial_decode_beams(
                x[lo:lo + chunk], cache, partial, beams, lo, beam_width=12, prune_history=True,
                hotword_scorer=hotwords, is_end=last, force_next_word=last or n % 3 == 2)
            out.append([tuple(b) for b in beams])
            if n == cut_at:
                beams = beams[:5]
        return out
    finally:
        compiled._c = saved


def test_a_stream_on_the_compiled_search_is_the_references(world):
    """partial_decode_beams carries the compiled search from chunk to chunk: every chunk's
    beams (all eight fields) are the reference's, with every kind of LM and hotwords; a
    caller who changes the beams between chunks gets the reference from there on, from
    the compiled search's cache."""
    from nnlm.pyctcdecode import BeamSearchDecoderCTC, build_ctcdecoder
    from nnlm.pyctcdecode.alphabet import Alphabet

    d, arpa, lines = world
    base = nnlm_lm(d)
    decoders = [build_ctcdecoder(LABELS, str(d / "kn3")),
                BeamSearchDecoderCTC(Alphabet.build_alphabet(LABELS),
                                     Subclassed(base._kenlm_model, unigrams=base.unigrams)),
                build_ctcdecoder(LABELS)]
    hot = HotwordScorer.build_scorer(["the", "of it"], 5.0)
    for decoder in decoders:
        for i, line in enumerate(lines[:2]):
            x = logits_for(line[:45], np.random.default_rng(i))
            for hotwords in (None, hot):
                assert streamed(decoder, x, 11, True, hotwords) == \
                    streamed(decoder, x, 11, False, hotwords)
            assert streamed(decoder, x, 9, True, cut_at=1) == \
                streamed(decoder, x, 9, False, cut_at=1)
    assert not compiled._streams  # each stream dropped at its end


@pytest.mark.parametrize("prune,hot", [(False, ()), (True, ("cat", "the dog"))])
def test_log_add_false_is_the_references_max(world, prune, hot):
    """log_add=False: the compiled search merges beams by the larger score as the
    reference's merge_beams does (to the bit), whole and streamed; the beams differ from
    the sums'."""
    from nnlm.pyctcdecode import build_ctcdecoder

    d, arpa, lines = world
    differs = 0
    for logp in char_logits([x[:40] for x in lines], n=3):
        for lm in (None, nnlm_lm(d, alpha=0.7, beta=1.2)):
            best = same_beams(LABELS, lm, logp, hot=hot, prune=prune, log_add=False)
            summed = same_beams(LABELS, lm, logp, hot=hot, prune=prune)
            differs += [b[3] for b in best] != [b[3] for b in summed]
    assert differs
    decoder = build_ctcdecoder(LABELS, str(d / "kn3"), log_add=False)
    x = logits_for(lines[0][:45], np.random.default_rng(0))
    assert streamed(decoder, x, 11, True) == streamed(decoder, x, 11, False)
    import multiprocessing as mp

    with mp.get_context("fork").Pool(2) as pool:  # the attribute travels with the decoder
        pooled = decoder.decode_beams_batch(pool, [x, x[:30]])
    assert pooled == [[b.get_mp_safe_beam() for b in decoder.decode_beams(y)]
                      for y in (x, x[:30])]
    decoder.log_add = True  # an attribute, read at each call
    assert decoder.decode_beams(x)[0][3] == \
        build_ctcdecoder(LABELS, str(d / "kn3")).decode_beams(x)[0][3]


def test_log_add_is_saved_only_where_it_is_false(world, tmp_path):
    """save_to_dir keeps pyctcdecode's layout for the default (pyctcdecode loads the
    folder), and writes nnlm_search.json where log_add is False, which load_from_dir
    reads; a broken one, or a log_add that is not a bool, is one line."""
    from nnlm.pyctcdecode import BeamSearchDecoderCTC, build_ctcdecoder

    d, arpa, lines = world
    x = logits_for(lines[1][:40], np.random.default_rng(1))
    for log_add in (True, False):
        folder = tmp_path / f"saved-{log_add}"
        folder.mkdir()
        decoder = build_ctcdecoder(LABELS, str(arpa), log_add=log_add)
        decoder.save_to_dir(str(folder))
        assert (folder / "nnlm_search.json").exists() is not log_add
        again = BeamSearchDecoderCTC.load_from_dir(str(folder))
        assert again.log_add is log_add
        assert again.decode_beams(x)[0][3] == decoder.decode_beams(x)[0][3]
    no_lm = tmp_path / "no-lm"
    no_lm.mkdir()
    build_ctcdecoder(LABELS, log_add=False).save_to_dir(str(no_lm))
    assert BeamSearchDecoderCTC.load_from_dir(str(no_lm)).log_add is False
    (no_lm / "nnlm_search.json").write_text('{"log_add": "no"}')
    with pytest.raises(ValueError, match="nnlm_search.json: expected"):
        BeamSearchDecoderCTC.load_from_dir(str(no_lm))
    for bad in ("no", 0, None):
        with pytest.raises(TypeError, match="log_add="):
            build_ctcdecoder(LABELS, log_add=bad)


def guide_block(marker: str) -> str:
    """The docs/guide/decoders.md Python block that holds ``marker``."""
    page = Path(__file__).parents[1] / "docs" / "guide" / "decoders.md"
    blocks = [b.split("```")[0] for b in page.read_text().split("```python\n")[1:]]
    found = [b for b in blocks if marker in b]
    assert len(found) == 1, marker
    return found[0]


def test_the_guides_wav2vec2_recipe_runs_as_written(world, tmp_path, monkeypatch):
    """The guide's transformers recipe, run as written on a tiny wav2vec2 (randomly
    initialised, saved where the recipe names its checkpoint; no download): its labels
    read <pad> as the blank and | as the separator, so logits spelling a sentence in the
    tokenizer's ids decode to the sentence; the model's own logits decode."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    import json
    import warnings

    torch = pytest.importorskip("torch")
    d, _, lines = world
    folder = tmp_path / "facebook" / "wav2vec2-base-960h"
    folder.mkdir(parents=True)
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ'"
    vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, "<unk>": 3, "|": 4,
             **{c: i + 5 for i, c in enumerate(letters)}}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokenizer = transformers.Wav2Vec2CTCTokenizer(str(tmp_path / "vocab.json"))
        processor = transformers.Wav2Vec2Processor(transformers.Wav2Vec2FeatureExtractor(),
                                                   tokenizer)
        processor.save_pretrained(str(folder))
        torch.manual_seed(0)
        config = transformers.Wav2Vec2Config(
            vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
            num_attention_heads=2, intermediate_size=32, conv_dim=(8, 8),
            conv_kernel=(10, 3), conv_stride=(5, 2), num_conv_pos_embeddings=4,
            num_conv_pos_embedding_groups=2, pad_token_id=0)
        transformers.Wav2Vec2ForCTC(config).save_pretrained(str(folder))
    (tmp_path / "runs").mkdir()
    from nnlm.cli import main

    assert main(["ngram", "convert", str(d / "kn3"), str(tmp_path / "runs/kn5")]) == 0
    monkeypatch.chdir(tmp_path)
    names = {"audio": np.random.default_rng(0).normal(size=16_000).astype(np.float32)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(guide_block("AutoModelForCTC"), names)
    decoder, logits = names["decoder"], names["logits"]
    assert logits.shape[1] == len(vocab) and isinstance(names["text"], str)
    assert set(names["text"]) <= set(letters.lower() + " ")
    line = " ".join(w for w in lines[0].lower().split() if w.isalpha())[:30].strip()
    ids = [vocab["|" if c == " " else c.upper()] for c in line]
    spoken = np.full((2 * len(ids), len(vocab)), -8.0, np.float32)
    spoken[np.arange(0, 2 * len(ids), 2), ids] = 0.0  # each label, then the blank
    spoken[np.arange(1, 2 * len(ids), 2), vocab["<pad>"]] = 0.0
    assert decoder.decode(spoken) == line


def test_the_guides_nemo_recipe_appends_the_blank_last(world, tmp_path, monkeypatch):
    """The guide's NeMo recipe, run as written on a stand-in model whose vocabulary is
    SentencePiece-style pieces with no blank: the decoder appends the blank last, as
    NeMo's logits have it, and reads the pieces as subwords."""
    from types import SimpleNamespace

    from nnlm.cli import main

    d, _, lines = world
    words = " ".join(w for w in lines[0].lower().split() if w.isalpha()).split()[:5]
    pieces = sorted({"▁" + w[:2] for w in words} | {w[2:] for w in words if w[2:]})
    asr_model = SimpleNamespace(decoder=SimpleNamespace(vocabulary=pieces))
    ids = []
    for w in words:
        ids += [pieces.index("▁" + w[:2])] + ([pieces.index(w[2:])] if w[2:] else [])
    blank = len(pieces)  # NeMo's: the last column
    logits = np.full((2 * len(ids), len(pieces) + 1), -8.0, np.float32)
    logits[np.arange(0, 2 * len(ids), 2), ids] = 0.0
    logits[np.arange(1, 2 * len(ids), 2), blank] = 0.0
    (tmp_path / "runs").mkdir()
    assert main(["ngram", "convert", str(d / "kn3"), str(tmp_path / "runs/kn5")]) == 0
    monkeypatch.chdir(tmp_path)
    names = {"asr_model": asr_model, "logits": logits}
    exec(guide_block("asr_model.decoder.vocabulary"), names)
    assert names["decoder"]._alphabet.labels[-1] == "" and names["decoder"]._is_bpe
    assert names["text"] == " ".join(words)


def test_a_hotword_scorer_the_search_used_still_pickles(world):
    import pickle

    _, _, lines = world
    scorer = HotwordScorer.build_scorer(["cat", "the dog"], 5.0)
    logp = char_logits(lines, n=1)[0]
    first = same_beams(LABELS, None, logp, hot=("cat", "the dog"), weight=5.0)
    out = compiled.decode(PrefixSearch(LABELS, False, None), logp, 16, -10.0, -5.0, False,
                          scorer)
    assert hasattr(scorer, "_compiled_trie")  # kept for the next utterance
    again = pickle.loads(pickle.dumps(scorer))
    assert not hasattr(again, "_compiled_trie")
    assert compiled.decode(PrefixSearch(LABELS, False, None), logp, 16, -10.0, -5.0, False,
                           again) == out == first


def test_a_lexicon_is_an_unknown_word_offset_of_minus_infinity(world):
    """unk_score_offset=-inf (flashlight's unk_score=-inf) keeps the words to the word
    list: a word being spelled that starts no listed word, or a finished one not listed,
    scores -inf and leaves the beam. A spelled prefix of a listed word scores alpha times
    the best log10 p (no context, in ln) of the listed words it starts, as flashlight
    smears its lexicon's trie, where pyctcdecode's -inf * 0 is NaN (pyctcdecode 0.5 stops
    on it). The compiled search is the reference's to the bit."""
    import nnlm.kenlm
    from nnlm.decoding.ctc.fusion import LOG_BASE_CHANGE_FACTOR

    d, _, lines = world
    words = sorted({w for x in lines for w in x.split()})
    lexicon = words[::2]
    strict = nnlm_lm(d, alpha=0.7, beta=1.2, unigrams=lexicon, unk_score_offset=float("-inf"))
    model = nnlm.kenlm.Model(str(d / "kn3"))
    null, out = nnlm.kenlm.State(), nnlm.kenlm.State()
    model.NullContextWrite(null)
    for prefix in {w[:n] for w in lexicon for n in range(4)}:
        best = max(model.BaseScore(null, w, out) for w in lexicon if w.startswith(prefix))
        assert strict.score_partial_token(prefix) == 0.7 * LOG_BASE_CHANGE_FACTOR * best
    assert strict.score_partial_token("zqzq") == float("-inf")
    outside = 0
    for logp in char_logits([x[:40] for x in lines], n=6):
        best = same_beams(LABELS, strict, logp)[0]
        if np.isfinite(best[4]):
            assert set(best[0].split()) <= set(lexicon)
        outside += any(w not in lexicon for w in
                       same_beams(LABELS, nnlm_lm(d, alpha=0.7, beta=1.2), logp)[0][0].split())
    assert outside  # the word list changed what was decoded


def test_a_network_computes_ahead_only_what_kept_beams_hold(world, monkeypatch):
    """A whole-line network (an LSTM through WholeLine): the compiled search tells it the
    kept beams' states each frame, so its batched passes compute fewer rows, in about as
    many passes, than with every queued history; the beams are the reference's."""
    torch = pytest.importorskip("torch", reason="torch (nnlm[neural]) is not installed")
    from nnlm.decoding.whole_line import WholeLine
    from nnlm.models import load_model
    from nnlm.neural.networks.lstm import LSTMConfig, LSTMNetwork
    from nnlm.neural.nplm_lm import NeuralLM

    d, _, lines = world
    vocab = load_model(str(d / "kn3")).vocab
    torch.manual_seed(0)
    net = LSTMNetwork(LSTMConfig(vocab_size=len(vocab), m=8, h=16, span=8))
    words = [w for w in vocab.words if w not in ("<s>", "</s>", "<unk>")]
    counts = {}
    for told in (True, False):
        lm = NeuralLM(vocab, net)
        rows = []
        lm.next_logprobs = lambda c, f=lm.next_logprobs, rows=rows: rows.append(len(c)) or f(c)
        if not told:
            monkeypatch.setattr(WholeLine, "live", lambda self, states: None)
        fused = LanguageModel(WholeLine(lm), unigrams=words, alpha=0.7, beta=1.2)
        for logp in char_logits([x[:40] for x in lines], n=3):
            same_beams(LABELS, fused, logp)
        counts[told] = rows
    assert len(counts[True]) <= 1.1 * len(counts[False])
    assert sum(counts[True]) < 0.9 * sum(counts[False])


def test_a_network_scores_the_utterances_end_in_one_pass(world):
    """At the end of an utterance the compiled search hands a whole-line network every
    beam's last word at once (score_last_words): every word is scored before any </s>,
    so the rows the </s> read are computed in one batched pass, not one pass a beam. The
    beams are the reference's, and those of a model whose score() is its own (which the
    search calls beam by beam, as pyctcdecode does)."""
    pytest.importorskip("torch", reason="torch (nnlm[neural]) is not installed")
    import torch

    from nnlm.decoding.whole_line import WholeLine
    from nnlm.models import load_model
    from nnlm.neural.networks.lstm import LSTMConfig, LSTMNetwork
    from nnlm.neural.nplm_lm import NeuralLM

    class OwnScore(LanguageModel):
        def score(self, prev_state, word, is_last_word=False):
            return super().score(prev_state, word, is_last_word)

    d, _, lines = world
    vocab = load_model(str(d / "kn3")).vocab
    torch.manual_seed(0)
    net = LSTMNetwork(LSTMConfig(vocab_size=len(vocab), m=8, h=16, span=8))
    words = [w for w in vocab.words if w not in ("<s>", "</s>", "<unk>")]
    end_passes, beams = {}, {}
    for kind in (LanguageModel, OwnScore):
        lm = NeuralLM(vocab, net)
        whole = WholeLine(lm)
        frames = []
        lm.next_logprobs = (lambda c, f=lm.next_logprobs, frames=frames, whole=whole:
                            frames.append(whole.frame) or f(c))
        fused = kind(whole, unigrams=words, alpha=0.7, beta=1.2)
        end_passes[kind], beams[kind] = [], []
        for logp in char_logits([x[:37] for x in lines], seed=2, n=6):
            frames.clear()
            out = compiled.decode(PrefixSearch(LABELS, False, fused), logp, 64, -10.0, -5.0,
                                  False, HotwordScorer.build_scorer([], 10.0), None)
            end_passes[kind].append(frames.count(max(frames)))
            beams[kind].append([(b[0], b[4]) for b in out])
            if kind is LanguageModel:
                assert [(b[0], b[4]) for b in same_beams(LABELS, fused, logp, width=64)] \
                    == beams[kind][-1]
    assert beams[LanguageModel] == beams[OwnScore]
    assert max(end_passes[LanguageModel]) <= 2  # a missing row of a history, then the ends
    assert min(end_passes[OwnScore]) > 2  # beam by beam: 3-6 passes here
    logp = char_logits([lines[0][:37]], seed=2, n=1)[0]
    for broken, error in ((lambda self, pairs: None, TypeError),
                          (lambda self, pairs: [(0.0,)] * len(pairs), TypeError),
                          (lambda self, pairs: [("x", None)] * len(pairs), TypeError),
                          (lambda self, pairs: 1 / 0, ZeroDivisionError)):
        fused = LanguageModel(WholeLine(NeuralLM(vocab, net)), unigrams=words)
        fused.score_last_words = broken.__get__(fused)
        with pytest.raises(error):
            compiled.decode(PrefixSearch(LABELS, False, fused), logp, 16, -10.0, -5.0,
                            False, HotwordScorer.build_scorer([], 10.0), None)


def test_build_ctcdecoder_takes_a_loaded_model(world, tmp_path):
    """A model nnlm.load_model loaded (set up as the caller chose) decodes as its path
    does, with its own words as the word list, and saves the path it was loaded from."""
    from nnlm.models import load_model
    from nnlm.pyctcdecode import BeamSearchDecoderCTC, build_ctcdecoder

    d, _, lines = world
    labels = list(LABELS)
    by_path = build_ctcdecoder(labels, kenlm_model_path=str(d / "kn3"), alpha=0.7)
    loaded = build_ctcdecoder(labels, kenlm_model_path=load_model(str(d / "kn3")), alpha=0.7)
    for logp in char_logits([x[:40] for x in lines], n=3):
        assert loaded.decode(logp) == by_path.decode(logp)
    (tmp_path / "saved").mkdir()
    loaded.save_to_dir(str(tmp_path / "saved"))
    again = BeamSearchDecoderCTC.load_from_dir(str(tmp_path / "saved"))
    logp = char_logits(lines, seed=5, n=1)[0]
    assert again.decode(logp) == by_path.decode(logp)


@pytest.mark.parametrize("exact", [False, True])
def test_an_utterance_ending_on_the_separator_scores_end_of_sentence(world, monkeypatch,
                                                                     exact):
    """A beam that ends on the word separator (no word being spelled) scores </s> after
    its last word: every final beam's LM score is alpha ln 10 log10 p(words </s>) + beta
    a word, as nnlm.kenlm scores the sentence, whether its last word was finished by the
    separator or is scored as the last one. pyctcdecode scores an empty last word as
    unknown instead (NNLM_PYCTCDECODE_EXACT keeps that): there some beams differ. The
    compiled search and the reference agree either way."""
    import math

    import nnlm.kenlm
    from nnlm.decoding.ctc import fusion

    monkeypatch.setattr(fusion, "PYCTCDECODE_EXACT", exact)
    d, _, lines = world
    lm = nnlm_lm(d, alpha=0.7, beta=1.2)
    model = nnlm.kenlm.Model(str(d / "kn3"))
    agree = []
    for logp in char_logits([" ".join(x.split()[:5]) + " " for x in lines], n=10):
        for text, _, _, logit, score in same_beams(LABELS, lm, logp):
            want = 0.7 * math.log(10) * model.score(text) + 1.2 * len(text.split())
            agree.append(math.isclose(score - logit, want, abs_tol=1e-4))  # float32 sums
    assert len(agree) >= 10 and all(agree) != exact


def test_the_batch_decoder_without_torch_names_the_extra():
    """In the core install (no torch), asking for the batch decoder is one line naming
    the neural extra, never an ImportError."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        pytest.skip("torch is installed here; the core wheels' tests run this")
    import nnlm.pyctcdecode
    from nnlm.base.errors import NnlmError

    with pytest.raises(NnlmError, match=r"build_batch_decoder needs torch.*neural") as caught:
        getattr(nnlm.pyctcdecode, "build_batch_decoder")  # noqa: B009 - the lookup is the test
    assert "\n" not in str(caught.value)

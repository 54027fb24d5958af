"""The suffix-array index (nnlm.index) and the unbounded model over it (nnlm.ngram.infgram).

Oracles: a brute-force counter over the indexed token stream, the numpy path against the
C one, infini-gram's own engine on nnlm's files (where the package is installed), and
the model's distributions summed over the vocabulary."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.index import Index, build_index, search
from nnlm.index.files import pointer_bytes
from nnlm.lm import evaluate
from nnlm.models import load_model, save_model
from nnlm.ngram.estimate.kneser_ney import KneserNey
from nnlm.ngram.infgram import InfgramLM
from nnlm.text.corpus import read_corpus, read_stream

WORDS = "a b c d e f g".split()
REPEATED = "a b c d e f g a b c"  # a line every tenth: its 10-gram occurs 30 times


def _corpus(path: Path, lines: int = 300, seed: int = 0) -> Path:
    rng = random.Random(seed)
    out = []
    for i in range(lines):  # a small language with repeats: long n-grams recur
        n = rng.randint(1, 12)
        out.append(" ".join(rng.choice(WORDS[: rng.randint(2, 7)]) for _ in range(n)))
        if i % 10 == 0:
            out.append(REPEATED)
    path.write_text("\n".join(out) + "\n")
    return path


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    d = tmp_path_factory.mktemp("index")
    text = _corpus(d / "train.txt")
    build_index([text], d / "idx")
    return d, text, Index.open(d / "idx")


def _stream(index: Index) -> np.ndarray:
    return np.frombuffer(index.shards[0].text, f"<u{index.width}").astype(np.int64)


def _brute(stream: np.ndarray, query: list[int]) -> int:
    if not query:
        return len(stream)
    windows = np.lib.stride_tricks.sliding_window_view(stream, len(query))
    return int((windows == np.array(query)).all(1).sum())


def _queries(stream: np.ndarray, sep: int, rng: np.random.Generator, n: int = 200):
    out = []
    while len(out) < n:
        k = int(rng.integers(1, 11))
        i = int(rng.integers(0, len(stream) - k))
        q = stream[i:i + k].tolist()
        if sep not in q:
            out.append(q)
    return out + [[1], [2], [1, 2]]


def test_the_files_are_sized_as_infini_grams():
    assert pointer_bytes(255) == 1 and pointer_bytes(256) == 1 and pointer_bytes(257) == 2
    assert pointer_bytes(65536) == 2 and pointer_bytes(65537) == 3


def test_counts_equal_a_brute_force_counter_up_to_n_10(world):
    _, _, index = world
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(0))
    queries.append(index.encode(REPEATED))
    got = index.count(queries)
    assert got.tolist() == [_brute(stream, q) for q in queries]
    assert got[-1] == 30 and index.count(REPEATED) == 30


def test_the_numpy_path_answers_as_the_compiled_one(world, monkeypatch):
    _, _, index = world
    if search.compiled() is None:
        pytest.skip("the C extension is not built")
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(1), 60) + [[]]
    c_counts, c_next = index.count(queries), index.next(queries)
    monkeypatch.setattr(search, "_C", False)
    assert index.count(queries).tolist() == c_counts.tolist()
    for a, b in zip(index.next(queries), c_next):
        assert (a.count, a.total) == (b.count, b.total)
        assert dict(zip(a.tokens.tolist(), a.counts.tolist())) == \
            dict(zip(b.tokens.tolist(), b.counts.tolist()))


def test_next_counts_what_follows_and_batches_equal_one_by_one(world):
    _, _, index = world
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(2), 40)
    batch = index.next(queries)
    for q, got in zip(queries, batch):
        one = index.next([q])[0]
        assert (one.tokens.tolist(), one.counts.tolist()) == (got.tokens.tolist(),
                                                              got.counts.tolist())
        windows = np.lib.stride_tricks.sliding_window_view(stream, len(q) + 1)
        hits = windows[(windows[:, :-1] == np.array(q)).all(1), -1]
        hits = hits[hits != index.separator]
        want = dict(zip(*np.unique(hits, return_counts=True)))
        assert dict(zip(got.tokens.tolist(), got.counts.tolist())) == \
            {int(k): int(v) for k, v in want.items()}
        assert got.total == len(hits) and list(got.counts) == sorted(got.counts, reverse=True)


def test_the_infgram_takes_the_longest_suffix_that_occurs(world):
    _, _, index = world
    stream = _stream(index)
    context = ["zzz", "a", "b"]  # an unknown word: only the suffixes after it can occur
    got = index.infgram(" ".join(context))
    ids = index.encode(context[1:])
    assert got.suffix_length == 2 and got.count == _brute(stream, ids)
    assert index.infgram("zzz").suffix_length == 0  # the empty context: every token
    assert index.count(["zzz a", "a zzz"]).tolist() == [0, 0]


def test_docs_hold_their_query(world):
    _, text, index = world
    lines = text.read_text().splitlines()
    for doc in index.docs("a b c", limit=5):
        words = doc.words
        assert words == lines[doc.doc].split()
        assert doc.tokens[doc.offset:doc.offset + 3] == index.encode("a b c")


def test_infini_grams_engine_agrees_on_nnlms_files(world):
    engine_module = pytest.importorskip("infini_gram.engine",
                                        reason="the infini-gram package is not installed")
    _, _, index = world
    engine = engine_module.InfiniGramEngine(index_dir=str(index.path), eos_token_id=2,
                                            vocab_size=65535)
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(3), 80)
    for q, c, nxt, inf in zip(queries, index.count(queries), index.next(queries),
                              index.infgram(queries)):
        assert engine.count(q)["count"] == c
        if q[-1] == 2:  # after </s> the engine reports a document's end as eos; nnlm
            continue  # drops it from what follows
        theirs = engine.ntd(q, max_support=10**6)["result_by_token_id"]
        assert {t: v["cont_cnt"] for t, v in theirs.items()} == \
            dict(zip(nxt.tokens.tolist(), nxt.counts.tolist()))
        assert engine.infgram_ntd(q, max_support=10**6)["suffix_len"] == inf.suffix_length


def test_an_infini_gram_index_opens_as_it_is(world, tmp_path):
    d, _, index = world
    foreign = tmp_path / "ig"
    foreign.mkdir()
    for name in ("tokenized.0", "table.0", "offset.0"):
        (foreign / name).write_bytes((index.path / name).read_bytes())
    with pytest.warns(Warning, match="infini-gram index"):
        bare = Index.open(foreign)
    ids = index.encode("a b")
    assert bare.count([ids]).tolist() == index.count([ids]).tolist()
    with pytest.raises(NnlmError, match="without words|bare token ids"):
        bare.count(["a b"])


@pytest.mark.parametrize("name", ["tokenized.0", "table.0", "offset.0", "index.json"])
def test_a_truncated_or_damaged_index_is_one_line(world, tmp_path, name):
    d, _, index = world
    copy = tmp_path / "idx"
    copy.mkdir()
    for f in index.path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    data = (copy / name).read_bytes()
    cuts = (data[: len(data) // 2], data[:-2] if name.endswith(".json") else data[:-1])
    for damaged in (*cuts, data[:1] + bytes([data[1] ^ 1]) + data[2:]):
        (copy / name).write_bytes(damaged)
        with pytest.raises(NnlmError) as e:
            Index.open(copy).count(["a b"])
        assert "\n" not in str(e.value) and str(copy) in str(e.value)


def test_build_refuses_a_users_folder_and_bad_queries(world, tmp_path, capsys):
    d, text, index = world
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    assert main(["index", "build", str(text), "-o", str(mine)]) == 2
    assert (mine / "notes.txt").read_text() == "keep me"
    assert "not an nnlm index" in capsys.readouterr().err
    with pytest.raises(NnlmError, match="empty query"):
        index.docs([""])
    with pytest.raises(NnlmError, match="token id"):
        index.count([[70000]])


def test_the_cli_answers_and_writes_json(world, capsys):
    import json

    d, _, index = world
    assert main(["index", "count", str(index.path), "a b", "b a", "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["count"] for r in rows] == index.count(["a b", "b a"]).tolist()
    assert main(["index", "next", str(index.path), "a", "-k", "2"]) == 0
    assert main(["index", "infgram", str(index.path), "zzz a b", "--json"]) == 0
    assert '"suffix_length": 2' in capsys.readouterr().out
    assert main(["index", "docs", str(index.path), "a b c", "b a", "--limit", "2",
                 "--json"]) == 0
    rows = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["count"] for r in rows] == index.count(["a b c", "b a"]).tolist()
    assert all(isinstance(d["offset"], int) for r in rows for d in r["documents"])


# -- the unbounded model ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def model(world):
    d, text, _ = world
    vocab, train = read_corpus(text)
    return InfgramLM.fit(KneserNey(vocab, 3, True).fit(train), train), train


def _contexts(train, width: int) -> np.ndarray:
    ends = train.offsets[1:] - 1
    last = int(ends[-1])  # the corpus's last word: its match runs to the text's end
    picks = [last, int(ends[0]), 5, 40, 41, 100]
    rows = train.contexts(width + 1, np.array(picks, np.int64))
    unseen = np.array([[1] + [3] * (width - 1)])
    return np.vstack([rows, unseen])


def test_every_distribution_sums_to_one(model):
    m, train = model
    m.order = 16
    dist = np.exp(m.next_logprobs(_contexts(train, 15)))
    assert np.allclose(dist.sum(1), 1.0, atol=1e-10)
    assert (m.matched_lengths(_contexts(train, 15)) > 3).any()  # the levels above the base
    assert dist[:, 1].max() == 0  # <s> is never predicted


def test_scores_equal_the_distributions_and_beat_nothing_worse(model):
    m, train = model
    contexts = _contexts(train, 15)
    targets = np.array([2, 3, 4, 5, 3, 2, 4])
    direct = m.target_logprobs(contexts, targets)
    full = m.next_logprobs(contexts)[np.arange(len(targets)), targets]
    assert np.allclose(direct, full)


def test_save_load_and_the_decoder_states_score_as_the_whole_text(model, tmp_path):
    from nnlm.decoding import Decoder

    m, train = model
    m.order = 64
    save_model(m, tmp_path / "inf")
    loaded = load_model(tmp_path / "inf")
    assert loaded.kind == "infgram"
    whole = loaded.logprobs(train)
    assert np.allclose(whole, m.logprobs(train))
    sentence = " ".join(m.vocab.decode(train.ids[train.offsets[3]:train.offsets[4] - 1]))
    dec = Decoder(tmp_path / "inf")
    per_word = [s[0] for s in dec.full_scores(sentence)]
    assert np.allclose(np.array(per_word) / np.log10(np.e),
                       whole[train.offsets[3]:train.offsets[4]], atol=1e-6)


def test_ngram_train_method_infgram_evaluates(world, tmp_path, capsys):
    d, text, _ = world
    out = tmp_path / "inf"
    assert main(["ngram", "train", str(text), "--method", "infgram", "--order", "3",
                 "--discount-fallback", "-o", str(out)]) == 0
    assert main(["eval", str(out), str(text), "--json"]) == 0
    m = load_model(out)
    assert evaluate(m, read_stream(text, m.vocab)).perplexity < \
        evaluate(m.base, read_stream(text, m.vocab)).perplexity  # the text's own n-grams


# -- the server ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def client(world):
    from fastapi.testclient import TestClient

    from nnlm.serve.app import create_app
    from nnlm.serve.runner import _load

    _, _, index = world
    models, indexes = _load([f"corpus={index.path}"], 0.002, 16384)
    assert not models and list(indexes) == ["corpus"]
    with TestClient(create_app(models, indexes=indexes)) as c:
        yield c


def test_the_server_answers_nnlms_index_endpoints(world, client):
    _, _, index = world
    r = client.post("/v1/index/count", json={"queries": ["a b", "b a", "zzz"]})
    assert r.status_code == 200 and r.json()["counts"] == index.count(["a b", "b a", "zzz"]
                                                                      ).tolist()
    r = client.post("/v1/index/next", json={"index": "corpus", "query": "a", "k": 3}).json()
    want = index.next("a", 3)
    assert [w["count"] for w in r["next"]] == want.counts.tolist() and r["total"] == want.total
    r = client.post("/v1/index/infgram", json={"query": "zzz a b"}).json()
    assert r["suffix_length"] == 2
    r = client.post("/v1/index/docs", json={"query": "a b c", "limit": 2}).json()
    assert len(r["documents"]) == 2 and all("a b c" in d["text"] for d in r["documents"])
    assert client.post("/v1/index/next", json={"index": "nope", "query": "a"}).status_code \
        == 404
    assert client.get("/v1/indexes").json()["data"][0]["tokens"] == index.tokens
    assert 'id="corpus-section"' in client.get("/").text  # the page's corpus box


def test_the_server_speaks_infini_grams_api(world, client):
    _, _, index = world
    ids = index.encode("a b")
    for body in ({"index": "corpus", "query_type": "count", "query": "a b"},
                 {"index": "corpus", "query_type": "count", "query_ids": ids}):
        r = client.post("/", json=body).json()
        assert r["count"] == index.count("a b") and r["approx"] is False
        assert r["token_ids"] == ids and r["tokens"] == ["a", "b"]
    r = client.post("/", json={"index": "corpus", "query_type": "prob", "query": "a b"}).json()
    assert r["prompt_cnt"] == index.count("a") and r["cont_cnt"] == index.count("a b")
    r = client.post("/", json={"index": "corpus", "query_type": "infgram_ntd",
                               "query": "zzz a"}).json()
    assert r["suffix_len"] == 1 and sum(v["cont_cnt"] for v in
                                        r["result_by_token_id"].values()) == r["prompt_cnt"]
    r = client.post("/", json={"index": "corpus", "query_type": "search_docs",
                               "query": "a b c", "maxnum": 2}).json()
    assert len(r["documents"]) == 2 and ["a b c", "0"] in r["documents"][0]["spans"]
    bad = client.post("/", json={"index": "corpus", "query_type": "nope", "query": "a"})
    assert bad.status_code == 400 and "query_type" in bad.json()["error"]
    assert client.post("/", json={"index": "x", "query_type": "count", "query": "a"}
                       ).status_code == 404


def test_shards_within_memory_answer_as_one_index(world, tmp_path):
    d, text, index = world
    build_index([text], tmp_path / "sharded", memory=400 * 14)  # ~400 tokens a shard
    sharded = Index.open(tmp_path / "sharded")
    assert len(sharded.shards) > 3 and sharded.tokens == index.tokens
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(5), 60)
    assert sharded.count(queries).tolist() == index.count(queries).tolist()
    for a, b in zip(sharded.next(queries), index.next(queries)):
        assert dict(zip(a.tokens.tolist(), a.counts.tolist())) == \
            dict(zip(b.tokens.tolist(), b.counts.tolist()))
    build_index([text], tmp_path / "two", memory=400 * 14 * 2, workers=2)  # sorted at once
    assert all((tmp_path / "two" / f.name).read_bytes() == f.read_bytes()
               for f in sharded.path.iterdir())
    lines = text.read_text().splitlines()
    for doc in sharded.docs("a b c", limit=50):
        assert doc.words == lines[doc.doc].split()
    engine = pytest.importorskip("infini_gram.engine")
    ig = engine.InfiniGramEngine(index_dir=str(sharded.path), eos_token_id=2,
                                 vocab_size=65535)
    assert [ig.count(q)["count"] for q in queries] == index.count(queries).tolist()


@pytest.mark.parametrize("cores", [2, 3, 5])
def test_a_batch_cut_over_cores_answers_as_one_by_one(world, tmp_path, monkeypatch, cores):
    """A large batch is searched in pieces on threads, each shard cut to fill the cores:
    counts and followers equal the same queries asked one at a time (never cut), on one
    shard and on several."""
    import nnlm.index.index as index_module

    d, text, index = world
    build_index([text], tmp_path / "sharded", memory=400 * 14)
    sharded = Index.open(tmp_path / "sharded")
    stream = _stream(index)
    queries = _queries(stream, index.separator, np.random.default_rng(7), 50)
    queries.append(["not-a-word"])  # a missing word inside a piece
    one = {name: ([int(ix.count([q])[0]) for q in queries], [ix.next([q])[0] for q in queries])
           for name, ix in (("one", index), ("sharded", sharded))}
    monkeypatch.setattr(index_module, "usable_cores", lambda: cores)
    monkeypatch.setattr(index_module, "PARALLEL_QUERIES", 1)
    for name, ix in (("one", index), ("sharded", sharded)):
        counts, nexts = one[name]
        assert ix.count(queries).tolist() == counts
        for a, b in zip(ix.next(queries), nexts):
            assert (a.count, a.total) == (b.count, b.total)
            assert (a.tokens.tolist(), a.counts.tolist()) == (b.tokens.tolist(),
                                                              b.counts.tolist())


def test_a_forked_child_searches_on_threads_of_its_own(world, monkeypatch):
    """A pool made before a fork has no threads in the child: the child makes its own."""
    import multiprocessing

    import nnlm.index.index as index_module

    _, _, index = world
    monkeypatch.setattr(index_module, "usable_cores", lambda: 2)
    queries = [["a"], ["b"]] * 40
    want = index.count(queries).tolist()  # the parent's pool now exists
    global _FORKED
    _FORKED = index  # the child inherits it (an index's mappings do not pickle)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        got = pool.apply_async(_count_in_child, (queries,)).get(timeout=60)
    assert got == want


_FORKED = None


def _count_in_child(queries):
    return _FORKED.count(queries).tolist()


def test_paragraph_documents(tmp_path):
    text = tmp_path / "p.txt"
    text.write_text("a b\nc d\n\n\ne f\n\ng\nh\n")
    build_index([text], tmp_path / "idx", documents="paragraphs")
    index = Index.open(tmp_path / "idx")
    assert index.documents == 3
    assert [d.words for d in index.docs("c d")] == [["a", "b", "c", "d"]]
    assert index.count("b </s> <s> c") == 1 and index.count("d </s> <s> e") == 0


def test_a_decoders_kept_states_score_as_the_whole_batch(model, monkeypatch):
    m, train = model
    rng = np.random.default_rng(7)
    picks = np.sort(rng.choice(len(train.ids), 60, replace=False))
    contexts = train.contexts(16, picks)
    targets = train.ids[picks].astype(np.int64)
    whole = m.target_logprobs(contexts, targets)  # 60 rows: the vectorized levels
    steps = np.concatenate([m.target_logprobs(contexts[i:i + 3], targets[i:i + 3])
                            for i in range(0, 60, 3)])  # a decoder's few rows a call
    np.testing.assert_allclose(steps, whole, rtol=0, atol=1e-12)
    again = np.concatenate([m.target_logprobs(contexts[i:i + 3], targets[i:i + 3])
                            for i in range(0, 60, 3)])  # from the kept states
    np.testing.assert_array_equal(again, steps)
    if search.compiled() is not None:  # the numpy narrowing, from fresh states
        monkeypatch.setattr(search, "_C", False)
        m.states = type(m.states)(m.index)
        numpy_steps = np.concatenate([m.target_logprobs(contexts[i:i + 3], targets[i:i + 3])
                                      for i in range(0, 60, 3)])
        np.testing.assert_allclose(numpy_steps, whole, rtol=0, atol=1e-12)


# -- infini-gram's API on infini-gram's own index: its engine's numbers -------------------------
def _index_without_ends(world, folder: Path) -> Path:
    """The corpus as an indexer without an end token writes it (infini-gram's files
    only, no index.json): documents that end in their last word, not in </s>."""
    from nnlm.index import files

    _, _, index = world
    stream = _stream(index)
    stream = stream[stream != 2].astype(np.uint16)
    raw = stream.astype("<u2").tobytes()
    suffixes = sorted(range(len(stream)), key=lambda i: raw[2 * i:])
    folder.mkdir()
    files.write_shard(folder, 0, stream, np.flatnonzero(stream == 65535), np.array(suffixes))
    return folder


def test_infini_grams_api_gives_its_engines_numbers_on_its_own_index(world, tmp_path):
    engine_module = pytest.importorskip("infini_gram.engine",
                                        reason="the infini-gram package is not installed")
    from nnlm.serve.indexes import infini_gram_answer
    from nnlm.serve.schemas import InfiniGramRequest

    folder = _index_without_ends(world, tmp_path / "ig")
    engine = engine_module.InfiniGramEngine(index_dir=str(folder), eos_token_id=2,
                                            vocab_size=65535)
    with pytest.warns(Warning, match="infini-gram index"):
        bare = Index.open(folder)
    stream = _stream(bare)
    rng = np.random.default_rng(5)
    differ = 0
    for q in _queries(stream, bare.separator, rng, 500):
        if rng.random() < 0.2:
            q = [int(rng.integers(3, 10))] * int(rng.integers(2, 6)) + q[-1:]  # unseen
        prompt, cont = q[:-1], q[-1]

        def ours(kind, ids):
            return infini_gram_answer(bare, InfiniGramRequest(query_type=kind, query_ids=ids))

        for kind, theirs in (("prob", engine.prob(prompt, cont)),
                             ("infgram_prob", engine.infgram_prob(prompt, cont))):
            mine = ours(kind, q)
            keys = ["prompt_cnt", "cont_cnt"] + (["suffix_len"] if kind != "prob" else [])
            differ += any(mine[k] != theirs[k] for k in keys)
            assert mine["prob"] == pytest.approx(theirs["prob"])
        theirs = engine.infgram_ntd(q, max_support=1000)
        mine = ours("infgram_ntd", q)
        differ += (mine["prompt_cnt"], mine["suffix_len"]) != (theirs["prompt_cnt"],
                                                               theirs["suffix_len"])
        assert engine.count(q)["count"] == ours("count", q)["count"]
    assert differ == 0


def _foreign(index, folder: Path) -> Path:
    folder.mkdir()
    for name in ("tokenized.0", "table.0", "offset.0"):  # what infini-gram's indexer writes
        (folder / name).write_bytes((index.path / name).read_bytes())
    return folder


@pytest.mark.parametrize("action", ["count", "next", "infgram", "docs"])
def test_the_cli_queries_an_index_without_words_with_ids(world, tmp_path, capsys, action):
    import json

    _, _, index = world
    foreign = _foreign(index, tmp_path / "ig")
    ids = index.encode("a b")
    assert main(["index", action, str(foreign), " ".join(map(str, ids)), "--json"]) == 0
    row = json.loads(capsys.readouterr().out)
    assert row["count"] == index.count("a b")
    if action in ("next", "infgram"):
        want = index.next([ids])[0]
        assert [e["word"] for e in row["next"]] == want.tokens[:10].tolist()
    assert main(["index", action, str(foreign), "a b"]) == 2
    err = [x for x in capsys.readouterr().err.splitlines() if "warning" not in x]
    assert len(err) == 1 and "'a' is not a token id" in err[0]


@pytest.mark.parametrize("call", [
    lambda ix: ix.next(["a"], top_k=-1), lambda ix: ix.next("a", top_k=0),
    lambda ix: ix.infgram(["a"], top_k=-1), lambda ix: ix.next(["a"], top_k=True),
    lambda ix: ix.next(["a"], top_k=2.5), lambda ix: ix.docs(["a"], limit=-3),
    lambda ix: ix.docs("a", limit=0), lambda ix: ix.docs(["a"], limit=None)])
def test_the_python_api_refuses_what_the_cli_refuses(world, call):
    _, _, index = world
    with pytest.raises(NnlmError, match="top_k=|limit="):
        call(index)


def test_an_unverified_damaged_index_is_one_line_not_an_index_error(world, tmp_path):
    _, _, index = world
    copy = tmp_path / "idx"
    copy.mkdir()
    for f in index.path.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    tokens = np.fromfile(copy / "tokenized.0", "<u2")
    # the last word's id past the vocabulary: the suffix array's order is kept
    tokens[tokens == len(index.vocab) - 1] = 0xff00
    tokens.tofile(copy / "tokenized.0")
    damaged = Index.open(copy, verify=False)
    with pytest.raises(NnlmError, match="past its vocabulary"):
        damaged.docs([[1]], limit=300)
    with pytest.raises(NnlmError, match="past its vocabulary"):
        damaged.words(damaged.next([[]])[0].tokens)


def test_docs_are_distinct_documents(world, capsys):
    import json

    _, _, index = world
    found = index.docs("a", limit=8)
    assert len(found) == 8 and len({d.doc for d in found}) == 8
    assert main(["index", "docs", str(index.path), "a", "--limit", "2", "--json"]) == 0
    docs = json.loads(capsys.readouterr().out)["documents"]
    assert len(docs) == 2 and docs[0]["doc"] != docs[1]["doc"]


def test_build_warns_when_the_vocabulary_shares_no_word_with_the_text(world, tmp_path,
                                                                      capsys):
    _, text, _ = world
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("<unk>\n<s>\n</s>\nzebra\nquokka\n")
    assert main(["index", "build", str(text), "-o", str(tmp_path / "idx"), "--vocab",
                 str(vocab)]) == 0
    err = capsys.readouterr().err
    assert "none of its" in err and "<unk>" in err


def test_the_longest_suffix_is_found_alike_by_both_searches(world, monkeypatch):
    """Every suffix counted at once (short queries) or a binary search on the length
    (where every suffix would hold the square of a query's length): the same lengths,
    equal to brute force; a query of 20,000 tokens is answered without its square."""
    import nnlm.index.index as index_module

    _, _, index = world
    stream = _stream(index)
    rng = np.random.default_rng(11)
    queries = [[int(t) for t in rng.integers(3, 10, size=int(rng.integers(0, 14)))]
               for _ in range(120)] + _queries(stream, index.separator, rng, 60)

    def brute(q):
        return max(k for k in range(len(q) + 1) if _brute(stream, q[len(q) - k:]))

    at_once = index.longest_suffix(queries).tolist()
    monkeypatch.setattr(index_module, "SUFFIX_TOKENS", 0)
    assert index.longest_suffix(queries).tolist() == at_once == [brute(q) for q in queries]
    monkeypatch.undo()
    long = [3, 4] * 10_000 + index.encode("a b c")
    assert index.longest_suffix([long])[0] == brute(long[-40:])

"""nnlm serve: every endpoint against the library's own numbers and real clients.

Oracles: ``nnlm score --per-token`` (the CLI), kenlm's ``full_scores`` (the kenlm module
where installed, nnlm.kenlm always), a model's ``next_logprobs`` sorted by brute force,
the openai client against a live uvicorn, lm-evaluation-harness's way of reading an
echoed completion, schemathesis against /openapi.json, and headless Chromium on the page.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import math
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import numpy as np
import pytest
from hypothesis import HealthCheck, settings

from conftest import serve_process, toy_world
from nnlm.cli import main
from nnlm.models import load_model
from nnlm.serve.app import Settings, create_app
from nnlm.serve.registry import load_models, parse_spec

LN10 = math.log(10)
TEXTS = ["the cat sees a dog", "a dog", "zebra the quantum cat", ""]


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = toy_world(tmp_path_factory.mktemp("served"))
    assert main(["mix", str(w / "kn3"), str(w / "nplm"), "--valid", str(w / "toy/valid.txt"),
                 "-o", str(w / "mix")]) == 0
    return w


@pytest.fixture(scope="module")
def specs(world):
    return [str(world / "kn3"), f"arpa={world / 'kn3.arpa'}", str(world / "nplm"),
            str(world / "mix")]


@pytest.fixture(scope="module")
def app(specs, world):
    from nnlm.index import build_index
    from nnlm.serve.indexes import load_index
    from nnlm.text.vocab import Vocabulary

    build_index([world / "toy/train.txt"], world / "toy.idx",
                Vocabulary.load(world / "kn3" / "vocab.txt"))
    return create_app(load_models(specs, 0.002, 16384),
                      indexes={"toy": load_index("toy", world / "toy.idx")})


@pytest.fixture(scope="module")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app) as c:
        yield c


@contextlib.contextmanager
def live(app):
    """The app on a free loopback port under a real uvicorn, in a thread."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def cli_per_token(model: Path, texts: list[str], tmp_path: Path) -> list[list[tuple]]:
    """``nnlm score --per-token``'s (word, log10 p, n-gram length or None) per sentence."""
    f = tmp_path / "texts.txt"
    f.write_text("\n".join(texts) + "\n")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["score", str(model), str(f), "--per-token"]) == 0
    blocks = out.getvalue().split("\n\n")
    result = []
    for block in blocks[: len(texts)]:
        rows = [line.split("\t") for line in block.strip("\n").split("\n")
                if line and not line.startswith("Total:")]
        result.append([(r[0], float(r[1]), int(r[2]) if len(r) > 2 and r[2] != "OOV"
                        else None) for r in rows])
    return result


# -- /v1/score --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["kn3", "arpa", "nplm", "mix"])
def test_score_equals_nnlm_score(client, world, tmp_path, name):
    path = {"kn3": world / "kn3", "arpa": world / "kn3.arpa", "nplm": world / "nplm",
            "mix": world / "mix"}[name]
    texts = [t for t in TEXTS if t]
    r = client.post("/v1/score", json={"model": name, "texts": texts})
    assert r.status_code == 200, r.text
    expected = cli_per_token(path, texts, tmp_path)
    for got, want in zip(r.json()["results"], expected):
        assert [t["word"] for t in got["tokens"]] == [w for w, _, _ in want]
        assert np.allclose([t["log10_prob"] for t in got["tokens"]], [p for _, p, _ in want],
                           atol=1.5e-6)
        if want[0][2] is not None:  # back-off models print their n-gram lengths
            assert [t["ngram_length"] for t in got["tokens"]] == [n for _, _, n in want]
        total = sum(p for _, p, _ in want)
        assert got["log10_prob"] == pytest.approx(total, abs=1e-5)
        assert got["perplexity"] == pytest.approx(10 ** (-total / len(want)), rel=1e-5)


@pytest.mark.parametrize("bos,eos", [(True, True), (True, False), (False, True),
                                     (False, False)])
def test_score_is_kenlms_full_scores(client, world, bos, eos):
    import nnlm.kenlm

    oracles = [nnlm.kenlm.Model(str(world / "kn3.arpa"))]
    with contextlib.suppress(ImportError):
        import kenlm

        oracles.append(kenlm.Model(str(world / "kn3.arpa")))
    r = client.post("/v1/score", json={"model": "arpa", "texts": TEXTS, "bos": bos, "eos": eos})
    assert r.status_code == 200
    for text, got in zip(TEXTS, r.json()["results"]):
        for oracle in oracles:
            want = list(oracle.full_scores(text, bos=bos, eos=eos))
            assert len(want) == len(got["tokens"])
            for (p, n, oov), t in zip(want, got["tokens"]):
                assert t["log10_prob"] == pytest.approx(p, abs=1e-5)
                assert (t["ngram_length"], t["oov"]) == (n, oov)
    empty = r.json()["results"][-1]
    assert (empty["perplexity"] is None) == (not eos)


def test_score_refuses_sentence_boundaries_inside(client):
    r = client.post("/v1/score", json={"model": "kn3", "texts": ["the <s> cat"]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "texts"]


# -- /v1/next -----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["kn3", "nplm", "mix"])
def test_next_is_the_models_distribution(client, world, name):
    lm = load_model(world / ("mix" if name == "mix" else name))
    V = len(lm.vocab)
    r = client.post("/v1/next", json={"model": name, "context": "the cat", "k": V})
    assert r.status_code == 200
    words = r.json()["words"]
    assert len(words) == V - 1  # every word but <s>
    assert math.fsum(10 ** w["log10_prob"] for w in words) == pytest.approx(1.0, abs=1e-6)
    k = lm.order - 1
    ctx = np.array([([1] * k + [lm.vocab.index["the"], lm.vocab.index["cat"]])[-k:]])
    brute = lm.next_logprobs(ctx)[0]
    best = np.argsort(-brute, kind="stable")[:5]
    top = client.post("/v1/next", json={"model": name, "context": "the cat", "k": 5}).json()
    assert [w["word"] for w in top["words"]] == [lm.vocab.words[i] for i in best]
    assert np.allclose([w["log10_prob"] for w in top["words"]], brute[best] / LN10)


def test_next_after_the_null_context_is_the_unigram_distribution(client, world):
    lm = load_model(world / "kn3")
    r = client.post("/v1/next", json={"model": "kn3", "context": "", "k": 3, "bos": False})
    best = np.argsort(-lm.unigram_logp)[:3]
    assert [w["word"] for w in r.json()["words"]] == [lm.vocab.words[i] for i in best]


# -- completions: the openai client and lm-evaluation-harness's reading -------------------
def test_openai_client_echo_sums_to_the_score(app, client):
    openai = pytest.importorskip("openai")
    with live(app) as url:
        api = openai.OpenAI(base_url=url + "/v1", api_key="none")
        for name in ("kn3", "nplm"):
            text = "the cat sees a dog"
            out = api.completions.create(model=name, prompt=text, echo=True, max_tokens=0,
                                         logprobs=1)
            lp = out.choices[0].logprobs
            assert out.choices[0].text == text
            assert "".join(lp.tokens) == text and lp.text_offset == [0, 3, 7, 12, 14]
            assert lp.token_logprobs[0] is None
            scored = client.post("/v1/score", json={"model": name, "texts": [text],
                                                    "eos": False}).json()["results"][0]
            first = scored["tokens"][0]["log10_prob"] * LN10
            assert first + sum(lp.token_logprobs[1:]) == pytest.approx(
                scored["log10_prob"] * LN10, abs=1e-5)
            for tok, alt in zip(lp.token_logprobs[1:], lp.top_logprobs[1:]):
                assert max(alt.values()) >= tok - 1e-12  # the best is at least the token

            # sampling: seeded draws repeat, n choices, a stop sequence ends the text
            a = api.completions.create(model=name, prompt="the", max_tokens=8, n=3, seed=7)
            b = api.completions.create(model=name, prompt="the", max_tokens=8, n=3, seed=7)
            assert [c.text for c in a.choices] == [c.text for c in b.choices]
            assert [c.index for c in a.choices] == [0, 1, 2]
            # a sampled </s> ends a choice: its last token, with no text
            assert a.usage.completion_tokens == sum(len(c.text.split()) + (
                c.finish_reason == "stop") for c in a.choices)
            greedy = api.completions.create(model=name, prompt="the cat", max_tokens=1,
                                            temperature=0)
            best = client.post("/v1/next", json={"model": name, "context": "the cat",
                                                 "k": 2}).json()["words"]
            word = next(w["word"] for w in best if w["word"] not in ("<unk>",))
            assert greedy.choices[0].text in ("", " " + word)


def test_lm_evaluation_harness_loglikelihood(client):
    """lm-evaluation-harness's local-completions with the remote tokenizer: token ids of
    context and continuation, echo, max_tokens 1, logprobs 1; it sums the continuation's
    token_logprobs[ctxlen:-1] and checks greediness against top_logprobs."""
    info = client.get("/tokenizer_info").json()
    assert "eos_token" in info
    eot = client.post("/tokenize", json={"prompt": info["eos_token"]}).json()["tokens"][0]
    for context, continuation in [("the cat", " sees a dog"), ("", "a dog")]:
        ctx = client.post("/tokenize", json={"prompt": context}).json()["tokens"] or [eot]
        cont = client.post("/tokenize", json={"prompt": continuation}).json()["tokens"]
        out = client.post("/v1/completions", json={
            "model": "kn3", "prompt": [ctx + cont], "temperature": 0, "max_tokens": 1,
            "logprobs": 1, "seed": 1234, "echo": True}).json()
        assert "choices" in out, out
        choice = out["choices"][0]["logprobs"]
        n = len(ctx)
        got = sum(choice["token_logprobs"][n:n + len(cont)])
        full = client.post("/v1/score", json={"model": "kn3", "texts": [
            (context + continuation).strip()], "eos": False}).json()["results"][0]
        skip = len(context.split())
        want = sum(t["log10_prob"] for t in full["tokens"][skip:]) * LN10
        assert got == pytest.approx(want, abs=1e-9)
    # a greedy continuation is recognised as greedy: its numbers are its row's maximum
    best = client.post("/v1/next", json={"model": "kn3", "context": "the cat", "k": 1}).json()
    word = best["words"][0]["word"]
    ids = client.post("/tokenize", json={"prompt": f"the cat {word}"}).json()["tokens"]
    out = client.post("/v1/completions", json={"model": "kn3", "prompt": ids, "echo": True,
                                               "max_tokens": 1, "logprobs": 1,
                                               "temperature": 0}).json()
    lp = out["choices"][0]["logprobs"]
    assert lp["token_logprobs"][2] == max(lp["top_logprobs"][2].values())


def test_lm_evaluation_harness_itself(app, client):
    """The harness's own local-completions model, unchanged: it finds the remote
    tokenizer, sends token ids, and reads log-likelihoods and greediness back."""
    api = pytest.importorskip("lm_eval.models.openai_completions")
    from lm_eval.api.instance import Instance

    pairs = [("the cat", " sees a dog"), ("", "a dog"), ("the cat", " is")]
    with live(app) as url:
        lm = api.LocalCompletionsAPI(base_url=url + "/v1/completions", model="kn3",
                                     max_retries=1)
        got = lm.loglikelihood([Instance("loglikelihood", doc={}, arguments=p, idx=i)
                                for i, p in enumerate(pairs)], disable_tqdm=True)
        text = lm.generate_until([Instance("generate_until", doc={}, idx=0, arguments=(
            "the cat", {"until": ["\n"], "max_gen_toks": 5}))], disable_tqdm=True)
    for (context, continuation), (logp, greedy) in zip(pairs, got):
        tokens = client.post("/v1/score", json={"model": "kn3", "texts": [
            (context + continuation).strip()], "eos": False}).json()["results"][0]["tokens"]
        cont = tokens[len(context.split()):]
        assert logp == pytest.approx(sum(t["log10_prob"] for t in cont) * LN10, abs=1e-9)
        best = [client.post("/v1/next", json={"model": "kn3", "k": 1, "context": " ".join(
            t["word"] for t in tokens[:i])}).json()["words"][0]["word"]
            for i in range(len(tokens) - len(cont), len(tokens))]
        assert greedy == (best == [t["word"] for t in cont])
    assert isinstance(text[0], str) and 1 <= len(text[0].split()) <= 5


def test_tokens_round_trip(client):
    ids = client.post("/tokenize", json={"prompt": "the cat\nzebra"}).json()["tokens"]
    assert ids[2] == 2 and ids[3] == 0  # a newline is </s>; an unknown word <unk>
    assert client.post("/detokenize", json={"tokens": ids}).json()["prompt"] == \
        "the cat\n<unk>"
    r = client.post("/detokenize", json={"tokens": [10**6]})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "tokens"]


# -- embeddings and neighbours ---------------------------------------------------------------
def test_embed_and_neighbors_are_the_libraries(client, world):
    lm = load_model(world / "nplm")
    r = client.post("/v1/embed", json={"model": "nplm", "texts": ["the cat", "a dog"]})
    assert np.allclose(r.json()["embeddings"], lm.embed(["the cat", "a dog"]), atol=1e-6)
    r = client.post("/v1/neighbors", json={"model": "nplm", "word": "cat", "k": 4})
    assert [(n["word"], round(n["similarity"], 5)) for n in r.json()["neighbors"]] == \
        [(w, round(s, 5)) for w, s in lm.neighbors("cat", 4)]
    for body in ({"model": "kn3", "word": "cat"}, {"model": "nplm", "word": "zebra"}):
        r = client.post("/v1/neighbors", json=body)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"][1] in ("model", "word")


# -- limits ---------------------------------------------------------------------------------
def test_limits(client, specs):
    assert client.post("/v1/next", json={"model": "nope"}).status_code == 404
    r = client.post("/v1/next", json={"model": "kn3", "k": 0})
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "k"]
    big = b'{"model": "kn3", "texts": ["' + b"a " * (1 << 19) + b'"]}'
    assert client.post("/v1/score", content=big,
                       headers={"content-type": "application/json"}).status_code == 413

    def chunks():  # no content-length: counted as it streams
        yield b'{"model": "kn3", "texts": ["'
        for _ in range(300):
            yield b"a " * 4096
        yield b'"]}'
    assert client.post("/v1/score", content=chunks(),
                       headers={"content-type": "application/json"}).status_code == 413
    assert client.post("/v1/score", content=b"{", headers={
        "content-type": "application/json"}).status_code == 422
    as_curl = client.post("/v1/score", content=b'{"model": "kn3", "texts": ["the cat"]}',
                          headers={"content-type": "application/x-www-form-urlencoded"})
    assert as_curl.status_code == 200  # curl -d's default type, JSON inside
    from fastapi.testclient import TestClient

    with TestClient(create_app(load_models(specs[:1], 0.002, 16384),
                               Settings(timeout=1e-6))) as slow:
        r = slow.post("/v1/score", json={"model": "kn3", "texts": ["the cat"] * 2000})
        assert r.status_code == 504


def test_concurrent_requests_share_model_calls(specs):
    models = load_models(specs[2:3], 0.05, 16384)  # nplm, a 50 ms window
    app = create_app(models)
    texts = [f"the cat sees {w}" for w in ("a dog", "the dog", "a cat", "the bird")] * 4

    async def run():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await asyncio.gather(*[c.post("/v1/score", json={
                "model": "nplm", "texts": [t]}) for t in texts])
    answers = asyncio.run(run())
    assert models["nplm"].batcher.calls < len(texts) / 2  # merged
    alone = create_app(load_models(specs[2:3], 0, 16384))
    from fastapi.testclient import TestClient

    with TestClient(alone) as c:
        for t, a in zip(texts, answers):
            b = c.post("/v1/score", json={"model": "nplm", "texts": [t]}).json()
            assert np.allclose([x["log10_prob"] for x in a.json()["results"][0]["tokens"]],
                               [x["log10_prob"] for x in b["results"][0]["tokens"]],
                               atol=1e-5)


# -- the command ------------------------------------------------------------------------
def test_names(world):
    assert parse_spec("kn=a/b") == ("kn", Path("a/b"))
    assert parse_spec("x/lm.arpa.gz")[0] == "lm"
    assert parse_spec("a=b=c")[0] == "a"


@pytest.mark.parametrize("args,message", [
    (["{w}/nothing"], "no such model"),
    (["{w}/toy/train.txt"], "neither an ARPA file nor an nnlm model"),
    (["{w}/kn3", "kn3={w}/kn3.arpa"], "two models are named 'kn3'"),
    (["{w}/kn3", "--port", "0"], "--port"),
    (["{w}/kn3", "--batch-wait", "2"], "--batch-wait"),
])
def test_serve_refuses_in_one_line(world, args, message, capsys):
    assert main(["serve", *[a.format(w=world) for a in args]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err


@pytest.mark.slow
def test_serve_command_answers_with_two_workers(world):
    """The real command, with --workers 2: both processes load the models and answer."""
    url, proc = serve_process(world / "kn3", "--workers", "2")
    try:
        r = httpx.post(f"{url}/v1/score", json={"model": "kn3", "texts": ["the cat"]})
        assert r.status_code == 200 and len(r.json()["results"][0]["tokens"]) == 3
    finally:
        proc.terminate()
        proc.wait(30)


# -- schemathesis: no 5xx, every answer valid against the spec ------------------------------
def test_fuzz_the_api(app):
    """schemathesis writes requests from /openapi.json (25 an operation): none may get a
    5xx, and every answer must have a status, content type and body the spec allows. (A
    422 for input the schema allows but the vocabulary does not, such as an unknown word
    for /v1/neighbors, is expected, so schemathesis's positive-data check is left out.)"""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import given
    from schemathesis import checks

    chosen = [checks.not_a_server_error, checks.status_code_conformance,
              checks.content_type_conformance, checks.response_schema_conformance]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [r.ok() for r in schema.get_all_operations()]
    assert len(operations) >= 11
    for op in operations:
        @given(case=op.as_strategy())
        @settings(max_examples=25, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def check(case):
            case.call_and_validate(checks=chosen)
        check()


# -- the page in a real browser ---------------------------------------------------------------
def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="no Chromium installed (apt install chromium)")
def test_page_in_a_real_browser(app, world, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    errors: list[str] = []
    with live(app) as url, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(),
                                    args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url + "/")
        # before anything is typed: the placeholder's context, said so, not another's
        page.wait_for_function("document.querySelectorAll('#next-out .card').length == 4")
        placeholder = page.get_attribute("#context", "placeholder")
        assert placeholder in page.text_content("#next-caption")
        assert "example" in page.text_content("#next-caption")
        page.fill("#context", "the cat")
        page.wait_for_function("document.getElementById('next-caption').textContent"
                               ".includes('the cat')")
        assert "example" not in page.text_content("#next-caption")
        page.wait_for_function("document.querySelectorAll('#next-out .card').length == 4 && "
                               "document.querySelectorAll('#next-out .bars li').length >= 20")
        bars = page.eval_on_selector_all("#next-out .card", "cs => cs.map(c => "
                                         "[c.dataset.model, c.querySelectorAll('li').length])")
        assert {name for name, n in bars if n == 10} == {"kn3", "arpa", "nplm", "mix"}
        sentence = "the cat sees a dog and the dog sees a cat in the garden " * 2
        page.fill("#sentence", sentence)
        page.keyboard.press("Enter")
        tokens = 4 * (len(sentence.split()) + 1)
        page.wait_for_function(f"document.querySelectorAll('#score-out .tok').length == "
                               f"{tokens}")
        outside = page.evaluate("""[...document.querySelectorAll('#score-out .card')].map(c =>
            [...c.querySelectorAll('.tok')].filter(t => t.getBoundingClientRect().right >
             c.getBoundingClientRect().right + 1).length)""")
        assert outside == [0, 0, 0, 0], "words spill out of their model's card"
        page.fill("#word", "cat")
        page.keyboard.press("Enter")
        page.wait_for_function("document.querySelectorAll('#nb-out .bars li').length == 10")
        # the corpus box: what follows a phrase in the served index, with its counts
        page.fill("#phrase", "the cat")
        page.wait_for_function("document.getElementById('corpus-caption').textContent"
                               ".includes('the cat') && document.querySelector("
                               "'#corpus-out .card[data-index=toy] .bars li') !== null")
        shown = page.eval_on_selector_all("#corpus-out .bars li .p",
                                          "ps => ps.map(p => Number(p.textContent))")
        from nnlm.index import Index

        assert shown == Index.open(world / "toy.idx").next("the cat", 10).counts.tolist()
        shot = Path(os.environ.get("NNLM_SCREENSHOT", tmp_path / "serve.png"))
        page.screenshot(path=str(shot), full_page=True)
        page.set_viewport_size({"width": 390, "height": 800})  # a phone
        width = page.evaluate("document.documentElement.scrollWidth")
        browser.close()
    assert not errors, errors
    assert width <= 390, "the page scrolls sideways on a phone"
    assert shot.stat().st_size > 10_000


# -- no 5xx for any value of any field: non-finite numbers, lone surrogates, bad UTF-8 -----
# every POST endpoint's request model and a valid body for it
POST_BODIES = {
    "/v1/score": {"model": "kn3", "texts": ["the cat"]},
    "/v1/next": {"model": "kn3", "context": "the", "k": 3},
    "/v1/completions": {"model": "kn3", "prompt": "the", "max_tokens": 2, "seed": 1},
    "/v1/embed": {"model": "nplm", "texts": ["the cat"]},
    "/v1/neighbors": {"model": "nplm", "word": "cat", "k": 3},
    "/tokenize": {"model": "kn3", "prompt": "the cat"},
    "/detokenize": {"model": "kn3", "tokens": [3, 4]},
    "/v1/index/count": {"index": "toy", "queries": ["the cat"]},
    "/v1/index/next": {"index": "toy", "query": "the", "k": 3},
    "/v1/index/infgram": {"index": "toy", "query": "the", "k": 3},
    "/v1/index/docs": {"index": "toy", "query": "the", "limit": 2},
}
# POST / is infini-gram's API, which answers in its own shapes: 400 and {"error": ...}
INFINI_GRAM_BODY = {"index": "toy", "query_type": "search_docs", "query": "the cat",
                    "maxnum": 2, "max_disp_len": 20}
ODD_VALUES = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity",
              "a lone surrogate": '"\\ud800"', "a list holding NaN": "[NaN]",
              "a list holding a lone surrogate": '["a \\udfff b"]'}


def _fields(path):
    from nnlm.serve import schemas as s
    from nnlm.serve.app import create_app as _  # noqa: F401 (the schemas' module loaded)

    model = {"/v1/score": s.ScoreRequest, "/v1/next": s.NextRequest,
             "/v1/completions": s.CompletionRequest, "/v1/embed": s.EmbedRequest,
             "/v1/neighbors": s.NeighborsRequest, "/tokenize": s.TokenizeRequest,
             "/detokenize": s.DetokenizeRequest, "/v1/index/count": s.IndexCountRequest,
             "/v1/index/next": s.IndexNextRequest, "/v1/index/infgram": s.IndexNextRequest,
             "/v1/index/docs": s.IndexDocsRequest}[path]
    return list(model.model_fields)


def test_every_field_of_every_endpoint_answers_422_to_odd_values(client):
    import json

    assert {r.path for r in client.app.routes if "POST" in getattr(r, "methods", ())} == \
        set(POST_BODIES) | {"/"}
    for path, body in POST_BODIES.items():
        assert client.post(path, json=body).status_code == 200, path
        for field in _fields(path):
            for what, raw in ODD_VALUES.items():
                rest = json.dumps({k: v for k, v in body.items() if k != field})
                data = rest[:-1] + (", " if len(rest) > 2 else "") + f'"{field}": {raw}}}'
                r = client.post(path, content=data.encode(),
                                headers={"content-type": "application/json"})
                assert r.status_code in (404, 422), (path, field, what, r.status_code, r.text)
                detail = r.json()["detail"]  # an answer in valid JSON
                if r.status_code == 422 and isinstance(detail, list):
                    assert any(field in map(str, d["loc"]) for d in detail), (path, field, what)
        key = "model" if "model" in body else "index"
        bad = json.dumps(body).replace(f'"{key}": "', f'"{key}": "\xff\xfe').encode("latin-1")
        assert b"\xff" in bad
        r = client.post(path, content=bad, headers={"content-type": "application/json"})
        assert r.status_code in (400, 422), (path, r.status_code, r.text)
        r.json()


def test_infini_grams_api_is_held_to_the_same_rules(client):
    """POST / (infini-gram's request and answer shapes): every field given an odd value,
    a wrong type, or a size past nnlm's own endpoints' caps is a 400 in infini-gram's
    shape, never a 500 nor an answer of unbounded size."""
    import json

    from nnlm.serve import schemas as s

    assert client.post("/", json=INFINI_GRAM_BODY).status_code == 200
    odd = {**ODD_VALUES, "a list": '["b3k"]', "an object": '{"a": 1}', "a float": "2.5",
           "true": "true", "a huge number": str(10**9), "a negative number": "-3"}
    for field in s.InfiniGramRequest.model_fields:
        for what, raw in odd.items():
            rest = json.dumps({k: v for k, v in INFINI_GRAM_BODY.items() if k != field})
            data = rest[:-1] + f', "{field}": {raw}}}'
            r = client.post("/", content=data.encode(),
                            headers={"content-type": "application/json"})
            assert r.status_code in (400, 404), (field, what, r.status_code, r.text)
            assert "error" in r.json(), (field, what)
    deep = "[" * 100_000 + "]" * 100_000
    for data in (deep, '{"index": ' + deep + "}", "[1, 2]", "not json", '"\\ud800"'):
        r = client.post("/", content=data.encode(),
                        headers={"content-type": "application/json"})
        assert r.status_code == 400 and "error" in r.json(), (data[:20], r.text)
    long_ids = {**INFINI_GRAM_BODY, "query_ids": [3] * (s.MAX_QUERY_TOKENS + 1)}
    long_ids.pop("query")
    assert client.post("/", content=json.dumps(long_ids).encode()).status_code in (400, 413)

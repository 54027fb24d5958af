"""The FastAPI application: routes, limits and errors around :mod:`nnlm.serve.work`.

Limits: a body over ``max_body`` bytes (1 MB) is a 413 before it is read whole; a field
out of range a 422 naming it; an unknown model a 404; a request that runs past
``timeout`` seconds a 504. Nothing a client sends should give a 500 (schemathesis checks
that against ``/openapi.json`` in the tests).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from pydantic import BaseModel

from ..base.errors import NnlmError, a
from ..base.version import __version__
from . import schemas as s
from . import work
from .indexes import ServedIndex, infini_gram_answer, infini_gram_request, nnlm_next
from .registry import ServedModel
from .work import RequestError


@dataclass
class Settings:
    timeout: float = 30.0  # seconds per request
    max_body: int = 1 << 20  # bytes


class Detail(BaseModel):
    detail: str | list


ERRORS = {404: {"model": Detail, "description": "no such model"},
          413: {"model": Detail, "description": "the body is over the size limit"},
          422: {"model": Detail, "description": "a field is malformed or out of range"},
          503: {"model": Detail, "description": "the model cannot give a finite score"},
          504: {"model": Detail, "description": "the request ran past the server's timeout"}}


class BodyLimit:
    """ASGI middleware: a 413 for a body over ``limit`` bytes, whether it declares its
    length or streams in chunks (read here, at most ``limit`` bytes of it, then handed on
    whole). A JSON body sent as a form (``curl -d``'s default type) is taken as JSON."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or {}).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.limit):
            return await _too_large(self.limit)(scope, receive, send)
        parts, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            parts.append(message.get("body", b""))
            size += len(parts[-1])
            if size > self.limit:
                return await _too_large(self.limit)(scope, receive, send)
            more = message.get("more_body", False)
        body = b"".join(parts)
        if body.lstrip()[:1] in (b"{", b"[") and b"json" not in \
                dict(scope.get("headers") or {}).get(b"content-type", b""):
            # curl -d sends JSON as a form; take it for what it is
            scope = {**scope, "headers": [(k, v) for k, v in scope["headers"]
                                          if k != b"content-type"]
                     + [(b"content-type", b"application/json")]}
        replayed = False

        async def replay():
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


class FastJSON(JSONResponse):
    """JSON by orjson where installed (several times faster on score lists), else json;
    never NaN (scores are checked finite before they get here)."""

    def render(self, content) -> bytes:
        try:
            import orjson
        except ImportError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode()
        return orjson.dumps(content)


def _too_large(limit: int) -> JSONResponse:
    return JSONResponse({"detail": f"the request body is over {limit:,} bytes"}, 413)


def _json_safe_error(error: dict) -> dict:
    """One validation error as JSON can carry it: type, location and message (the
    input echoed only where JSON can hold it: no NaN, no lone surrogate)."""
    out = {"type": error.get("type"), "loc": [str(x) if not isinstance(x, int) else x
                                              for x in error.get("loc", ())],
           "msg": str(error.get("msg", "")).encode("utf-8", "replace").decode("utf-8")}
    try:
        json.dumps(error.get("input"), allow_nan=False, ensure_ascii=False).encode("utf-8")
        out["input"] = error.get("input")
    except (TypeError, ValueError):
        pass
    return out


def create_app(models: dict[str, ServedModel], settings: Settings | None = None,
               indexes: dict[str, ServedIndex] | None = None) -> FastAPI:
    """The server for ``models`` (see :func:`nnlm.serve.registry.load_models`) and
    ``indexes`` (:mod:`nnlm.serve.indexes`)."""
    settings = settings or Settings()
    indexes = indexes or {}
    first_name = next(iter(models), None)
    app = FastAPI(title="nnlm", version=__version__,
                  description="Scores, next words, completions and embeddings from nnlm's "
                  "language models. nnlm's endpoints give log10 probabilities (KenLM's "
                  "convention); the OpenAI-shaped ones natural logs.")
    app.add_middleware(BodyLimit, limit=settings.max_body)

    def model(name: str | None) -> ServedModel:
        """The served model ``name`` (None: the first), as its files are now: loaded
        again if they changed, 503 if they cannot be (nnlm.serve.registry)."""
        m = models.get(first_name if name is None else name)  # type: ignore[arg-type]
        if m is None:
            raise RequestError("model", f"model {name!r} is not served here; served: "
                               f"{', '.join(models)}", 404)
        try:
            fresh = m.current()
        except NnlmError as e:
            raise RequestError(None, f"model {m.name!r} is unavailable: {e}", 503) from None
        if fresh is not m:
            models[m.name] = fresh
        return fresh

    async def timed(m: ServedModel, coro):
        try:
            with m.batcher.request():
                return await asyncio.wait_for(coro, settings.timeout)
        except TimeoutError:
            raise RequestError(None, f"the request ran past {settings.timeout:g} s (the "
                               "server's --timeout); send less at once", 504) from None

    @app.exception_handler(RequestError)
    async def request_error(request: Request, e: RequestError):
        if e.field is None or e.status == 404:
            return JSONResponse({"detail": e.message}, e.status)
        return JSONResponse({"detail": [{"loc": ["body", e.field], "msg": e.message,
                                         "type": "value_error"}]}, e.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, e: RequestValidationError):
        """FastAPI's 422, with what cannot be JSON (a NaN, a lone surrogate) left out of
        the echo of the input, so the answer is always a 422 and never a 500."""
        return JSONResponse({"detail": [_json_safe_error(x) for x in e.errors()]}, 422)

    @app.exception_handler(NnlmError)
    async def nnlm_error(request: Request, e: NnlmError):
        return JSONResponse({"detail": str(e)}, 422)

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return (resources.files(__package__) / "page.html").read_text("utf-8")

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok", "models": list(models)}

    @app.get("/v1/models")
    async def list_models() -> dict:
        return {"object": "list", "data": [m.describe() for m in models.values()]}

    @app.get("/v1/models/{name}", responses=ERRORS)
    async def one_model(name: str) -> dict:
        return model(name).describe()

    @app.post("/v1/score", responses=ERRORS, response_model=s.ScoreResponse)
    async def score(req: s.ScoreRequest):
        """Each text as one sentence: log10 probabilities per token and in total, as
        ``nnlm score --per-token`` and kenlm's ``full_scores`` give them."""
        m = model(req.model)
        return FastJSON(await timed(m, work.score(m, req)))

    @app.post("/v1/next", responses=ERRORS)
    async def next_words(req: s.NextRequest) -> s.NextResponse:
        """The k most likely next words after a context, with log10 probabilities."""
        m = model(req.model)
        return await timed(m, work.next_words(m, req))

    @app.post("/v1/completions", responses=ERRORS)
    async def completions(req: s.CompletionRequest) -> s.CompletionResponse:
        """OpenAI's legacy completions: ``echo`` with ``logprobs`` scores a prompt
        (lm-evaluation-harness's loglikelihood); ``max_tokens`` > 0 samples words."""
        m = model(req.model)
        return await timed(m, work.complete(m, req))

    @app.post("/v1/embed", responses=ERRORS, response_model=s.EmbedResponse)
    async def embed(req: s.EmbedRequest):
        """Sentence embeddings from the word feature vectors C (neural models)."""
        m = _with_features(model(req.model))
        vectors = await timed(m, m.batcher.run(lambda: m.lm.embed(req.texts,
                                                                normalize=req.normalize)))
        return FastJSON({"model": m.name, "dim": int(vectors.shape[1]),
                         "embeddings": vectors.astype(float).tolist()})

    @app.post("/v1/neighbors", responses=ERRORS)
    async def neighbors(req: s.NeighborsRequest) -> s.NeighborsResponse:
        """A word's nearest words by cosine of their feature vectors C."""
        m = _with_features(model(req.model))
        if req.word not in m.lm.vocab or req.word in ("<s>", "</s>", "<unk>"):
            raise RequestError("word", f"{req.word!r} is not a word of {m.name}'s "
                               f"vocabulary ({len(m.lm.vocab):,} words)")
        found = await timed(m, m.batcher.run(m.lm.neighbors, req.word, req.k))
        return s.NeighborsResponse(model=m.name, word=req.word, neighbors=[
            s.Neighbor(word=w, similarity=sim) for w, sim in found])

    # vLLM's tokenizer endpoints: lm-evaluation-harness's local-completions uses them to
    # send token ids, so a prompt's context and continuation split where nnlm splits
    @app.get("/tokenizer_info")
    async def tokenizer_info() -> dict:
        return {"tokenizer_class": "nnlm words (whitespace; a newline is </s>)",
                "eos_token": "</s>", "bos_token": "<s>", "unk_token": "<unk>",
                "pad_token": None, "model": first_name,
                "vocab_size": len(model(None).lm.vocab)}

    @app.post("/tokenize", responses=ERRORS)
    async def tokenize(req: s.TokenizeRequest) -> s.TokenizeResponse:
        m = model(req.model)
        ids = work.tokenize(m.lm.vocab, req.prompt).ids
        return s.TokenizeResponse(tokens=ids, count=len(ids), max_model_len=1 << 20)

    @app.post("/detokenize", responses=ERRORS)
    async def detokenize(req: s.DetokenizeRequest) -> s.DetokenizeResponse:
        return s.DetokenizeResponse(
            prompt=work.detokenize(model(req.model).lm.vocab, req.tokens).text)

    add_index_routes(app, indexes, settings)
    return app


def add_index_routes(app: FastAPI, indexes: dict[str, ServedIndex], settings: Settings):
    """nnlm's index endpoints and infini-gram's API (a POST to ``/``)."""

    def served(name: str | None, field: str = "index") -> ServedIndex:
        found = indexes.get(next(iter(indexes), "") if name is None else name)
        if found is None:
            raise RequestError(field, f"index {name!r} is not served here; served: "
                               f"{', '.join(indexes) or 'none'}", 404)
        try:
            fresh = found.current()
        except NnlmError as e:
            raise RequestError(None, f"index {found.name!r} is unavailable: {e}", 503) \
                from None
        indexes[found.name] = fresh
        return fresh

    async def run(fn, *args):
        try:
            return await asyncio.wait_for(asyncio.to_thread(fn, *args), settings.timeout)
        except TimeoutError:
            raise RequestError(None, f"the request ran past {settings.timeout:g} s (the "
                               "server's --timeout); send less at once", 504) from None

    @app.get("/v1/indexes")
    async def list_indexes() -> dict:
        return {"object": "list", "data": [x.describe() for x in indexes.values()]}

    @app.post("/v1/index/count", responses=ERRORS)
    async def index_count(req: s.IndexCountRequest) -> s.IndexCountResponse:
        """How often each n-gram occurs in the corpus (one batch)."""
        x = served(req.index)
        counts = await run(x.index.count, list(req.queries))
        return s.IndexCountResponse(index=x.name, counts=counts.tolist())

    @app.post("/v1/index/next", responses=ERRORS)
    async def index_next(req: s.IndexNextRequest) -> s.IndexNextResponse:
        """What follows an n-gram in the corpus, with counts."""
        x = served(req.index)
        return s.IndexNextResponse(**await run(nnlm_next, x, req.query, req.k, False))

    @app.post("/v1/index/infgram", responses=ERRORS)
    async def index_infgram(req: s.IndexNextRequest) -> s.IndexNextResponse:
        """The ∞-gram: the longest suffix of the context that occurs, and what follows it."""
        x = served(req.index)
        return s.IndexNextResponse(**await run(nnlm_next, x, req.query, req.k, True))

    @app.post("/v1/index/docs", responses=ERRORS)
    async def index_docs(req: s.IndexDocsRequest) -> s.IndexDocsResponse:
        """Documents of the corpus that hold an n-gram."""
        x = served(req.index)
        docs = (await run(x.index.docs, [req.query], req.limit))[0]
        count = int((await run(x.index.count, [req.query]))[0])
        return s.IndexDocsResponse(index=x.name, query=req.query, count=count, documents=[
            s.IndexDocument(doc=d.doc, offset=d.offset, text=" ".join(
                map(str, d.words if d.words is not None else d.tokens))) for d in docs])

    @app.post("/", include_in_schema=False)
    async def infini_gram(request: Request):
        """infini-gram's API: {"index", "query_type", "query" | "query_ids", ...}, held to
        the rules of nnlm's own index endpoints (:class:`~.schemas.InfiniGramRequest`);
        errors in infini-gram's shape, {"error": ...}, 400 (404: no such index)."""
        try:
            req = infini_gram_request(await request.body())
            x = served(req.index if req.index is not None else req.corpus)
            return FastJSON(await run(infini_gram_answer, x.index, req))
        except RequestError as e:
            return JSONResponse({"error": _json_safe_text(e.message)},
                                404 if e.status == 404 else 400)
        except (NnlmError, ValueError) as e:
            return JSONResponse({"error": _json_safe_text(str(e).splitlines()[0])}, 400)


def _json_safe_text(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def _with_features(m: ServedModel) -> ServedModel:
    if not m.has_features:
        raise RequestError("model", f"{m.name} is {a(m.kind)} model: it has no word feature "
                           "vectors C (embeddings and neighbours need a neural model)")
    return m

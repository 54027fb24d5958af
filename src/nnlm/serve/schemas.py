"""The server's requests and answers, as pydantic models: FastAPI checks every field
against them (a bad one is a 422 naming it) and publishes them at ``/openapi.json``.

The completions request is OpenAI's legacy ``/v1/completions`` (with ``top_k`` added);
the others are nnlm's own. Scores follow each family's convention: nnlm's endpoints give
log10 probabilities as KenLM's ``full_scores`` and ``nnlm score`` do, the OpenAI ones
natural logs as OpenAI's.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

MAX_TEXTS = 10_000  # sentences in one request (the body is also capped at 1 MB)
MAX_K = 1000  # next words or neighbours in one answer
MAX_NEW_WORDS = 256  # words sampled for one completion
MAX_CHOICES = 16  # completions per prompt
MAX_LOGPROBS = 20  # alternatives per token

Text = Annotated[str, Field(max_length=1 << 20)]


def _utf8(value, where: str = "") -> None:
    """Refuse a string no UTF-8 answer could echo: a lone surrogate (JSON's \\ud800)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(f"holds a lone surrogate{where} (U+{ord(value[e.start]):04X}), "
                             "which is not a character: send UTF-8 text") from None
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _utf8(v, f" in item {i}")


class _Body(BaseModel):
    """Every request body: unknown fields ignored, non-finite numbers (JSON's NaN,
    Infinity) and lone surrogates refused, each as a 422 naming its field."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)  # clients send more

    @field_validator("*", mode="before")
    @classmethod
    def _text_is_utf8(cls, value):
        _utf8(value)
        return value


class _Request(_Body):
    model: str = Field(description="a served model's name (GET /v1/models)")


class ScoreRequest(_Request):
    texts: list[Text] = Field(max_length=MAX_TEXTS, description="one sentence each")
    bos: bool = Field(True, description="condition the first word on <s>")
    eos: bool = Field(True, description="predict </s> after the last word")
    tokens: bool = Field(True, description="per-token scores too (false: totals only)")


class TokenScore(BaseModel):
    word: str
    log10_prob: float
    ngram_length: int
    oov: bool


class SentenceScore(BaseModel):
    log10_prob: float
    perplexity: float | None = Field(description="null for a text with no tokens, or a "
                                     "model whose scores are not probabilities")
    tokens: list[TokenScore] | None = Field(description="null when not asked for")


class ScoreResponse(BaseModel):
    model: str
    results: list[SentenceScore]


class NextRequest(_Request):
    context: Text = Field("", description="the words so far (the start of a sentence)")
    k: int = Field(10, ge=1, le=MAX_K, description="how many next words")
    bos: bool = Field(True, description="the context starts a sentence")


class NextWord(BaseModel):
    word: str
    log10_prob: float


class NextResponse(BaseModel):
    model: str
    context: list[str] = Field(description="the context's words as the model sees them "
                               "(<unk> for unknown ones)")
    words: list[NextWord]


class EmbedRequest(_Request):
    texts: list[Text] = Field(max_length=MAX_TEXTS)
    normalize: bool = Field(False, description="lowercase and drop punctuation first")


class EmbedResponse(BaseModel):
    model: str
    dim: int
    embeddings: list[list[float]]


class NeighborsRequest(_Request):
    word: str = Field(max_length=1000)
    k: int = Field(10, ge=1, le=MAX_K)


class Neighbor(BaseModel):
    word: str
    similarity: float


class NeighborsResponse(BaseModel):
    model: str
    word: str
    neighbors: list[Neighbor]


Prompt = (Text | Annotated[list[Text], Field(min_length=1, max_length=MAX_TEXTS)]
          | Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]
          | Annotated[list[Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)]],
                      Field(min_length=1, max_length=MAX_TEXTS)])


class CompletionRequest(_Request):
    prompt: Prompt = Field(description="text, texts, token ids (GET /tokenize) or lists "
                           "of them; a newline or </s> ends a sentence")
    max_tokens: int = Field(16, ge=0, le=MAX_NEW_WORDS, description="words to sample")
    temperature: float = Field(1.0, ge=0, le=100, description="0: the most likely word")
    top_p: float = Field(1.0, gt=0, le=1)
    top_k: int = Field(0, ge=0, description="sample among the k most likely (0: all)")
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS,
                                 description="alternatives per token (and the tokens' own "
                                 "log-probabilities)")
    echo: bool = Field(False, description="return the prompt's tokens too")
    stop: Annotated[str, Field(max_length=1000)] | \
        Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=4)] | None \
        = None
    seed: int | None = Field(None, ge=0, le=(1 << 53) - 1)  # exact in JSON numbers


class Logprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float | None]
    top_logprobs: list[dict[str, float] | None] | None
    text_offset: list[int]


class Choice(BaseModel):
    text: str
    index: int
    logprobs: Logprobs | None
    finish_reason: Literal["stop", "length"]


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class CompletionResponse(BaseModel):
    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage


class TokenizeRequest(_Body):
    prompt: Text
    model: str | None = Field(None, description="whose vocabulary (default: the first model)")
    add_special_tokens: bool = False


class TokenizeResponse(BaseModel):
    tokens: list[int]
    count: int
    max_model_len: int


class DetokenizeRequest(_Body):
    tokens: list[Annotated[int, Field(ge=0)]] = Field(max_length=1 << 18)
    model: str | None = None


class DetokenizeResponse(BaseModel):
    prompt: str


# -- suffix-array indexes (nnlm index) ---------------------------------------------------
MAX_DOCS = 100  # documents in one answer


class _IndexRequest(_Body):
    index: str | None = Field(None, description="a served index's name (GET /v1/indexes; "
                              "default: the first)")


class IndexCountRequest(_IndexRequest):
    queries: list[Text] = Field(min_length=1, max_length=MAX_TEXTS,
                                description="n-grams (words), answered in one batch")


class IndexCountResponse(BaseModel):
    index: str
    counts: list[int]


class IndexNextRequest(_IndexRequest):
    query: Text = Field(description="the context (words); empty: every token")
    k: int = Field(10, ge=1, le=MAX_K, description="how many next words")


class IndexNextWord(BaseModel):
    word: str
    count: int
    prob: float


class IndexNextResponse(BaseModel):
    index: str
    query: str
    count: int = Field(description="occurrences of the query (of its longest suffix "
                       "that occurs, for the ∞-gram)")
    total: int = Field(description="of them, those followed by a word")
    suffix_length: int | None = Field(None, description="the ∞-gram's: the tokens of the "
                                      "longest suffix that occurs")
    next: list[IndexNextWord]


class IndexDocsRequest(_IndexRequest):
    query: Text = Field(min_length=1, description="the n-gram to find (words)")
    limit: int = Field(5, ge=1, le=MAX_DOCS, description="at most this many documents")


class IndexDocument(BaseModel):
    doc: int
    offset: int = Field(description="the match's token offset in the document")
    text: str


class IndexDocsResponse(BaseModel):
    index: str
    query: str
    count: int
    documents: list[IndexDocument]


# -- infini-gram's API (a POST to /) ----------------------------------------------------------
MAX_QUERY_TOKENS = 1 << 16  # nnlm.index's own cap on a query
MAX_DISP_LEN = 1000  # infini-gram's default: a document's tokens shown


class InfiniGramRequest(_Body):
    """infini-gram's request (its API's fields and defaults), held to the same rules and
    caps as nnlm's index endpoints: ``maxnum`` at most :data:`MAX_DOCS`, ``max_support``
    at most :data:`MAX_K`, ``max_disp_len`` at most :data:`MAX_DISP_LEN`."""

    index: str | None = Field(None, description="a served index's name")
    corpus: str | None = Field(None, description="infini-gram's older name of index")
    query_type: Literal["count", "prob", "ntd", "infgram_prob", "infgram_ntd",
                        "search_docs"]
    query: Text | None = Field(None, description="the query (words)")
    query_ids: list[Annotated[StrictInt, Field(ge=0)]] | None = Field(
        None, max_length=MAX_QUERY_TOKENS, description="the query (token ids)")
    maxnum: StrictInt = Field(1, ge=1, le=MAX_DOCS)
    max_support: StrictInt = Field(MAX_K, ge=1, le=MAX_K)
    max_disp_len: StrictInt = Field(MAX_DISP_LEN, ge=1, le=MAX_DISP_LEN)

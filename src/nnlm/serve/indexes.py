"""The suffix-array indexes a server holds, and their two APIs: nnlm's
(``/v1/index/count|next|infgram|docs``) and infini-gram's (a POST to ``/`` with ``index``,
``query_type`` and ``query`` or ``query_ids``, answered in its API's response shapes, so
that its clients work against ``nnlm serve`` unchanged; Liu et al. 2024).

An index is memory-mapped: as for models (:mod:`nnlm.serve.registry`), its files are
compared with what was opened before each request, and an index whose files changed is
opened again, checked whole, or answers 503 until it can be.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from ..base.errors import NnlmError
from ..index import Index
from ..index.files import HEADER
from ..text.specials import EOS_ID
from .registry import file_stamp
from .schemas import InfiniGramRequest
from .work import RequestError


def is_index(path: Path) -> bool:
    """Whether ``path`` is an index folder (nnlm's, or infini-gram's)."""
    return path.is_dir() and ((path / HEADER).exists() or (
        (path / "tokenized.0").exists() and (path / "table.0").exists()))


@dataclass
class ServedIndex:
    name: str
    path: Path
    index: Index
    stamp: tuple

    def describe(self) -> dict:
        ix = self.index
        return {"id": self.name, "object": "index", "tokens": ix.tokens,
                "documents": ix.documents, "shards": len(ix.shards),
                "token_bytes": ix.width, "words": ix.vocab is not None,
                "path": str(self.path)}

    def current(self) -> ServedIndex:
        if file_stamp(self.path) == self.stamp:
            return self
        return load_index(self.name, self.path)


def load_index(name: str, path: Path) -> ServedIndex:
    stamp = file_stamp(path)
    return ServedIndex(name, path, Index.open(path), stamp)


def _query(index: Index, req: InfiniGramRequest) -> list:
    """The query as its tokens: ``query_ids`` (token ids) or ``query`` (words, split)."""
    if req.query_ids is not None:
        index.encode(req.query_ids)  # ids in range
        return list(req.query_ids)
    if req.query is None:
        raise RequestError("query", "give query (words) or query_ids (token ids)")
    if index.vocab is None:
        raise RequestError("query", "this index has token ids and no words: give query_ids")
    return index.vocab.split(req.query)


def _longest_suffix(index: Index, prompt: list) -> int:
    """infini-gram's ∞-gram context: the longest suffix of ``prompt`` that occurs at all
    (a suffix seen only at documents' ends included; nnlm's own ∞-gram model needs one
    followed by a token)."""
    return int(index.longest_suffix([prompt])[0])


def _ntd(index: Index, prompt: list, support: int) -> dict:
    """What follows ``prompt`` as infini-gram's engine counts it: ``prompt_cnt`` every
    occurrence, a document's end as the end token (:data:`EOS_ID`, also Llama-2's)."""
    nxt = index.next([prompt])[0]
    counts = dict(zip(nxt.tokens.tolist(), nxt.counts.tolist()))
    if nxt.count > nxt.total:
        counts[EOS_ID] = counts.get(EOS_ID, 0) + nxt.count - nxt.total
    top = sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))[:support]
    words = index.words([t for t, _ in top])
    return {"prompt_cnt": nxt.count, "approx": False, "result_by_token_id": {
        str(t): {"token": w, "cont_cnt": c, "prob": c / max(nxt.count, 1)}
        for (t, c), w in zip(top, words)}}


def infini_gram_request(raw: bytes) -> InfiniGramRequest:
    """A body of infini-gram's API, checked (:class:`~.schemas.InfiniGramRequest`): a
    RequestError naming the first field that is wrong, never an exception of the parser
    (100,000 nested brackets are a RecursionError there)."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise RequestError(None, "the body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError):
        raise RequestError(None, "the body: a JSON object") from None
    if not isinstance(body, dict):
        raise RequestError(None, "the body: a JSON object")
    try:
        return InfiniGramRequest.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(map(str, first.get("loc", ()))) or "body"
        raise RequestError(where, f"{where}: {first.get('msg', 'invalid')}") from None


def infini_gram_answer(index: Index, req: InfiniGramRequest) -> dict:
    """One request of infini-gram's API answered from ``index`` with its engine's numbers
    and in its response shape (``latency`` in milliseconds, ``token_ids`` and ``tokens``
    of the query): a prompt's count is every occurrence, and the ∞-gram's context the
    longest suffix that occurs (:func:`_longest_suffix`)."""
    start = time.perf_counter()
    kind = req.query_type
    query = _query(index, req)
    ids = index.encode(query)  # a word outside the vocabulary: -1, occurring nowhere
    out: dict
    if kind == "count":
        out = {"count": int(index.count([query])[0]), "approx": False}
    elif kind in ("prob", "infgram_prob"):
        if not query:
            raise RequestError("query", "prob needs at least one token: the continuation")
        prompt = query[:-1]
        k = len(prompt) if kind == "prob" else _longest_suffix(index, prompt)
        context = prompt[len(prompt) - k:]
        total, hit = (int(c) for c in index.count([context, context + query[-1:]]))
        out = {"prompt_cnt": total, "cont_cnt": hit, "prob": hit / total if total else -1.0}
        if kind == "infgram_prob":
            out["suffix_len"] = k
    elif kind in ("ntd", "infgram_ntd"):
        k = len(query) if kind == "ntd" else _longest_suffix(index, query)
        out = _ntd(index, query[len(query) - k:], req.max_support)
        if kind == "infgram_ntd":
            out["suffix_len"] = k
    else:
        if not query:
            raise RequestError("query", "search_docs needs at least one token")
        docs = index.docs([query], req.maxnum)[0]
        out = {"cnt": int(index.count([query])[0]), "approx": False,
               "idxs": [d.doc for d in docs],
               "documents": [_document(index, d, len(ids), req.max_disp_len) for d in docs]}
    out["latency"] = (time.perf_counter() - start) * 1000
    out["token_ids"] = ids
    out["tokens"] = ([str(t) for t in query] if req.query_ids is None
                     else index.words(ids))
    return out


def _document(index: Index, doc, needle: int, shown: int) -> dict:
    """A document as infini-gram's search_docs gives it: spans of text, the match's
    span marked "0" (the query's one clause)."""
    tokens = doc.tokens[:shown]
    cut = [tokens[:doc.offset], tokens[doc.offset:doc.offset + needle],
           tokens[doc.offset + needle:]]
    spans = [[" ".join(map(str, index.words(part))), mark]
             for part, mark in zip(cut, (None, "0", None)) if part]
    return {"doc_ix": doc.doc, "doc_len": len(doc.tokens), "disp_len": len(tokens),
            "metadata": "", "token_ids": tokens, "spans": spans}


def nnlm_next(served: ServedIndex, query: str, k: int, infgram: bool) -> dict:
    index = served.index
    try:
        nxt = (index.infgram if infgram else index.next)([query], k)[0]
    except NnlmError as e:
        raise RequestError("query", str(e)) from None
    return {"index": served.name, "query": query, "count": nxt.count, "total": nxt.total,
            "suffix_length": nxt.suffix_length,
            "next": [{"word": str(w), "count": int(c), "prob": int(c) / max(nxt.total, 1)}
                     for w, c in zip(index.words(nxt.tokens), nxt.counts)]}

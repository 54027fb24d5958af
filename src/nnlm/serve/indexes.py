"""The suffix-array indexes a server holds, and their two APIs: nnlm's
(``/v1/index/count|next|infgram|docs``) and infini-gram's (a POST to ``/`` with ``index``,
``query_type`` and ``query`` or ``query_ids``, answered in its API's response shapes, so
that its clients work against ``nnlm serve`` unchanged; Liu et al. 2024).

An index is memory-mapped: as for models (:mod:`nnlm.serve.registry`), its files are
compared with what was opened before each request, and an index whose files changed is
opened again, checked whole, or answers 503 until it can be.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..base.errors import NnlmError
from ..index import Index
from ..index.files import HEADER
from .registry import file_stamp
from .work import RequestError

QUERY_TYPES = ("count", "prob", "ntd", "infgram_prob", "infgram_ntd", "search_docs")
MAX_SUPPORT = 1000  # infini-gram's default: the next tokens an ntd answer lists
MAX_DISP_LEN = 1000  # infini-gram's default: tokens of a document shown


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


def _query(index: Index, body: dict) -> list:
    """The query as its tokens: ``query_ids`` (token ids) or ``query`` (words, split)."""
    if "query_ids" in body:
        ids = body["query_ids"]
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool)
                                                for t in ids):
            raise RequestError("query_ids", "query_ids: a list of token ids")
        index.encode(ids)  # ids in range
        return ids
    query = body.get("query")
    if not isinstance(query, str):
        raise RequestError("query", "give query (words) or query_ids (token ids)")
    if index.vocab is None:
        raise RequestError("query", "this index has token ids and no words: give query_ids")
    return index.vocab.split(query)


def _words(index: Index, ids) -> list:
    return index.vocab.decode(ids) if index.vocab is not None else [int(t) for t in ids]


def _positive(body: dict, field: str, default: int) -> int:
    value = body.get(field, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(field, f"{field}: a positive integer")
    return value


def infini_gram_answer(index: Index, body: dict) -> dict:
    """One request of infini-gram's API answered from ``index``, in its response shape
    (``latency`` in milliseconds, ``token_ids`` and ``tokens`` of the query)."""
    start = time.perf_counter()
    kind = body.get("query_type")
    if kind not in QUERY_TYPES:
        raise RequestError("query_type", f"query_type: one of {', '.join(QUERY_TYPES)}")
    query = _query(index, body)
    ids = index.encode(query)  # a word outside the vocabulary: -1, occurring nowhere
    out: dict
    if kind == "count":
        out = {"count": int(index.count([query])[0]), "approx": False}
    elif kind in ("prob", "infgram_prob"):
        if not ids:
            raise RequestError("query", "prob needs at least one token: the continuation")
        cont = ids[-1]
        nxt = (index.next if kind == "prob" else index.infgram)([query[:-1]])[0]
        hit = int(nxt.counts[nxt.tokens == cont].sum()) if cont >= 0 else 0
        out = {"prompt_cnt": nxt.total, "cont_cnt": hit,
               "prob": hit / nxt.total if nxt.total else -1.0}
        if kind == "infgram_prob":
            out["suffix_len"] = nxt.suffix_length
    elif kind in ("ntd", "infgram_ntd"):
        support = _positive(body, "max_support", MAX_SUPPORT)
        nxt = (index.next if kind == "ntd" else index.infgram)([query], support)[0]
        words = _words(index, nxt.tokens)
        out = {"prompt_cnt": nxt.total, "approx": False, "result_by_token_id": {
            str(t): {"token": w, "cont_cnt": int(c), "prob": int(c) / max(nxt.total, 1)}
            for t, w, c in zip(nxt.tokens, words, nxt.counts)}}
        if kind == "infgram_ntd":
            out["suffix_len"] = nxt.suffix_length
    else:
        if not ids:
            raise RequestError("query", "search_docs needs at least one token")
        maxnum = _positive(body, "maxnum", 1)
        shown = _positive(body, "max_disp_len", MAX_DISP_LEN)
        docs = index.docs([query], maxnum)[0]
        out = {"cnt": int(index.count([query])[0]), "approx": False,
               "idxs": [d.doc for d in docs],
               "documents": [_document(index, d, len(ids), shown) for d in docs]}
    out["latency"] = (time.perf_counter() - start) * 1000
    out["token_ids"] = ids
    out["tokens"] = ([str(t) for t in query] if "query_ids" not in body
                     else _words(index, ids))
    return out


def _document(index: Index, doc, needle: int, shown: int) -> dict:
    """A document as infini-gram's search_docs gives it: spans of text, the match's
    span marked "0" (the query's one clause)."""
    tokens = doc.tokens[:shown]
    cut = [tokens[:doc.offset], tokens[doc.offset:doc.offset + needle],
           tokens[doc.offset + needle:]]
    spans = [[" ".join(map(str, _words(index, part))), mark]
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
                     for w, c in zip(_words(index, nxt.tokens), nxt.counts)]}

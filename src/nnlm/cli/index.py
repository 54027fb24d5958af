"""nnlm index: suffix-array indexes of a corpus (build, count, next, infgram, docs)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..base.argtypes import memory_size, positive_int, ranged
from ..base.errors import NnlmError
from .common import add_vocabulary_arguments, fixed_vocabulary

QUERY_HELP = ("the n-gram (words, quoted as one argument; token ids such as \"1234 5678\" "
              "for an index without words); several are answered in one "
              "batch; none: one query a line from standard input")


def add_parsers(sub) -> None:
    index = sub.add_parser(
        "index", help="index a corpus: counts of n-grams of any length, the ∞-gram, documents",
        description="Suffix-array indexes of a corpus (Liu et al. 2024, infini-gram's files): "
        "exact counts of any n-gram, what follows it, the ∞-gram and the documents holding "
        "it. infini-gram's own indexes open as they are.")
    index_sub = index.add_subparsers(dest="index_command", metavar="ACTION", required=True)
    build = index_sub.add_parser(
        "build", help="index text files",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Index TEXT (one sentence a line) into the folder INDEX: token ids over "
        "the vocabulary, a suffix array per shard (libdivsufsort), memory-mapped when "
        "opened.",
        epilog="examples:\n"
        "  nnlm index build data/brown/train.txt -o runs/brown.idx\n"
        "  nnlm index build part-*.txt -o big.idx --memory 8G --workers 2\n"
        "  nnlm index build train.txt -o train.idx --vocab runs/kn5/vocab.txt "
        "--documents paragraphs")
    build.add_argument("texts", type=Path, nargs="+", metavar="TEXT",
                       help="text files, one corpus, read in the order given")
    build.add_argument("-o", "--output", type=Path, required=True, metavar="INDEX",
                       help="the index folder to write (a new one, or an index nnlm built)")
    build.add_argument("--documents", choices=("lines", "paragraphs"), default="lines",
                       help="a document is a line, or lines between blank lines (default: "
                       "lines)")
    build.add_argument("--memory", type=memory_size, default=memory_size("4G"), metavar="SIZE",
                       help="memory for the suffix sorts (e.g. 8G, 40%%; default: 4G): the "
                       "text is cut into shards that fit it")
    build.add_argument("--workers", type=ranged(int, 1, 64, name="workers"), default=1,
                       help="shards sorted at once, each within SIZE / N (default: 1)")
    add_vocabulary_arguments(build.add_argument_group("vocabulary"))

    for name, summary, extra in (
            ("count", "how often each n-gram occurs", None),
            ("next", "what follows each n-gram, with counts", "top"),
            ("infgram", "the ∞-gram: the longest suffix that occurs, and what follows it",
             "top"),
            ("docs", "the documents that hold each n-gram", "limit")):
        cmd = index_sub.add_parser(name, help=summary, description=f"{summary[0].upper()}"
                                   f"{summary[1:]}, from INDEX.")
        cmd.add_argument("index", type=Path, metavar="INDEX",
                         help="an index folder (nnlm's or infini-gram's)")
        cmd.add_argument("queries", nargs="*", metavar="QUERY", help=QUERY_HELP)
        if extra == "top":
            cmd.add_argument("-k", "--top", type=positive_int, default=10, metavar="K",
                             help="the K most frequent next words (default: 10)")
        if extra == "limit":
            cmd.add_argument("--limit", type=positive_int, default=5, metavar="N",
                             help="at most N documents a query (default: 5)")
        cmd.add_argument("--json", action="store_true", help="one JSON object a query")


def _queries(args) -> list[str]:
    if args.queries:
        return list(args.queries)
    from ..text.fileio import iter_lines

    return [line for line in iter_lines("-") if line.strip()]


def _as_ids(index, queries: list[str]) -> list:
    """The queries as the index takes them: words where it has a vocabulary, else token
    ids (infini-gram's own indexes hold ids only), each query one line naming a non-id."""
    if index.vocab is not None:
        return queries
    out = []
    for q in queries:
        ids = []
        for t in q.split():
            try:
                ids.append(int(t, 10))
            except ValueError:
                raise NnlmError(f"{index.path}: an index of token ids without words; query "
                                f"{q!r}: {t!r} is not a token id (give integers, e.g. "
                                "\"1234 5678\")") from None
        out.append(ids)
    return out


def cmd_index(args) -> None:
    from ..index import Index, build_index

    if args.index_command == "build":
        from ..index.files import check_output

        check_output(args.output)
        build_index(args.texts, args.output, fixed_vocabulary(args), args.min_count,
                    args.documents, args.memory, args.workers)
        index = Index.open(args.output, verify=False)
        print(f"{args.output}: {index.tokens:,} tokens, {index.documents:,} documents, "
              f"{len(index.shards)} shard{'s' * (len(index.shards) > 1)}, "
              f"{index.bytes() / index.tokens:.2f} bytes a token")
        return
    index = Index.open(args.index)
    queries = _queries(args)
    if not queries:
        raise NnlmError("no query: give QUERY arguments or lines on standard input")
    asked = _as_ids(index, queries)
    words = index.words
    if args.index_command == "count":
        rows = [{"query": q, "count": int(c)} for q, c in zip(queries, index.count(asked))]
        text = [f"{r['count']}\t{r['query']}" for r in rows]
    elif args.index_command in ("next", "infgram"):
        found = (index.next if args.index_command == "next" else index.infgram)(
            asked, args.top)
        rows, text = [], []
        for q, n in zip(queries, found):
            row = {"query": q, "count": n.count, "total": n.total,
                   "next": [{"word": w, "count": int(c), "prob": int(c) / max(n.total, 1)}
                            for w, c in zip(words(n.tokens), n.counts)]}
            if n.suffix_length is not None:
                row["suffix_length"] = n.suffix_length
            rows.append(row)
            head = f"{q}\tcount {n.count}" + (f", longest suffix {n.suffix_length} tokens"
                                              if n.suffix_length is not None else "")
            text += [head] + [f"  {e['count']}\t{e['prob']:.4f}\t{e['word']}"
                              for e in row["next"]]
    else:
        rows, text = [], []
        counts = index.count(asked)  # one batch, as the documents' search
        for q, docs, count in zip(queries, index.docs(asked, args.limit), counts.tolist()):
            rows.append({"query": q, "count": count, "documents": [
                {"doc": d.doc, "offset": d.offset,
                 "text": " ".join(d.words) if d.words is not None else d.tokens}
                for d in docs]})
            text += [f"{q}\tcount {count}"] + [f"  doc {e['doc']}: {e['text']}"
                                               for e in rows[-1]["documents"]]
    if args.json:
        sys.stdout.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    else:
        sys.stdout.write("\n".join(text) + "\n")


HANDLERS = {"index": cmd_index}
PATHS = {
    "index build": lambda a: ([*a.texts, a.vocab], [a.output]),
}

"""nnlm filter against the tools it replaces: cc_net's normalization written here from its
rules, DataTrove's own ``KenlmModel`` (installed from the registry), the kenlm module and
SentencePiece give the same normalized texts, the same scores to the bit and the same
perplexities; ``nnlm filter score`` writes every record once, in order, with its
perplexity and bucket, and a bad record is one line naming file and line."""

from __future__ import annotations

import gzip
import json
import math
import random
import re
import unicodedata
from pathlib import Path

import numpy as np
import pytest

from conftest import toy_text
from nnlm.base.errors import NnlmError
from nnlm.cli import main
from nnlm.filter import DocumentScorer, ccnet, datatrove, perplexity

# cc_net's text_normalizer, written here from its rules (the oracle where DataTrove is not
# installed): its punctuation table, then the steps in its order
CCNET_PUNCT = {"，": ",", "。": ".", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"',
               "»": '"', "１": '"', "」": '"', "「": '"', "《": '"', "》": '"', "´": "'",
               "∶": ":", "：": ":", "？": "?", "！": "!", "（": "(", "）": ")", "；": ";",
               "–": "-", "—": " - ", "．": ". ", "～": "~", "’": "'", "…": "...", "━": "-",
               "〈": "<", "〉": ">", "【": "[", "】": "]", "％": "%", "►": "-"}
CONTROL = re.compile(f"[{''.join(map(chr, [*range(0, 32), *range(127, 160)]))}]")
ODD = [*CCNET_PUNCT, "é", "Ö", "ñ", "\u0301", "٣", "12.5", "3,14", "\t", "\x07", "\x85",
       "ﬁ", "İ", "ß", "\r", "  ", "\n"]


def ccnet_rules(line: str) -> str:
    line = line.strip()
    if not line:
        return line
    line = line.lower()
    line = "".join(c for c in unicodedata.normalize("NFD", line)
                   if unicodedata.category(c) != "Mn")
    line = re.sub(r"\d", "0", line)
    line = "".join(CCNET_PUNCT.get(c, c) for c in line)
    return CONTROL.sub("", line)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A cc_net-style pair on the toy world: en.sp.model and en.arpa (KN 4-gram on the
    normalized text's pieces), and documents with odd characters."""
    spm = pytest.importorskip("sentencepiece")
    d = tmp_path_factory.mktemp("filter")
    toy_text(d / "toy", 300)
    train = (d / "toy/train.txt").read_text().splitlines()
    (d / "norm.txt").write_text("\n".join(ccnet_rules(x) for x in train) + "\n")
    spm.SentencePieceTrainer.train(input=str(d / "norm.txt"), model_prefix=str(d / "en"),
                                   vocab_size=60, hard_vocab_limit=False, minloglevel=2)
    (d / "en.model").rename(d / "en.sp.model")
    assert main(["ngram", "train", str(d / "norm.txt"), "--order", "4", "--tokenizer",
                 str(d / "en.sp.model"), "--discount-fallback", "-o", str(d / "kn"),
                 "--arpa", str(d / "en.arpa")]) == 0
    rng = random.Random(0)
    lines = (d / "toy/test.txt").read_text().splitlines()
    docs = []
    for i in range(0, min(len(lines), 240), 3):
        doc = "\n".join(lines[i:i + 3])
        if i % 2:  # a third of the characters' neighbours odd
            doc = "".join(c if rng.random() > 0.1 else c + rng.choice(ODD) for c in doc)
        docs.append(doc.title() if i % 5 == 0 else doc)
    return d, docs


def kenlm_perplexity(model, pieces: str) -> tuple[float, int]:
    total, length = 0, 0
    for line in pieces.split("\n"):
        total += model.score(line)
        length += len(line.split()) + 1
    return total, length


def test_the_normalizations_are_the_tools(pair):
    _, docs = pair
    for doc in docs:
        assert ccnet(doc) == ccnet_rules(doc)
    dt = pytest.importorskip("datatrove.utils.perplexity")
    model = dt.KenlmModel("unused", "en")
    for doc in docs:
        assert datatrove(doc) == model.normalize(doc)
    assert datatrove("It cost 12.5 or 3,14 ٣٣") == "it cost 0 or 0 0"
    assert ccnet("It cost 12.5 or 3,14 ٣٣") == "it cost 00.0 or 0,00 00"


def test_cc_nets_pipeline_scores_to_the_bit(pair):
    kenlm = pytest.importorskip("kenlm")
    import sentencepiece as spm

    d, docs = pair
    sp = spm.SentencePieceProcessor(model_file=str(d / "en.sp.model"))
    model = kenlm.Model(str(d / "en.arpa"))
    ours = DocumentScorer(d / "en.arpa", d / "en.sp.model", "ccnet")
    got = ours.log10_scores(docs)
    for doc, mine in zip(docs, got):
        want = kenlm_perplexity(model, " ".join(sp.encode_as_pieces(ccnet_rules(doc))))
        assert mine == want
        assert round(perplexity(*mine), 1) == round(10.0 ** (-want[0] / want[1]), 1)


def test_datatroves_own_perplexities(pair):
    dt = pytest.importorskip("datatrove.utils.perplexity")
    kenlm = pytest.importorskip("kenlm")
    import sentencepiece as spm

    d, docs = pair
    model = dt.KenlmModel("unused", "en")  # its files set here: no download
    model._model = kenlm.Model(str(d / "en.arpa"))
    tokenizer = dt.SentencePiece("unused", "en")
    tokenizer._model = spm.SentencePieceProcessor(model_file=str(d / "en.sp.model"))
    model._tokenizer = tokenizer
    ours = DocumentScorer(d / "en.arpa", d / "en.sp.model", "datatrove")
    assert [round(p, 1) for p in ours.perplexities(docs)] == \
        [model.get_perplexity(doc) for doc in docs]
    raw = [kenlm_perplexity(model.model, tokenizer.tokenize(model.normalize(doc)))
           for doc in docs]
    assert ours.log10_scores(docs) == raw  # before DataTrove's rounding: equal


def cc_net_perplexities(d, docs) -> list[float]:
    """What the kenlm module gives cc_net's pieces (cc_net's rules written here)."""
    kenlm = pytest.importorskip("kenlm")
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(d / "en.sp.model"))
    model = kenlm.Model(str(d / "en.arpa"))
    return [10.0 ** (-s / n) for s, n in (kenlm_perplexity(
        model, " ".join(sp.encode_as_pieces(ccnet_rules(doc)))) for doc in docs)]


def test_the_ray_data_function_on_a_batch(pair):
    """Ray's numpy and pandas batches: each row's perplexity is the kenlm module's on
    cc_net's pieces, the other columns kept in order; bounds drop rows; a text that is
    not a string is one error naming the row."""
    from nnlm.integrations.ray import Perplexity

    d, docs = pair
    want = cc_net_perplexities(d, docs)
    batch = {"text": np.array(docs, dtype=object), "id": np.arange(len(docs))}
    out = Perplexity(d / "en.arpa")(batch)  # en.sp.model found beside it
    assert out["perplexity"].tolist() == want and out["id"].tolist() == list(range(len(docs)))
    cut = sorted(want)[len(want) // 2]
    kept = Perplexity(d / "en.arpa", max_perplexity=cut)(batch)
    assert kept["id"].tolist() == [i for i, p in enumerate(want) if p <= cut]
    assert kept["text"].tolist() == [docs[i] for i in kept["id"]]
    pd = pytest.importorskip("pandas")
    frame = Perplexity(d / "en.arpa", min_perplexity=cut)(pd.DataFrame(batch))
    assert frame["id"].tolist() == [i for i, p in enumerate(want) if p >= cut]
    assert frame["perplexity"].tolist() == [p for p in want if p >= cut]
    with pytest.raises(NnlmError, match="row 1 of the batch: field 'text' is int"):
        Perplexity(d / "en.arpa")({"text": np.array(["a b", 3], dtype=object)})
    with pytest.raises(NnlmError, match="max_perplexity=nan"):
        Perplexity(d / "en.arpa", max_perplexity=float("nan"))


@pytest.mark.slow  # Ray starts its own cluster (about 10 s)
def test_a_ray_data_pipeline(pair):
    """In Ray Data itself: map_batches with the class on an actor, the rows' perplexities
    the kenlm module's."""
    ray = pytest.importorskip("ray", reason="ray is not installed (make installs ray[data])")
    pytest.importorskip("ray.data", reason="ray without its data library")
    from nnlm.integrations.ray import Perplexity

    d, docs = pair
    want = cc_net_perplexities(d, docs)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             configure_logging=False)
    try:
        ds = ray.data.from_items([{"text": t, "id": i} for i, t in enumerate(docs)])
        rows = ds.map_batches(Perplexity, fn_constructor_kwargs={"model": str(d / "en.arpa")},
                              concurrency=1, batch_size=16).take_all()
    finally:
        ray.shutdown()
    assert sorted((r["id"], r["perplexity"]) for r in rows) == list(enumerate(want))


def write_jsonl(path, docs, opener=open):
    with opener(path, "wt", encoding="utf-8") as f:
        for i, doc in enumerate(docs):
            f.write(json.dumps({"id": i, "text": doc, "meta": {"k": [1, 2.5]}}) + "\n")


def read_jsonl(path, opener=open):
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_every_record_comes_out_once_in_order_with_its_perplexity(pair, tmp_path, capsys):
    d, docs = pair
    write_jsonl(tmp_path / "a.jsonl.gz", docs, gzip.open)
    write_jsonl(tmp_path / "b.jsonl", docs[:7])
    assert main(["filter", "score", str(tmp_path / "a.jsonl.gz"), str(tmp_path / "b.jsonl"),
                 "-m", str(d / "en.arpa"), "-o", str(tmp_path / "out"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["tokenizer"].endswith("en.sp.model")  # found beside the model
    assert summary["documents"] == summary["kept"] == len(docs) + 7
    out = read_jsonl(tmp_path / "out/a.jsonl.gz", gzip.open)
    want = DocumentScorer(d / "en.arpa", d / "en.sp.model").perplexities(docs)
    assert [r["id"] for r in out] == list(range(len(docs)))
    assert [r["perplexity"] for r in out] == [round(p, 1) for p in want]
    assert all(r["text"] == doc and r["meta"] == {"k": [1, 2.5]} and r["bucket"] == "all"
               for r, doc in zip(out, docs))
    assert len(read_jsonl(tmp_path / "out/b.jsonl")) == 7


def test_buckets_split_keep_and_cc_nets_cutoff_table(pair, tmp_path, capsys):
    d, docs = pair
    write_jsonl(tmp_path / "a.jsonl", docs)
    ppl = [round(p, 1) for p in DocumentScorer(d / "en.arpa", d / "en.sp.model")
           .perplexities(docs)]
    head, tail = sorted(ppl)[len(ppl) // 3], sorted(ppl)[2 * len(ppl) // 3]
    rows = [f"{p},{head if p == 30 else tail if p == 60 else 0.0},1.0" for p in range(101)]
    (tmp_path / "cutoff.csv").write_text(",en,de\n" + "\n".join(rows) + "\n")
    assert main(["filter", "score", str(tmp_path / "a.jsonl"), "-m", str(d / "en.arpa"),
                 "--cutoffs", str(tmp_path / "cutoff.csv"), "--language", "en", "--split",
                 "-o", str(tmp_path / "split"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)

    def bucket(p):  # cc_net's PerplexityBucket.get_bucket
        return "head" if p < head else "middle" if p < tail else "tail"

    seen = []
    for b in ("head", "middle", "tail"):
        records = read_jsonl(tmp_path / "split" / b / "a.jsonl")
        assert all(r["bucket"] == b == bucket(r["perplexity"]) for r in records)
        assert summary["buckets"].get(b, 0) == len(records)
        seen += [r["id"] for r in records]
    assert sorted(seen) == list(range(len(docs)))  # each once
    assert main(["filter", "score", str(tmp_path / "a.jsonl"), "-m", str(d / "en.arpa"),
                 "--cutoffs-from", "20", "--keep", "head,middle", "--max-perplexity",
                 str(tail), "-o", str(tmp_path / "kept"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = read_jsonl(tmp_path / "kept/a.jsonl")
    assert len(kept) == summary["kept"] and summary["kept"] + summary["filtered"] == len(docs)
    assert all(r["bucket"] in ("head", "middle") and r["perplexity"] <= tail for r in kept)


def test_plain_text_and_zstd(pair, tmp_path, capsys):
    zstd = pytest.importorskip("zstandard")
    d, docs = pair
    flat = [doc.replace("\n", " ").replace("\r", " ") for doc in docs[:10]]  # \r ends a line
    (tmp_path / "lines.txt").write_text("\n".join(flat) + "\n")
    (tmp_path / "paras.txt").write_text("\n\n".join(docs[:10]).replace("\r", "") + "\n")
    with open(tmp_path / "c.jsonl.zst", "wb") as f:
        f.write(zstd.ZstdCompressor().compress(
            "".join(json.dumps({"raw_content": x}) + "\n" for x in flat).encode()))
    assert main(["filter", "score", str(tmp_path / "lines.txt"), "-m", str(d / "en.arpa"),
                 "-o", str(tmp_path / "o1")]) == 0
    assert main(["filter", "score", str(tmp_path / "paras.txt"), "--format", "paragraphs",
                 "-m", str(d / "en.arpa"), "-o", str(tmp_path / "o2")]) == 0
    assert main(["filter", "score", str(tmp_path / "c.jsonl.zst"), "--text-field",
                 "raw_content", "-m", str(d / "en.arpa"), "-o", str(tmp_path / "o3")]) == 0
    lines = read_jsonl(tmp_path / "o1/lines.jsonl")
    assert [r["text"] for r in lines] == flat
    assert len(read_jsonl(tmp_path / "o2/paras.jsonl")) == 10
    with open(tmp_path / "o3/c.jsonl.zst", "rb") as f:
        out = zstd.ZstdDecompressor().stream_reader(f).read().decode().split("\n")[:-1]
    assert [json.loads(x)["perplexity"] for x in out] == [r["perplexity"] for r in lines]


@pytest.mark.parametrize("line,problem", [
    ("not json", "not a JSON object"), ('{"id": 3}', "no field 'text'"),
    ('{"text": 5}', "field 'text' is a number, not a string"),
    ('{"text": "  "}', "an empty document"), ("[1, 2]", "a JSON list")])
def test_a_bad_record_is_one_line_naming_it(pair, tmp_path, capsys, line, problem):
    d, docs = pair
    good = json.dumps({"text": docs[0]})
    (tmp_path / "in.jsonl").write_text(f"{good}\n{line}\n{good}\n")
    args = ["filter", "score", str(tmp_path / "in.jsonl"), "-m", str(d / "en.arpa"), "-o"]
    assert main([*args, str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"in.jsonl:2: {problem}" in err
    assert not (tmp_path / "out/in.jsonl").exists()  # nothing half-written
    assert main([*args, str(tmp_path / "out"), "--on-error", "skip", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["bad_records"] == 1 and summary["documents"] == 2
    assert len(read_jsonl(tmp_path / "out/in.jsonl")) == 2


def test_damaged_inputs_and_outputs_over_inputs(pair, tmp_path, capsys):
    d, docs = pair
    write_jsonl(tmp_path / "a.jsonl.gz", docs * 20, gzip.open)
    data = (tmp_path / "a.jsonl.gz").read_bytes()
    (tmp_path / "cut.jsonl.gz").write_bytes(data[:len(data) // 2])
    assert main(["filter", "score", str(tmp_path / "cut.jsonl.gz"), "-m", str(d / "en.arpa"),
                 "-o", str(tmp_path / "out")]) == 2
    assert "truncated" in capsys.readouterr().err
    assert main(["filter", "score", str(tmp_path / "a.jsonl.gz"), "-m", str(d / "en.arpa"),
                 "-o", str(tmp_path)]) == 2  # the output folder holds the input
    assert "nnlm: error:" in capsys.readouterr().err
    assert (tmp_path / "a.jsonl.gz").read_bytes() == data
    assert main(["filter", "score", str(tmp_path / "a.jsonl.gz"), "-m", str(d / "en.arpa"),
                 "--keep", "best", "-o", str(tmp_path / "o")]) == 2
    assert "--keep 'best'" in capsys.readouterr().err
    # a model of words beside a SentencePiece model: a pair that was not trained together
    assert main(["ngram", "train", str(d / "norm.txt"), "--order", "2", "--discount-fallback",
                 "-o", str(tmp_path / "words"), "--arpa", str(tmp_path / "words.arpa")]) == 0
    capsys.readouterr()
    for flags in [["-m", str(tmp_path / "words.arpa")],
                  ["-m", str(d / "en.arpa"), "--bad-model", str(tmp_path / "words.arpa")]]:
        assert main(["filter", "score", str(tmp_path / "a.jsonl.gz"), *flags, "--tokenizer",
                     str(d / "en.sp.model"), "-o", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert "words.arpa and " in err and "en.sp.model disagree" in err, err
        assert not (tmp_path / "o").exists()


def test_the_datatrove_pipeline_step(pair, tmp_path):
    """nnlm's step in a real DataTrove pipeline (reader, filter, writer): each document's
    metadata perplexity is DataTrove's own KenlmModel's, and those above the bound are
    dropped."""
    pytest.importorskip("datatrove")
    kenlm = pytest.importorskip("kenlm")
    import sentencepiece as spm
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.perplexity import KenlmModel, SentencePiece

    from nnlm.integrations.datatrove import PerplexityFilter

    d, docs = pair
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw/a.jsonl").write_text("".join(
        json.dumps({"id": f"d{i}", "text": doc}) + "\n" for i, doc in enumerate(docs)))
    theirs = KenlmModel("unused", "en")
    theirs._model = kenlm.Model(str(d / "en.arpa"))
    tokenizer = SentencePiece("unused", "en")
    tokenizer._model = spm.SentencePieceProcessor(model_file=str(d / "en.sp.model"))
    theirs._tokenizer = tokenizer
    want = {f"d{i}": theirs.get_perplexity(doc) for i, doc in enumerate(docs)}
    bound = sorted(want.values())[len(want) // 2]
    LocalPipelineExecutor(pipeline=[
        JsonlReader(str(tmp_path / "raw")),
        PerplexityFilter(d / "en.arpa", max_perplexity=bound, batch_size=16),
        JsonlWriter(str(tmp_path / "kept"), compression=None),
    ], tasks=1, logging_dir=str(tmp_path / "logs")).run()
    kept = [json.loads(x) for f in sorted((tmp_path / "kept").glob("*.jsonl"))
            for x in f.read_text().splitlines()]
    assert kept and all(r["metadata"]["perplexity"] == want[r["id"]] <= bound for r in kept)
    assert {r["id"] for r in kept} == {i for i, p in want.items() if p <= bound}


def test_parquet_in_and_out(pair, tmp_path, capsys):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    d, docs = pair
    table = pa.table({"id": list(range(len(docs))), "text": docs,
                      "score": [0.5] * len(docs)})
    pq.write_table(table, tmp_path / "a.parquet", row_group_size=7)
    assert main(["filter", "score", str(tmp_path / "a.parquet"), "-m", str(d / "en.arpa"),
                 "--cutoffs-from", "30", "--split", "-o", str(tmp_path / "out")]) == 0
    want = [round(p, 1) for p in DocumentScorer(d / "en.arpa", d / "en.sp.model")
            .perplexities(docs)]
    rows = []
    for b in ("head", "middle", "tail", "all"):
        part = pq.read_table(tmp_path / "out" / b / "a.parquet")
        assert part.schema.names == ["id", "text", "score", "perplexity", "bucket"]
        rows += [r for r in part.to_pylist() if r["bucket"] == b or not r]
    assert sorted(r["id"] for r in rows) == list(range(len(docs)))  # each once
    assert all(r["perplexity"] == want[r["id"]] and r["score"] == 0.5 for r in rows)
    bad = pa.table({"text": [docs[0], None, docs[1]]})
    pq.write_table(bad, tmp_path / "bad.parquet")
    assert main(["filter", "score", str(tmp_path / "bad.parquet"), "-m", str(d / "en.arpa"),
                 "-o", str(tmp_path / "o2")]) == 2
    assert "bad.parquet: row 2: the text is null" in capsys.readouterr().err
    pq.write_table(pa.table({"content": ["x"]}), tmp_path / "other.parquet")
    assert main(["filter", "score", str(tmp_path / "other.parquet"), "-m", str(d / "en.arpa"),
                 "-o", str(tmp_path / "o3")]) == 2
    assert "no column 'text' (columns: content)" in capsys.readouterr().err


def test_the_histogram_counts_every_document_and_draws(pair, tmp_path, capsys):
    from nnlm.filter.buckets import Histogram

    h = Histogram()
    for p in (0.5, 1.0, 12.5, 12.6, 999.0, 1e9, float("inf"), 0.0):
        h.add(p)
    assert h.counts.sum() == 6 and h.counts[0] == 2 and h.counts[-1] == 1  # ends take the rest
    assert h.edges()[0] == 1.0 and h.edges()[-1] == 1e6
    pytest.importorskip("matplotlib")
    d, docs = pair
    write_jsonl(tmp_path / "a.jsonl", docs)
    assert main(["filter", "score", str(tmp_path / "a.jsonl"), "-m", str(d / "en.arpa"),
                 "--cutoffs-from", "20", "--plot", str(tmp_path / "h.png"), "-o",
                 str(tmp_path / "out")]) == 0
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_rerun_skips_finished_inputs_and_workers_write_the_same(pair, tmp_path, capsys):
    """A run stopped by a bad record in its second input keeps the first's outputs and
    record; once the input is fixed, the rerun skips the first and ends with the outputs
    of a clean run, byte for byte; two worker processes write the same again."""
    d, docs = pair
    for i in range(3):
        write_jsonl(tmp_path / f"in{i}.jsonl", docs[i * 10:(i + 1) * 10])
    good = (tmp_path / "in1.jsonl").read_text()
    (tmp_path / "in1.jsonl").write_text(good + "not json\n")
    inputs = [str(tmp_path / f"in{i}.jsonl") for i in range(3)]
    run = ["filter", "score", *inputs, "-m", str(d / "en.arpa"), "--json", "-o"]
    assert main([*run, str(tmp_path / "out")]) == 2
    capsys.readouterr()
    assert (tmp_path / "out/in0.jsonl").exists() and not (tmp_path / "out/in1.jsonl").exists()
    (tmp_path / "in1.jsonl").write_text(good)
    assert main([*run, str(tmp_path / "out")]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["skipped_inputs"] == 1 and summary["documents"] == 30
    assert main([*run, str(tmp_path / "clean")]) == 0
    clean = json.loads(capsys.readouterr().out)
    assert main([*run, str(tmp_path / "workers"), "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["buckets"] == clean["buckets"]
    for i in range(3):
        name = f"in{i}.jsonl"
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "clean" / name).read_bytes() \
            == (tmp_path / "workers" / name).read_bytes()
    assert main([*run, str(tmp_path / "out")]) == 0  # all finished: nothing to do
    assert json.loads(capsys.readouterr().out)["skipped_inputs"] == 3
    assert main([*run, str(tmp_path / "out"), "--digits", "2"]) == 0  # new settings: all
    assert json.loads(capsys.readouterr().out)["skipped_inputs"] == 0


def test_filter_train_writes_the_pair_the_tools_load(tmp_path, capsys):
    """nnlm filter train's folder: SentencePiece and the kenlm module load its files;
    cc_net's pipeline through the kenlm module scores its KenLM binary (cc_net's
    en.arpa.bin) as its ARPA file, to the bit; nnlm's scores over either are the
    same, and over its one-file model (values stored in float32 as nnlm computes them)
    within 1e-6."""
    spm = pytest.importorskip("sentencepiece")
    kenlm = pytest.importorskip("kenlm")
    toy_text(tmp_path / "toy", 300)
    (tmp_path / "mine").mkdir()
    assert main(["filter", "train", str(tmp_path / "toy/train.txt"), "-o",
                 str(tmp_path / "mine"), "--vocab-size", "60"]) == 2  # not a folder it wrote
    assert "is not a folder nnlm filter train wrote" in capsys.readouterr().err
    out = tmp_path / "ref"
    assert main(["filter", "train", str(tmp_path / "toy/train.txt"), "-o", str(out),
                 "--vocab-size", "60", "--order", "4"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["en.arpa", "en.arpa.bin",
                                                      "en.sp.model", "nnlm-filter.json"]
    assert main(["ngram", "convert", str(out / "en.arpa"), str(tmp_path / "en.bin")]) == 0
    sp = spm.SentencePieceProcessor(model_file=str(out / "en.sp.model"))
    model = kenlm.Model(str(out / "en.arpa"))
    binary = kenlm.Model(str(out / "en.arpa.bin"))
    docs = (tmp_path / "toy/test.txt").read_text().splitlines()[:40]
    exact = DocumentScorer(out / "en.arpa", out / "en.sp.model").log10_scores(docs)
    probing = DocumentScorer(out / "en.arpa.bin", out / "en.sp.model").log10_scores(docs)
    onefile = DocumentScorer(tmp_path / "en.bin", out / "en.sp.model").log10_scores(docs)
    for doc, mine, hashed, mapped in zip(docs, exact, probing, onefile):
        pieces = " ".join(sp.encode_as_pieces(ccnet_rules(doc)))
        want = kenlm_perplexity(model, pieces)
        assert kenlm_perplexity(binary, pieces) == want
        assert mine == want and hashed == want and mapped[1] == want[1]
        assert mapped[0] == pytest.approx(want[0], rel=1e-6)
    assert main(["filter", "train", str(tmp_path / "toy/train.txt"), "-o", str(out),
                 "--vocab-size", "50"]) == 0  # its own folder: replaced whole
    assert json.loads((out / "nnlm-filter.json").read_text())["order"] == 5


def test_the_good_bad_ratio(tmp_path, capsys):
    """filter train --bad: a second model of the same pieces; score --bad-model writes
    ln ppl - ln ppl_bad, the kenlm module's perplexities' over the two ARPA files, and
    --max-ratio keeps the documents at or below it."""
    kenlm = pytest.importorskip("kenlm")
    spm = pytest.importorskip("sentencepiece")
    toy_text(tmp_path / "toy", 300)
    words = (tmp_path / "toy/train.txt").read_text().split()
    rng = random.Random(1)
    (tmp_path / "bad.txt").write_text("\n".join(" ".join(rng.sample(words, 7))
                                                for _ in range(300)) + "\n")
    out = tmp_path / "ref"
    assert main(["filter", "train", str(tmp_path / "toy/train.txt"), "--bad",
                 str(tmp_path / "bad.txt"), "-o", str(out), "--vocab-size", "60",
                 "--order", "3"]) == 0
    assert {"en.bad.arpa", "en.bad.arpa.bin"} <= {p.name for p in out.iterdir()}
    capsys.readouterr()
    docs = (tmp_path / "toy/test.txt").read_text().splitlines()[:30] + \
        (tmp_path / "bad.txt").read_text().splitlines()[:30]
    write_jsonl(tmp_path / "a.jsonl", docs)
    assert main(["filter", "score", str(tmp_path / "a.jsonl"), "-m", str(out / "en.arpa"),
                 "--bad-model", str(out / "en.bad.arpa"), "--max-ratio", "0", "-o",
                 str(tmp_path / "o"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    kept = read_jsonl(tmp_path / "o/a.jsonl")
    sp = spm.SentencePieceProcessor(model_file=str(out / "en.sp.model"))
    good, bad = kenlm.Model(str(out / "en.arpa")), kenlm.Model(str(out / "en.bad.arpa"))
    want = {}
    for i, doc in enumerate(docs):
        pieces = " ".join(sp.encode_as_pieces(ccnet_rules(doc)))
        (g, n), (b, _) = kenlm_perplexity(good, pieces), kenlm_perplexity(bad, pieces)
        want[i] = math.log(10.0 ** (-g / n)) - math.log(10.0 ** (-b / n))
    assert all(r["ratio"] == pytest.approx(want[r["id"]], abs=1e-9) and r["ratio"] <= 0
               for r in kept)
    assert {r["id"] for r in kept} == {i for i, x in want.items() if x <= 0}
    assert summary["kept"] + summary["filtered"] == len(docs)
    assert sum(x <= 0 for x in list(want.values())[:30]) > sum(x <= 0 for x in
                                                                list(want.values())[30:])


@pytest.mark.slow
def test_a_run_on_a_dask_cluster_writes_what_one_process_writes(pair, tmp_path, capsys):
    pytest.importorskip("distributed")
    d, docs = pair
    for i in range(3):
        write_jsonl(tmp_path / f"in{i}.jsonl.gz", docs[i * 9:(i + 1) * 9], gzip.open)
    inputs = [str(tmp_path / f"in{i}.jsonl.gz") for i in range(3)]
    run = ["filter", "score", *inputs, "-m", str(d / "en.arpa"), "--json", "-o"]
    assert main([*run, str(tmp_path / "one")]) == 0
    one = json.loads(capsys.readouterr().out)
    assert main([*run, str(tmp_path / "dask"), "--cluster", "local:2"]) == 0
    assert json.loads(capsys.readouterr().out)["documents"] == one["documents"] == 27
    for i in range(3):
        name = f"in{i}.jsonl.gz"
        assert gzip.decompress((tmp_path / "one" / name).read_bytes()) == \
            gzip.decompress((tmp_path / "dask" / name).read_bytes())
    assert main([*run, str(tmp_path / "dask"), "--cluster", "local:2"]) == 0  # all done
    assert json.loads(capsys.readouterr().out)["skipped_inputs"] == 3


def test_the_id_path_gives_the_text_paths_numbers(pair, tmp_path, monkeypatch):
    """Documents scored from SentencePiece's ids in one call (nnlm.kenlm's score_ids) get
    the text path's numbers to the bit, over the ARPA file read into memory, KenLM's
    probing file and nnlm's one-file model, under both normalizations; documents holding
    SentencePiece's unknown piece (whose text is the characters it covers) are among
    them and go the text way; the good/bad pair too."""
    d, docs = pair
    docs = docs + ["", "٣٣٣ 本", "a\u3000b"]
    for target, extra in [("en.arpa.bin", ["--kenlm"]), ("en.bin", [])]:
        if not (d / target).exists():
            assert main(["ngram", "convert", str(d / "en.arpa"), str(d / target),
                         *extra]) == 0
    # cc_net's way: spm_encode's text (an unknown piece as its characters) for lmplz
    sp = DocumentScorer(d / "en.arpa", d / "en.sp.model").tokenizer.processor
    pieces = sp.encode([ccnet(x) for x in docs], out_type=str)
    (tmp_path / "pieces.txt").write_text("\n".join(" ".join(p) for p in pieces) + "\n")
    assert main(["ngram", "train", str(tmp_path / "pieces.txt"), "--order", "3",
                 "--discount-fallback", "-o", str(tmp_path / "kn"), "--arpa",
                 str(tmp_path / "ccnet.arpa")]) == 0
    surfaces = {p for ps, ids in zip(pieces, sp.encode([ccnet(x) for x in docs]))
                for p, i in zip(ps, ids) if i == sp.unk_id()}
    assert surfaces  # unknown pieces' characters, words of that model
    (tmp_path / "en.sp.model").write_bytes((d / "en.sp.model").read_bytes())
    for name in ["en.arpa", "en.arpa.bin", "en.bin", tmp_path / "ccnet.arpa"]:
        sp_model = tmp_path / "en.sp.model" if isinstance(name, Path) else d / "en.sp.model"
        name = name if isinstance(name, Path) else d / name
        for normalize in ["ccnet", "datatrove"]:
            scorer = DocumentScorer(name, sp_model, normalize, bad_model=d / "en.arpa")
            assert scorer._ids_apply(scorer.model)
            unknown = scorer.tokenizer.processor.unk_id()
            by_text = scorer._id_table(scorer.model)[unknown] < 0
            assert by_text == (name.name == "ccnet.arpa")
            encoded = scorer.tokenizer.processor.encode([scorer.normalize(x) for x in docs])
            assert any(unknown in e for e in encoded) and not all(unknown in e for e in encoded)
            fast, both = scorer.log10_scores(docs), scorer.both(docs)
            with monkeypatch.context() as m:
                m.setattr(DocumentScorer, "_ids_apply", lambda self, model: False)
                assert scorer.log10_scores(docs) == fast and scorer.both(docs) == both
    assert fast[-3] is not None  # DataTrove scores the empty document


def test_many_sentences_of_ids_score_as_their_text():
    """nnlm.kenlm's word_ids and score_ids: the float32 sums score() gives each sentence,
    with and without <s> and </s>; -1 for what KenLM would not read as one word; ids past
    the vocabulary and bounds that disagree are ValueErrors."""
    import nnlm.kenlm

    with pytest.warns(UserWarning):  # KenLM's own test model: pruned, summing above 1
        model = nnlm.kenlm.Model(str(Path(__file__).parent / "fixtures/kenlm/test.arpa"))
    sentences = ["looking on a little the biarritz not_found more .", "", "also would",
                 "<s> a </s>"]
    words = sorted({w for s in sentences for w in s.split()})
    table = dict(zip(words, model.word_ids(words)))
    assert model.word_ids(["", "a b", "a\tb", 3]) == [-1, -1, -1, -1]
    ids = np.array([table[w] for s in sentences for w in s.split()], np.int32)
    bounds = np.cumsum([0, *(len(s.split()) for s in sentences)])
    for bos, eos in [(True, True), (False, True), (True, False), (False, False)]:
        assert model.score_ids(ids, bounds, bos, eos).tolist() == \
            [model.score(s, bos, eos) for s in sentences]
    with pytest.raises(ValueError, match="not a word of the model"):
        model.score_ids(np.array([10 ** 6], np.int32), [0, 1])
    with pytest.raises(ValueError, match="disagree"):
        model.score_ids(ids, [0, 2])


@pytest.mark.slow
def test_a_worker_killed_mid_run_loses_nothing(pair, tmp_path, capsys):
    """A Dask worker killed (SIGKILL) while the inputs are being scored: Dask runs its
    task again, and the outputs are one process's, byte for byte; a rerun does nothing."""
    pytest.importorskip("distributed")
    psutil = pytest.importorskip("psutil")
    import subprocess
    import sys
    import time

    d, docs = pair
    model = tmp_path / "en.arpa.bin"
    assert main(["ngram", "convert", str(d / "en.arpa"), str(model), "--kenlm"]) == 0
    inputs = []
    for i in range(32):
        inputs.append(str(tmp_path / f"in{i:02d}.jsonl"))
        write_jsonl(tmp_path / f"in{i:02d}.jsonl", [f"{i} {x}" for x in docs * 60])
    run = ["filter", "score", *inputs, "-m", str(model), "--tokenizer", str(d / "en.sp.model")]
    assert main([*run, "-o", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    job = subprocess.Popen([sys.executable, "-m", "nnlm", *run, "-o", str(tmp_path / "dask"),
                            "--cluster", "local:2", "--json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    killed, deadline = None, time.monotonic() + 120
    while killed is None and job.poll() is None and time.monotonic() < deadline:
        if any((tmp_path / "dask").glob("in*.jsonl")):  # the first outputs are in place
            workers = [p for p in psutil.Process(job.pid).children(recursive=True)
                       if "multiprocessing" in " ".join(p.cmdline())]
            if workers:
                killed = workers[0].pid
                workers[0].kill()
        time.sleep(0.05)
    out, err = job.communicate(timeout=600)
    assert job.returncode == 0, err[-2000:]
    assert killed is not None, "the run ended before a worker could be killed"
    summary = json.loads(out)
    assert summary["documents"] == 32 * len(docs) * 60 and summary["skipped_inputs"] == 0
    for path in inputs:
        name = Path(path).name
        assert (tmp_path / "dask" / name).read_bytes() == (tmp_path / "one" / name).read_bytes()
    assert main([*run, "-o", str(tmp_path / "dask"), "--cluster", "local:2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["skipped_inputs"] == 32

"""Every bad input is a clean error, no wrong number, no lost data.

A table of cases, each run through the CLI's ``main()`` in-process. Every case asserts

* exit 0 with only finite numbers on stdout, or exit 2 with exactly one line on stderr,
  ``nnlm: error: ...``, matching what the case expects (never a traceback);
* that no input file changed (every file present before the case has the same bytes
  after it, outside the case's declared output).

The world the cases run in (toy corpus, n-gram, ARPA, neural and mixture models) is
built once per module; tampered inputs are made per case in its own folder.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import write
from nnlm.cli import main
from nnlm.text.vocab import EOS_ID
from reliability_world import (
    T,
    V,
    arpa_lines,
    build_world,
    check_outcome,
    copy,
    edit_json,
    first_line,
    safetensors_with,
    set_field,
    snapshot,
    tampered_arpa,
    trie_with,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory)


# -- the table -----------------------------------------------------------------------------
@dataclass
class Case:
    id: str
    argv: object  # (world, case dir) -> list of arguments
    expect: str = "error"  # "ok" or "error"
    match: str | None = None  # a regex the error line must match
    setup: object = None  # (world, case dir) -> None: make the case's inputs
    output: object = None  # (world, case dir) -> the path the command may write
    check: object = None  # (world, case dir, stdout) -> None: more assertions on success
    warns: str | None = None  # a regex one "nnlm: warning:" line on stderr must match


VOCABS = {"VOCAB_TEXT": lambda w: w / "toy/train.txt", "VOCAB_NNLM": lambda w: w / "kn3/vocab.txt",
          "VOCAB_DUP": lambda w: write(w.parent / "dup_vocab.txt", "dog\ncat\ndog\n")}


def ng(extra, match=None, expect="error"):
    """An `ngram train` case with extra options, output in the case folder."""
    def argv(w, t):
        return ["ngram", "train", T(w), "-o", t / "m",
                *(VOCABS[x](w) if x in VOCABS else x for x in extra)]

    return dict(argv=argv, expect=expect, match=match, output=lambda w, t: t / "m")


def tr(extra, match=None, expect="error"):
    return dict(argv=lambda w, t: ["train", T(w), "--valid", V(w), "--preset", "tiny",
                                   "--threads", "1", "-o", t / "ck", *extra],
                expect=expect, match=match, output=lambda w, t: t / "ck")


def ev(model, text=None, extra=(), expect="error", match=None, setup=None):
    return dict(argv=lambda w, t: ["eval", model(w, t), (text or (lambda w, t: w /
                                   "toy/test.txt"))(w, t), *extra],
                expect=expect, match=match, setup=setup)


OPTION_CASES = [
    Case("min-count 0", **ng(["--min-count", "0"], "min-count.*not in")),
    Case("max-size 2", **ng(["--max-size", "2"], "max-size")),
    Case("order 0", **ng(["--order", "0"], "order.*not in")),
    Case("order 99", **ng(["--order", "99"], "order")),
    Case("classes 0", **ng(["--method", "class", "--classes", "0"], "classes.*not in")),
    Case("classes > words", **ng(["--method", "class", "--classes", "10000"], "at most")),
    Case("k inf", **ng(["--method", "addk", "--order", "2", "--k", "inf"], "finite")),
    Case("k 0", **ng(["--method", "addk", "--order", "2", "--k", "0"], "k.*not in")),
    Case("k nan", **ng(["--method", "addk", "--order", "2", "--k", "nan"], "finite")),
    Case("discount nan", **ng(["--discount-fallback", "nan", "1", "1.5"], "finite")),
    Case("discount negative", **ng(["--discount-fallback", "-0.5", "1", "1.5"], "not in")),
    Case("discount 0", **ng(["--discount-fallback", "0", "1", "1.5"], "not in")),
    Case("discount D1>=1", **ng(["--discount-fallback", "1", "1", "1.5"], "0 < D1 < 1")),
    Case("discount D3>=3", **ng(["--discount-fallback", "0.5", "1", "3"], "D3\\+ < 3")),
    Case("discount two", **ng(["--discount-fallback", "0.5", "1"], "three discounts")),
    Case("discount good", **ng(["--discount-fallback", "0.4", "1.1", "1.7"], expect="ok")),
    Case("memory too small", **ng(["--memory", "10M", "--discount-fallback"],
                                  "--memory 10M is too small to make progress")),
    Case("memory not a size", **ng(["--memory", "lots"], "not a size")),
    Case("memory 0", **ng(["--memory", "0"], "must be positive")),
    Case("memory 150%", **ng(["--memory", "150%"], "in \\(0, 100\\]")),
    Case("memory temp missing", **ng(["--memory", "1G", "--temp", "/nonexistent/dir",
                                      "--discount-fallback"], "cannot make a temporary")),
    Case("temp without memory", **ng(["--temp", "/tmp"], "give --memory")),
    Case("memory class", **ng(["--memory", "1G", "--method", "class"], "goes with --method kn")),
    Case("memory ok", **ng(["--memory", "1G", "--discount-fallback"], expect="ok")),
    Case("cluster classes 0", argv=lambda w, t: ["ngram", "cluster", T(w), "--classes", "0",
                                                 "-o", t / "c.tsv"], match="classes"),
    Case("cluster iterations 0", argv=lambda w, t: ["ngram", "cluster", T(w), "--iterations",
                                                    "0", "-o", t / "c.tsv"], match="iterations"),
    Case("epochs 0", **tr(["--epochs", "0"], "epochs.*not in")),
    Case("patience 0", **tr(["--patience", "0"], "patience")),
    Case("dropout-x 1.5", **tr(["--dropout-x", "1.5"], "dropout-x.*not in")),
    Case("dropout-h -0.1", **tr(["--dropout-h", "-0.1"], "dropout-h")),
    Case("threads -1", **tr(["--threads", "-1"], "threads")),
    Case("seed -1", **tr(["--seed", "-1"], "seed.*not in")),
    Case("seed 2^32", **tr(["--seed", str(2**32)], "seed")),
    Case("clip -1", **tr(["--clip", "-1"], "clip.*not in")),
    Case("weight-decay -1", **tr(["--weight-decay", "-1"], "weight-decay")),
    Case("plateau-decay -0.5", **tr(["--plateau-decay", "-0.5"], "plateau-decay")),
    Case("plateau-decay 0", **tr(["--plateau-decay", "0"], "plateau-decay")),
    Case("plateau-decay 1.5", **tr(["--plateau-decay", "1.5"], "plateau-decay")),
    Case("lr 0", **tr(["--lr", "0"], "lr")),
    Case("lr nan", **tr(["--lr", "nan"], "finite")),
    Case("lr text", **tr(["--lr", "fast"], "not a number")),
    Case("batch-size 0", **tr(["--batch-size", "0"], "batch-size")),
    Case("m 0", **tr(["--m", "0"], "--m")),
    Case("h -1", **tr(["--h", "-1"], "--h")),
    Case("order 1 neural", **tr(["--order", "1"], "order")),
    Case("max-steps 0", **tr(["--max-steps", "0"], "max-steps")),
    Case("checkpoint-every -1", **tr(["--checkpoint-every", "-1"], "checkpoint-every")),
    Case("noise-samples 0", **tr(["--objective", "nce", "--noise-samples", "0"], "noise")),
    Case("noise-power 2", **tr(["--objective", "nce", "--noise-power", "2"], "noise-power")),
    Case("selfnorm-alpha -1", **tr(["--objective", "selfnorm", "--selfnorm-alpha", "-1"],
                                   "selfnorm-alpha")),
    Case("generate -n -1", argv=lambda w, t: ["generate", w / "kn3", "-n", "-1"], match="-n"),
    Case("generate -n 0", argv=lambda w, t: ["generate", w / "kn3", "-n", "0"], match="-n"),
    Case("temperature 0", argv=lambda w, t: ["generate", w / "kn3", "--temperature", "0"],
         match="temperature"),
    Case("temperature inf", argv=lambda w, t: ["generate", w / "kn3", "--temperature", "inf"],
         match="temperature"),
    Case("top-k -1", argv=lambda w, t: ["generate", w / "kn3", "--top-k", "-1"], match="top-k"),
    Case("max-words 0", argv=lambda w, t: ["generate", w / "kn3", "--max-words", "0"],
         match="max-words"),
    Case("generate seed -1", argv=lambda w, t: ["generate", w / "kn3", "--seed", "-1"],
         match="seed"),
    Case("generate ok", argv=lambda w, t: ["generate", w / "kn3", "-n", "2", "--seed", "3"],
         expect="ok"),
    Case("neighbors -k 0", argv=lambda w, t: ["neighbors", w / "nplm", "cat", "-k", "0"],
         match="-k"),
    Case("toy sentences 0", argv=lambda w, t: ["prepare", "toy", t / "d", "--train-sentences",
                                               "0"], match="train-sentences"),
    Case("toy seed -1", argv=lambda w, t: ["prepare", "toy", t / "d", "--seed", "-1"],
         match="seed"),
    Case("valid-fraction 1.5", argv=lambda w, t: ["prepare", "text", T(w), t / "d",
                                                  "--valid-fraction", "1.5"], match="fraction"),
    Case("valid-fraction 0", argv=lambda w, t: ["prepare", "text", T(w), t / "d",
                                                "--valid-fraction", "0"], match="fraction"),
    Case("fractions sum 1", argv=lambda w, t: ["prepare", "text", T(w), t / "d",
                                               "--valid-fraction", "0.5", "--test-fraction",
                                               "0.5"], match="sum"),
    Case("unk-max-count -1", argv=lambda w, t: ["prepare", "text", T(w), t / "d",
                                                "--unk-max-count", "-1"], match="unk-max-count"),
    Case("mix weights sum", argv=lambda w, t: ["mix", w / "kn3", w / "addk", "--valid", V(w),
                                               "--weights", "0.7", "0.7", "-o", t / "mx"],
         match="sum to 1"),
    Case("mix weights nan", argv=lambda w, t: ["mix", w / "kn3", w / "addk", "--valid", V(w),
                                               "--weights", "nan", "0.5", "-o", t / "mx"],
         match="finite"),
    Case("mix weights count", argv=lambda w, t: ["mix", w / "kn3", w / "addk", "--valid",
                                                 V(w), "--weights", "1", "-o", t / "mx"],
         match="one weight per model"),
    Case("mix iterations 0", argv=lambda w, t: ["mix", w / "kn3", w / "addk", "--valid", V(w),
                                                "--iterations", "0", "-o", t / "mx"],
         match="iterations"),
    Case("eval threads 0", **ev(lambda w, t: w / "nplm", extra=["--threads", "0"],
                                match="threads")),
    Case("plot one word", argv=lambda w, t: ["plot-embeddings", w / "nplm", "cat", "-o",
                                             t / "e.png"], match="at least 2 words"),
    Case("plot tsne 3 words", argv=lambda w, t: ["plot-embeddings", w / "nplm", "cat", "dog",
                                                 "man", "--method", "tsne", "-o", t / "e.png"],
         match="at least 5 words"),
    Case("reproduce threads 0", argv=lambda w, t: ["reproduce", "brown", "--threads", "0",
                                                   "--workdir", t / "r"], match="threads"),
    Case("demo epochs 0", argv=lambda w, t: ["demo", "--epochs", "0", "--workdir", t / "d"],
         match="epochs"),
]


def _user_file(w, t):
    (t / "mine").mkdir()
    write(t / "mine" / "thesis.tex", "my thesis\n")


OUTPUT_CASES = [
    Case("arpa over train", argv=lambda w, t: ["ngram", "train", t / "train.txt", "-o",
                                               t / "m", "--arpa", t / "train.txt",
                                               "--discount-fallback"],
         setup=lambda w, t: copy(T(w), t / "train.txt"), match="also an input"),
    Case("model over train", argv=lambda w, t: ["ngram", "train", t / "train.txt", "-o",
                                                t / "train.txt"],
         setup=lambda w, t: copy(T(w), t / "train.txt"), match="also an input"),
    Case("model dir holds train", argv=lambda w, t: ["ngram", "train", t / "train.txt", "-o",
                                                     t],
         setup=lambda w, t: copy(T(w), t / "train.txt"), match="folder holding the input"),
    Case("cluster over train", argv=lambda w, t: ["ngram", "cluster", t / "train.txt", "-o",
                                                  t / "train.txt"],
         setup=lambda w, t: copy(T(w), t / "train.txt"), match="also an input"),
    Case("mix over component", argv=lambda w, t: ["mix", t / "kn3", w / "addk", "--valid",
                                                  V(w), "-o", t / "kn3"],
         setup=lambda w, t: copy(w / "kn3", t / "kn3"), match="also an input"),
    Case("plot over weights", argv=lambda w, t: ["plot-embeddings", t / "nplm", "cat", "dog",
                                                 "-o", t / "nplm/model.safetensors"],
         setup=lambda w, t: copy(w / "nplm", t / "nplm"), match="inside the input"),
    Case("export into model", argv=lambda w, t: ["ngram", "export-arpa", t / "kn3",
                                                 t / "kn3/ngrams.trie"],
         setup=lambda w, t: copy(w / "kn3", t / "kn3"), match="inside the input"),
    Case("split over source", argv=lambda w, t: ["prepare", "text", t / "d/train.txt",
                                                 t / "d"],
         setup=lambda w, t: copy(w / "toy", t / "d"), match="also an input"),
    Case("two equal outputs", argv=lambda w, t: ["ngram", "train", T(w), "-o", t / "x",
                                                 "--arpa", t / "x", "--discount-fallback"],
         match="two outputs"),
    Case("train over a model", argv=lambda w, t: ["train", T(w), "--valid", V(w), "--preset",
                                                  "tiny", "-o", t / "kn3"],
         setup=lambda w, t: copy(w / "kn3", t / "kn3"), match="not an unfinished training"),
    Case("demo over user files", argv=lambda w, t: ["demo", "--workdir", t / "mine"],
         setup=_user_file, match="did not make"),
    Case("reproduce over user files", argv=lambda w, t: ["reproduce", "brown", "--workdir",
                                                         t / "mine"],
         setup=_user_file, match="did not make"),
    Case("output is a directory", argv=lambda w, t: ["ngram", "cluster", T(w), "--classes",
                                                     "3", "-o", t / "dir"],
         setup=lambda w, t: (t / "dir").mkdir(), match="is a directory"),
    Case("parent is a file", argv=lambda w, t: ["ngram", "train", T(w), "-o",
                                                t / "f.txt" / "m"],
         setup=lambda w, t: write(t / "f.txt", "x\n"), match="is a file"),
    Case("model dir over a file", argv=lambda w, t: ["ngram", "train", T(w), "-o",
                                                     t / "f.txt", "--discount-fallback"],
         setup=lambda w, t: write(t / "f.txt", "x\n"), match="is a file"),
]


def _arpa_case(name, edit, match, expect="error", warns=None, extra=()):
    return Case(f"arpa {name}", argv=lambda w, t: ["eval", t / "bad.arpa", w / "toy/test.txt",
                                                   *extra],
                setup=lambda w, t: tampered_arpa(w, t, edit), match=match, expect=expect,
                warns=warns)


def _uni(lines, word="dog"):
    return first_line(lines, "\\1-grams:", rf"\t{word}(\t|$)")


def _bi(lines):
    return first_line(lines, "\\2-grams:")


def _bi_context(lines):
    """A bigram that is a context (not one ending in </s>, whose weight is never used)."""
    return first_line(lines, "\\2-grams:", r"\t\S+ (?!</s>)\S+\t")


def _tri(lines):
    return first_line(lines, "\\3-grams:")


def _drop_unk(lines):
    lines.remove(lines[_uni(lines, "<unk>")])
    lines[1] = f"ngram 1={int(lines[1].split('=')[1]) - 1}"


def _dup_bigram(lines):
    i = _bi(lines)
    lines.insert(i + 1, lines[i])
    n = next(j for j, x in enumerate(lines) if x.startswith("ngram 2="))
    lines[n] = f"ngram 2={int(lines[n].split('=')[1]) + 1}"


def _dup_unigram(lines):
    i = _uni(lines)
    lines.insert(i + 1, lines[i])
    lines[1] = f"ngram 1={int(lines[1].split('=')[1]) + 1}"


def _predict_bos(lines):
    i = _bi(lines)
    parts = lines[i].split("\t")
    parts[1] = parts[1].split(" ")[0] + " <s>"
    lines[i] = "\t".join(parts)


def _heavy_unigrams(lines):
    start = lines.index("\\1-grams:")
    for i in range(start + 1, lines.index("", start)):
        if "\t<s>" not in lines[i]:
            set_field(lines, i, 0, "-0.1")


def _heavy_trigram_context(lines):
    """Two trigrams of one context given probability 0.98 each."""
    i = _tri(lines)
    rows = range(i, lines.index("", i))
    contexts = [" ".join(lines[j].split("\t")[1].split(" ")[:2]) for j in rows]
    ctx = next(c for c in contexts if contexts.count(c) >= 2)
    for j, c in zip(rows, contexts):
        if c == ctx:
            set_field(lines, j, 0, "-0.01")


ARPA_CASES = [
    _arpa_case("nan prob", lambda ls: set_field(ls, _uni(ls), 0, "nan"), r":\d+: log10 prob"),
    _arpa_case("inf prob", lambda ls: set_field(ls, _uni(ls), 0, "inf"), "not a number in"),
    _arpa_case("-inf prob", lambda ls: set_field(ls, _bi(ls), 0, "-inf"), "not a number in"),
    _arpa_case("huge prob", lambda ls: set_field(ls, _bi(ls), 0, "-1e308"), "not a number in"),
    _arpa_case("positive prob", lambda ls: set_field(ls, _uni(ls), 0, "0.5"), r"\[-1000, 0\]"),
    _arpa_case("huge bow", lambda ls: set_field(ls, _uni(ls), 2, "-1e308"), "within"),
    _arpa_case("nan bow", lambda ls: set_field(ls, _uni(ls), 2, "nan"), "back-off weight"),
    _arpa_case("inf bow", lambda ls: set_field(ls, _bi(ls), 2, "-inf"), "back-off weight"),
    _arpa_case("duplicate unigram", _dup_unigram, "appears twice"),
    _arpa_case("duplicate bigram", _dup_bigram, "appears twice"),
    _arpa_case("predicts <s>", _predict_bos, "<s> is only context"),
    # what KenLM loads loads, with a warning; --strict refuses it
    _arpa_case("unigrams above 1", _heavy_unigrams, None, expect="ok",
               warns="unigram probabilities sum to [\\d.]+, more than 1"),
    _arpa_case("unigrams above 1 strict", _heavy_unigrams, "sum to", extra=["--strict"]),
    _arpa_case("trigram context above 1", _heavy_trigram_context, None, expect="ok",
               warns="summing to [\\d.]+, more than 1"),
    _arpa_case("trigram context above 1 strict", _heavy_trigram_context, "summing to",
               extra=["--strict"]),
    _arpa_case("without <unk>", _drop_unk, None, expect="ok", warns="no <unk>.*-100"),
    _arpa_case("unigrams below 1", _drop_unk, None, expect="ok",
               warns="unigram probabilities sum to 0.9.*less than 1"),
    _arpa_case("bigram bow", lambda ls: set_field(ls, _bi_context(ls), 2, "0.3"), None,
               expect="ok", warns="more than 1"),
    _arpa_case("bigram bow strict", lambda ls: set_field(ls, _bi_context(ls), 2, "0.3"),
               "more than 1", extra=["--strict"]),
    _arpa_case("unigram bow up", lambda ls: set_field(ls, _uni(ls), 2, "0.5"), None,
               expect="ok", warns="after 'dog' sum to [\\d.]+, more than 1"),
    _arpa_case("unigram bow up strict", lambda ls: set_field(ls, _uni(ls), 2, "0.5"),
               "more than 1", extra=["--strict"]),
    _arpa_case("unigram bow down", lambda ls: set_field(ls, _uni(ls), 2, "-0.5"), None,
               expect="ok", warns="after 'dog'.*less than 1"),
    _arpa_case("count mismatch", lambda ls: ls.__setitem__(1, "ngram 1=3"), "declares"),
    _arpa_case("no end", lambda ls: ls.remove("\\end\\"), "truncated"),
    _arpa_case("text prob", lambda ls: set_field(ls, _uni(ls), 0, "abc"), r":\d+: expected"),
    _arpa_case("unknown word", lambda ls: set_field(ls, _bi(ls), 1, "zzz dog"),
               "not among the unigrams"),
    _arpa_case("crlf", lambda ls: ls.__setitem__(slice(None), [x + "\r" for x in ls]), None,
               expect="ok"),
    _arpa_case("bom", lambda ls: ls.__setitem__(0, "\ufeff" + ls[0]), None, expect="ok"),
    Case("arpa empty", argv=lambda w, t: ["eval", t / "e.arpa", w / "toy/test.txt"],
         setup=lambda w, t: write(t / "e.arpa", ""), match="e.arpa: empty file"),
    Case("arpa garbage", argv=lambda w, t: ["score", t / "g.arpa", w / "toy/test.txt"],
         setup=lambda w, t: write(t / "g.arpa", b"\\data\\\n\x00\xff\x00"), match="UTF-8|NUL"),
    Case("export of a bad arpa", argv=lambda w, t: ["ngram", "export-arpa", t / "bad.arpa",
                                                    t / "out.arpa"],
         setup=lambda w, t: tampered_arpa(w, t, lambda ls: set_field(ls, _uni(ls), 0, "nan")),
         match="not a number in"),
]


def _kn(w, t):
    return copy(w / "kn3", t / "m")


def _nplm(w, t):
    return copy(w / "nplm", t / "m")


def _nan_npz(w, t):
    _kn(w, t)
    trie_with(t / "m/ngrams.trie", lambda a: a["logp_2"].__setitem__(slice(None), np.nan))


def _foreign_weights(w, t):
    from nnlm.models import load_model, save_model

    _nplm(w, t)
    save_model(load_model(w / "nplm"), t / "other")  # same weights, another model
    shutil.copy(t / "other/model.safetensors", t / "m/model.safetensors")


def _self_mixture(w, t):
    copy(w / "mix", t / "m")
    edit_json(t / "m/config.json", lambda d: d["config"].__setitem__("components", [".", "."]))


CHECKPOINT_CASES = [
    Case("config empty", **ev(lambda w, t: t / "m", match="not valid JSON",
                              setup=lambda w, t: (_kn(w, t), write(t / "m/config.json", "")))),
    Case("config not json", **ev(lambda w, t: t / "m", match="not valid JSON",
                                 setup=lambda w, t: (_kn(w, t),
                                                     write(t / "m/config.json", "{oops")))),
    Case("config vocab_size text", **ev(
        lambda w, t: t / "m", match="vocab_size",
        setup=lambda w, t: (_kn(w, t), edit_json(t / "m/config.json",
                                                 lambda d: d.__setitem__("vocab_size", "x"))))),
    Case("config without config", **ev(
        lambda w, t: t / "m", match="'config'",
        setup=lambda w, t: (_kn(w, t), edit_json(t / "m/config.json", lambda d: d.pop("config"))))),
    Case("config order text", **ev(
        lambda w, t: t / "m", match="config.json",
        setup=lambda w, t: (_nplm(w, t), edit_json(
            t / "m/config.json", lambda d: d["config"].__setitem__("order", "3"))))),
    Case("config order changed", **ev(
        lambda w, t: t / "m", match="belongs to another model",
        setup=lambda w, t: (_kn(w, t), edit_json(
            t / "m/config.json", lambda d: d["config"].__setitem__("order", 2))))),
    Case("config future format", **ev(
        lambda w, t: t / "m", match="newer",
        setup=lambda w, t: (_kn(w, t), edit_json(
            t / "m/config.json", lambda d: d.__setitem__("format_version", 99))))),
    Case("arrays of a bigram", **ev(
        lambda w, t: t / "m", match="belongs to another model",
        setup=lambda w, t: (_kn(w, t), shutil.copy(w / "kn2/ngrams.trie", t / "m/ngrams.trie")))),
    Case("arrays of add-k", **ev(
        lambda w, t: t / "m", match="belongs to another model",
        setup=lambda w, t: (_kn(w, t), (t / "m/ngrams.trie").unlink(),
                            shutil.copy(w / "addk/arrays.npz", t / "m/arrays.npz")))),
    Case("arrays truncated", **ev(
        lambda w, t: t / "m", match="truncated",
        setup=lambda w, t: (_kn(w, t), (t / "m/ngrams.trie").write_bytes(
            (w / "kn3/ngrams.trie").read_bytes()[:500])))),
    Case("arrays with nan", **ev(lambda w, t: t / "m", match="NaN", setup=_nan_npz)),
    Case("vocab of another model", **ev(
        lambda w, t: t / "m", match="does not match the model",
        setup=lambda w, t: (_nplm(w, t), write(t / "m/vocab.txt", "# nnlm vocabulary v1\n0\t"
                                               "<unk>\t0\n1\t<s>\t0\n2\t</s>\t0\n3\tdog\t1\n")))),
    # an n-gram model's trie holds its own vocabulary, bound to config.json: a vocab.txt
    # replaced beside it is not read, and the model scores as it was saved
    Case("vocab.txt replaced beside a trie", **ev(
        lambda w, t: t / "m", expect="ok",
        setup=lambda w, t: (_kn(w, t), write(t / "m/vocab.txt", "# nnlm vocabulary v1\n0\t"
                                             "<unk>\t0\n1\t<s>\t0\n2\t</s>\t0\n3\tdog\t1\n")))),
    Case("weights with nan", **ev(
        lambda w, t: t / "m", match="not finite|NaN",
        setup=lambda w, t: (_nplm(w, t), safetensors_with(
            t / "m/model.safetensors", lambda ts: ts["b"].__setitem__(0, float("nan")))))),
    Case("weights with inf", **ev(
        lambda w, t: t / "m", match="not finite|inf",
        setup=lambda w, t: (_nplm(w, t), safetensors_with(
            t / "m/model.safetensors", lambda ts: ts["C"].__setitem__((0, 0), float("inf")))))),
    Case("weights truncated", **ev(
        lambda w, t: t / "m", match="unreadable|truncated",
        setup=lambda w, t: (_nplm(w, t), (t / "m/model.safetensors").write_bytes(
            (w / "nplm/model.safetensors").read_bytes()[:300])))),
    Case("weights of another model", **ev(lambda w, t: t / "m", match="belongs to another",
                                          setup=_foreign_weights)),
    Case("weights missing", **ev(lambda w, t: t / "m", match="missing",
                                 setup=lambda w, t: (_nplm(w, t),
                                                     (t / "m/model.safetensors").unlink()))),
    Case("mixture includes itself", **ev(lambda w, t: t / "m", match="includes itself",
                                         setup=_self_mixture)),
    Case("model is a text", **ev(lambda w, t: w / "toy/train.txt",
                                 match="neither an ARPA file nor an nnlm model directory")),
    Case("no such model", **ev(lambda w, t: t / "nothing", match="no such model")),
]


def _other_weights_in_state(t):
    from nnlm.models import load_model, save_model

    save_model(load_model(t / "ck"), t / "other")  # the same numbers, another model
    shutil.copy(t / "other/model.safetensors", t / "ck/state/model.safetensors")


def _resume(tamper, match):
    """A --resume case: a copy of the world's one-epoch run, tampered with, resumed."""
    def setup(w, t):
        copy(w / "nplm", t / "ck")
        tamper(t)

    return dict(argv=lambda w, t: ["train", T(w), "--valid", V(w), "--threads", "1",
                                   "--resume", "--epochs", "2", "-o", t / "ck"],
                setup=setup, match=match, output=lambda w, t: t / "ck")


TEXT_CASES = [
    Case("vocab is a text", **ng(["--vocab", "VOCAB_TEXT"], "not a vocabulary")),
    Case("vocab with min-count", **ng(["--vocab", "VOCAB_NNLM", "--min-count", "2"],
                                      "drop --min-count")),
    Case("vocab listed twice", **ng(["--vocab", "VOCAB_DUP"], "listed twice")),
    Case("vocab ok", **ng(["--vocab", "VOCAB_NNLM", "--discount-fallback"], expect="ok")),
    Case("text missing", **ev(lambda w, t: w / "kn3", lambda w, t: t / "none.txt",
                              match="no such file")),
    Case("text is a dir", **ev(lambda w, t: w / "kn3", lambda w, t: t, match="is a directory")),
    Case("text empty", **ev(lambda w, t: w / "kn3", lambda w, t: t / "e.txt",
                            setup=lambda w, t: write(t / "e.txt", ""), match="empty")),
    Case("text blank", **ev(lambda w, t: w / "kn3", lambda w, t: t / "b.txt",
                            setup=lambda w, t: write(t / "b.txt", "\n \n\t\n"), match="blank")),
    Case("text latin-1", **ev(lambda w, t: w / "kn3", lambda w, t: t / "l.txt",
                              setup=lambda w, t: write(t / "l.txt", b"a dog\ncaf\xe9\n"),
                              match=r"l.txt:2: not valid UTF-8")),
    Case("text NUL", **ev(lambda w, t: w / "kn3", lambda w, t: t / "n.txt",
                          setup=lambda w, t: write(t / "n.txt", b"a dog\na\x00cat\n"),
                          match=r"n.txt:2: NUL")),
    Case("text with <s>", **ev(lambda w, t: w / "kn3", lambda w, t: t / "s.txt",
                               setup=lambda w, t: write(t / "s.txt", "a dog\n<s> a cat </s>\n"),
                               match=r"s.txt:2: <s> may not")),
    Case("score with </s>", argv=lambda w, t: ["score", w / "kn3", t / "s.txt"],
         setup=lambda w, t: write(t / "s.txt", "a dog </s>\n"), match=r"s.txt:1: </s>"),
    Case("train text with <s>", argv=lambda w, t: ["ngram", "train", t / "s.txt", "-o", t / "m"],
         setup=lambda w, t: write(t / "s.txt", "a dog\n<s> a cat\n"), match=r"s.txt:2: <s>"),
    Case("prepare text with <s>", argv=lambda w, t: ["prepare", "text", t / "s.txt", t / "d"],
         setup=lambda w, t: write(t / "s.txt", "a dog\n<s> a cat </s>\n" * 20),
         match=r"s.txt:2: <s>"),
    Case("prepare text tiny", argv=lambda w, t: ["prepare", "text", t / "s.txt", t / "d"],
         setup=lambda w, t: write(t / "s.txt", "a dog\n"), match="would be empty"),
    Case("generate prompt <s>", argv=lambda w, t: ["generate", w / "kn3", "--prompt", "<s> a"],
         match="<s> may not"),
    Case("eval crlf ok", **ev(lambda w, t: w / "kn3", lambda w, t: t / "c.txt", expect="ok",
                              setup=lambda w, t: write(t / "c.txt", (w / "toy/test.txt")
                                                       .read_text().replace("\n", "\r\n")))),
    Case("neighbors unknown", argv=lambda w, t: ["neighbors", w / "nplm", "zebra"],
         match="not in the model's vocabulary"),
    Case("neighbors of n-gram", argv=lambda w, t: ["neighbors", w / "kn3", "dog"],
         match="not a neural"),
    Case("resume nothing", **tr(["--resume"], "no such model|no training state")),
    Case("resume trainer.json empty", **_resume(lambda t: write(t / "ck/state/trainer.json", ""),
                                                 "not valid JSON")),
    Case("resume trainer.json no counters", **_resume(
        lambda t: edit_json(t / "ck/state/trainer.json", lambda d: d.pop("trainer")),
        "field 'trainer' is missing")),
    Case("resume trainer.json epoch -5", **_resume(
        lambda t: edit_json(t / "ck/state/trainer.json",
                            lambda d: d["trainer"].__setitem__("epoch", -5)),
        "field 'trainer.epoch' should be an integer >= 0, got -5")),
    Case("resume trainer.json step nan", **_resume(
        lambda t: edit_json(t / "ck/state/trainer.json",
                            lambda d: d["trainer"].__setitem__("elapsed", float("nan"))),
        "field 'trainer.elapsed' should be a finite number")),
    Case("resume trainer.json other run", **_resume(
        lambda t: edit_json(t / "ck/state/trainer.json", lambda d: d.__setitem__("binding", "x")),
        "another training run")),
    Case("resume optimizer truncated", **_resume(
        lambda t: (t / "ck/state/optimizer.safetensors").write_bytes(b"\x08\x00"),
        "unreadable")),
    Case("resume weights of another run", **_resume(_other_weights_in_state,
                                                    "belongs to another")),
    Case("resume config edited", **_resume(
        lambda t: edit_json(t / "ck/config.json", lambda d: d["config"].__setitem__("h", 3)),
        "belongs to another|changed settings")),
    Case("shortlist without backoff", **tr(["--shortlist", "10"], "needs --shortlist-backoff")),
    Case("eval json ok", **ev(lambda w, t: w / "nplm", extra=["--json"], expect="ok")),
    Case("score stdin-less ok", argv=lambda w, t: ["score", w / "mix", w / "toy/test.txt"],
         expect="ok"),
    Case("eval arpa ok", **ev(lambda w, t: w / "kn3.arpa", expect="ok")),
]

def _empty(w, t):
    (t / "empty.txt").write_text("")


FEATURE_CASES = [  # embeddings, unknown words, the energy network
    Case("embed n-gram model", argv=lambda w, t: ["embed", w / "kn3", w / "toy/test.txt", "-o",
                                                  t / "e.npy"],
         match="no word feature vectors C"),
    Case("embed mixture", argv=lambda w, t: ["embed", w / "mix", w / "toy/test.txt", "-o",
                                             t / "e.npy"], match="no word feature vectors C"),
    Case("embed buckets 0", argv=lambda w, t: ["embed", w / "nplm", w / "toy/test.txt", "-o",
                                               t / "e.npy", "--buckets", "0"]),
    Case("embed hash fraction 1", argv=lambda w, t: ["embed", w / "nplm", w / "toy/test.txt",
                                                     "-o", t / "e.npy", "--hash-fraction", "1"]),
    Case("embed hash fraction -0.1", argv=lambda w, t: [
        "embed", w / "nplm", w / "toy/test.txt", "-o", t / "e.npy", "--hash-fraction=-0.1"]),
    Case("embed over its text", argv=lambda w, t: ["embed", w / "nplm", t / "x.txt", "-o",
                                                   t / "x.txt"],
         setup=lambda w, t: (t / "x.txt").write_text("the cat\n")),
    Case("embed into the model", argv=lambda w, t: ["embed", t / "m", w / "toy/test.txt", "-o",
                                                    t / "m/model.safetensors"],
         setup=lambda w, t: copy(w / "nplm", t / "m"), match="inside the input"),
    Case("embed empty file ok", argv=lambda w, t: ["embed", w / "nplm", t / "empty.txt", "-o",
                                                   t / "e.npy"], setup=_empty, expect="ok",
         output=lambda w, t: t / "e.npy"),
    Case("similar k 0", argv=lambda w, t: ["similar", w / "nplm", "the cat", w / "toy/test.txt",
                                           "-k", "0"]),
    Case("similar missing file", argv=lambda w, t: ["similar", w / "nplm", "the cat",
                                                    t / "none.txt"]),
    Case("open vocab n-gram", **ev(lambda w, t: w / "kn3", extra=["--open-vocab"])),
    Case("open vocab mixture", **ev(lambda w, t: w / "mix", extra=["--open-vocab"])),
    Case("open vocab ok", **ev(lambda w, t: w / "nplm", extra=["--open-vocab", "--json"],
                                expect="ok")),
    Case("oov-lr negative", **ev(lambda w, t: w / "nplm", extra=["--open-vocab", "--oov-lr",
                                                                 "-0.1"], match="oov-lr")),
    Case("oov-lr nan", **ev(lambda w, t: w / "nplm", extra=["--open-vocab", "--oov-lr", "nan"],
                             match="oov-lr")),
    Case("oov-lr without open vocab", **ev(lambda w, t: w / "nplm", extra=["--oov-lr", "0.2"],
                                            match="only with --open-vocab")),
    Case("oov-prior bad", **ev(lambda w, t: w / "nplm", extra=["--open-vocab", "--oov-prior",
                                                                "words"], match="oov-prior")),
    Case("energy-v on nplm", **tr(["--energy-v", "per-word"], "do not apply")),
    Case("energy with tied", **tr(["--preset", "energy", "--tied"], "do not apply")),
    Case("energy-v bad value", **tr(["--preset", "energy", "--energy-v", "some"])),
]

# -- an output replaces only a model nnlm wrote of its family -------------------------------
def _thesis(w, t):
    """A folder of the user's own files, with a subfolder."""
    (t / "out" / "sub").mkdir(parents=True)
    write(t / "out" / "thesis.tex", "my thesis\n")
    write(t / "out" / "sub" / "notes.txt", "notes\n")


def _placed(name):
    """Put a copy of the world's model ``name`` at the case's output ``out``."""
    return lambda w, t: copy(w / name, t / "out")


def _with_notes(name):
    def setup(w, t):
        copy(w / name, t / "out")
        write(t / "out" / "notes.txt", "mine\n")
    return setup


def _abandoned_run(w, t):
    """The start of a training run killed before its first checkpoint."""
    (t / "out").mkdir()
    copy(w / "nplm" / "config.json", t / "out" / "config.json")
    copy(w / "nplm" / "vocab.txt", t / "out" / "vocab.txt")


# every command whose -o is a model directory, as (name, argv with the output at t/out)
MODEL_WRITERS = {
    "ngram train": lambda w, t: ["ngram", "train", T(w), "--order", "2", "--discount-fallback",
                                 "-o", t / "out"],
    "ngram prune": lambda w, t: ["ngram", "prune", w / "kn3", "--threshold", "1e-6",
                                 "-o", t / "out"],
    "mix": lambda w, t: ["mix", w / "kn3", w / "addk", "--valid", V(w), "--iterations", "2",
                         "-o", t / "out"],
    "train": lambda w, t: ["train", T(w), "--valid", V(w), "--preset", "tiny", "--threads",
                           "1", "--max-steps", "2", "-o", t / "out"],
}
# what each may replace: a model of its own family (train: only an unfinished start)
REPLACES = {"ngram train": "kn2", "ngram prune": "kn2", "mix": "mix"}


def _data_loss_cases():
    cases = []
    for name, argv in MODEL_WRITERS.items():
        cases += [
            Case(f"{name} -o over user files", argv=argv, setup=_thesis,
                 match="not an nnlm model directory|not an unfinished training run"),
            Case(f"{name} -o over a training run", argv=argv, setup=_placed("nplm"),
                 match="training run"),
            Case(f"{name} -o over a file", argv=argv,
                 setup=lambda w, t: write(t / "out", "x\n"), match="is a file"),
        ]
        other = "kn2" if name in ("mix", "train") else "mix"
        cases.append(Case(f"{name} -o over a {other} model", argv=argv, setup=_placed(other),
                          match=r"holds a \w+ model|not an unfinished training run"))
        if name in REPLACES:
            cases += [
                Case(f"{name} -o replaces its own kind", argv=argv, setup=_placed(REPLACES[name]),
                     expect="ok", output=lambda w, t: t / "out"),
                Case(f"{name} -o keeps a user file in a model", argv=argv,
                     setup=_with_notes(REPLACES[name]), match="did not write.*notes.txt"),
            ]
        cases.append(Case(f"{name} -o into an empty folder", argv=argv,
                          setup=lambda w, t: (t / "out").mkdir(), expect="ok",
                          output=lambda w, t: t / "out"))
    cases += [
        Case("ngram train -o over another method's model", argv=MODEL_WRITERS["ngram train"],
             setup=_placed("addk"), expect="ok", output=lambda w, t: t / "out"),
        Case("train -o over an abandoned start", argv=MODEL_WRITERS["train"],
             setup=_abandoned_run, expect="ok", output=lambda w, t: t / "out"),
        Case("ngram train -o over an abandoned start", argv=MODEL_WRITERS["ngram train"],
             setup=_abandoned_run, match="training run"),
    ]
    return cases


def _mixture_of_copies(w, t):
    copy(w / "kn3", t / "kn3")
    copy(w / "kn3.arpa", t / "kn3.arpa")
    assert main(["mix", str(t / "kn3"), str(w / "addk"), str(t / "kn3.arpa"), "--valid",
                 str(V(w)), "--iterations", "2", "-o", str(t / "mx")]) == 0


def _retrained_component(w, t):
    _mixture_of_copies(w, t)
    assert main(["ngram", "train", str(T(w)), "--order", "2", "--discount-fallback",
                 "-o", str(t / "kn3")]) == 0


def _edited_arpa_component(w, t):
    _mixture_of_copies(w, t)
    lines = (t / "kn3.arpa").read_text().split("\n")
    i = _uni(lines)
    set_field(lines, i, 2, str(float(lines[i].split("\t")[2]) - 0.5))  # less mass: valid
    (t / "kn3.arpa").write_text("\n".join(lines))


DATA_LOSS_CASES = _data_loss_cases() + [
    Case("mixture of a retrained component", **ev(lambda w, t: t / "mx",
                                                  setup=_retrained_component,
                                                  match="kn3.*changed since the mixture")),
    Case("mixture of an edited ARPA component", **ev(lambda w, t: t / "mx",
                                                     setup=_edited_arpa_component,
                                                     match="kn3.arpa.*changed since")),
    Case("mixture of unchanged components", **ev(lambda w, t: t / "mx",
                                                 setup=_mixture_of_copies, expect="ok")),
]

# -- sizes, ARPA headers, small ones --------------------------------------------------------
GAP_HEAD = "\\data\\\nngram 1=3\nngram 2=1\n{more}\n\\1-grams:\n-1\t<unk>\n-99\t<s>\t0\n" \
    "-0.5\t</s>\n\n\\2-grams:\n-0.2\t<s> </s>\n\n{sections}\\end\\\n"


def _arpa_text(text):
    return lambda w, t: write(t / "x.arpa", text)


def _nplm_with_m(m):
    def setup(w, t):
        copy(w / "nplm", t / "m")
        edit_json(t / "m/config.json", lambda d: d["config"].__setitem__("m", m))
    return setup


def _kn_arpa_after_comments(w, t):
    write(t / "x.arpa", "# written by hand\n\n#another\n" + (w / "kn3.arpa").read_text())


def _eval_x(expect="error", match=None, setup=None):
    return ev(lambda w, t: t / "x.arpa", expect=expect, match=match, setup=setup)


SIZE_AND_SMALL_CASES = [
    Case("train m 1e8", **tr(["--m", "100000000"], "needs [\\d.]+[GT] of memory.*smaller network")),
    Case("checkpoint m 1e8", **ev(lambda w, t: t / "m", setup=_nplm_with_m(10**8),
                                  match="needs [\\d.]+[GT] of memory.*config.json")),
    Case("embed buckets 1e12", argv=lambda w, t: ["embed", w / "nplm", w / "toy/test.txt", "-o",
                                                  t / "e.npy", "--buckets", "1000000000000"],
         match="needs [\\d.]+[GT] of memory"),
    Case("arpa orders with a gap", **_eval_x(
        match=":5: 'ngram 12=0'.*without gaps",
        setup=_arpa_text(GAP_HEAD.format(more="ngram 3=0\nngram 12=0\n", sections="")))),
    Case("arpa empty order without its section", **_eval_x(
        match="no \\\\3-grams: section",
        setup=_arpa_text(GAP_HEAD.format(more="ngram 3=0\n", sections="")))),
    Case("arpa empty higher orders", **_eval_x(expect="ok", setup=_arpa_text(
        GAP_HEAD.format(more="ngram 3=0\nngram 4=0\n", sections="\\3-grams:\n\n\\4-grams:\n\n")))),
    Case("arpa after comment lines", **_eval_x(expect="ok", setup=_kn_arpa_after_comments)),
    Case("arpa empty file", **_eval_x(match="x.arpa: empty file", setup=_arpa_text(""))),
    Case("arpa first line not data", **_eval_x(match="neither an ARPA file.*'hello'",
                                               setup=_arpa_text("hello\n\\data\\\n"))),
    Case("kenlm binary", **_eval_x(match="a KenLM binary file", setup=_arpa_text(
        b"mmap lm http://kheafield.com/code\0\0\0"))),
    Case("memory 1K", **ng(["--memory", "1K", "--discount-fallback"], "--memory 1K is too small")),
    Case("memory 100K", **ng(["--memory", "100K", "--discount-fallback"],
                             "--memory 100K is too small")),
    Case("temp is a file", **ng(["--memory", "1G", "--temp", "VOCAB_TEXT", "--discount-fallback"],
                                "is a file; --temp needs a folder")),
    Case("prune threshold -1e-7", argv=lambda w, t: ["ngram", "prune", w / "kn3", "--threshold",
                                                     "-1e-7", "-o", t / "p"],
         match="threshold: -1e-7 is not in"),
    Case("similar empty sentence", argv=lambda w, t: ["similar", w / "nplm", "",
                                                      w / "toy/test.txt"], match="is empty"),
    Case("similar <s>", argv=lambda w, t: ["similar", w / "nplm", "<s> the cat",
                                           w / "toy/test.txt"], match="<s> may not occur"),
]

# -- no non-finite number is ever printed ---------------------------------------------------
def _huge_biases(w, t):
    copy(w / "nplm", t / "m")
    safetensors_with(t / "m/model.safetensors",
                     lambda d: d.__setitem__("b", torch_sign_pattern(d["b"], 3e38)))


def torch_sign_pattern(like, value):
    out = like.clone()
    out[0::2], out[1::2] = value, -value
    return out


def _kn_with_neginf(name):
    def setup(w, t):
        copy(w / "kn3", t / "m")
        trie_with(t / "m/ngrams.trie", lambda a: a[name].__setitem__(slice(None), -np.inf))
    return setup


def _new_words(w, t):
    write(t / "new.txt", "the zork saw the zork\nthe blip and the zork ran\n")


def _blank_text(w, t):
    write(t / "blank.txt", "\n  \n\n")


def _rs(extra):
    def argv(w, t):
        return ["rescore", w / "kn3", t / "nbest.txt", *extra]
    return argv


def _nbest(w, t):
    write(t / "nbest.txt", "1\t-3.5\tthe cat sat\n1\t-2.0\tthe dog\n")


NONFINITE_CASES = [
    Case("nplm biases 3e38", **ev(lambda w, t: t / "m", setup=_huge_biases,
                                  match="b holds values beyond")),
    Case("kn logp -inf", **ev(lambda w, t: t / "m", setup=_kn_with_neginf("logp_2"),
                              match="'logp_2' holds -inf|probability 0")),
    Case("kn unigram -inf", **ev(lambda w, t: t / "m", setup=_kn_with_neginf("unigram_logp"),
                                 match="'unigram_logp' holds -inf")),
    Case("kn bow -inf", **ev(lambda w, t: t / "m", setup=_kn_with_neginf("log_bow_2"),
                             match="'log_bow_2' holds -inf")),
    Case("kn finite logp that overflow", **ev(
        lambda w, t: t / "m", match="probability 0|beyond floating point",
        setup=lambda w, t: (copy(w / "kn3", t / "m"), trie_with(
            t / "m/ngrams.trie", lambda a: (a["logp_2"].__setitem__(slice(None), -3e38),
                                            a["logp_3"].__setitem__(slice(None), -3e38)))))),
    Case("score finite logp that overflow", argv=lambda w, t: ["score", t / "m",
                                                              w / "toy/test.txt"],
         match="beyond floating point|probability 0",
         setup=lambda w, t: (copy(w / "kn3", t / "m"), trie_with(
             t / "m/ngrams.trie", lambda a: (a["logp_2"].__setitem__(slice(None), -3e38),
                                             a["logp_3"].__setitem__(slice(None), -3e38))))),
    Case("open vocab lr 10 diverges", **ev(lambda w, t: w / "nplm", lambda w, t: t / "new.txt",
                                           extra=["--open-vocab", "--oov-lr", "10"],
                                           setup=_new_words, match="diverged")),
    Case("open vocab lr 1000", **ev(lambda w, t: w / "nplm", extra=["--open-vocab", "--oov-lr",
                                                                    "1000"], match="oov-lr")),
    Case("open vocab blank text", **ev(lambda w, t: w / "nplm", lambda w, t: t / "blank.txt",
                                       extra=["--open-vocab", "--json"], setup=_blank_text,
                                       match="no tokens")),
    Case("open vocab self-normalized", **ev(lambda w, t: w / "nplm",
                                            extra=["--open-vocab", "--self-normalized"],
                                            match="drop --self-normalized")),
    Case("open vocab new words ok", **ev(lambda w, t: w / "nplm", lambda w, t: t / "new.txt",
                                         extra=["--open-vocab"], setup=_new_words, expect="ok")),
    Case("rescore lm-weight 1e308", argv=_rs(["--lm-weight", "1e308"]), setup=_nbest,
         match="overflows"),
    Case("rescore word-penalty 1e308", argv=_rs(["--word-penalty", "1e308"]), setup=_nbest,
         match="overflows"),
    Case("eval /dev/zero", **ev(lambda w, t: w / "kn3", lambda w, t: Path("/dev/zero"),
                                match="NUL byte")),
]

ALL_CASES = (OPTION_CASES + OUTPUT_CASES + ARPA_CASES + CHECKPOINT_CASES + TEXT_CASES
             + FEATURE_CASES + DATA_LOSS_CASES
             + SIZE_AND_SMALL_CASES + NONFINITE_CASES)


@pytest.mark.parametrize("case", ALL_CASES, ids=[c.id for c in ALL_CASES])
def test_case(case: Case, world, tmp_path, capsys):
    t = tmp_path
    if case.setup:
        case.setup(world, t)
    before = snapshot(world, t)
    output = case.output(world, t) if case.output else None
    code = main([str(a) for a in case.argv(world, t)])
    out, err = capsys.readouterr()
    check_outcome(code, out, err, case.expect, case.match, case.warns)
    after = snapshot(world, t)
    for path, digest in before.items():
        if output is not None and (path == output or output in path.parents):
            continue
        assert after.get(path) == digest, f"{path} changed or vanished"
    leftovers = [p for p in t.rglob("*") if ".nnlm-" in p.name and "lock" in p.name]
    assert not leftovers, leftovers
    if case.check:
        case.check(world, t, out)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_edit_of_an_arpa_number_is_refused_or_harmless(world, tmp_path, data):
    """Hypothesis: replace one number of a valid ARPA file by any float. Either loading
    refuses the file in one line, or every next-word distribution that does not sum to 1
    is warned about, above or below (an independent check: the model's own full
    distributions, summed in float64); strict loading refuses every one above 1."""
    from nnlm.base.errors import NnlmError
    from nnlm.lm import logsumexp
    from nnlm.ngram import read_arpa

    lines = arpa_lines(world)
    numeric = [i for i, x in enumerate(lines) if x and x[0] in "-0123456789" and "\t" in x]
    i = data.draw(st.sampled_from(numeric))
    n_fields = len(lines[i].split("\t"))
    field_no = data.draw(st.sampled_from([0, n_fields - 1] if n_fields > 2 else [0]))
    value = data.draw(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                st.floats(-3, 1)))
    set_field(lines, i, field_no, repr(value))
    path = write(tmp_path / "edit.arpa", "\n".join(lines))
    import warnings

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = read_arpa(path)
    except NnlmError as e:
        assert "\n" not in str(e) and str(path) in str(e)
        return
    V = len(model.vocab)
    words = [w for w in range(V) if w != EOS_ID]  # </s> is never a context
    contexts = np.array([[a, b] for a in words for b in words][:: 7], np.int64)
    dist = model.next_logprobs(contexts)
    sums = logsumexp(dist, axis=1)
    if np.any(sums > 2e-3):  # more than 1 loads as KenLM loads it, said; strict refuses it
        assert any("more than 1" in str(w.message) for w in caught)
        with pytest.raises(NnlmError, match="more than 1"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_arpa(path, strict=True)
    if np.any(sums < -2e-3):  # less than 1 is allowed, and said
        assert any("less than 1" in str(w.message) for w in caught)
    assert np.isfinite(dist[:, 3:]).all()


def test_the_table_is_broad():
    """The count of cases: tried, clean errors, correct outputs."""
    errors = sum(c.expect == "error" for c in ALL_CASES)
    assert len(ALL_CASES) >= 120 and errors >= 100

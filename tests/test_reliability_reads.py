"""Reliability of what nnlm reads: the Python API, compressed files and standard input,
a reader racing a writer, random variants of every JSON file nnlm reads back, a full
temporary disk."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import write
from nnlm.cli import main
from reliability_world import (
    T,
    V,
    build_world,
    check_outcome,
    copy,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory)


# -- the Python API ------------------------------------------------------------------------
def test_python_api_generate_strings_and_boundaries(world):
    from nnlm import load_model
    from nnlm.base.errors import NnlmError

    model = load_model(world / "kn3")
    draws = {tuple(model.generate(3)) for _ in range(4)}
    assert len(draws) > 1  # a fresh seed per call, like the CLI
    assert model.generate(3, seed=5) == model.generate(3, seed=5)
    sentence = "a dog is running"
    assert model.perplexity(sentence) == pytest.approx(
        math.exp(-model.sentence_logprob(sentence) / 5))
    assert model.perplexity(Path(world / "toy/test.txt")) > 1
    with pytest.raises(NnlmError, match="names a file"):
        model.perplexity(str(world / "toy/test.txt"))
    with pytest.raises(NnlmError, match="<s> may not"):
        model.sentence_logprob("<s> a dog </s>")
    with pytest.raises(NnlmError, match="seed"):
        model.generate(1, seed=-1)


# -- compressed files and standard input, on the same reader --------------------------------
def _stdin(monkeypatch, data: bytes):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_compressed_text_and_arpa_read_like_plain_ones(world, tmp_path, capsys, suffix):
    import bz2
    import gzip
    import lzma

    opener = {".gz": gzip.open, ".bz2": bz2.open, ".xz": lzma.open}[suffix]
    test = world / "toy/test.txt"
    packed = tmp_path / f"test.txt{suffix}"
    with opener(packed, "wb") as f:
        f.write(test.read_bytes())
    results = []
    for model, text in ((world / "kn3", test), (world / "kn3", packed)):
        assert main(["eval", str(model), str(text), "--json"]) == 0
        results.append(json.loads(capsys.readouterr().out))
    arpa = tmp_path / f"m.arpa{suffix}"
    assert main(["ngram", "export-arpa", str(world / "kn3"), str(arpa)]) == 0
    with opener(tmp_path / f"m.arpa{suffix}", "rb") as f:
        assert f.read(6) == b"\\data\\"
    capsys.readouterr()
    assert main(["eval", str(tmp_path / f"m.arpa{suffix}"), str(packed), "--json"]) == 0
    results.append(json.loads(capsys.readouterr().out))
    assert results[0]["tokens"] == results[1]["tokens"] == results[2]["tokens"]
    assert results[1]["perplexity"] == results[0]["perplexity"]
    assert results[2]["perplexity"] == pytest.approx(results[0]["perplexity"], rel=1e-6)


def test_standard_input_is_a_file_named_dash(world, tmp_path, capsys, monkeypatch):
    train = T(world).read_bytes()
    _stdin(monkeypatch, train)  # ngram train reads its input twice (counts, then ids)
    assert main(["ngram", "train", "-", "--discount-fallback", "-o", str(tmp_path / "m")]) == 0
    _stdin(monkeypatch, (world / "toy/test.txt").read_bytes())
    capsys.readouterr()
    assert main(["eval", str(tmp_path / "m"), "-", "--json"]) == 0
    from_stdin = json.loads(capsys.readouterr().out)
    assert main(["eval", str(world / "kn3"), str(world / "toy/test.txt"), "--json"]) == 0
    assert from_stdin["perplexity"] == json.loads(capsys.readouterr().out)["perplexity"]


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_corrupt_compressed_file_is_one_line(world, tmp_path, capsys, suffix):
    import bz2
    import gzip
    import lzma

    data = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}[suffix](
        T(world).read_bytes())
    flipped = data[:40] + bytes(b ^ 0x55 for b in data[40:80]) + data[80:]
    for name, damaged in (("cut", data[: len(data) // 2]), ("flipped", flipped)):
        path = write(tmp_path / f"{name}{suffix}", damaged)
        code = main(["eval", str(world / "kn3"), str(path)])
        check_outcome(code, "", capsys.readouterr().err, "error", "corrupt|truncated|UTF-8")


def test_a_reader_racing_a_writer_reads_one_whole_model(world, tmp_path):
    """A model loaded while another process replaces it again and again loads
    whole every time (old or new), never "mixed from two models"."""
    import subprocess
    import sys

    from nnlm.models import load_model

    model = copy(world / "kn2", tmp_path / "m")
    writer = subprocess.Popen([sys.executable, "-c", (
        "from nnlm.models import load_model, save_model\n"
        f"m = load_model({str(model)!r})\n"
        f"for _ in range(300): save_model(m, {str(model)!r})\n")])
    loads = 0
    try:
        while writer.poll() is None:
            assert len(load_model(model).vocab) > 0
            loads += 1
    finally:
        writer.kill() if writer.poll() is None else None
        writer.wait()
    assert writer.returncode == 0 and loads >= 20, (writer.returncode, loads)


@pytest.mark.parametrize("name", ["kn2", "nplm", "mix"])
def test_a_swap_between_config_and_arrays_is_read_again_whole(world, tmp_path, monkeypatch,
                                                             name):
    """The race above, made to happen at its worst moment every time: the directory is
    swapped for another save after config.json was read and before any array file was.
    The reader must not mix the two (a binding mismatch), nor blame the files: it reads the
    newest version whole. A directory that never stops changing is one line, not a mix."""
    import nnlm.models as models
    from nnlm.base.errors import NnlmError

    for part in ("kn3", "addk"):  # the mixture's components, beside it as in the world
        copy(world / part, tmp_path / part)
    original = models.load_model(world / name)
    model = models.save_model(original, tmp_path / name)  # a model, not a training run
    # a model whose id comes from its content saves the same directory again: the swap
    # that makes a stale header then is another estimate, in turns with the original
    other = models.load_model(world / "kn3") if original.bound_by_content else original
    versions = [other, original]
    real_load_dir = models._load_dir
    swaps = {"left": 3}
    saved_ids = []

    def swap_then_load(path, header):
        if swaps["left"] > 0 and Path(path) == model:
            swaps["left"] -= 1
            models.save_model(versions[swaps["left"] % 2], model)  # the old header: stale
            saved_ids.append(json.loads((model / "config.json").read_text())["model_id"])
            assert saved_ids[-1] != header["model_id"]
        return real_load_dir(path, header)

    monkeypatch.setattr(models, "_load_dir", swap_then_load)
    loaded = models.load_model(model)
    assert swaps["left"] == 0 and loaded.source_id == saved_ids[-1]
    sentence = " ".join(original.vocab.words[4:9])
    assert loaded.sentence_logprob(sentence) == versions[0].sentence_logprob(sentence)

    swaps["left"] = 10**6  # replaced at every try
    monkeypatch.setattr(models, "LOAD_TRIES", 4)
    with pytest.raises(NnlmError, match=r"replaced 4 times while it was being read"):
        models.load_model(model)


def test_closed_standard_input_is_one_line(world, capsys, monkeypatch):
    """A process started with stdin closed (``<&-``) has no sys.stdin at all."""
    import sys

    monkeypatch.setattr(sys, "stdin", None)
    for argv in (["score", str(world / "kn3")], ["eval", str(world / "kn3"), "-"]):
        code = main(argv)
        check_outcome(code, *capsys.readouterr(), "error", "standard input is closed")


# -- every JSON file nnlm reads back, in random variants ------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                  max_size=3),
    max_leaves=6)


def _variant(data, draw):
    """The JSON text of ``data`` with one field (at any depth) replaced by any JSON value,
    deleted, or the whole text truncated."""
    import copy as copy_

    data = copy_.deepcopy(data)
    paths = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                paths.append((*path, k))
                walk(v, (*path, k))

    walk(data, ())
    how = draw(st.sampled_from(["replace", "delete", "truncate"]))
    text = json.dumps(data)
    if how == "truncate":
        return text[:draw(st.integers(0, len(text) - 1))]
    path = draw(st.sampled_from(paths))
    parent = data
    for k in path[:-1]:
        parent = parent[k]
    if how == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(JSON_VALUES)
    return json.dumps(data)  # NaN and Infinity as Python's json writes them


def _one_line_or_ok(code, capsys):
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    if code != 0:
        lines = [x for x in err.strip().split("\n") if not x.startswith("nnlm: warning:")]
        assert code == 2 and len(lines) == 1 and lines[0].startswith("nnlm: error: "), err


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_config_json_loads_or_is_one_line(world, tmp_path_factory, capsys, data):
    name = data.draw(st.sampled_from(["kn3", "nplm", "mix"]))
    t = tmp_path_factory.mktemp("cfg")
    model = copy(world / name, t / name)
    original = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(_variant(original, data.draw))
    _one_line_or_ok(main(["eval", str(model), str(world / "toy/test.txt")]), capsys)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_trainer_json_resumes_or_is_one_line(world, tmp_path_factory, capsys, data):
    t = tmp_path_factory.mktemp("state")
    run = copy(world / "nplm", t / "ck")
    original = json.loads((run / "state/trainer.json").read_text())
    (run / "state/trainer.json").write_text(_variant(original, data.draw))
    code = main(["train", str(T(world)), "--valid", str(V(world)), "--resume", "--epochs", "1",
                 "--threads", "1", "-o", str(run)])
    _one_line_or_ok(code, capsys)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_result_and_eval_caches_are_redone_not_crashed(world, tmp_path_factory, data):
    """reproduce's caches: a damaged one is said and its work done again."""
    from nnlm.experiments.reproduce import _cached, training_done
    from nnlm.text.jsonfiles import Float, Map

    t = tmp_path_factory.mktemp("cache")
    said = []
    original = json.loads((world / "nplm/state/result.json").read_text())
    write(t / "result.json", _variant(original, data.draw))
    assert training_done(t / "result.json", said.append) in (True, False)
    shape = {"stamp": float, "perplexity": Map(Float(min=1))}
    write(t / "eval.json", _variant({"stamp": 1.5, "perplexity": {"test": 120.0}}, data.draw))
    got = _cached(t / "eval.json", shape, {}, said.append)
    if got:  # accepted: then it has the shape the reader relies on
        assert all(isinstance(v, (int, float)) and v >= 1 for v in got["perplexity"].values())
    assert all("\n" not in s for s in said)


def test_a_full_temp_disk_is_named_as_such(tmp_path, monkeypatch):
    """numpy reports a short write without an errno ("262144 requested and 16384
    written"); the message names the folder and says the disk is full."""
    import shutil as shutil_

    from nnlm.base.errors import NnlmError
    from nnlm.ngram.estimate import workspace

    monkeypatch.setattr(shutil_, "disk_usage",
                        lambda p: shutil_._ntuple_diskusage(10**9, 10**9 - 4096, 4096))
    monkeypatch.setattr(workspace.shutil, "disk_usage", shutil_.disk_usage)
    with workspace.Workspace(tmp_path) as work:
        array = work.positions(1000, np.int64, "ids")

        class ShortWrite:
            def tofile(self, f):
                raise OSError("262144 requested and 16384 written")

        monkeypatch.setattr(workspace.np, "ascontiguousarray", lambda *a, **k: ShortWrite())
        with pytest.raises(NnlmError, match=r"cannot write counting's temporary files \(no "
                           "space left on device\\); free some space or give another folder"):
            array.write(0, np.arange(10))

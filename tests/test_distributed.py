"""Modified Kneser-Ney on a Dask cluster against the one-process estimator: every
n-gram, probability and back-off equal to the bit, and the ARPA file byte for byte, from
shards read by the workers themselves."""

from __future__ import annotations

import contextlib
import gzip
import math
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import directory_bytes
from nnlm import Stream
from nnlm.cli import main
from nnlm.ngram import KneserNey
from nnlm.text.corpus import read_corpus

distributed = pytest.importorskip("distributed", reason="the distributed extra (dask)")

from nnlm.ngram.distributed.cluster import connect  # noqa: E402
from nnlm.ngram.distributed.estimate import estimate_kn, shard_vocabulary  # noqa: E402


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """The toy world's training text in three shards, one of them gzip-compressed."""
    from nnlm.text.toyworld import toy_world

    root = tmp_path_factory.mktemp("shards")
    train = toy_world(seed=0, n_train=1500, n_valid=10, n_test=10)[0]
    paths = []
    # words that name things in Dask's graph (a task was once named "words")
    train = [*train, "the words of the vocabulary order shard_ngrams"]
    for i in range(3):
        text = ("\n".join(train[i::3]) + "\n").encode()
        path = root / (f"s{i}.txt.gz" if i == 1 else f"s{i}.txt")
        path.write_bytes(gzip.compress(text) if i == 1 else text)
        paths.append(path)
    return paths


@pytest.fixture(scope="module")
def client():
    with connect("local:2") as c:
        yield c


def assert_same_model(a: KneserNey, b: KneserNey, tol: float = 0.0) -> None:
    assert a.vocab == b.vocab and a.order == b.order
    np.testing.assert_allclose(a.discounts, b.discounts, rtol=0, atol=tol)
    assert np.array_equal(np.isneginf(a.unigram_logp), np.isneginf(b.unigram_logp))
    finite = np.isfinite(a.unigram_logp)
    np.testing.assert_allclose(a.unigram_logp[finite], b.unigram_logp[finite], rtol=0,
                               atol=tol)
    np.testing.assert_allclose(a.unigram_log_bow, b.unigram_log_bow, rtol=0, atol=tol)
    assert len(a.levels) == len(b.levels)
    for x, y in zip(a.levels, b.levels):
        for name in ("keys", "prefix", "last"):
            assert np.array_equal(getattr(x, name), getattr(y, name)), name
        assert x.n_prefixes == y.n_prefixes
        np.testing.assert_allclose(x.logp, y.logp, rtol=0, atol=tol)
        np.testing.assert_allclose(x.log_bow, y.log_bow, rtol=0, atol=tol)


@pytest.mark.parametrize("order", [1, 2, 5])
def test_the_cluster_estimates_the_one_process_model(client, shards, order):
    vocab = shard_vocabulary(client, [str(p) for p in shards])
    reference_vocab, stream = read_corpus(shards)
    assert vocab == reference_vocab  # the vocabulary pass, summed over workers
    model = estimate_kn(client, [str(p) for p in shards], order, vocab, True, partitions=3)
    assert_same_model(KneserNey(vocab, order, True).fit(stream), model)
    # and it is a model: each context's distribution sums to 1
    ctx = np.array([[vocab.index.get("the", 3)] * max(order - 1, 1)])[:, : order - 1]
    assert abs(np.exp(model.next_logprobs(ctx)).sum() - 1) < 1e-9


def _arpa_entries(path) -> dict:
    """{(order, words): (log10 p, log10 bow)} of an ARPA file, and its header counts."""
    entries, counts, k = {}, {}, 0
    for line in open(path, encoding="utf-8"):
        line = line.rstrip("\n")
        if line.startswith("ngram "):
            a, b = line[6:].split("=")
            counts[int(a)] = int(b)
        elif line.endswith("-grams:"):
            k = int(line[1:].split("-")[0])
        elif k and line and not line.startswith("\\"):
            fields = line.split("\t")
            entries[(k, fields[1])] = (float(fields[0]),
                                       float(fields[2]) if len(fields) > 2 else 0.0)
    return entries, counts


def test_the_arpa_file_streamed_from_the_workers_is_the_one_process_file(client, shards,
                                                                         tmp_path):
    """The file write_arpa writes of the one-process model, byte for byte (the partitions
    come in the model's order), and KenLM reads it."""
    from nnlm.ngram.formats.arpa_write import write_arpa

    paths = [str(p) for p in shards]
    vocab = shard_vocabulary(client, paths)
    _, stream = read_corpus(shards)
    model = estimate_kn(client, paths, 4, vocab, True, partitions=3,
                        arpa=tmp_path / "dist.arpa.gz")
    one = KneserNey(vocab, 4, True).fit(stream)
    write_arpa(one, tmp_path / "one.arpa")
    with gzip.open(tmp_path / "dist.arpa.gz", "rt") as f:
        (tmp_path / "dist.arpa").write_text(f.read())
    got, got_counts = _arpa_entries(tmp_path / "dist.arpa")
    assert got_counts == dict(enumerate(one.num_ngrams(), start=1))
    assert len(got) == sum(got_counts.values())
    assert (tmp_path / "dist.arpa").read_bytes() == (tmp_path / "one.arpa").read_bytes()
    assert_same_model(one, model)
    kenlm = pytest.importorskip("kenlm")
    lm = kenlm.Model(str(tmp_path / "dist.arpa"))
    plain = next(p for p in shards if not p.name.endswith(".gz"))
    first = plain.read_text(encoding="utf-8").splitlines()[0]
    line = first.split()
    ours = one.logprobs(Stream.from_lines([line], vocab)) * math.log10(math.e)
    theirs = [s[0] for s in lm.full_scores(" ".join(line))]
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_the_command_line_trains_on_a_local_cluster(shards, tmp_path, capsys):
    base = ["ngram", "train", *map(str, shards), "--order", "3", "--discount-fallback"]
    assert main([*base, "--cluster", "local:2", "--partitions", "2", "-o",
                 str(tmp_path / "dist"), "--arpa", str(tmp_path / "dist.arpa")]) == 0
    assert main([*base, "-o", str(tmp_path / "one")]) == 0
    capsys.readouterr()
    for model in ("dist", "one", "dist.arpa"):
        assert main(["eval", str(tmp_path / model), str(shards[0]), "--json"]) == 0
    reports = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    import json

    ppl = [json.loads(r)["perplexity"] for r in reports]
    assert ppl[0] == pytest.approx(ppl[1], rel=1e-12) and ppl[2] == pytest.approx(ppl[1],
                                                                                  rel=1e-6)
    # written from the workers' partitions, never gathered: the one process's directory,
    # every file byte for byte (config.json's model id and the trie's binding included)
    assert directory_bytes(tmp_path / "dist") == directory_bytes(tmp_path / "one")


@pytest.mark.parametrize("order", [1, 2, 5])
def test_the_model_file_written_from_the_workers_is_the_one_process_file(client, shards,
                                                                        tmp_path, order):
    """``save`` gets the model while its pieces are still on the workers, and the file
    it writes from them is the one-process model's, byte for byte."""
    from nnlm.models import save_model

    paths = [str(p) for p in shards]
    vocab = shard_vocabulary(client, paths)
    _, stream = read_corpus(shards)
    estimate_kn(client, paths, order, vocab, True, partitions=3,
                save=lambda model: save_model(model, tmp_path / "dist"))
    save_model(KneserNey(vocab, order, True).fit(stream), tmp_path / "one")
    assert directory_bytes(tmp_path / "dist") == directory_bytes(tmp_path / "one")


@pytest.mark.parametrize("extra, message", [
    (["--method", "addk"], "--cluster estimates --method kn"),
    (["--prune", "0", "1"], "--prune applies to one process"),
    (["--cluster", "local:0"], "--cluster local:0: give local:N with N >= 1"),
    (["--cluster", "tcp://127.0.0.1:9"], "--cluster tcp://127.0.0.1:9: the scheduler cannot "
                                         "be reached at 127.0.0.1:9 (connection refused"),
    (["--cluster", "local:100000"], "--cluster local:100000: local:N starts N worker "
                                    "processes on this machine"),
    (["--cluster", "tcp://:8786"], "not an address"),
])
def test_bad_cluster_settings_are_one_line(shards, tmp_path, capsys, monkeypatch, extra,
                                           message):
    monkeypatch.setenv("NNLM_CLUSTER_TIMEOUT", "2")
    argv = ["ngram", "train", *map(str, shards), "-o", str(tmp_path / "m")]
    if "--cluster" not in extra:
        extra = [*extra, "--cluster", "local:1"]
    started = time.monotonic()
    assert main(argv + extra) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert time.monotonic() - started < 30


def test_an_address_that_answers_but_is_no_scheduler_is_named(shards, tmp_path, capsys):
    """Something listens (here a server that sends junk, as a web server or a proxy
    might): one line saying so, not an allocation failure from Dask's handshake."""
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]

    def junk():
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n" * 64)
                conn.close()

    threading.Thread(target=junk, daemon=True).start()
    try:
        assert main(["ngram", "train", str(shards[0]), "--cluster", f"tcp://127.0.0.1:{port}",
                     "-o", str(tmp_path / "m")]) == 2
    finally:
        server.close()
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a Dask scheduler" in err, err


def test_a_bad_shard_is_one_line_without_the_workers_reports(shards, tmp_path):
    """A worker's failed task is the job's one error line; the engine's report of it
    (its traceback, from the worker process) is not printed."""
    import subprocess
    import sys

    bad = tmp_path / "bad.txt"
    bad.write_text("a b c\nd <s> e\n")
    done = subprocess.run([sys.executable, "-m", "nnlm", "ngram", "train", str(shards[0]),
                           str(bad), "--cluster", "local:1", "--discount-fallback", "-o",
                           str(tmp_path / "m")], capture_output=True, text=True, timeout=300)
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == 2
    assert lines[-1].startswith("nnlm: error: ") and "bad.txt:2: <s> may not" in lines[-1]
    assert not any("Traceback" in x or "distributed." in x for x in lines), done.stderr
    assert len(lines) <= 2, done.stderr  # the progress line, then the error

def test_a_missing_shard_or_a_url_without_a_cluster_is_named(shards, tmp_path, capsys):
    argv = ["ngram", "train", str(shards[0]), str(tmp_path / "gone.txt"), "-o",
            str(tmp_path / "m"), "--cluster", "local:1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "gone.txt: no such file" in err and len(err.splitlines()) == 1
    assert main(["ngram", "train", "s3://bucket/shard.txt", "-o", str(tmp_path / "m")]) == 2
    assert "s3://bucket/shard.txt: a URL is read by a cluster's workers" in \
        capsys.readouterr().err
    assert main(["ngram", "train", str(shards[0]), "--partitions", "4", "-o",
                 str(tmp_path / "m")]) == 2
    assert "--partitions cuts the work among the workers of --cluster" in \
        capsys.readouterr().err


def test_a_shard_a_worker_cannot_read_is_named(client, tmp_path):
    bad = tmp_path / "bad.txt.gz"
    bad.write_bytes(b"\x1f\x8b\x08\x00not gzip at all")
    from nnlm.base.errors import NnlmError

    with pytest.raises(NnlmError, match="bad.txt.gz"):
        shard_vocabulary(client, [str(bad)])


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 1])
def test_a_worker_killed_mid_job_is_replaced_and_the_model_is_still_exact(shards, tmp_path,
                                                                          victim):
    """The engine reruns a dead worker's tasks on the others (its nanny starts a new
    one): the job finishes with the same numbers, whichever worker dies. (Either one
    may hold the only copy of a result the memory manager trimmed to one replica: the
    vocabulary was once such scattered data, and a kill lost it for good.)"""
    big = tmp_path / "big.txt"
    big.write_text("".join(p.read_text() if not p.name.endswith(".gz") else
                           gzip.decompress(p.read_bytes()).decode() for p in shards) * 200)
    paths = [str(big)] * 3
    with connect("local:2") as c:
        vocab = shard_vocabulary(c, paths)
        before = set(c.scheduler_info()["workers"])
        result, killed = {}, {}

        def job():
            result["model"] = estimate_kn(c, paths, 4, vocab, True, partitions=4)

        thread = threading.Thread(target=job)
        thread.start()
        deadline = time.monotonic() + 60  # kill once the workers are busy with the job
        while time.monotonic() < deadline and thread.is_alive() and \
                not any(c.processing().values()):
            time.sleep(0.05)
        time.sleep(0.5)
        killed["during"] = thread.is_alive()
        victim = sorted(before)[victim]
        try:
            c.run(os._exit, 1, workers=[victim])
        except Exception:  # noqa: BLE001 - the worker dies before it can answer
            pass
        thread.join(timeout=600)
        assert not thread.is_alive()
        after = set(c.scheduler_info()["workers"])
    assert killed["during"], "the job ended before the kill; make it longer"
    assert victim not in after
    _, stream = read_corpus(paths)
    assert_same_model(KneserNey(vocab, 4, True).fit(stream), result["model"])


def _can_make_namespaces() -> bool:
    import shutil
    import subprocess

    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = subprocess.run(["ip", "netns", "add", "nnlm-probe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "nnlm-probe"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.slow
def test_two_hosts_in_network_namespaces_give_the_one_process_model(shards, tmp_path):
    """bench/ngram/two_hosts_dask.sh: a scheduler and a worker in one namespace, a worker in
    another, joined by a veth pair; the model equals the one-process model to the bit."""
    import subprocess
    import sys
    from pathlib import Path

    if not _can_make_namespaces():
        pytest.skip("network namespaces need root and CAP_NET_ADMIN (ip netns)")
    script = Path(__file__).parents[1] / "bench" / "ngram" / "two_hosts_dask.sh"
    run = subprocess.run(["bash", str(script), str(tmp_path / "out"), "4", *map(str, shards),
                          "--discount-fallback"], capture_output=True, text=True,
                         env={**os.environ, "PYTHON": sys.executable, "PORT": "8796"},
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "on 2 worker(s)" in run.stderr and "largest difference" in run.stdout


@pytest.mark.slow
def test_a_worker_out_of_disk_is_one_line_naming_the_engines_error(shards, tmp_path):
    """Workers whose local directory is a 64 KB tmpfs and who spill every result to it
    (a memory target of 200 KB): the spill fails, and the command says a worker ran out
    of disk, with Dask's own error."""
    import subprocess

    import dask
    from distributed import LocalCluster

    from nnlm.base.errors import NnlmError
    from nnlm.ngram.distributed.run import train_distributed

    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
            capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        with dask.config.set({"distributed.worker.memory.target": 1e-4,
                              "distributed.worker.memory.spill": 2e-4}), \
                LocalCluster(n_workers=2, threads_per_worker=1, local_directory=str(disk),
                             memory_limit="2GB", dashboard_address=None,
                             silence_logs=50) as cluster:
            with pytest.raises(NnlmError) as caught:
                train_distributed([str(p) for p in shards] * 20, 5, cluster.scheduler_address,
                                  None, 1, None, True, None, lambda message: None)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
    message = str(caught.value)
    assert "a worker ran out of disk" in message and "No space left" in message
    assert len(message.splitlines()) == 1


def test_shards_given_as_urls_are_read_by_the_workers_through_fsspec(client, shards):
    """A file:// URL goes the way s3:// or hdfs:// would: fsspec on the worker opens it
    (gzip inferred from the name), and the model is the one from the paths."""
    urls = [p.resolve().as_uri() for p in shards]
    assert all(u.startswith("file://") for u in urls)
    vocab = shard_vocabulary(client, urls)
    assert vocab == shard_vocabulary(client, [str(p) for p in shards])
    from_urls = estimate_kn(client, urls, 3, vocab, True)
    assert_same_model(estimate_kn(client, [str(p) for p in shards], 3, vocab, True),
                      from_urls, tol=0)


def _descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (Linux's /proc children lists)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in (Path(f"/proc/{p}/task").glob("*") if Path(f"/proc/{p}").exists() else ()):
            with contextlib.suppress(OSError):
                kids = [int(x) for x in (task / "children").read_text().split()]
                out.update(kids)
                todo.extend(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _long_job(shards, tmp_path, out, workers=2):
    """``nnlm ngram train`` on a cluster, in its own process, on enough text to run for a
    while; returns the process once the workers are up."""
    import subprocess
    import sys

    big = tmp_path / "big.txt"
    if not big.exists():
        big.write_text("".join(p.read_text() if not p.name.endswith(".gz") else
                               gzip.decompress(p.read_bytes()).decode() for p in shards) * 300)
    proc = subprocess.Popen([sys.executable, "-m", "nnlm", "ngram", "train", str(big),
                             str(big), str(big), "--order", "5", "--discount-fallback",
                             "--cluster", f"local:{workers}", "--partitions", "8",
                             "-o", str(out)], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(_descendants(proc.pid)) < workers + 1:
        time.sleep(0.2)
    return proc


@pytest.mark.slow
def test_ctrl_c_of_the_client_leaves_no_worker_behind(shards, tmp_path):
    import signal

    proc = _long_job(shards, tmp_path, tmp_path / "m")
    time.sleep(2.0)
    below = _descendants(proc.pid)
    assert proc.poll() is None and len(below) >= 3, "the job ended too soon; make it longer"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "nnlm: interrupted", err
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(map(_alive, below)):
        time.sleep(0.2)
    assert not any(map(_alive, below)), [p for p in below if _alive(p)]
    assert not (tmp_path / "m").exists()


@pytest.mark.slow
def test_two_jobs_onto_one_output_cannot_both_write_it(shards, tmp_path, capsys):
    proc = _long_job(shards, tmp_path, tmp_path / "m", workers=1)
    try:
        assert proc.poll() is None, "the first job ended too soon"
        assert main(["ngram", "train", str(shards[0]), "--discount-fallback", "--cluster",
                     "local:1", "-o", str(tmp_path / "m")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"pid {proc.pid}" in err, err
        _, first = proc.communicate(timeout=600)
        assert proc.returncode == 0, first
    finally:
        if proc.poll() is None:
            proc.kill()
    assert main(["eval", str(tmp_path / "m"), str(shards[0])]) == 0

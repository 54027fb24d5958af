"""Modified Kneser-Ney within a memory bound (nnlm.ngram.distributed.out_of_core): the
cluster's passes run here a partition at a time with the pieces in files. The oracle is
the in-memory estimator: the model's file equal byte for byte (the header's binding
aside) and the ARPA file equal byte for byte, for any shards, partitions and threads;
and the failures: one line, the temporary folder gone, no model left."""

from __future__ import annotations

import errno
import filecmp

import pytest

from conftest import trie_file_parts, zipf_corpus
from nnlm.base.errors import NnlmError
from nnlm.fit import run_ngram_job, train_ngram
from nnlm.models import load_model, save_model
from nnlm.ngram.distributed import out_of_core
from nnlm.ngram.estimate.methods import NgramJob
from nnlm.ngram.formats.arpa_write import write_arpa

pytestmark = pytest.mark.skipif(not out_of_core.available(),
                                reason="the compiled reader is not built")


def write_text(path, seed=0, sentences=900, blank_every=0):
    lines = [" ".join(words) for words in zipf_corpus(seed=seed, n_sentences=sentences,
                                                       n_words=80)]
    if blank_every:
        lines = [line if i % blank_every else "" for i, line in enumerate(lines)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def in_memory(paths, order, tmp_path, **settings):
    model = train_ngram(paths, "kn", order, discount_fallback=True, **settings)
    save_model(model, tmp_path / "memory")
    write_arpa(model, tmp_path / "memory.arpa")
    return tmp_path / "memory"


def out_of_core_model(paths, order, tmp_path, name, arpa=True, **settings):
    stats: dict = {}
    out_of_core.estimate_out_of_core(
        paths, order, 64 << 20, tmp_path, discount_fallback=True,
        save=lambda streamed: save_model(streamed, tmp_path / name),
        arpa=tmp_path / f"{name}.arpa" if arpa else None, stats=stats, **settings)
    return tmp_path / name, stats


@pytest.mark.parametrize("order", [1, 2, 3, 5])
@pytest.mark.parametrize("partitions, shard_tokens, threads",
                         [(2, 10**9, 1), (3, 700, 2), (7, 2000, 1), (40, 3000, 2)])
def test_the_files_are_the_in_memory_estimators(order, partitions, shard_tokens, threads,
                                                tmp_path):
    text = write_text(tmp_path / "train.txt", seed=order, blank_every=17)
    memory = in_memory([text], order, tmp_path)
    model, stats = out_of_core_model([text], order, tmp_path, "ooc", partitions=partitions,
                                     shard_tokens=shard_tokens, threads=threads)
    assert trie_file_parts(model / "ngrams.trie") == trie_file_parts(memory / "ngrams.trie")
    assert (model / "vocab.txt").read_bytes() == (memory / "vocab.txt").read_bytes()
    assert filecmp.cmp(tmp_path / "ooc.arpa", tmp_path / "memory.arpa", shallow=False)
    assert stats["partitions"] == partitions and stats["temp_peak_bytes"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("nnlm-kn-")]  # cleaned


def test_shards_vocabulary_limits_and_a_fixed_vocabulary(tmp_path):
    """Several files read as one corpus, --min-count and --max-size, and a fixed
    vocabulary (words outside it are <unk>): the in-memory estimator's model each time."""
    shards = [write_text(tmp_path / f"s{i}.txt", seed=10 + i, sentences=300) for i in range(3)]
    for settings in ({"min_count": 2}, {"max_size": 40}):
        memory = in_memory(shards, 3, tmp_path, **settings)
        model, _ = out_of_core_model(shards, 3, tmp_path, "ooc", arpa=False, partitions=4,
                                     shard_tokens=1500, **settings)
        assert trie_file_parts(model / "ngrams.trie") == trie_file_parts(memory / "ngrams.trie")
        assert (model / "vocab.txt").read_bytes() == (memory / "vocab.txt").read_bytes()
    vocab = load_model(memory).vocab  # max_size=40: most of the text is <unk>
    fixed = in_memory(shards[:1], 3, tmp_path / ".", vocab=vocab)
    model, _ = out_of_core_model(shards[:1], 3, tmp_path, "fixed", arpa=False, partitions=3,
                                 shard_tokens=900, vocab=vocab)
    assert trie_file_parts(model / "ngrams.trie") == trie_file_parts(fixed / "ngrams.trie")


def test_run_ngram_job_goes_out_of_core_where_the_text_needs_more_than_memory(
        tmp_path, monkeypatch):
    text = write_text(tmp_path / "train.txt", seed=3)
    memory = in_memory([text], 4, tmp_path)
    calls = []
    real = out_of_core.estimate_out_of_core

    def spy(*args, **kwargs):
        calls.append(kwargs.get("log"))
        return real(*args, **kwargs)

    monkeypatch.setattr(out_of_core, "estimate_out_of_core", spy)
    job = NgramJob(text, "kn", 4, discount_fallback=True, memory=1 << 30)
    run_ngram_job(job, output=tmp_path / "small")  # the text fits: in memory
    assert not calls
    model = run_ngram_job(NgramJob(text, "kn", 4, discount_fallback=True, memory=64 << 20),
                          output=tmp_path / "big")  # below the interpreter's own needs
    assert len(calls) == 1
    assert trie_file_parts(tmp_path / "big" / "ngrams.trie") == \
        trie_file_parts(memory / "ngrams.trie")
    assert model.order == 4  # the saved model, loaded
    calls.clear()
    run_ngram_job(NgramJob(text, "kn", 4, discount_fallback=True, memory=64 << 20,
                           prune_counts=[0, 1]), output=tmp_path / "pruned")
    run_ngram_job(NgramJob(text, "kn", 4, discount_fallback=True, memory=64 << 20))
    assert not calls  # pruning is the in-memory estimator's, and so is a model not saved


def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, monkeypatch):
    text = write_text(tmp_path / "train.txt", seed=4)
    written = []
    real = out_of_core.pickle.dump

    def dump(value, f, protocol=None):
        written.append(f.name)
        if len(written) > 5:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(value, f, protocol=protocol)

    monkeypatch.setattr(out_of_core.pickle, "dump", dump)
    with pytest.raises(NnlmError, match="no space left on device.*--temp"):
        out_of_core_model([text], 3, tmp_path, "full", partitions=3, shard_tokens=500)
    assert not (tmp_path / "full").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("nnlm-kn-")]


def test_the_plan_keeps_each_step_within_the_bound():
    for tokens, memory, threads in [(10**9, 6 << 30, 2), (5 * 10**7, 500 << 20, 2),
                                    (10**7, 1 << 30, 4)]:
        shard, partitions, chunk = out_of_core.plan(tokens, memory, threads)
        share = (memory - out_of_core.BASE_BYTES) / threads
        assert shard * out_of_core.SHARD_BYTES_PER_TOKEN + chunk * 64 + \
            out_of_core.SHARD_FIXED_BYTES <= share
        ngrams = tokens * out_of_core.NGRAMS_PER_TOKEN / partitions
        assert ngrams * out_of_core.PARTITION_BYTES_PER_NGRAM <= share
    assert out_of_core.plan(1000, 1 << 30, 1)[1] == 2  # at least two partitions


def test_a_sentence_marker_in_the_text_is_one_line_naming_it(tmp_path):
    text = write_text(tmp_path / "train.txt", seed=5, sentences=50)
    text.write_text(text.read_text() + "a b <s> c\n", encoding="utf-8")
    with pytest.raises(NnlmError, match=r"train.txt:51.*<s>"):
        out_of_core_model([text], 3, tmp_path, "marked", partitions=2)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("nnlm-kn-")]


def test_a_compressed_text_is_planned_by_what_it_holds(tmp_path):
    """The plan reads a text's size on disk: about 5 bytes a token of plain text, and a
    compressed file (by its magic bytes, whatever its name) at 20 bytes a token."""
    import gzip

    text = write_text(tmp_path / "train.txt", seed=6, sentences=2000)
    packed = tmp_path / "train.txt.gz"
    packed.write_bytes(gzip.compress(text.read_bytes()))
    plain = out_of_core.tokens_about(text)
    assert abs(plain - len(text.read_text().split())) < 0.5 * plain
    assert out_of_core.tokens_about(packed) == packed.stat().st_size // 20  # not // 5

"""Reading text, splitting, Brown protocol v1, the toy world, and every kind of bad input."""

import hashlib
from collections import Counter

import numpy as np
import pytest

from conftest import write
from nnlm import NnlmError, Stream, Vocabulary, count_words, read_stream
from nnlm.text import corpus as corpus_mod
from nnlm.text import fileio
from nnlm.text.corpus import BROWN_EXPECTED, replace_rare, split_by_tokens
from nnlm.text.toyworld import HELD_OUT_EXAMPLES, has_held_out_pair, toy_world

VOCAB = Vocabulary.from_counts({"the": 3, "cat": 2, "sat": 1})


# -- bad input -------------------------------------------------------------------------
def test_missing_file(tmp_path):
    with pytest.raises(NnlmError, match=r"nope\.txt: no such file"):
        read_stream(tmp_path / "nope.txt", VOCAB)


def test_empty_file(tmp_path):
    with pytest.raises(NnlmError, match=r"empty\.txt: file is empty"):
        count_words(write(tmp_path / "empty.txt", ""))


def test_file_of_blank_lines(tmp_path):
    path = write(tmp_path / "blank.txt", "\n   \n\t\n")
    with pytest.raises(NnlmError, match=r"blank\.txt: no tokens: all 3 lines are blank"):
        count_words(path)
    with pytest.raises(NnlmError, match="all 3 lines are blank"):
        read_stream(path, VOCAB)


@pytest.mark.parametrize("block_bytes", [3, 1 << 22])  # tiny blocks: the error crosses blocks
def test_non_utf8_byte_names_its_line_and_column(tmp_path, monkeypatch, block_bytes):
    monkeypatch.setattr(fileio, "BLOCK_BYTES", block_bytes)
    path = write(tmp_path / "latin1.txt", "the cat\nsat\nthe ca\xeft sat\n".encode("latin-1"))
    message = r"latin1\.txt:3: not valid UTF-8 \(byte 0xef at column 7\)"
    with pytest.raises(NnlmError, match=message):
        read_stream(path, VOCAB)


def test_sentence_boundary_tokens_in_text_are_refused_with_line(tmp_path):
    path = write(tmp_path / "t.txt", "the cat\n\nthe </s> sat\n")
    with pytest.raises(NnlmError, match=r"t\.txt:3: </s> may not occur"):
        read_stream(path, VOCAB)
    with pytest.raises(NnlmError, match=r"t\.txt:3: </s> may not occur"):
        count_words(path)


def test_a_line_of_a_million_tokens(tmp_path):
    path = write(tmp_path / "long.txt", "the cat sat " * 333_333 + "cat\n" + "sat\n")
    stream = read_stream(path, VOCAB)
    assert stream.offsets.tolist() == [0, 1_000_001, 1_000_003]  # 1,000,000 words + </s>, 1 + </s>
    last_of_long = stream.offsets[1] - 1  # the </s> of the long line
    assert VOCAB.decode(stream.contexts(4, [last_of_long])[0]) == ["cat", "sat", "cat"]
    assert count_words(path)["the"] == 333_333


# -- reading ---------------------------------------------------------------------------
@pytest.mark.parametrize("block_bytes", [5, 64, 1 << 22])
def test_streamed_reading_equals_encoding_the_lines_in_memory(tmp_path, monkeypatch, block_bytes):
    monkeypatch.setattr(fileio, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(0)
    words = ["the", "cat", "sat", "emu", "naïve"]
    lines = [" ".join(rng.choice(words, size=rng.integers(0, 6))) for _ in range(200)]
    path = write(tmp_path / "t.txt", "\r\n".join(lines) + "\r\n")  # CRLF too
    got = read_stream(path, VOCAB)
    want = Stream.from_lines([line.split() for line in lines], VOCAB)
    assert np.array_equal(got.ids, want.ids) and np.array_equal(got.offsets, want.offsets)
    assert count_words(path) == Counter(w for line in lines for w in line.split())
    assert got.num_unk == sum(w not in VOCAB for line in lines for w in line.split())


@pytest.mark.parametrize("block_bytes", [5, 1 << 22])
@pytest.mark.parametrize("min_count,max_size", [(1, None), (2, None), (1, 6), (3, 5)])
def test_one_pass_reading_equals_counting_then_encoding(tmp_path, monkeypatch, block_bytes,
                                                        min_count, max_size):
    monkeypatch.setattr(fileio, "BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(1)
    words = ["the", "cat", "sat", "emu", "naïve", "<unk>", "b", "a"]
    lines = [" ".join(rng.choice(words, size=rng.integers(0, 7))) for _ in range(300)]
    path = write(tmp_path / "t.txt", "\n".join(lines) + "\n")
    want_vocab = Vocabulary.from_counts(count_words(path), min_count, max_size)
    want = read_stream(path, want_vocab)
    vocab, got = corpus_mod.read_corpus(path, min_count, max_size)
    assert vocab.words == want_vocab.words and vocab.counts.tolist() == want_vocab.counts.tolist()
    assert np.array_equal(got.ids, want.ids) and np.array_equal(got.offsets, want.offsets)


def test_one_pass_reading_refuses_boundaries_and_blank_files(tmp_path):
    with pytest.raises(NnlmError, match=r"t\.txt:4: <s> may not occur"):
        corpus_mod.read_corpus(write(tmp_path / "t.txt", "a b\n\nc\nd <s>\n"))
    with pytest.raises(NnlmError, match="all 2 lines are blank"):
        corpus_mod.read_corpus(write(tmp_path / "b.txt", "  \n\n"))


# -- splitting -------------------------------------------------------------------------
def test_split_by_tokens_keeps_the_crossing_line_on_the_earlier_side():
    lines = ["a b c", "d e", "f", "g h i j", "k"]  # sizes 3 2 1 4 1
    train, valid, test = split_by_tokens(lines, train_tokens=4, valid_tokens=2)
    # tokens before each line: 0 3 5 6 10
    assert train == ["a b c", "d e"]  # 3 < 4 before "d e", so it joins train; 5 >= 4 before "f"
    assert valid == ["f"]  # 5 < 6 before "f"; 6 >= 4 + 2 before "g h i j"
    assert test == ["g h i j", "k"]


def test_replace_rare():
    counts = Counter({"a": 4, "b": 3})
    assert replace_rare(["a b c"], counts, 3) == ["a <unk> <unk>"]
    assert replace_rare(["a b c"], counts, 0) == ["a b c"]


# -- Brown -----------------------------------------------------------------------------
def test_brown_absent_and_offline_says_how_to_get_it(monkeypatch, tmp_path):
    import nltk

    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    monkeypatch.delenv("NNLM_NO_DOWNLOAD", raising=False)
    calls = []
    monkeypatch.setattr(nltk, "download", lambda *a, **k: calls.append(a) or False)
    with pytest.raises(NnlmError, match=r"python -m nltk\.downloader brown.*NLTK_DATA"):
        corpus_mod.prepare_brown()
    assert calls == [("brown",)]  # it did try NLTK's downloader first


BROWN_SHA256 = {  # protocol v1 files as first written; byte-for-byte reproducibility
    "train": "55062be1c8972dc41cd7dd559c502559ea1798241ec2d9e3938d9fdcb88b8e2b",
    "valid": "a7133fe692da7f2c979eb2c3c4a0571be1dbe9fe634432d0352007102cd5d016",
    "test": "bb6dce16d6d1b36c5ddbbe8d190963ac1efc9644eceabb2dbd4b7f8c9c10f496",
}


@pytest.mark.slow
def test_brown_protocol_v1_counts(brown_dir):
    types = set()
    for name, (lines, tokens) in BROWN_EXPECTED.items():
        data = (brown_dir / f"{name}.txt").read_bytes()
        text = data.decode("utf-8")
        assert text.endswith("\n") and "\r" not in text and "  " not in text
        assert (text.count("\n"), len(text.split())) == (lines, tokens)
        types |= set(text.split())
        assert hashlib.sha256(data).hexdigest() == BROWN_SHA256[name]
    assert len(types) == 14_116 and "<unk>" in types
    train_counts = Counter((brown_dir / "train.txt").read_text().split())
    assert min(c for w, c in train_counts.items() if w != "<unk>") == 4  # rare = seen <= 3


@pytest.mark.slow
def test_brown_paper_cut_counts_rare_words_over_the_whole_corpus(brown_dir):
    from nnlm.text.corpus import brown_paragraphs, prepare_brown

    whole = Counter(w for p in brown_paragraphs(download=False) for w in p.split())
    parts = prepare_brown(paper_cut=True, download=False)
    kept = {w for part in parts for line in part for w in line.split()} - {"<unk>"}
    assert kept == {w for w, c in whole.items() if c > 3}
    assert sum(len(line.split()) for line in parts[0]) == BROWN_EXPECTED["train"][1]


# -- toy world -------------------------------------------------------------------------
def test_toy_world_is_deterministic_and_holds_pairs_out_of_train():
    train, valid, test = toy_world(seed=0)
    assert (train, valid, test) == toy_world(seed=0)
    assert toy_world(seed=1)[0] != train
    assert (len(train), len(valid), len(test)) == (4000, 500, 500)
    assert not any(has_held_out_pair(s) for s in train + valid)
    assert test[: len(HELD_OUT_EXAMPLES)] == HELD_OUT_EXAMPLES
    assert all(has_held_out_pair(s) for s in HELD_OUT_EXAMPLES)
    assert sum(map(has_held_out_pair, test)) >= 200
    train_words = {w for s in train for w in s.split()}
    assert {w for s in test for w in s.split()} <= train_words  # every test word is known


@pytest.mark.parametrize("block_bytes", [1, 2, 3, 7, 1 << 22])
def test_every_line_end_survives_any_block_boundary(tmp_path, monkeypatch, block_bytes):
    """\\n, \\r\\n and a lone \\r end lines wherever the blocks are cut, a \\r\\n cut in
    two included (it is one line end, not two), and the last line needs no line end."""
    monkeypatch.setattr(fileio, "BLOCK_BYTES", block_bytes)
    path = write(tmp_path / "t.txt", b"a b\r\nc\rd e\n\r\nf\r\r\ng")
    got = [line for _, block in fileio.iter_line_blocks(path) for line in block]
    assert got == ["a b", "c", "d e", "", "f", "", "g"]


def test_an_endless_line_is_one_line_not_all_of_memory(tmp_path, monkeypatch):
    monkeypatch.setattr(fileio, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(fileio, "BLOCK_BYTES", 64)
    path = write(tmp_path / "long.txt", "ok\n" + "w " * 600)
    with pytest.raises(NnlmError, match=r"long\.txt:2: a line longer than"):
        list(fileio.iter_line_blocks(path))
    path = write(tmp_path / "zeros.bin", b"\x00" * 5000)
    with pytest.raises(NnlmError, match=r"zeros\.bin:1: NUL byte"):
        list(fileio.iter_line_blocks(path))

"""The compiled reading path (nnlm.text._words) against the Python one (str.split and a
dict), which is its oracle: the same ids, lines, words and error messages on texts made
to trip it (every whitespace character str.split knows, every line end, a BOM, blocks cut
anywhere, bytes that are not UTF-8)."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from nnlm.base.errors import NnlmError
from nnlm.text import fileio, word_blocks
from nnlm.text.corpus import read_corpus, read_stream

pytestmark = pytest.mark.skipif(word_blocks._words is None,
                                reason="nnlm.text._words is not built (no C compiler)")

SPACES = [chr(c) for c in range(0x110000) if chr(c).isspace() and chr(c) not in "\n\r"]
WORDS = ["a", "b", "the", "é", "日本", "x\u200by", "a\u00adb", "ǅ", "😀", "<unk>", "s>",
         "\u00a0a"[1:], "\ufeffbom"]
ENDS = ["\n", "\r\n", "\r"]


def random_text(seed: int, lines: int = 300) -> str:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(lines):
        parts = [str(rng.choice(SPACES))] if rng.random() < 0.2 else []
        for _ in range(int(rng.integers(0, 8))):
            parts.append(str(rng.choice(WORDS)) + (str(rng.integers(0, 50))
                                                   if rng.random() < 0.3 else ""))
            parts.append("".join(rng.choice(SPACES, int(rng.integers(1, 3)))))
        out.append("".join(parts) + str(rng.choice(ENDS)))
    return ("\ufeff" if seed % 2 else "") + "".join(out).rstrip("\n\r" if seed % 3 else "")


def both(fn, *args):
    """fn(*args) on the compiled path and on the Python path."""
    fast = fn(*args)
    saved, word_blocks._words = word_blocks._words, None
    try:
        slow = fn(*args)
    finally:
        word_blocks._words = saved
    return fast, slow


def refusal(fn, *args) -> str:
    """The one-line error ``fn(*args)`` refuses with."""
    with pytest.raises(NnlmError) as e:
        fn(*args)
    return str(e.value)


def same_corpus(a, b) -> None:
    (va, sa), (vb, sb) = a, b
    assert va.words == vb.words and np.array_equal(va.counts, vb.counts)
    assert np.array_equal(sa.ids, sb.ids) and np.array_equal(sa.offsets, sb.offsets)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("block", [7, 64, 1 << 18])
def test_read_corpus_equals_the_python_path(tmp_path, monkeypatch, seed, block):
    monkeypatch.setattr(fileio, "BLOCK_BYTES", block)  # lines and \r\n cut across blocks
    path = tmp_path / "t.txt"
    path.write_bytes(random_text(seed).encode())
    fast, slow = both(read_corpus, path)
    same_corpus(fast, slow)
    assert len(fast[1].ids) > 100
    vocab = slow[0]
    a, b = both(read_stream, path, vocab)
    assert np.array_equal(a.ids, b.ids) and np.array_equal(a.offsets, b.offsets)


def test_shards_and_compressed_files_and_a_vocabulary_that_misses_words(tmp_path):
    texts = [random_text(s, 100) for s in (10, 11, 12)]
    paths = [tmp_path / "a.txt", tmp_path / "b.txt.gz", tmp_path / "c.txt"]
    paths[0].write_text(texts[0], encoding="utf-8")
    paths[1].write_bytes(gzip.compress(texts[1].encode()))
    paths[2].write_text(texts[2], encoding="utf-8")
    same_corpus(*both(read_corpus, paths))
    vocab, _ = read_corpus(paths[0])  # words of b and c outside it become <unk>
    a, b = both(read_stream, paths, vocab)
    assert np.array_equal(a.ids, b.ids) and (a.ids == 0).any()


def test_every_byte_string_is_refused_exactly_when_python_cannot_decode_it():
    """The C validator against Python's UTF-8 decoder, on random and edge-case bytes."""
    rng = np.random.default_rng(0)
    cases = [b"\xc0\x80", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xf5",
             b"\x80", b"\xe2\x80", b"ok\x00", b"\xf0\x9f\x98\x80", b"\xef\xbb\xbf",
             b"\xc2\xa0", b"\xe2\x80\xaf"]
    cases += [bytes(rng.integers(0, 256, int(rng.integers(1, 12)), dtype=np.uint8))
              for _ in range(3000)]
    cases += [bytes(rng.choice([0x41, 0x20, 0x80, 0xbf, 0xc2, 0xe2, 0xf0, 0x0a, 0x00],
                               int(rng.integers(1, 20)))) for _ in range(3000)]
    for case in cases:
        try:
            case.decode("utf-8")
            decodes = b"\x00" not in case
        except UnicodeDecodeError:
            decodes = False
        table = word_blocks._words.new()
        assert (word_blocks._words.encode(table, case) is not None) == decodes, case


@pytest.mark.parametrize("data, message", [
    (b"good line\nbad \xff byte\n", "t.txt:2: not valid UTF-8 (byte 0xff at column 5)"),
    (b"one\r\n\xff\n", "t.txt:2: not valid UTF-8 (byte 0xff at column 1)"),
    (b"\xfe\n", "t.txt:1: not valid UTF-8 (byte 0xfe at column 1)"),
    (b"one\r\ntwo\rthree \xe2\x80\n", "t.txt:3: not valid UTF-8 (byte 0xe2 at column 7)"),
    (b"a\nb\x00c\n", "t.txt:2: NUL byte"),
    (b"a b\nc <s> d\n", "t.txt:2:"),
    (b"a b\r\nc </s>\n", "t.txt:2:"),
    (b"\n \n\t\xc2\xa0\n", "no tokens: all 3 lines are blank"),
])
def test_errors_are_the_python_paths(tmp_path, data, message):
    path = tmp_path / "t.txt"
    path.write_bytes(data)
    errors = both(refusal, read_corpus, path)
    assert errors[0] == errors[1] and message in errors[0]


@pytest.mark.parametrize("seed", range(3))
def test_word_counts_and_index_blocks_equal_the_python_path(tmp_path, monkeypatch, seed):
    from nnlm.index.build import encode_documents
    from nnlm.text.corpus import count_words

    monkeypatch.setattr(fileio, "BLOCK_BYTES", 97)
    path = tmp_path / "t.txt"
    path.write_bytes((random_text(seed) + "\n\n \nlast line\n").encode())
    fast, slow = both(count_words, path)
    assert fast == slow and sum(fast.values()) > 100
    vocab, _ = read_corpus(path)
    short = type(vocab)(vocab.words[:20])  # most words outside it: <unk>
    a, b = both(lambda: [tuple(map(np.copy, x[:2])) for x in encode_documents(path, short)])
    assert len(a) == len(b) and all(np.array_equal(x, y) for p, q in zip(a, b)
                                    for x, y in zip(p, q))
    assert (np.concatenate([ids for ids, _ in a]) == 0).any()  # unknown words


def test_count_words_names_the_line_of_a_sentence_marker_as_before(tmp_path):
    from nnlm.text.corpus import count_words

    path = tmp_path / "t.txt"
    path.write_bytes(b"a b\nc </s>\nd <s> e\n")
    messages = both(refusal, count_words, path)
    assert messages[0] == messages[1] and "t.txt:3: <s> may not occur" in messages[0]

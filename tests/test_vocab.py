import numpy as np
import pytest

from nnlm import NnlmError, Vocabulary
from nnlm.text.vocab import BOS_ID, EOS_ID, UNK_ID


def test_specials_first_then_by_count_ties_alphabetical():
    v = Vocabulary.from_counts({"b": 2, "a": 2, "the": 5, "z": 1})
    assert v.words == ["<unk>", "<s>", "</s>", "the", "a", "b", "z"]
    assert (v.id("<unk>"), v.id("<s>"), v.id("</s>")) == (UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2)


def test_min_count_and_short_list_send_their_counts_to_unk():
    counts = {"the": 5, "a": 3, "b": 2, "c": 1, "<unk>": 4}
    v = Vocabulary.from_counts(counts, min_count=2)
    assert v.words[3:] == ["the", "a", "b"]
    assert v.counts[UNK_ID] == 4 + 1  # the literal <unk> tokens plus the dropped "c"
    short = Vocabulary.from_counts(counts, max_size=5)
    assert short.words[3:] == ["the", "a"]
    assert short.counts[UNK_ID] == 4 + 2 + 1
    assert short.counts.sum() == sum(counts.values())


def test_encode_maps_unknown_words_to_unk_and_decode_inverts_known_ones():
    v = Vocabulary.from_counts({"cat": 2, "dog": 1})
    ids = v.encode(["cat", "emu", "dog", "<unk>"])
    assert ids.dtype == np.int32
    assert ids.tolist() == [v.id("cat"), UNK_ID, v.id("dog"), UNK_ID]
    assert v.decode(ids) == ["cat", "<unk>", "dog", "<unk>"]


def test_sentence_boundaries_may_not_be_counted_as_words():
    with pytest.raises(ValueError, match="<s>"):
        Vocabulary.from_counts({"<s>": 1, "a": 1})


def test_save_load_round_trip(tmp_path):
    v = Vocabulary.from_counts({"the": 5, "naïve": 2, "x\u00a0y": 1})
    v.save(tmp_path / "vocab.txt")
    w = Vocabulary.load(tmp_path / "vocab.txt")
    assert w == v and w.counts.tolist() == v.counts.tolist()
    assert w.fingerprint == v.fingerprint


def test_load_rejects_a_damaged_file_naming_the_line(tmp_path):
    v = Vocabulary.from_counts({"a": 1, "b": 1})
    v.save(tmp_path / "vocab.txt")
    lines = (tmp_path / "vocab.txt").read_text().splitlines()
    lines[4] = "9\tb\t1"  # wrong id on line 5
    (tmp_path / "vocab.txt").write_text("\n".join(lines) + "\n")
    with pytest.raises(NnlmError, match=r"vocab\.txt:5: expected"):
        Vocabulary.load(tmp_path / "vocab.txt")
    (tmp_path / "other.txt").write_text("hello\n")
    with pytest.raises(NnlmError, match=r"other\.txt:1: not an nnlm vocabulary"):
        Vocabulary.load(tmp_path / "other.txt")

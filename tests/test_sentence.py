"""Sentence embeddings (the NNLM text-embedding modules' recipe): buckets as means of
their members, the sqrt-n combiner on a hand-worked example, normalization, the CLI's
edge cases, and the toy world's cats nearer to cats than to teachers."""

import hashlib
import math

import numpy as np
import pytest
import torch

from conftest import write
from nnlm import Vocabulary, load_model
from nnlm.cli import main
from nnlm.neural.networks.network import NPLMConfig, NPLMNetwork
from nnlm.neural.nplm_lm import NeuralLM
from nnlm.neural.sentence import SentenceEncoder, cosine_top_k, normalize_text, stable_bucket

COUNTS = {"the": 9, "cat": 8, "sat": 7, "on": 6, "mat": 5, "dog": 4, "ran": 3, "far": 2,
          "away": 1, "zebra": 1}


def model_with_C(C=None) -> NeuralLM:
    vocab = Vocabulary.from_counts(COUNTS)
    net = NPLMNetwork(NPLMConfig(vocab_size=len(vocab), order=3, m=2, h=2))
    with torch.no_grad():
        net.C.copy_(torch.arange(2 * len(vocab), dtype=torch.float32).view(-1, 2)
                    if C is None else torch.as_tensor(C))
    return NeuralLM(vocab, net)


def test_the_sqrt_n_combiner_by_hand():
    """C(w) = (2i, 2i + 1) for id i: "the cat sat" has ids 3, 4, 5, so its vector is
    ((6 + 8 + 10), (7 + 9 + 11)) / sqrt(3) = (24, 27) / 1.7320508 = (13.8564, 15.5885)."""
    lm = model_with_C()
    v = lm.embed(["the cat sat", "", "cat"], hash_fraction=0.0)
    assert v[0] == pytest.approx([13.856406, 15.588457], abs=1e-5)
    assert v[1] == pytest.approx([0.0, 0.0])  # the empty line
    assert v[2] == pytest.approx([8.0, 9.0])  # one word: its own vector
    assert lm.embed("the cat sat", hash_fraction=0.0)[0] == pytest.approx(v[0])


def test_a_bucket_is_the_mean_of_its_members_and_unknown_words_use_it():
    lm = model_with_C()
    C = lm.model.C.detach().numpy()
    enc = SentenceEncoder(lm.vocab, C, buckets=3, hash_fraction=0.4)
    rare = math.ceil(0.4 * (len(lm.vocab) - 3))  # 4 of the 10 words, the rarest ids
    members = {b: [] for b in range(3)}
    for i in range(len(lm.vocab) - rare, len(lm.vocab)):
        members[stable_bucket(lm.vocab.words[i], 3)].append(i)
    for b, ids in members.items():
        want = C[ids].mean(0) if ids else C[0]  # an empty bucket: <unk>'s vector
        assert enc.table[enc.first_rare + b].numpy() == pytest.approx(want)
    # a rare word and an unknown word are their buckets' vectors
    for w in ["zebra", "unseen-word"]:
        row = enc.first_rare + stable_bucket(w, 3)
        assert enc.embed([w])[0] == pytest.approx(enc.table[row].numpy())
    # a frequent word keeps its own row
    assert enc.embed(["the"])[0] == pytest.approx(C[lm.vocab.index["the"]])


def test_the_hash_is_stable_and_documented():
    digest = hashlib.blake2b("κόσμε".encode(), digest_size=8).digest()
    assert stable_bucket("κόσμε", 977) == int.from_bytes(digest, "little") % 977
    assert 0 <= stable_bucket("hello", 1000) < 1000


def test_normalization_lowercases_and_drops_punctuation():
    assert normalize_text("The cat, sat!  «on» the mat.").split() == \
        ["the", "cat", "sat", "on", "the", "mat"]
    lm = model_with_C()
    a = lm.embed(["The Cat, sat."], normalize=True)
    assert a[0] == pytest.approx(lm.embed(["the cat sat"])[0])


def test_cosine_top_k_against_brute_force():
    rng = np.random.default_rng(0)
    vecs, q = rng.normal(size=(50, 4)), rng.normal(size=4)
    vecs[7] = 0  # a zero vector: similarity 0
    sims = [float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q))) if v.any() else 0.0
            for v in vecs]
    order = sorted(range(50), key=lambda i: -sims[i])[:5]
    got = cosine_top_k(q, vecs, 5)
    assert [i for i, _ in got] == order
    assert [s for _, s in got] == pytest.approx([sims[i] for i in order])


def test_embed_cli_edge_cases(tmp_path, capsys):
    lm = model_with_C()
    from nnlm import save_model

    save_model(lm, tmp_path / "m")
    text = write(tmp_path / "t.txt", "the cat sat\n\nzebra far away\n")
    assert main(["embed", str(tmp_path / "m"), str(text), "-o", str(tmp_path / "e.npy")]) == 0
    got = np.load(tmp_path / "e.npy")
    assert got.shape == (3, 2) and not got[1].any()
    assert got == pytest.approx(lm.embed(["the cat sat", "", "zebra far away"]))
    empty = write(tmp_path / "empty.txt", "")
    assert main(["embed", str(tmp_path / "m"), str(empty), "-o", str(tmp_path / "z.npy")]) == 0
    assert np.load(tmp_path / "z.npy").shape == (0, 2)
    capsys.readouterr()
    from nnlm.ngram import KneserNey
    from nnlm.text.stream import Stream

    kn = KneserNey(lm.vocab, 2, discount_fallback=True).fit(
        Stream.from_lines([["the", "cat"]], lm.vocab))
    save_model(kn, tmp_path / "kn")
    for argv in (["embed", str(tmp_path / "kn"), str(text), "-o", str(tmp_path / "x.npy")],
                 ["embed", str(tmp_path / "m"), str(text), "-o", str(tmp_path / "x.npy"),
                  "--buckets", "0"],
                 ["embed", str(tmp_path / "m"), str(text), "-o", str(tmp_path / "x.npy"),
                  "--hash-fraction", "1"],
                 ["embed", str(tmp_path / "m"), str(text), "-o", str(text)]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("nnlm: error:"), err
    assert not (tmp_path / "x.npy").exists()
    assert text.read_text() == "the cat sat\n\nzebra far away\n"


def test_toy_world_cats_are_nearer_to_cats_than_to_teachers(tmp_path, capsys):
    from nnlm.neural.training.run import train_from_files
    from nnlm.text.corpus import write_splits
    from nnlm.text.toyworld import toy_world

    write_splits(tmp_path / "data", toy_world(seed=0))
    train_from_files(tmp_path / "data/train.txt", tmp_path / "data/valid.txt",
                     tmp_path / "m", preset="tiny", train={"epochs": 4}, threads=1,
                     log=lambda s: None)
    lm = load_model(tmp_path / "m")
    cats = ["the cat is walking in the bedroom", "a cat was hiding in the yard",
            "the cat is running in the room"]
    teachers = ["the teacher is reading in the room", "a teacher was singing in a bedroom",
                "the teacher is cooking in the kitchen"]
    v = lm.embed(cats + teachers)
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    sim = v @ v.T
    within = np.mean([sim[i, j] for i in range(3) for j in range(3) if i != j])
    across = np.mean([sim[i, j] for i in range(3) for j in range(3, 6)])
    assert within > across, (within, across)
    # and nnlm similar puts a cat sentence first among the others
    pool = write(tmp_path / "pool.txt", "\n".join(cats[1:] + teachers) + "\n")
    assert main(["similar", str(tmp_path / "m"), cats[0], str(pool), "-k", "2"]) == 0
    top = capsys.readouterr().out.splitlines()
    assert all("cat" in line for line in top), top


def test_similar_skips_blank_lines_and_embed_refuses_sentence_boundaries(tmp_path, capsys):
    from nnlm import save_model

    save_model(model_with_C(), tmp_path / "m")
    text = write(tmp_path / "t.txt", "\nthe cat sat\n\n   \nzebra far away\n\n")
    assert main(["similar", str(tmp_path / "m"), "the cat", str(text), "-k", "10",
                 "--json"]) == 0
    import json

    found = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert sorted(f["line"] for f in found) == [2, 5]  # the lines with words, numbered
    bad = write(tmp_path / "b.txt", "the cat\nthe <s> cat sat\n")
    for argv in (["embed", tmp_path / "m", bad, "-o", tmp_path / "e.npy"],
                 ["similar", tmp_path / "m", "the cat", bad]):
        assert main([str(a) for a in argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "b.txt:2: <s> may not" in err[0], err
    assert not (tmp_path / "e.npy").exists()

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nnlm import Stream, Vocabulary
from nnlm.text.vocab import BOS, EOS

WORDS = ["a", "b", "c", "d", "e"]
VOCAB = Vocabulary.from_counts({w: 1 for w in WORDS})
lines_strategy = st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=8), min_size=1,
                          max_size=12)


def brute_force_windows(lines, order):
    """The reference: a plain loop over lines, padding each with <s> on the left."""
    contexts, targets = [], []
    for line in lines:
        padded = [BOS] * (order - 1) + list(line) + [EOS]
        for i in range(order - 1, len(padded)):
            contexts.append(padded[i - order + 1 : i])
            targets.append(padded[i])
    return contexts, targets


@settings(max_examples=60, deadline=None)
@given(lines=lines_strategy, order=st.integers(1, 5))
def test_contexts_match_a_brute_force_loop(lines, order):
    stream = Stream.from_lines(lines, VOCAB)
    want_ctx, want_tgt = brute_force_windows(lines, order)
    got_ctx = stream.contexts(order)
    assert got_ctx.shape == (len(want_tgt), order - 1)
    assert [VOCAB.decode(row) for row in got_ctx] == want_ctx
    assert VOCAB.decode(stream.ids) == want_tgt


@settings(max_examples=30, deadline=None)
@given(lines=lines_strategy, order=st.integers(1, 4), batch=st.integers(1, 7),
       seed=st.integers(0, 9))
def test_shuffled_batches_visit_every_slot_once_with_its_own_context(lines, order, batch, seed):
    stream = Stream.from_lines(lines, VOCAB)
    pairs = [(tuple(c), t) for ctx, tgt in
             stream.batches(order, batch, shuffle=True, rng=np.random.default_rng(seed))
             for c, t in zip(ctx.tolist(), tgt.tolist())]
    want = [(tuple(c), t) for c, t in zip(stream.contexts(order).tolist(), stream.ids.tolist())]
    assert sorted(pairs) == sorted(want)


def test_sizes_and_offsets():
    stream = Stream.from_lines([["a", "b", "c"], [], ["d", "e"]], VOCAB)  # empty line skipped
    assert (len(stream), stream.num_lines, stream.num_words) == (7, 2, 5)
    assert stream.offsets.tolist() == [0, 4, 7]
    assert VOCAB.decode(stream.line(1)) == ["d", "e"]
    assert stream.line_of(np.arange(7)).tolist() == [0, 0, 0, 0, 1, 1, 1]


def test_concatenate_keeps_lines_apart():
    a = Stream.from_lines([["a", "b"]], VOCAB)
    b = Stream.from_lines([["c"], ["d", "e"]], VOCAB)
    both = Stream.concatenate([a, b])
    want = Stream.from_lines([["a", "b"], ["c"], ["d", "e"]], VOCAB)
    assert both.ids.tolist() == want.ids.tolist()
    assert both.offsets.tolist() == [0, 3, 5, 8]
    assert VOCAB.decode(both.contexts(3)[3]) == [BOS, BOS]  # "c" starts its own line

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from nnlm.base.sorted_keys import lookup
from nnlm.ngram.store.hashindex import HashIndex


@settings(max_examples=50, deadline=None)
@given(keys=st.sets(st.integers(0, 2**40), max_size=300),
       queries=st.lists(st.integers(-5, 2**40), max_size=200))
def test_hash_index_agrees_with_binary_search(keys, queries):
    keys = np.array(sorted(keys), np.int64)
    queries = np.array(queries + keys[::3].tolist(), np.int64)
    got = HashIndex(keys).lookup(queries)
    assert np.array_equal(got, np.where(queries >= 0, lookup(keys, queries), -1))


def test_colliding_keys_all_found():
    keys = np.arange(0, 1 << 20, 1 << 12, dtype=np.int64)  # same low bits: many collisions
    index = HashIndex(keys)
    assert np.array_equal(index.lookup(keys), np.arange(len(keys)))
    assert np.all(index.lookup(keys + 1) == -1)
    assert np.all(index.lookup(np.array([-1, -2, -1], np.int64)) == -1)  # -1 marks empty slots

"""Where a back-off model's n-grams live, below the model: the levels in memory
(:mod:`.levels`, sorted keys with :mod:`.hashindex`'s lookups) and nnlm's memory-mapped
trie (:mod:`.trie`, its header and sections in :mod:`.trie_layout`, written by
:mod:`.trie_write` and opened by :mod:`.trie_map`, its numbers in :mod:`.values`,
bit-packed with :mod:`.bits` and :mod:`.run_pointers`, its words in
:mod:`.vocab_table`; the C scorer in ``_trie.c``). Nothing here knows the model above
it. See docs/ngram_store.md."""

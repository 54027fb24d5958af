"""Where back-off n-gram models live on disk: nnlm's memory-mapped trie (:mod:`.trie`,
written by :mod:`.trie_write` and opened by :mod:`.trie_map`, its numbers in
:mod:`.values`, bit-packed with :mod:`.bits`), ARPA text (:mod:`.arpa_read`,
:mod:`.arpa_write`), KenLM's binary files
(:mod:`.kenlm_binary`) and conversion between them and ARPA (:mod:`.convert`). See
docs/ngram_store.md."""

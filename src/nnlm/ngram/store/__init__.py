"""Where back-off n-gram models live on disk: nnlm's memory-mapped trie (:mod:`.trie`,
its numbers in :mod:`.values`, bit-packed with :mod:`.bits`), KenLM's binary files
(:mod:`.kenlm_binary`) and conversion between them and ARPA (:mod:`.convert`). See
docs/ngram_store.md."""

"""Where back-off n-gram models live on disk: nnlm's memory-mapped trie (:mod:`.trie`,
bit-packed with :mod:`.bits`). See docs/ngram_store.md."""

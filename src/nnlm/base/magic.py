"""The first bytes that name the binary files nnlm reads and writes, in one numpy-free
place: the readers check them, and a command's output may replace only a file of its
own kind (:mod:`nnlm.file_kinds`), which it recognizes by them."""

NNLM_TRIE = b"NNLMTRIE"  # nnlm's mapped trie (ngram/store/trie_layout.py)
KENLM_BINARY = b"mmap lm http://kheafield.com/code"  # KenLM's build_binary files
NPY = b"\x93NUMPY"  # a NumPy array (np.save)
PNG = b"\x89PNG\r\n\x1a\n"

"""The files other tools read and write, above the model: ARPA text (:mod:`.arpa_read`,
with the compiled scanner :mod:`.arpa_scan`; :mod:`.arpa_write`), KenLM's binary files
(:mod:`.kenlm_binary`: trie, quantized and probing layouts, read where they lie;
:mod:`.kenlm_write`: the probing layout written, as ``build_binary`` writes it) and
conversion between them and nnlm's mapped files (:mod:`.convert`, handed the models'
load and save functions)."""

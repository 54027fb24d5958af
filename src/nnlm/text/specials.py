"""The reserved words and their ids, in KenLM's order (see :mod:`nnlm.text.vocab`). Without
numpy, so that :mod:`nnlm.kenlm` can name them in a process that imports nothing else."""

UNK, BOS, EOS = "<unk>", "<s>", "</s>"
UNK_ID, BOS_ID, EOS_ID = 0, 1, 2
SPECIALS = (UNK, BOS, EOS)
NO_WORD = -1  # a context slot with no word: the null context of back-off models (KenLM's)
KENLM_BOS_LOG10 = -99.0  # the log10 p KenLM stores for <s>: its score where asked as a word

"""Corpora: plain-text files, the Brown corpus (protocol v1), and their splits.

Plain text is UTF-8, one sentence or paragraph a line, tokens separated by whitespace
(``str.split()``). One rule everywhere: a blank line is not a sentence (nothing is
predicted for it; ``score`` keeps its row, with 0 tokens), and ``<s>`` and ``</s>`` may
not occur in a text, since nnlm adds the sentence boundaries itself. Files are streamed in
blocks: a large file becomes int32 ids and line offsets (:class:`~nnlm.text.stream.Stream`),
never a Python list of strings.

Brown, protocol v1 (Bengio et al. 2003's split, on NLTK's copy of the corpus): one
paragraph a line in NLTK's order, sentences joined, tokens joined by single spaces;
lines go to train until it holds 800,000 tokens, then to valid until 1,000,000 tokens
in all, the rest to test; every token seen 3 times or fewer in train becomes ``<unk>``
in all three files. On NLTK's Brown this gives train 9,748 lines / 800,173 tokens,
valid 3,024 / 199,854, test 2,895 / 161,165, and 14,116 word types including ``<unk>``.
The paper itself counted rare words over the whole corpus (``paper_cut=True``).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from pathlib import Path

import numpy as np

from ..base.errors import NnlmError, warn, where
from . import word_blocks
from .fileio import atomic_write_texts, iter_line_blocks
from .stream import Stream
from .vocab import BOS, EOS, EOS_ID, UNK, UNK_ID, Vocabulary, special_error

SPLIT_NAMES = ("train", "valid", "test")


# -- plain text ------------------------------------------------------------------------
def count_words(path: str | os.PathLike | Sequence) -> Counter:
    """Token counts of a text file (or of several, summed), streamed block by block."""
    if isinstance(path, (list, tuple)):
        total: Counter = Counter()
        for one in path:
            total.update(count_words(one))
        return total
    fast = word_blocks.count([path])
    if fast is not None:
        return Counter(fast)
    counts: Counter = Counter()
    lines = 0
    for _, block in iter_line_blocks(path):
        lines += len(block)
        counts.update("\n".join(block).split())
    if not counts:
        raise NnlmError(f"{path}: no tokens: all {lines} lines are blank")
    for special in (BOS, EOS):
        if special in counts:
            _raise_special(path, special)
    return counts


def word_counts(source) -> tuple[list[str], np.ndarray]:
    """(the words in order of first occurrence, their token counts) of a text file or
    several (paths, or an open binary file), a block at a time: the compiled counter,
    or :func:`count_words` where it is missing or refuses (naming the line)."""
    read = word_blocks.count_arrays(text_paths(source))
    if read is not None:
        return read
    counted = count_words(source)
    return list(counted), np.fromiter(counted.values(), np.int64, len(counted))


class _FirstSeen(dict):
    """word -> id in order of first occurrence; a lookup of a new word assigns the next id
    (so ``map(d.__getitem__, tokens)`` encodes a text in C, calling Python once a type)."""

    def __missing__(self, word: str) -> int:
        i = self[word] = len(self)
        return i


def text_paths(source) -> list:
    """One text or several (shards of one corpus, read in the order given)."""
    return list(source) if isinstance(source, (list, tuple)) else [source]


def _encode_blocks(source, table: dict, encode, split=str.split) -> tuple[np.ndarray,
                                                                          np.ndarray]:
    """Every token of a text file, or of several one after another: ``split`` makes a
    line's tokens (its words, or a tokenizer's subwords), ``encode`` maps an iterable of
    tokens to their ids; ``table`` (word -> id) names ``<s>`` and ``</s>``'s ids where it
    has them."""
    parts = [_encode_file(path, table, encode, split) for path in text_paths(source)]
    if len(parts) == 1:
        return parts[0]
    return np.concatenate([ids for ids, _ in parts]), np.concatenate([n for _, n in parts])


def _encode_file(path, table: dict, encode, split=str.split) -> tuple[np.ndarray,
                                                                      np.ndarray]:
    """Every token of a text file through ``encode`` (see :func:`_encode_blocks`),
    streamed block by block: (ids, lengths of the non-blank lines). ``<s>`` and
    ``</s>`` are refused, naming their line."""
    def blocks():
        for first, block in iter_line_blocks(path):
            tokenized = list(map(split, block))
            lengths = np.fromiter(map(len, tokenized), np.int64, len(tokenized))
            ids = np.fromiter(encode(chain.from_iterable(tokenized)), np.int32,
                              int(lengths.sum()))
            special = [table[w] for w in (BOS, EOS) if w in table]
            if special and np.isin(ids, special).any():
                bad = next(i for i, t in enumerate(tokenized) if BOS in t or EOS in t)
                raise NnlmError(special_error(where(path, first + bad), tokenized[bad]))
            yield ids, lengths

    return word_blocks.joined(path, blocks())


def read_stream(path: str | os.PathLike | Sequence, vocab: Vocabulary) -> Stream:
    """Encode a text file (or several, one after another) with ``vocab``: unknown words
    become ``<unk>``.

    Memory is about 4 bytes a token for the ids plus 8 a line for the offsets.
    """
    fast = word_blocks.encode(text_paths(path), vocab.words) if vocab.tokenizer is None else None
    if fast is not None:  # ids past the vocabulary's are words outside it
        word_ids, lengths, _ = fast
        return Stream.from_ids(np.where(word_ids < len(vocab), word_ids, np.int32(UNK_ID)),
                               lengths)
    get = vocab.index.get  # the vocabulary's own dict, not a copy: a model's process
    word_ids, lengths = _encode_blocks(  # holds one
        path, vocab.index, lambda tokens: map(get, tokens, repeat(UNK_ID)),
        vocab.split if vocab.tokenizer is not None else str.split)
    return Stream.from_ids(word_ids, lengths)


def warn_unknown_share(stream: Stream, path, what: str = "--vocab",
                       limit: float = 0.5) -> None:
    """Warn when most of a text's tokens are outside a fixed vocabulary (``what``): a
    vocabulary made for another text, or another tokenization, trains a model of
    ``<unk>``."""
    ids = np.asarray(stream.ids)
    n = int(np.count_nonzero(ids != EOS_ID))  # the text's own words, not the </s> added
    warn_unknown_share_of(n, int(np.count_nonzero(ids == UNK_ID)) if n else 0, path, what,
                          limit)


def warn_unknown_share_of(n: int, unknown: int, path, what: str = "--vocab",
                          limit: float = 0.5) -> None:
    """:func:`warn_unknown_share` from counts: ``unknown`` of a text's ``n`` tokens."""
    if n and unknown > limit * n:
        known = "none" if unknown == n else f"only {1 - unknown / n:.1%}"
        warn(f"{path}: {known} of its {n:,} tokens are words of {what}, and every other "
             "becomes <unk>; is it the vocabulary of this text (same tokenization, case)?")


def warn_same_text(train, valid) -> None:
    """Warn when the held-out text is the training text itself (the same file by any
    name, or standard input for both, which is read once and given to both): its
    perplexity then says nothing about unseen text, and early stopping never stops."""
    shards = train if isinstance(train, (list, tuple)) else [train]
    for shard in shards:
        if not isinstance(shard, (str, os.PathLike)):
            continue
        same = str(shard) == str(valid) == "-"
        if not same and str(shard) != "-" and str(valid) != "-":
            try:
                same = os.path.samefile(shard, valid)
            except OSError:
                same = False
        if same:
            warn(f"{valid}: the held-out text is the training text itself; its perplexity "
                 "will not say how the model does on unseen text (give a separate file)")
            return


def read_corpus(path: str | os.PathLike | Sequence, min_count: int = 1,
                max_size: int | None = None, tokenizer=None) -> tuple[Vocabulary, Stream]:
    """The vocabulary of a text file (or of several shards, one after another) and the
    text encoded with it, in one pass.

    Equivalent to ``Vocabulary.from_counts(count_words(path), min_count, max_size)``
    followed by ``read_stream``, at half the cost: words get ids in order of first
    occurrence while the text is read, and one array lookup renumbers them at the end.
    Reads standard input (``-``) too, since the text is read once. ``tokenizer``: a
    subword model's (:mod:`nnlm.text.tokenizer`), which the vocabulary keeps.
    """
    fast = word_blocks.encode(text_paths(path)) if tokenizer is None else None
    if fast is not None:
        word_ids, lengths, words = fast
    else:
        first_seen = _FirstSeen()
        word_ids, lengths = _encode_blocks(
            path, first_seen, lambda tokens: map(first_seen.__getitem__, tokens),
            tokenizer.split if tokenizer is not None else str.split)
        words = list(first_seen)
    counts = np.bincount(word_ids, minlength=len(words))
    vocab = Vocabulary.from_counts(dict(zip(words, counts.tolist())), min_count, max_size)
    vocab.tokenizer = tokenizer
    return vocab, Stream.from_ids(vocab.encode(words)[word_ids], lengths)


def read_lines(path: str | os.PathLike) -> list[str]:
    """Non-blank lines of a small text file, normalized to tokens joined by one space."""
    out = []
    for first, block in iter_line_blocks(path):
        for i, tokens in enumerate(line.split() for line in block):
            if BOS in tokens or EOS in tokens:
                raise NnlmError(special_error(where(path, first + i), tokens))
            if tokens:
                out.append(" ".join(tokens))
    if not out:
        raise NnlmError(f"{path}: no tokens: every line is blank")
    return out


def _raise_special(path, special: str):
    for first, block in iter_line_blocks(path):
        for i, line in enumerate(block):
            if special in line.split():
                raise NnlmError(special_error(where(path, first + i), [special]))
    raise AssertionError("unreachable")


# -- splits ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SplitStats:
    lines: int
    tokens: int
    types: int


def split_by_tokens(
    lines: Sequence[str], train_tokens: int, valid_tokens: int
) -> tuple[list[str], list[str], list[str]]:
    """Lines go to train until it holds ``train_tokens`` tokens, then to valid until
    ``train_tokens + valid_tokens`` in all, the rest to test (the line that crosses a
    threshold stays on the earlier side)."""
    sizes = np.array([len(line.split()) for line in lines], dtype=np.int64)
    before = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # tokens before each line
    train_end = int(np.searchsorted(before, train_tokens, side="left"))
    valid_end = int(np.searchsorted(before, train_tokens + valid_tokens, side="left"))
    return list(lines[:train_end]), list(lines[train_end:valid_end]), list(lines[valid_end:])


def replace_rare(lines: Sequence[str], counts: Counter, max_rare_count: int) -> list[str]:
    """Replace every token seen ``max_rare_count`` times or fewer in ``counts`` by ``<unk>``
    (words absent from ``counts`` count 0)."""
    if max_rare_count <= 0:
        return list(lines)
    keep = {w for w, c in counts.items() if c > max_rare_count}
    return [" ".join(w if w in keep else UNK for w in line.split()) for line in lines]


def write_splits(
    outdir: str | os.PathLike, parts: Sequence[Sequence[str]]
) -> dict[str, SplitStats]:
    """Write ``train.txt``, ``valid.txt``, ``test.txt`` (``\\n`` line ends), atomically and
    together: on a failure (a full disk) none of the three is replaced."""
    outdir = Path(outdir)
    for name, lines in zip(SPLIT_NAMES, parts):
        if not lines:
            raise NnlmError(f"{outdir / (name + '.txt')}: this split would be empty; give "
                            "the corpus more lines or change the fractions")
    atomic_write_texts({outdir / f"{name}.txt": "".join(line + "\n" for line in lines)
                        for name, lines in zip(SPLIT_NAMES, parts)})
    stats = {}
    for name, lines in zip(SPLIT_NAMES, parts):
        tokens = [w for line in lines for w in line.split()]
        stats[name] = SplitStats(len(lines), len(tokens), len(set(tokens)))
    return stats


def split_text(
    lines: Sequence[str],
    train_tokens: int,
    valid_tokens: int,
    max_rare_count: int,
    rare_counted_on: str = "train",
) -> tuple[list[str], list[str], list[str]]:
    """Split by token thresholds, then replace rare words (counted on train or on all)."""
    train, valid, test = split_by_tokens(lines, train_tokens, valid_tokens)
    basis = train if rare_counted_on == "train" else lines
    counts = Counter(w for line in basis for w in line.split())
    return tuple(replace_rare(part, counts, max_rare_count) for part in (train, valid, test))


# -- Brown -----------------------------------------------------------------------------
BROWN_TRAIN_TOKENS = 800_000
BROWN_VALID_TOKENS = 200_000
BROWN_MAX_RARE_COUNT = 3
BROWN_EXPECTED = {  # protocol v1 on NLTK's Brown: (lines, tokens); 14,116 types with <unk>
    "train": (9_748, 800_173), "valid": (3_024, 199_854), "test": (2_895, 161_165),
}

BROWN_MISSING = (
    "the Brown corpus is not installed and could not be downloaded (offline?). "
    "On a machine with internet run `python -m nltk.downloader brown`, or point NLTK_DATA "
    "at a folder holding corpora/brown or corpora/brown.zip"
)


def brown_available() -> bool:
    """Whether NLTK finds Brown, unzipped or as ``corpora/brown.zip`` (as its reader does);
    False without NLTK (the ``data`` extra)."""
    try:
        import nltk
    except ModuleNotFoundError:
        return False

    for resource in ("corpora/brown", "corpora/brown.zip/brown/"):
        try:
            nltk.data.find(resource)
            return True
        except LookupError:
            pass
    return False


def ensure_brown(download: bool = True) -> None:
    """Make sure NLTK can read Brown, downloading it through NLTK if allowed.

    ``NNLM_NO_DOWNLOAD=1`` in the environment forbids the download too (CI sets it).
    Without NLTK, its ModuleNotFoundError (the command line names the ``data`` extra).
    """
    import nltk  # noqa: F401 - NLTK's reader is the data extra: say that first

    if brown_available():
        return
    if download and os.environ.get("NNLM_NO_DOWNLOAD") != "1":
        import nltk

        try:
            nltk.download("brown", quiet=True, raise_on_error=False)
        except Exception:  # noqa: BLE001 - any failure of the downloader means "not available"
            pass
        if brown_available():
            return
    raise NnlmError(BROWN_MISSING)


def brown_paragraphs(download: bool = True) -> list[str]:
    """Brown's paragraphs in NLTK's order, each one line: sentences joined, tokens joined
    by single spaces, case kept."""
    ensure_brown(download)
    from nltk.corpus import brown
    from tqdm import tqdm

    paras = tqdm(brown.paras(), desc="reading Brown", unit=" paragraphs", total=15_667,
                 leave=False, disable=None)
    return [" ".join(w for sent in para for w in sent) for para in paras]


def prepare_brown(paper_cut: bool = False, download: bool = True) -> tuple[list[str], ...]:
    """Protocol v1 splits of Brown; ``paper_cut`` counts rare words over the whole corpus."""
    return split_text(
        brown_paragraphs(download),
        BROWN_TRAIN_TOKENS,
        BROWN_VALID_TOKENS,
        BROWN_MAX_RARE_COUNT,
        rare_counted_on="all" if paper_cut else "train",
    )

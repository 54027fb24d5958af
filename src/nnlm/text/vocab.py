"""The vocabulary: words <-> stable integer ids, with ``<unk>``, ``<s>`` and ``</s>``.

Ids follow KenLM's order for the specials, then words by descending training count,
ties broken alphabetically, so the same counts always give the same ids::

    0 <unk>   1 <s>   2 </s>   3 the   4 ,   5 .   ...

``<s>`` is only ever context (it pads the start of each line); every model gives it
probability 0. ``</s>`` is predicted at the end of each line. ``<unk>`` stands for every
word outside the vocabulary; a corpus that already contains the literal ``<unk>`` (as
the prepared Brown files do) maps it to the same id.

Example:
    >>> v = Vocabulary.from_counts({"the": 3, "cat": 1, "dog": 1}, min_count=1)
    >>> v.words
    ['<unk>', '<s>', '</s>', 'the', 'cat', 'dog']
    >>> v.encode(["the", "cow"]).tolist()
    [3, 0]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from ..base.digest import sha256_hex
from ..base.errors import NnlmError, where
from .fileio import atomic_write_text, iter_line_blocks
from .specials import BOS, BOS_ID, EOS, EOS_ID, NO_WORD, SPECIALS, UNK, UNK_ID  # noqa: F401

FORMAT_HEADER = "# nnlm vocabulary v1"


def special_error(place: str, tokens) -> str:
    """The one message for ``<s>`` or ``</s>`` inside a text (``place``: file:line)."""
    special = BOS if BOS in tokens else EOS
    return (f"{place}: {special} may not occur in a text; nnlm adds sentence boundaries "
            "itself (remove them, e.g. sed -e 's/<\\/*s>//g')")


class Vocabulary:
    """An ordered list of words with counts; ids are list positions."""

    def __init__(self, words: Iterable[str], counts: Iterable[int] | None = None):
        self.words: list[str] = list(words)
        if tuple(self.words[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {self.words[:3]}")
        self.counts = np.asarray(
            list(counts) if counts is not None else [0] * len(self.words), dtype=np.int64
        )
        if len(self.counts) != len(self.words):
            raise ValueError("words and counts differ in length")
        self.index: dict[str, int] = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            dup = next(w for w in self.words if self.words.count(w) > 1)
            raise ValueError(f"word {dup!r} appears twice in the vocabulary")

    # -- construction -----------------------------------------------------------------
    @classmethod
    def from_counts(
        cls, counts: Mapping[str, int], min_count: int = 1, max_size: int | None = None
    ) -> Vocabulary:
        """Keep words seen at least ``min_count`` times, at most ``max_size`` of them.

        ``max_size`` counts the three specials, so ``max_size=10000`` is a short-list of
        the 9,997 most frequent words. Dropped words' counts go to ``<unk>``.
        """
        if min_count < 1:
            raise ValueError("min_count must be at least 1")
        unk_count = counts.get(UNK, 0)
        for special in (BOS, EOS):
            if counts.get(special):
                raise ValueError(f"{special} may not occur in a corpus")
        words = sorted(
            ((w, c) for w, c in counts.items() if w not in SPECIALS), key=lambda wc: (-wc[1], wc[0])
        )
        keep = [(w, c) for w, c in words if c >= min_count]
        if max_size is not None:
            if max_size < len(SPECIALS) + 1:
                raise ValueError(f"max_size must be at least {len(SPECIALS) + 1}")
            keep = keep[: max_size - len(SPECIALS)]
        unk_count += sum(counts.values()) - unk_count - sum(c for _, c in keep)
        return cls(
            [*SPECIALS, *(w for w, _ in keep)], [unk_count, 0, 0, *(c for _, c in keep)]
        )

    @classmethod
    def read(cls, path: str | os.PathLike) -> Vocabulary:
        """A fixed vocabulary (``--vocab``, like KenLM's ``--limit_vocab_file`` or SRILM's
        ``-vocab``): an nnlm ``vocab.txt`` (ids kept, so models trained on different
        text with it can be mixed), or a word list, one word a line, ids in its order
        after the specials."""
        path = Path(path)
        first = next(iter_line_blocks(path))[1][:1]
        if first == [FORMAT_HEADER]:
            return cls.load(path)
        words: list[str] = []
        seen: set[str] = set()
        for start, block in iter_line_blocks(path):
            for i, line in enumerate(block):
                tokens = line.split()
                if len(tokens) > 1:
                    raise NnlmError(f"{where(path, start + i)}: not a vocabulary: a word list "
                                    f"has one word a line, this line has {len(tokens)}")
                if tokens and tokens[0] not in SPECIALS:
                    if tokens[0] in seen:
                        raise NnlmError(f"{where(path, start + i)}: {tokens[0]!r} is listed "
                                        "twice")
                    seen.add(tokens[0])
                    words.append(tokens[0])
        if not words:
            raise NnlmError(f"{path}: not a vocabulary: no words")
        return cls([*SPECIALS, *words])

    # -- mapping ----------------------------------------------------------------------
    tokenizer = None  # a SubwordTokenizer (nnlm.text.tokenizer) for a subword model

    def __len__(self) -> int:
        return len(self.words)

    def split(self, text: str) -> list[str]:
        """The tokens of a line of text: its words (split on whitespace), or a subword
        model's tokens through its tokenizer."""
        return self.tokenizer.split(text) if self.tokenizer is not None else text.split()

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def id(self, word: str) -> int:
        """The id of ``word``, or ``<unk>``'s id for a word outside the vocabulary."""
        return self.index.get(word, UNK_ID)

    def encode(self, words: Iterable[str]) -> np.ndarray:
        """Words to an int32 id array; unknown words become ``<unk>``."""
        get = self.index.get
        return np.array([get(w, UNK_ID) for w in words], dtype=np.int32)

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.words[i] for i in ids]

    @property
    def fingerprint(self) -> str:
        """A short hash of the word list: models record it to detect a foreign vocabulary."""
        return sha256_hex("\n".join(self.words).encode("utf-8"))[:16]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocabulary) and self.words == other.words

    def __repr__(self) -> str:
        return f"Vocabulary({len(self)} words incl. {', '.join(SPECIALS)})"

    # -- persistence ------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write ``id<TAB>word<TAB>count`` lines under a version header, atomically."""
        lines = [FORMAT_HEADER]
        lines += [f"{i}\t{w}\t{c}" for i, (w, c) in enumerate(zip(self.words, self.counts))]
        atomic_write_text(path, "\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocabulary:
        """Read a vocabulary written by :meth:`save`: whole-list checks first (opening a
        model is dominated by this for large vocabularies), the line-by-line reader
        below only to name the first bad line."""
        path = Path(path)
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""  # the line-by-line reader names the problem
        head, _, body = text.partition("\n")
        if head == FORMAT_HEADER and "\r" not in body and "\0" not in body:
            fields = body.rstrip("\n").replace("\n", "\t").split("\t") if body else []
            n = len(fields) // 3
            if len(fields) == 3 * n and fields[0::3] == [str(i) for i in range(n)]:
                try:
                    counts = np.array(list(map(int, fields[2::3])), np.int64)
                except ValueError:
                    counts = None
                if counts is not None:
                    try:
                        return cls(fields[1::3], counts)
                    except ValueError as e:
                        raise NnlmError(f"{path}: {e}") from None
        return cls._load_line_by_line(path)

    @classmethod
    def _load_line_by_line(cls, path: Path) -> Vocabulary:
        words: list[str] = []
        counts: list[int] = []
        for first, block in iter_line_blocks(path):
            for offset, line in enumerate(block):
                n = first + offset
                if n == 1:
                    if line != FORMAT_HEADER:
                        raise NnlmError(
                            f"{where(path, 1)}: not an nnlm vocabulary (expected {FORMAT_HEADER!r})"
                        )
                    continue
                parts = line.split("\t")
                if len(parts) != 3 or not parts[0].isdigit() or int(parts[0]) != len(words):
                    raise NnlmError(
                        f"{where(path, n)}: expected 'id<TAB>word<TAB>count' with id {len(words)}"
                    )
                try:
                    counts.append(int(parts[2]))
                except ValueError:
                    raise NnlmError(
                        f"{where(path, n)}: count {parts[2]!r} is not an integer"
                    ) from None
                words.append(parts[1])
        try:
            return cls(words, counts)
        except ValueError as e:
            raise NnlmError(f"{path}: {e}") from None

"""The labels of a CTC acoustic model as pyctcdecode reads them: which one is the blank,
which the word separator, whether they are subwords.

A label list is BPE-style when a label starts with ``##`` (WordPiece, rewritten to
``▁`` style: a label without ``##`` starts a word) or with ``▁`` (SentencePiece: a word
starts at a ``▁``). Otherwise it is a character alphabet: ``|`` is the space where there
is no ``" "``; ``<pad>`` or ``[pad]`` (any case), else ``_``, is the blank ``""``, and one
is appended where there is none; ``<unk>``/``[unk]`` becomes ``⁇`` (``▁⁇▁`` in a BPE
alphabet, a word on its own). Duplicates are refused; so is a space in a BPE alphabet.
The rules and their log messages are pyctcdecode's (``Alphabet.build_alphabet``), so
that a decoder built from the same labels decodes the same.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Collection

logger = logging.getLogger(__name__)

BPE_TOKEN = "▁"  # a subword that starts a word (SentencePiece's)
UNK_TOKEN = "⁇"  # the unknown label of a character alphabet
UNK_BPE_TOKEN = "▁⁇▁"  # the unknown label of a BPE alphabet: a word of its own
SPECIAL_TOKEN_PTN = re.compile(r"^[<\[].+[>\]]$")
BLANK_TOKEN_PTN = re.compile(r"^[<\[]pad[>\]]$", flags=re.IGNORECASE)
UNK_TOKEN_PTN = re.compile(r"^[<\[]unk[>\]]$", flags=re.IGNORECASE)


def check_if_bpe(labels: list[str]) -> bool:
    is_bpe = any(s.startswith("##") for s in labels) or any(s.startswith(BPE_TOKEN)
                                                            for s in labels)
    logger.info("Alphabet determined to be of %s style.", "BPE" if is_bpe else "regular")
    return is_bpe


def normalize_regular_alphabet(labels: list[str]) -> list[str]:
    out = labels[:]
    if "|" in out and " " not in out:
        logger.info("Found '|' in vocabulary but not ' ', doing substitution.")
        out[out.index("|")] = " "
    for n, label in enumerate(out):
        if BLANK_TOKEN_PTN.match(label):
            logger.info("Found %s in vocabulary, interpreted as a CTC blank token, "
                        "substituting with %s.", label, "")
            out[n] = ""
    if "_" in out and "" not in out:
        logger.info("Found '_' in vocabulary but not '', doing substitution.")
        out[out.index("_")] = ""
    if "" not in out:
        logger.info("CTC blank char '' not found, appending to end.")
        out.append("")
    for n, label in enumerate(out):
        if UNK_TOKEN_PTN.match(label):
            logger.info("Found %s in vocabulary, interpreting as unknown token, "
                        "substituting with %s.", label, UNK_TOKEN)
            out[n] = UNK_TOKEN
    if any(len(c) > 1 for c in out):
        logger.warning("Found entries of length > 1 in alphabet. This is unusual unless "
                       "style is BPE, but the alphabet was not recognized as BPE type. Is "
                       "this correct?")
    if " " not in out:
        logger.warning("Space token ' ' missing from vocabulary.")
    return out


def convert_bpe_token_style(token: str) -> str:
    """A ``##``-style subword in ``▁`` style."""
    if token.startswith("##"):
        return token[2:]
    if SPECIAL_TOKEN_PTN.match(token) or token in ("", BPE_TOKEN, UNK_BPE_TOKEN):
        return token
    return BPE_TOKEN + token


def normalize_bpe_alphabet(labels: list[str]) -> list[str]:
    out = labels[:]
    if any(s.startswith("##") for s in labels):
        out = [convert_bpe_token_style(c) for c in out]
    for n, label in enumerate(out):
        if BLANK_TOKEN_PTN.match(label):
            logger.info("Found %s in vocabulary, substituting with %s.", label, "")
            out[n] = ""
    if "" not in out:
        logger.info("CTC blank char '' not found, appending to end.")
        out.append("")
    for n, label in enumerate(out):
        if UNK_TOKEN_PTN.match(label):
            logger.info("Found %s in vocabulary, substituting with %s.", label, UNK_BPE_TOKEN)
            out[n] = UNK_BPE_TOKEN
    if UNK_BPE_TOKEN not in out:
        logger.warning("UNK token %s not found, is this a mistake?", UNK_BPE_TOKEN)
    return out


def verify_alphabet(labels: list[str], is_bpe: bool) -> None:
    if not isinstance(labels, (list, tuple)) or not all(isinstance(s, str) for s in labels):
        raise ValueError("labels must be a list of strings, one per logit column")
    if len(labels) != len(set(labels)):
        raise ValueError("Alphabet contains duplicate entries, this is not allowed.")
    if is_bpe and any(" " in s for s in labels):
        raise ValueError("Space token ' ' found in vocabulary even though it looks like BPE.")


class Alphabet:
    """The decoder's labels, normalized (module docstring), and whether they are BPE."""

    def __init__(self, labels: list[str], is_bpe: bool) -> None:
        self._labels = list(labels)
        self._is_bpe = bool(is_bpe)

    @property
    def is_bpe(self) -> bool:
        return self._is_bpe

    @property
    def labels(self) -> list[str]:
        """A copy of the labels."""
        return self._labels[:]

    @classmethod
    def build_alphabet(cls, labels: list[str]) -> Alphabet:
        """The alphabet of an acoustic model's labels, normalized for the decoder."""
        is_bpe = check_if_bpe(labels) if isinstance(labels, (list, tuple)) else False
        verify_alphabet(labels, is_bpe)
        labels = list(labels)
        normalized = normalize_bpe_alphabet(labels) if is_bpe else \
            normalize_regular_alphabet(labels)
        return cls(normalized, is_bpe)

    def dumps(self) -> str:
        return json.dumps({"labels": self.labels, "is_bpe": self.is_bpe})

    @classmethod
    def loads(cls, s: str) -> Alphabet:
        as_dict = json.loads(s)
        expected = {"is_bpe", "labels"}
        if set(as_dict) != expected:
            raise ValueError(f"unexpected keys found. Expected {expected}, found "
                             f"{set(as_dict)}")
        return cls(as_dict["labels"], as_dict["is_bpe"])


def verify_alphabet_coverage(alphabet: Alphabet, unigrams: Collection[str]) -> None:
    """Warn where the words hold many characters the labels do not."""
    label_chars = set(alphabet.labels)
    chars = set("".join(unigrams))
    if chars and len(chars - label_chars) / len(chars) > 0.2:
        logger.warning("Unigrams and labels don't seem to agree.")

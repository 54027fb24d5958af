"""Subword tokens for models of subword speech recognizers (NeMo's and Riva's BPE models):
a SentencePiece model that turns each line of text into the model's tokens.

Two spellings of a token, chosen when the model is trained:

- ``pieces``: SentencePiece's own pieces (``▁the``, ``re``, ``ing``): readable ARPA files;
- ``nemo``: each token id as one character, ``chr(id + 100)``, the encoding NeMo's
  ``train_kenlm.py`` writes for KenLM and its beam-search decoders query with, so an ARPA
  file (or KenLM binary) written by nnlm loads in NeMo's decoding unchanged.

A model trained with a tokenizer keeps a copy of its ``.model`` file, and every command
that reads text for it (eval, score, serve, mix, rescore) tokenizes through it.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..base.digest import sha256_hex
from ..base.errors import NnlmError

NEMO_TOKEN_OFFSET = 100  # NeMo's DEFAULT_TOKEN_OFFSET: token id i is written chr(i + 100)
ENCODINGS = ("pieces", "nemo")
FILE_NAME = "tokenizer.model"  # the copy inside a model directory
_SURROGATES = 0xD800  # chr(i + 100) must stay below them: UTF-8 cannot hold a surrogate


class SubwordTokenizer:
    """A SentencePiece model and the spelling of its tokens (module docstring)."""

    def __init__(self, path: str | os.PathLike, encoding: str = "pieces"):
        if encoding not in ENCODINGS:
            raise NnlmError(f"tokenizer encoding {encoding!r}: choose from "
                            f"{', '.join(ENCODINGS)}")
        path = Path(path)
        try:
            import sentencepiece
        except ImportError:
            raise NnlmError("a SentencePiece tokenizer needs the sentencepiece package: pip "
                            "install \"nnlm[filter]\" (or sentencepiece)") from None
        if not path.is_file():
            raise NnlmError(f"{path}: no such tokenizer file")
        processor = sentencepiece.SentencePieceProcessor()
        try:
            processor.Load(str(path))
        except (OSError, RuntimeError):
            raise NnlmError(f"{path}: not a SentencePiece model (the .model file that "
                            "spm_train writes)") from None
        size = processor.GetPieceSize()
        if encoding == "nemo" and size + NEMO_TOKEN_OFFSET > _SURROGATES:
            raise NnlmError(f"{path}: {size:,} tokens: NeMo's encoding, chr(id + "
                            f"{NEMO_TOKEN_OFFSET}), holds at most "
                            f"{_SURROGATES - NEMO_TOKEN_OFFSET:,} (past them it would "
                            "need surrogates); use the pieces encoding")
        self.path, self.encoding, self.processor, self.size = path, encoding, processor, size
        if encoding == "nemo":
            self._spell = [chr(i + NEMO_TOKEN_OFFSET) for i in range(size)]
        else:
            self._spell = [processor.IdToPiece(i) for i in range(size)]

    def split(self, line: str) -> list[str]:
        """The tokens of one line of text, spelled as the model's words."""
        spell = self._spell
        return [spell[i] for i in self.processor.EncodeAsIds(line)]

    def identity(self) -> tuple[str, str]:
        """(encoding, SHA-256 of the SentencePiece file): two tokenizers with the same
        identity split every text into the same tokens, spelled the same."""
        if not hasattr(self, "_identity"):
            with open(self.path, "rb") as f:
                self._identity = (self.encoding, sha256_hex(f.read()))
        return self._identity

    def config(self) -> dict:
        """What a model directory records of it (the file is copied beside)."""
        return {"file": FILE_NAME, "encoding": self.encoding}


def load_tokenizer(directory: Path, config: dict | None) -> SubwordTokenizer | None:
    """The tokenizer a model directory recorded (None if it has none)."""
    if not config:
        return None
    if not isinstance(config, dict) or config.get("encoding") not in ENCODINGS:
        raise NnlmError(f"{directory / 'config.json'}: 'tokenizer' should say its file and "
                        f"encoding ({', '.join(ENCODINGS)}); the file was edited or is damaged")
    return SubwordTokenizer(directory / str(config.get("file", FILE_NAME)), config["encoding"])

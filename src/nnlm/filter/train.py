"""A reference model for perplexity filtering from a user's "good" text, cc_net's recipe
in one call: each line normalized (cc_net's normalization by default), a SentencePiece
unigram model trained on them (``LANG.sp.model``; cc_net's 65,536 pieces and character
coverage 0.9995, fewer where the text holds fewer), and a modified Kneser-Ney n-gram model
of the pieces (order 5, with KenLM's discount fallback, as cc_net runs lmplz), written as
KenLM's probing file (``LANG.arpa.bin``, cc_net's name: DataTrove and cc_net load it with
the kenlm module, as they load cc_net's own models; ``nnlm filter score`` maps it and
scores fastest over it) and as ARPA (``LANG.arpa``). The folder is written whole or not
at all, with ``nnlm-filter.json`` saying what made it. Given text to keep out as well, a
second model of the same pieces (``LANG.bad.arpa.bin``, ``LANG.bad.arpa``) gives each
document ln ppl_good - ln ppl_bad (Kim et al., 2025).

One difference from cc_net's pipeline: a piece SentencePiece does not know is counted
as ``<unk>`` (spm_encode writes its surface characters instead, which lmplz then counts
as a word of their own); scoring maps such pieces to ``<unk>`` either way.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..base.errors import NnlmError
from ..fit import train_ngram
from ..models import convert
from ..text.fileio import atomic_path, iter_lines
from ..text.tokenizer import SubwordTokenizer
from .normalize import NORMALIZERS

MARKER = "nnlm-filter.json"  # what nnlm filter train writes into its folder
VOCAB_SIZE = 65536  # cc_net's
CHARACTER_COVERAGE = 0.9995  # cc_net's


def _normalized(texts: Iterable, normalize: str, out: Path) -> int:
    """Every non-empty normalized line of ``texts`` into ``out``; how many."""
    norm, n = NORMALIZERS[normalize], 0
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for path in texts:
            for line in iter_lines(path):
                line = norm(line)
                if line.strip():
                    f.write(line.replace("\n", " ") + "\n")
                    n += 1
    if n == 0:
        raise NnlmError("no text to train on: every line is empty after normalization")
    return n


def train_reference(texts: Iterable, out_dir: str | os.PathLike, language: str = "en",
                    vocab_size: int = VOCAB_SIZE, order: int = 5, normalize: str = "ccnet",
                    log=lambda message: None, bad: Iterable | None = None) -> dict:
    """The pair (module docstring) in ``out_dir``; what was made (the marker's content).
    ``bad``: text to keep out, whose model of the same pieces (``LANG.bad.arpa.bin``,
    ``LANG.bad.arpa``) gives the good/bad ratio of Kim et al. (2025)."""
    import sentencepiece  # the filter extra: imported where a model is trained

    if normalize not in NORMALIZERS:
        raise NnlmError(f"normalize={normalize!r}: choose from {', '.join(NORMALIZERS)}")
    texts = [str(t) for t in texts]
    out_dir = Path(out_dir)
    if out_dir.exists() and not (out_dir / MARKER).is_file():
        raise NnlmError(f"{out_dir}: exists and is not a folder nnlm filter train wrote; "
                        "give a new one")
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        lines = _normalized(texts, normalize, tmp / "normalized.txt")
        log(f"{lines:,} lines normalized ({normalize}); training SentencePiece")
        sentencepiece.SentencePieceTrainer.train(
            input=str(tmp / "normalized.txt"), model_prefix=str(tmp / language),
            vocab_size=vocab_size, hard_vocab_limit=False, model_type="unigram",
            character_coverage=CHARACTER_COVERAGE, minloglevel=2)
        (tmp / f"{language}.model").rename(tmp / f"{language}.sp.model")
        (tmp / f"{language}.vocab").unlink()
        tokenizer = SubwordTokenizer(tmp / f"{language}.sp.model")
        log(f"{tokenizer.size:,} pieces; estimating KN {order}-gram")
        models = [(language, tmp / "normalized.txt")]
        if bad:
            _normalized([str(t) for t in bad], normalize, tmp / "bad.txt")
            models.append((f"{language}.bad", tmp / "bad.txt"))
        files = [f"{language}.sp.model"]
        for name, text in models:
            train_ngram(text, "kn", order, log=log, tokenizer=tokenizer,
                        discount_fallback=True, arpa=str(tmp / f"{name}.arpa"))
            convert(tmp / f"{name}.arpa", tmp / f"{name}.arpa.bin", kenlm=True)
            text.unlink()
            files += [f"{name}.arpa.bin", f"{name}.arpa"]
        made = {"language": language, "texts": texts, "lines": lines, "normalize": normalize,
                "pieces": tokenizer.size, "order": order, "files": files}
        if bad:
            made["bad_texts"] = [str(t) for t in bad]
        (tmp / MARKER).write_text(json.dumps(made, indent=1) + "\n", encoding="utf-8")
    return made

"""A document's perplexity under a reference model, as cc_net and DataTrove compute it.

The document is normalized (:mod:`.normalize`), cut into SentencePiece pieces joined by
spaces (``encode_as_pieces``, here in batches), split into lines at ``\\n`` (after
cc_net's or DataTrove's normalization, which delete line breaks, it is one line), and
each line scored by the n-gram model with ``<s>`` and ``</s>`` (KenLM's ``score``). Then

    perplexity = 10 ** (-(sum of the lines' log10 scores) / (words + lines))

where words counts the pieces (each line's whitespace-separated tokens) and each line
adds one for its ``</s>``; both tools round it to one decimal. The model is read through
:mod:`nnlm.kenlm` (a KenLM binary or nnlm's one-file model is mapped where it lies, not
read into memory), so the scores are KenLM's to the bit. One difference between the
tools is kept: cc_net gives a document whose pieces are empty no perplexity at all
(None here), DataTrove scores the empty line.

The same numbers come without strings where the model has compiled queries (a KenLM
binary, nnlm's files): SentencePiece's ids, not its pieces' text, mapped once into the
model's word ids, every document of a batch scored in one call to ``nnlm.kenlm``'s
``score_ids``. SentencePiece's unknown piece stands for the characters it covers, which
cc_net's own models count as words: it is looked up by that text unless every word of the
model is a piece (nnlm's models of pieces count it as ``<unk>``).
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..base.errors import NnlmError
from ..decoding import kenlm
from ..text.tokenizer import SubwordTokenizer
from ..text.vocab import UNK
from .normalize import NORMALIZERS

SP_SUFFIX = ".sp.model"  # cc_net's pair: LANG.arpa.bin beside LANG.sp.model


def pair_tokenizer(model: str | os.PathLike) -> Path | None:
    """The SentencePiece model beside a cc_net-style model (``en.arpa.bin`` or
    ``en.arpa`` -> ``en.sp.model``), or None."""
    model = Path(model)
    stem = model.name.split(".", 1)[0]
    candidate = model.with_name(stem + SP_SUFFIX)
    return candidate if model.is_file() and candidate.is_file() else None


def perplexity(log10_score: float, length: int) -> float:
    """cc_net's and DataTrove's ``pp``: 10 ** (-log10_score / length)."""
    return 10.0 ** (-log10_score / length)


def ratio(good: float, bad: float, length: int) -> float:
    """ln ppl_good - ln ppl_bad of a document whose pieces score ``good`` and ``bad``
    (log10 sums) under the two models: ln 10 (bad - good) / length."""
    return math.log(10.0) * (bad - good) / length


class DocumentScorer:
    """Documents to (log10 score, length) and perplexities (module docstring).

    ``model``: a path nnlm.kenlm opens (a KenLM binary or ARPA file, an nnlm model) or an
    opened ``nnlm.kenlm.Model``; ``tokenizer``: a SentencePiece ``.model`` path, or None
    to score the normalized text's own words; ``normalize``: ``ccnet``, ``datatrove``
    or ``none``; ``bad_model``: a second model of the same pieces, trained on text to
    keep out, for :meth:`ratios` (Kim et al. 2025)."""

    def __init__(self, model, tokenizer: str | os.PathLike | None = None,
                 normalize: str = "ccnet", bad_model: str | os.PathLike | None = None):
        if normalize not in NORMALIZERS:
            raise NnlmError(f"normalize={normalize!r}: choose from "
                            f"{', '.join(NORMALIZERS)}")
        self._paths = (os.fspath(model), None if tokenizer is None else os.fspath(tokenizer)) \
            if isinstance(model, (str, os.PathLike)) else None
        self.model = kenlm.Model(model) if isinstance(model, (str, os.PathLike)) else model
        self.tokenizer = None if tokenizer is None else SubwordTokenizer(tokenizer)
        self.bad_path = None if bad_model is None else os.fspath(bad_model)
        self.bad = None if bad_model is None else kenlm.Model(bad_model)
        self.normalize_name = normalize
        self.normalize = NORMALIZERS[normalize]
        if self.tokenizer is not None:
            for lm, path in [(self.model, model), (self.bad, bad_model)]:
                if lm is not None:
                    self._check_pair(lm, path, tokenizer)

    def _check_pair(self, lm, path, tokenizer) -> None:
        """Refuse a model whose words are mostly not the tokenizer's pieces: a pair that
        was not trained together (every document would score as unknown words). cc_net's
        own models hold a few words that are no piece (characters SentencePiece did not
        know, which spm_encode wrote out), nnlm's none."""
        vocabulary = getattr(lm, "vocabulary", None)
        if vocabulary is None:
            return
        sp = self.tokenizer.processor
        words = set(vocabulary()) - {UNK, "<s>", "</s>"}
        pieces = {sp.id_to_piece(i) for i in range(sp.get_piece_size())}
        shared = len(words & pieces)
        if words and shared < len(words) / 2:
            name = os.fspath(path) if isinstance(path, (str, os.PathLike)) else "the model"
            raise NnlmError(f"{name} and {os.fspath(tokenizer)} disagree: only {shared:,} of "
                            f"the model's {len(words):,} words are pieces of the "
                            "SentencePiece model; give the pair that was trained together "
                            "(or --tokenizer none for a model of words)")

    def spec(self) -> tuple | None:
        """(model path, tokenizer path, normalization, bad model path): what opens the
        same scorer in another process; None for a scorer over a model object."""
        return None if self._paths is None else (*self._paths, self.normalize_name,
                                                 self.bad_path)

    def pieces(self, texts: Sequence[str]) -> list[str]:
        """Each text normalized and cut into pieces joined by spaces."""
        normalized = [self.normalize(t) for t in texts]
        if self.tokenizer is None:
            return normalized
        encoded = self.tokenizer.processor.encode(normalized, out_type=str)
        return [" ".join(p) for p in encoded]

    def log10_scores(self, texts: Sequence[str], pieces: list[str] | None = None,
                     model=None) -> list[tuple[float, int] | None]:
        """(sum of log10 scores, words + lines) per text; None where cc_net gives none
        (its pieces are empty: module docstring). ``pieces``: :meth:`pieces` of the
        texts where already cut; ``model``: another model than the scorer's."""
        model = model or self.model
        if pieces is None and self._ids_apply(model):
            return self._scores_of_ids(model, *self._encoded(texts))
        score = model.score
        skip_empty = self.normalize_name == "ccnet"
        out: list[tuple[float, int] | None] = []
        for doc in self.pieces(texts) if pieces is None else pieces:
            if skip_empty and not doc:
                out.append(None)
                continue
            total, length = 0, 0  # the tools' own start: 0 + the first score
            for line in doc.split("\n"):
                total += score(line)
                length += len(line.split()) + 1
            out.append((total, length))
        return out

    # -- the same numbers without strings: pieces' ids into the model's ids, in one call
    def _encoded(self, texts: Sequence[str]) -> tuple[list[str], list[list[int]]]:
        """The texts normalized, and their SentencePiece ids."""
        normalized = [self.normalize(t) for t in texts]
        return normalized, self.tokenizer.processor.encode(normalized, out_type=int)

    def _ids_apply(self, model) -> bool:
        return self.tokenizer is not None and self._id_table(model) is not None

    def _id_table(self, model):
        """Per SentencePiece id, the model's id of its piece (``nnlm.kenlm``'s
        ``word_ids``; -1 where KenLM would split the piece: the text path), and where
        SentencePiece's unknown piece goes: its text is the characters it covers, which
        cc_net's own models count as words (spm_encode wrote them for lmplz), so it is
        looked up by its text (-1 here) unless every word of the model is a piece, when
        no such text can be one of them (the model's ``<unk>``). None: the model has no
        compiled queries."""
        tables = self.__dict__.setdefault("_tables", {})
        if id(model) not in tables:
            sp = self.tokenizer.processor
            ids = getattr(model, "word_ids", lambda _: None)(
                [sp.id_to_piece(i) for i in range(sp.get_piece_size())])
            table = None if ids is None else np.asarray(ids, np.int32)
            if table is not None and sp.unk_id() >= 0:
                unk, *specials = model.word_ids([UNK, "<s>", "</s>"])
                pieces = set(table[table >= 0].tolist()) | {unk, *specials}
                table[sp.unk_id()] = unk if len(pieces) == len(model.vocabulary()) else -1
            tables[id(model)] = (model, table)  # the model kept: its id stays its own
        return tables[id(model)][1]

    def _scores_of_ids(self, model, normalized: list[str], encoded: list[list[int]]):
        """:meth:`log10_scores` from SentencePiece's ids: every document scored by
        ``model.score_ids`` in one call, to the bit what the text path gives. An unknown
        piece the table leaves to its text is looked up by it (the documents holding one
        cut again as text); a document whose pieces KenLM would split goes the text
        path."""
        sp = self.tokenizer.processor
        table = self._id_table(model)
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        bounds = np.zeros(len(encoded) + 1, np.int64)
        np.cumsum(lengths, out=bounds[1:])
        flat = np.fromiter(itertools.chain.from_iterable(encoded), np.int32, int(bounds[-1]))
        ids = table[flat]
        if table[sp.unk_id()] < 0:  # unknown pieces by their text
            unknown = np.flatnonzero(flat == sp.unk_id())
            docs = np.unique(np.searchsorted(bounds, unknown, "right") - 1).tolist()
            texts = sp.encode([normalized[i] for i in docs], out_type=str)
            surface = [p for i, pieces in zip(docs, texts)
                       for p, j in zip(pieces, encoded[i]) if j == sp.unk_id()]
            ids[unknown] = model.word_ids(surface)
        odd = np.flatnonzero(ids < 0)
        redo = set(np.unique(np.searchsorted(bounds, odd, "right") - 1).tolist())
        ids[odd] = 0
        sums = model.score_ids(ids, bounds).tolist()
        skip_empty = self.normalize_name == "ccnet"
        out = []
        for i, (total, n) in enumerate(zip(sums, lengths.tolist())):
            if i in redo:
                out.extend(self._text_scores(model, normalized[i]))
            elif skip_empty and n == 0:
                out.append(None)
            else:
                out.append((total, n + 1))
        return out

    def _text_scores(self, model, normalized: str) -> list:
        """The text path for one normalized document."""
        pieces = self.tokenizer.processor.encode([normalized], out_type=str)
        return self.log10_scores([""], [" ".join(pieces[0])], model)

    def both(self, texts: Sequence[str]) -> list[tuple[float, float, int] | None]:
        """(good log10 sum, bad log10 sum, length) per text, from the pieces cut once."""
        if self.bad is None:
            raise NnlmError("no bad model: give bad_model= (nnlm filter score --bad-model)")
        if self._ids_apply(self.model) and self._ids_apply(self.bad):
            encoded = self._encoded(texts)
            good = self._scores_of_ids(self.model, *encoded)
            bad = self._scores_of_ids(self.bad, *encoded)
        else:
            pieces = self.pieces(texts)
            good = self.log10_scores(texts, pieces)
            bad = self.log10_scores(texts, pieces, self.bad)
        return [None if g is None else (g[0], b[0], g[1]) for g, b in zip(good, bad)]

    def ratios(self, texts: Sequence[str]) -> list[float | None]:
        """ln ppl_good - ln ppl_bad per text: below 0 where the good model finds the text
        likelier than the bad one does (None: see :meth:`log10_scores`)."""
        return [None if s is None else ratio(*s) for s in self.both(texts)]

    def perplexities(self, texts: Sequence[str]) -> list[float | None]:
        """Each text's perplexity, unrounded (None: see :meth:`log10_scores`)."""
        return [None if s is None else perplexity(*s) for s in self.log10_scores(texts)]

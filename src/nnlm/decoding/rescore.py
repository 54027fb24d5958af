"""N-best rescoring: add a language model's score to a decoder's hypotheses and re-rank.

Two input forms, recognized from the first non-blank line:

* Moses: ``id ||| hypothesis ||| features ||| score`` (more ``|||`` fields are kept);
* plain: ``id<TAB>score<TAB>hypothesis``.

Each hypothesis gets ``lm`` = its log10 probability under the model (``</s>`` included,
``<s>`` as context, as ``nnlm score`` prints it), and the new score

    new = score + lm_weight * lm + word_penalty * (number of words)

(a negative ``word_penalty`` penalizes long hypotheses). Within each id the hypotheses
are sorted by the new score, best first; ids keep their input order. Moses output gets
the feature ``nnlm= LM`` appended, so a tuner can learn the weight. All hypotheses are
scored in large batches: one model call per few thousand of them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

from ..base.errors import NnlmError, warn, where
from ..lm import LOG10_E, LanguageModel, check_logprobs
from ..text.fileio import iter_line_blocks
from ..text.stream import Stream
from ..text.vocab import BOS, EOS, special_error

MOSES_SEP = "|||"
BATCH_HYPOTHESES = 4096


@dataclass
class Hypothesis:
    id: str
    words: list[str]
    score: float
    features: str | None  # Moses only: the feature field as given
    rest: list[str]  # Moses only: fields after the score
    lm: float = 0.0
    new_score: float = 0.0


# a decimal number as decoders write it: ASCII digits only (Python's float() would also
# take 1_000 and other scripts' digits, which no decoder writes)
DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
OUR_FEATURE = re.compile(r"(?:^|\s)nnlm=\s+\S+")  # what format_hypothesis appends


def _number(text: str, place: str, what: str) -> float:
    if text.strip().lower().lstrip("+-") in ("nan", "inf", "infinity"):
        raise NnlmError(f"{place}: {what} {text.strip()!r} is not a finite number")
    if not DECIMAL.fullmatch(text.strip()):
        raise NnlmError(f"{place}: {what} {text.strip()!r} is not a number (decimal, in "
                        "ASCII digits)")
    value = float(text)
    if not math.isfinite(value):
        raise NnlmError(f"{place}: {what} {text.strip()!r} is not a finite number")
    return value


def parse_line(line: str, place: str, moses: bool) -> Hypothesis:
    """One n-best line, checked: enough fields, a finite score, no <s> or </s>."""
    if moses:
        fields = [f.strip() for f in line.split(MOSES_SEP)]
        if len(fields) < 4:
            raise NnlmError(f"{place}: a Moses n-best line needs 'id ||| hypothesis ||| "
                            f"features ||| score', got {len(fields)} field(s)")
        ident, text, features, score, rest = fields[0], fields[1], fields[2], fields[3], \
            fields[4:]
    else:
        fields = line.split("\t")
        if len(fields) != 3:
            raise NnlmError(f"{place}: a plain n-best line needs 'id<TAB>score<TAB>hypothesis', "
                            f"got {len(fields)} tab-separated field(s)")
        ident, score, text = fields
        features, rest = None, []
    if not ident.strip():
        raise NnlmError(f"{place}: the hypothesis has no id")
    words = text.split()
    if BOS in words or EOS in words:
        raise NnlmError(special_error(place, words))
    return Hypothesis(ident.strip(), words, _number(score, place, "score"), features, rest)


def read_nbest(path) -> tuple[list[Hypothesis], bool]:
    """The hypotheses of an n-best file and whether it is in Moses form."""
    out: list[Hypothesis] = []
    moses = None
    name = "<stdin>" if str(path) == "-" else str(path)
    for first, block in iter_line_blocks(path, name):
        for i, line in enumerate(block):
            if not line.strip():
                continue
            if moses is None:
                moses = MOSES_SEP in line
            out.append(parse_line(line, where(name, first + i), moses))
    if not out:
        raise NnlmError(f"{name}: no hypotheses")
    ours = [h for h in out if h.features and OUR_FEATURE.search(h.features)]
    if ours:
        warn(f"{name}: {len(ours):,} hypotheses already hold an nnlm= feature (an output of "
             "nnlm rescore): it is replaced, but their scores already count the earlier "
             "model's; rescore the decoder's own n-best list instead")
        for h in ours:
            h.features = OUR_FEATURE.sub("", h.features).strip()
    return out, bool(moses)


def lm_scores(model: LanguageModel, hypotheses: list[Hypothesis]) -> np.ndarray:
    """log10 p(hypothesis) for each, ``</s>`` included, in batches."""
    out = np.empty(len(hypotheses))
    for lo in range(0, len(hypotheses), BATCH_HYPOTHESES):
        chunk = hypotheses[lo : lo + BATCH_HYPOTHESES]
        lengths = np.array([len(h.words) for h in chunk], np.int64)
        stream = Stream.from_ids(model.vocab.encode(w for h in chunk for w in h.words), lengths)
        lp = check_logprobs(model.logprobs(stream), stream, model.vocab,
                            model.zero_means) * LOG10_E
        out[lo : lo + len(chunk)] = np.add.reduceat(lp, stream.offsets[:-1])
    return out


def rescore(model: LanguageModel, hypotheses: list[Hypothesis], lm_weight: float = 1.0,
            word_penalty: float = 0.0) -> list[list[Hypothesis]]:
    """Score and re-rank: one list per id (input order), best hypothesis first."""
    for h, lm in zip(hypotheses, lm_scores(model, hypotheses)):
        h.lm = float(lm)
        h.new_score = h.score + lm_weight * h.lm + word_penalty * len(h.words)
        if not math.isfinite(h.new_score):
            raise NnlmError(f"hypothesis {h.id} '{' '.join(h.words)[:40]}': score {h.score:g} + "
                            f"{lm_weight:g} x LM {h.lm:g} + {word_penalty:g} x "
                            f"{len(h.words)} words overflows; use weights of a sane size")
    groups: dict[str, list[Hypothesis]] = {}
    for h in hypotheses:
        groups.setdefault(h.id, []).append(h)
    return [sorted(g, key=lambda h: -h.new_score) for g in groups.values()]


def format_hypothesis(h: Hypothesis, moses: bool) -> str:
    if moses:
        features = f"{h.features} nnlm= {h.lm:.6f}".strip()
        rest = "".join(f" {MOSES_SEP} {r}" for r in h.rest)
        return (f"{h.id} {MOSES_SEP} {' '.join(h.words)} {MOSES_SEP} {features} {MOSES_SEP} "
                f"{h.new_score:.6f}{rest}")
    return f"{h.id}\t{h.new_score:.6f}\t{' '.join(h.words)}"


def format_ranked(groups: Iterable[list[Hypothesis]], moses: bool,
                  best_only: bool = False) -> Iterator[str]:
    """Output lines: every hypothesis re-ranked, or (``best_only``) the best sentence per id."""
    for group in groups:
        if best_only:
            yield " ".join(group[0].words)
        else:
            yield from (format_hypothesis(h, moses) for h in group)

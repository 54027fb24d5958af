"""The text normalizations perplexity filters score under, each exactly as its tool
applies it to a document before SentencePiece.

``ccnet`` (cc_net's ``text_normalizer.normalize``, which its pipeline applies to the whole
document before SentencePiece): strip the ends; lowercase; strip accents (NFD, then drop
every combining mark, category Mn); each decimal digit (any script) to ``0``; cc_net's
table of unicode punctuation to ASCII; delete the control characters (U+0000-U+001F,
U+007F-U+009F). Line breaks are control characters, so a document comes out as one line.

``datatrove`` (DataTrove's ``KenlmModel.normalize``): lowercase; each number (digits of
any script, with at most one decimal part after one of ``.,،٫⎖⎗⎘``) to one ``0``, so
"12.5" becomes "0" where cc_net makes "00.0"; strip accents; strip the ends; the same
punctuation table; delete the same control characters.

``none``: the text as it is (its line breaks then split it into lines, each scored).

Every step runs in C (``str.lower``, ``str.translate``, ``re``, ``unicodedata``): the
tools' own loops over characters in Python (their accent stripping and punctuation map)
give the same strings, slower.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Callable

# cc_net's UNICODE_PUNCT (DataTrove copies it): one character to its ASCII stand-in
UNICODE_PUNCT = {
    "，": ",", "。": ".", "、": ",", "„": '"', "”": '"', "“": '"', "«": '"', "»": '"',
    "１": '"', "」": '"', "「": '"', "《": '"', "》": '"', "´": "'", "∶": ":", "：": ":",
    "？": "?", "！": "!", "（": "(", "）": ")", "；": ";", "–": "-", "—": " - ", "．": ". ",
    "～": "~", "’": "'", "…": "...", "━": "-", "〈": "<", "〉": ">", "【": "[", "】": "]",
    "％": "%", "►": "-",
}
_PUNCT = str.maketrans(UNICODE_PUNCT)
_CONTROL = dict.fromkeys([*range(0, 32), *range(127, 160)])  # deleted by translate
_DIGIT = re.compile(r"\d")  # str patterns: any decimal digit (category Nd), as cc_net's
_NUMBER = re.compile(r"\d+([.,،٫⎖⎗⎘]\d+)?")  # DataTrove's \p{Nd}+ with a decimal part
_marks: list[dict] = []  # the code points of category Mn, deleted (made on first use)


def _combining_marks() -> dict:
    if not _marks:
        _marks.append(dict.fromkeys(c for c in range(sys.maxunicode + 1)
                                    if unicodedata.category(chr(c)) == "Mn"))
    return _marks[0]


def strip_accents(text: str) -> str:
    """NFD, then every combining mark (category Mn) dropped: both tools' accent rule."""
    if text.isascii():  # nothing decomposes, nothing combines
        return text
    return unicodedata.normalize("NFD", text).translate(_combining_marks())


def ccnet(text: str) -> str:
    """cc_net's normalization of a document (module docstring)."""
    text = text.strip()
    if not text:
        return text
    text = strip_accents(text.lower())
    return _DIGIT.sub("0", text).translate(_PUNCT).translate(_CONTROL)


def datatrove(text: str) -> str:
    """DataTrove's normalization of a document (module docstring)."""
    text = strip_accents(_NUMBER.sub("0", text.lower())).strip()
    return text.translate(_PUNCT).translate(_CONTROL)


def unchanged(text: str) -> str:
    return text


NORMALIZERS: dict[str, Callable[[str], str]] = {
    "ccnet": ccnet, "datatrove": datatrove, "none": unchanged}

"""The numpy work of distributed estimation, one function per task: what a worker does
with its own shard or its own partition. Nothing here knows about the engine.

An n-gram of order k travels as k int32 word columns ``w0 .. w{k-1}`` (w0 the earliest
word) beside its numbers, in a pandas DataFrame: the engine hashes the columns it joins
on, so an n-gram is placed by all of its words, never by its last word alone (which
would send every n-gram ending in ``</s>`` or "the" to one worker).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd

from ...base.errors import NnlmError
from ...text.corpus import count_words, read_stream
from ...text.vocab import BOS_ID, EOS_ID, Vocabulary
from ..estimate.counts import SentenceSequence
from ..estimate.kneser_ney import backoff_of, discount_of
from ..formats.arpa_write import WordTexts, ngram_lines


def columns(k: int, first: int = 0) -> list[str]:
    """The word columns of an order-k n-gram (``first``: where its numbering starts)."""
    return [f"w{i}" for i in range(first, first + k)]


@contextlib.contextmanager
def opened(path):
    """A shard as the readers take it: a local path as it is; a URL (s3://, gs://,
    hdfs://, ...) opened through fsspec on this worker, compressed or not."""
    if "://" not in str(path):
        yield path
        return
    import fsspec

    try:
        with fsspec.open(str(path), "rb", compression="infer") as f:
            yield f
    except (OSError, ImportError, ValueError) as e:
        raise NnlmError(f"{path}: cannot be read on this worker ({type(e).__name__}: "
                        f"{str(e).strip()[:160]})") from None


def shard_words(path) -> dict:
    """The vocabulary pass on one shard: its token counts."""
    with opened(path) as source:
        return dict(count_words(source))


def vocabulary_text(words: bytes) -> str:
    """The vocabulary task's result: the words in id order, one a line."""
    return words.decode("utf-8")


def shard_ngrams(path, vocabulary: str, order: int) -> dict[int, pd.DataFrame]:
    """The counting pass on one shard: for k = 1..order, its distinct k-grams (as KenLM
    counts them: ``<s> w1 .. wL </s>`` per line, no n-gram across a line end) with their
    counts in this shard. ``vocabulary``: the words in id order, one a line."""
    vocab = Vocabulary(vocabulary.split("\n"))
    with opened(path) as source:
        stream = read_stream(source, vocab)
    seq = SentenceSequence(stream)
    s = seq.read(0, len(seq))
    # no n-gram continues past a </s>: the longest n-gram starting at p ends there
    eos = np.flatnonzero(s == EOS_ID)  # the sequence ends with one
    # words from each position up to and including its line's </s>
    room = np.repeat(eos, np.diff(eos, prepend=-1)) - np.arange(len(s)) + 1
    out = {}
    for k in range(1, order + 1):
        starts = np.flatnonzero(room >= k)
        windows = np.stack([s[starts + i] for i in range(k)], axis=1)
        out[k] = _distinct(windows, k)
    return out


def _distinct(words: np.ndarray, k: int) -> pd.DataFrame:
    """The distinct rows of ``words`` (n, k) with how often each occurs."""
    words = np.ascontiguousarray(words, dtype=np.int32)
    keys = words.view(np.dtype((np.void, 4 * k))).ravel()
    uniq, counts = np.unique(keys, return_counts=True)
    rows = uniq.view(np.int32).reshape(-1, k)
    frame = pd.DataFrame({c: rows[:, i] for i, c in enumerate(columns(k))})
    frame["c"] = counts.astype(np.int64)
    return frame


def adjusted_counts(table: pd.DataFrame, k: int, top: bool) -> pd.DataFrame:
    """a(g) for one partition of order k (Chen & Goodman; as lmplz): the raw count at the
    top order or for an n-gram that starts with ``<s>``, otherwise the number of
    distinct words before it (the column ``n``, joined on the n-gram's words; missing
    where it has none); ``<s>`` as a unigram gets 0 (it is never predicted)."""
    a = table["c"].to_numpy(np.int64, copy=True)
    if not top:
        n = table["n"].to_numpy(np.float64)
        from_left = np.nan_to_num(n, nan=0.0).astype(np.int64)
        starts_bos = table["w0"].to_numpy() == BOS_ID
        a = np.where(starts_bos, a, from_left)
    if k == 1:
        a[table["w0"].to_numpy() == BOS_ID] = 0
    out = table[columns(k)].copy()
    out["a"] = a
    return out


def counts_of_counts(frame: pd.DataFrame) -> np.ndarray:
    """n_1 .. n_4 (index 1-4) of one partition's adjusted counts, 5 meaning 5 or more."""
    a = frame["a"].to_numpy()
    return np.bincount(np.minimum(a[a > 0], 5), minlength=6)[:6].astype(np.int64)


def with_discounts(frame: pd.DataFrame, d: list[float]) -> pd.DataFrame:
    out = frame.copy()
    out["D"] = discount_of(frame["a"].to_numpy(), np.asarray(d, np.float64))
    return out


def interpolation_terms(rows: pd.DataFrame) -> pd.DataFrame:
    """u(g) = (a(g) - D(a(g))) / S(h) and gamma(h) for rows that carry their context's
    sums S(h) and mass(h) = sum of D over h's words (0 where S(h) = 0)."""
    a, D = rows["a"].to_numpy(np.float64), rows["D"].to_numpy()
    S, mass = rows["S"].to_numpy(), rows["mass"].to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        u = np.where(S > 0, (a - D) / S, 0.0)
    out = rows.drop(columns=["a", "D", "S", "mass"])
    out["u"], out["gamma"] = u, backoff_of(S, mass)
    return out


def context_gammas(sums: pd.DataFrame) -> pd.DataFrame:
    """gamma(h) = mass(h) / S(h) (1 where S(h) = 0) for one partition of contexts."""
    out = sums.drop(columns=["S", "mass"])
    out["bow"] = backoff_of(sums["S"].to_numpy(), sums["mass"].to_numpy())
    return out


def interpolate(rows: pd.DataFrame) -> pd.DataFrame:
    """p(g) = u(g) + gamma(h) p(suffix of g) for rows joined with their suffix's ``p_low``."""
    out = rows[[c for c in rows.columns if c.startswith("w")]].copy()
    out["p"] = rows["u"].to_numpy() + rows["gamma"].to_numpy() * rows["p_low"].to_numpy()
    return out


def arpa_lines(frame: pd.DataFrame, vocabulary: str, k: int, top: bool
               ) -> tuple[str | bytes, int]:
    """One partition of order ``k`` (w0 .. w{k-1} oldest first, p and, below the top
    order, the back-off ``bow``; NaN where the n-gram is no context) as ARPA lines, and
    how many."""
    words = WordTexts(vocabulary.split("\n"))
    frame = frame.sort_values(columns(k))
    ids = frame[columns(k)].to_numpy(np.int64)
    with np.errstate(divide="ignore"):
        logp = np.log(frame["p"].to_numpy(np.float64))
        log_bow = None if top else np.log(frame["bow"].fillna(1.0).to_numpy(np.float64))
    return ngram_lines(words, ids, logp, log_bow), len(frame)

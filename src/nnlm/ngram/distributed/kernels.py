"""What a worker does with its own shard or its own partition, one function per task:
reading and counting a shard, and each pass of :mod:`.blocks` on a partition, with the
results split into the pieces that go to other tasks. Nothing here knows about the
engine; everything is a pure function of its arguments, so the engine may run a task
again on another worker (after one dies) and get the same blocks.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ...base.errors import NnlmError
from ...text.corpus import read_stream, word_counts
from ...text.vocab import Vocabulary
from ..formats.arpa_write import WordTexts, ngram_lines
from . import blocks


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


def shard_words(path) -> tuple[bytes, np.ndarray]:
    """The vocabulary pass on one shard: its words (UTF-8, one a line) and their token
    counts (read by the compiled reader where it is built). Two arrays, not a dict: the
    engine takes seconds to move a dict of 50,000 words, and microseconds for these."""
    with opened(path) as source:
        words, counts = word_counts(source)
    return "\n".join(words).encode("utf-8"), counts


def vocabulary_text(words: bytes) -> str:
    """The vocabulary task's result: the words in id order, one a line."""
    return words.decode("utf-8")


def shard_blocks(path, vocabulary: str, order: int, bounds: np.ndarray) -> list[list]:
    """Pass 1 on one shard: its n-grams of orders 1..order counted (as KenLM counts them:
    ``<s> w1 .. wL </s>`` per line) and cut by last word into the partitions' pieces
    (:func:`blocks.shard_pieces`). ``vocabulary``: the words in id order, one a line."""
    vocab = Vocabulary(vocabulary.split("\n"))
    with opened(path) as source:
        stream = read_stream(source, vocab)
    return blocks.shard_pieces(stream, order, len(vocab), bounds)


def piece(result, *at):
    """``result[at[0]][at[1]]...``: one piece of a task's result, as a task of its own
    (the engine then moves only that piece to the task that needs it)."""
    for i in at:
        result = result[i]
    return result


def nbytes(value) -> int:
    """The bytes of the numpy arrays inside ``value`` (nested lists and tuples): what a
    piece costs to move between workers (for the benchmark's statistics)."""
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v) for v in value)
    return 0


def build_partition(V: int, *pieces) -> blocks.Partition:
    """Pass 2: a partition from every shard's piece of it."""
    return blocks.build_partition(list(pieces), V)


def partition_summary(part: blocks.Partition) -> dict:
    """What the client needs from a partition to choose the discounts and the unigrams:
    counts-of-counts, sizes per order, its unigrams' word ids and adjusted counts."""
    words, a = blocks.unigrams_of(part)
    return {"counts": blocks.counts_of_counts(part), "sizes": part.sizes(), "words": words,
            "a": a}


def answer_contexts(part: blocks.Partition, discounts: np.ndarray, offsets: np.ndarray,
                    *requests) -> tuple:
    """Pass 4 at a home partition, from every partition's requests to it."""
    return blocks.answer_contexts(part, list(requests), discounts, offsets)


def interpolate(part: blocks.Partition, groups, gammas, discounts: np.ndarray,
                unigram_p: np.ndarray, offsets: np.ndarray, V: int, has_child, *answers
                ) -> list:
    """Pass 5: this partition's pieces of the model's levels (``has_child``: pass 4's
    extension flags for pieces in the file's form, or None)."""
    return blocks.interpolate(part, groups, gammas, list(answers), discounts, unigram_p,
                              offsets, V, has_child)


def trie_piece(levels: list, has_child: list, k: int, name: str, first: np.ndarray, V: int,
               lo: int, hi: int, fn, *args):
    """``fn`` of entries [lo, hi) of this partition's piece of order k's ``name`` in the
    model's file (:func:`blocks.trie_array`): the entries, or what the writer needs of
    them."""
    piece = blocks.trie_array(levels, has_child, k, name, first, V, lo, hi)
    return fn(piece, int(first[k - 1]) + lo, *args)


def arpa_lines(part: blocks.Partition, levels: list, vocabulary: str, k: int,
               top: bool) -> tuple[str | bytes, int]:
    """This partition's n-grams of order ``k`` >= 2 as ARPA lines, and how many."""
    level = levels[k - 2]
    words = WordTexts(vocabulary.split("\n"))
    return ngram_lines(words, part.words[k - 1], level.logp,
                       None if top else level.log_bow), len(level)

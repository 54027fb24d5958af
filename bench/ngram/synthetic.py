"""A synthetic corpus with a seed text's statistics, of any size, for scale benchmarks.

    python bench/ngram/synthetic.py --tokens 50000000 -o big.txt      # NLTK_DATA must find Brown

Each sentence is a random walk on the seed text's trigram successors: after the two words
(u, v) the next word is the word that followed a uniformly chosen occurrence of (u, v) in
the seed text, and a sentence ends where that occurrence's sentence ended. So unigram,
bigram and trigram frequencies, and sentence lengths, follow the seed text (Brown's, by
default), while n-grams of order 4 and 5 are new combinations, as in a larger corpus of
the same kind. The default seed is all of Brown with no rare-word cut; a seed text that
holds ``<unk>`` (like data/brown/train.txt) gets each one replaced by a rare word
``r<k>``, k drawn from a Zipf law (exponent 1.1), since lmplz refuses ``<unk>`` in its
input. The text is synthetic: it says nothing about any real corpus's perplexity.
Generation is vectorized over many sentences at once (about 1 M tokens/s here).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness


def seed_lines(path: Path | None) -> list[str]:
    """The seed text's lines: a file, or all of Brown (NLTK's copy, no rare-word cut)."""
    if path is not None:
        return path.read_text(encoding="utf-8").splitlines()
    from nnlm.text.corpus import brown_paragraphs

    return brown_paragraphs(download=False)


def _seed_sequence(lines: list[str]) -> tuple[list[str], np.ndarray]:
    """Word list and ``<s> w1 .. wL </s> <s> ...`` as ids (0 = ``<s>``, 1 = ``</s>``)."""
    words = ["<s>", "</s>"]
    index: dict[str, int] = {}
    seq: list[int] = []
    for line in lines:
        tokens = line.split()
        if not tokens:
            continue
        seq.append(0)
        for w in tokens:
            i = index.get(w)
            if i is None:
                i = index[w] = len(words)
                words.append(w)
            seq.append(i)
        seq.append(1)
    return words, np.asarray(seq, np.int64)


def generate(seed_text: Path | None, tokens: int, out: Path, seed: int = 0,
             parallel: int = 200_000) -> int:
    """Write about ``tokens`` tokens of synthetic text to ``out``; returns the count."""
    rng = np.random.default_rng(seed)
    words, seq = _seed_sequence(seed_lines(seed_text))
    V = len(words)
    # occurrences of each bigram (seq[i], seq[i+1]) that has a successor, grouped by bigram
    pos = np.arange(1, len(seq) - 1)  # the bigram (seq[i-1], seq[i]), followed by seq[i+1]
    pos = pos[seq[pos] > 1]  # ... where seq[i] is a word, not <s> or </s>
    bigram = seq[pos - 1] * V + seq[pos]
    order = np.argsort(bigram, kind="stable")
    bigram_sorted, pos_sorted = bigram[order], pos[order]
    vocab = np.array(words, dtype=object)
    unk = words.index("<unk>") if "<unk>" in words else -1
    written = 0
    with open(out, "w", encoding="utf-8") as f:
        while written < tokens:
            # start each sentence at a random sentence start of the seed text
            starts = np.flatnonzero(seq == 0)
            here = starts[rng.integers(len(starts), size=parallel)] + 1  # first word
            sent = [seq[here]]
            alive = seq[here] != 1
            prev = np.zeros(parallel, np.int64)
            cur = seq[here]
            for _ in range(200):
                if not alive.any():
                    break
                key = prev * V + cur
                lo = np.searchsorted(bigram_sorted, key, "left")
                hi = np.searchsorted(bigram_sorted, key, "right")
                pick = pos_sorted[np.minimum(lo + (rng.random(parallel) * (hi - lo)).astype(
                    np.int64), len(pos_sorted) - 1)]
                nxt = np.where(alive & (hi > lo), seq[np.minimum(pick + 1, len(seq) - 1)], 1)
                nxt = np.where(alive, nxt, 1)
                sent.append(nxt)
                alive &= nxt != 1
                prev, cur = cur, nxt
            grid = np.stack(sent, axis=1)  # sentence x step, ending in </s> (1)
            lengths = np.argmax(grid == 1, axis=1)
            lengths[(grid != 1).all(axis=1)] = grid.shape[1]
            keep = (lengths > 0) & (np.cumsum(lengths) - lengths < tokens - written)
            grid, lengths = grid[keep], lengths[keep]
            mask = np.arange(grid.shape[1])[None, :] < lengths[:, None]
            flat = vocab[grid[mask]]
            rare = np.flatnonzero(grid[mask] == unk)
            # the seed's <unk> (its rare words) becomes rare words of a large vocabulary,
            # drawn from a Zipf law, so the vocabulary grows with the corpus as in real text
            flat[rare] = [f"r{k}" for k in rng.zipf(1.1, size=len(rare))]
            ends = np.cumsum(lengths)
            lines = [" ".join(flat[a:b]) for a, b in zip(ends - lengths, ends)]
            f.write("\n".join(lines) + "\n")
            written += int(lengths.sum())
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed-text", type=Path,
                        help="seed text (default: all of Brown, through NLTK_DATA)")
    parser.add_argument("--tokens", type=int, required=True)
    parser.add_argument("-o", "--output", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    n = generate(args.seed_text, args.tokens, args.output, args.seed)
    print(f"{args.output}: {n:,} tokens")


if __name__ == "__main__":
    main()

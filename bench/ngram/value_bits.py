"""How few bits a KN model's values need without loss: the information the mapped trie
spends 32 bits a value on.

A stored value is float32 log p(w | h), and

    p(w | h) = (a(h w) - D(a(h w))) / S(h) + gamma(h) p(w | h')

(kneser_ney.py's docstring). A reader that walks the reversed trie has already found
log p(w | h') one order down (it is the suffix's entry) and the context's float32 log
gamma(h) (its back-off). So it can *predict* the value from small integers, the adjusted
count a(h w) of the entry and the total S(h) of its context, and only the difference
between the prediction and the stored float32, counted in float32 units in the last
place (ulps), is new information. The back-off is the same story one level up: gamma(h)
= (D1 N1(h) + D2 N2(h) + D3 N3+(h)) / S(h), from three more integers of the context.

This measures, per order, on a real estimate (nnlm's KN, the numbers of its file):

- the entropy of each field (a, the residual, S, N1..N3+): what any coder must spend;
- a fixed-width code with escapes, which a mapped reader can index in one step: for
  each field the width w minimizing n w + 64 (escapes), an escape being an (entry,
  value) pair in a side table;

and sets the result beside the file's own sections (``read_trie_header``): what the file
would weigh with log p (and the back-offs) coded this way, words and pointers as today.

    python bench/ngram/value_bits.py --text data/brown/train.txt --name brown \
        --out bench/results/value_bits.json
    python bench/ngram/synthetic.py --tokens 10000000 -o /tmp/s10m.txt
    python bench/ngram/value_bits.py --text /tmp/s10m.txt --name synthetic-10M --out ...

Nothing here is a format: it is the measurement that says whether one is worth building.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

ESCAPE_BITS = 64  # an escaped value: its entry number and the value, 32 bits each


def entropy(x: np.ndarray) -> float:
    """Empirical entropy of the values of ``x``, bits a value."""
    if len(x) == 0:
        return 0.0
    _, c = np.unique(x, return_counts=True)
    p = c / c.sum()
    return float(-(p * np.log2(p)).sum())


def fixed_width(x: np.ndarray) -> tuple[int, float]:
    """(w, bits a value) of the cheapest fixed-width code of non-negative ints ``x``
    whose top code 2^w - 1 escapes to a side table."""
    if len(x) == 0:
        return 0, 0.0
    best = None
    for w in range(1, 33):
        escapes = int(np.count_nonzero(x >= (1 << w) - 1))
        bits = len(x) * w + escapes * ESCAPE_BITS
        if best is None or bits < best[1]:
            best = (w, bits)
        if escapes == 0:
            break
    return best[0], best[1] / len(x)


def ranked(*columns: np.ndarray) -> np.ndarray:
    """Each row's tuple of ``columns`` as its rank among the tuples by frequency (0: the
    most frequent): a code whose small values a fixed width holds, the rest escaping."""
    _, inverse, counts = np.unique(np.stack(columns, axis=1), axis=0, return_inverse=True,
                                   return_counts=True)
    rank_of = np.empty(len(counts), np.int64)
    rank_of[np.argsort(-counts, kind="stable")] = np.arange(len(counts))
    return rank_of[inverse.ravel()]


def zigzag(r: np.ndarray) -> np.ndarray:
    return np.where(r >= 0, 2 * r, -2 * r - 1)


def ulps(stored: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    """stored - predicted in float32 ulps (both finite, same sign: log p < 0)."""
    return stored.view(np.int32).astype(np.int64) - predicted.view(np.int32).astype(np.int64)


def log_agreement(x: np.ndarray, sample: int = 2_000_000) -> dict:
    """Whether readers' log functions give the estimator's float32 numbers: numpy's
    float64 log (the estimator's) against numba's (a compiled reader's) on every value,
    and against glibc's (a C reader's) on an even sample, each before and after rounding
    to float32."""
    import ctypes
    import ctypes.util

    import numba

    @numba.njit
    def numba_log(v):
        out = np.empty_like(v)
        for i in range(len(v)):
            out[i] = np.log(v[i])
        return out

    ref = np.log(x)
    nb = numba_log(x)
    out = {"values": int(len(x)), "numba_float64_differ": int(np.count_nonzero(nb != ref)),
           "numba_float32_differ": int(np.count_nonzero(nb.astype(np.float32)
                                                        != ref.astype(np.float32)))}
    name = ctypes.util.find_library("m")
    if name:
        libm = ctypes.CDLL(name)
        libm.log.restype, libm.log.argtypes = ctypes.c_double, [ctypes.c_double]
        step = max(1, len(x) // sample)
        part = x[::step]
        c = np.fromiter((libm.log(v) for v in part), np.float64, len(part))
        out.update(glibc_sample=int(len(part)),
                   glibc_float64_differ=int(np.count_nonzero(c != ref[::step])),
                   glibc_float32_differ=int(np.count_nonzero(
                       c.astype(np.float32) != ref[::step].astype(np.float32))))
    return out


def measure(text: Path, order: int, name: str) -> dict:
    from nnlm import load_model, read_stream
    from nnlm.ngram.estimate.counts import count_ngrams
    from nnlm.ngram.estimate.kneser_ney import (
        adjusted_counts,
        backoff_of,
        context_classes,
        discount_of,
        discounted_mass,
        discounts_from,
    )
    from nnlm.ngram.store.trie_layout import read_trie_header

    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nnlm", "ngram", "train", str(text), "--order",
                        str(order), "-o", f"{tmp}/kn"], check=True, stdout=subprocess.DEVNULL)
        header, _ = read_trie_header(Path(tmp) / "kn" / "ngrams.trie")
        file_bytes = (Path(tmp) / "kn" / "ngrams.trie").stat().st_size
        model = load_model(f"{tmp}/kn")
        V = len(model.vocab)
        stream = read_stream(text, model.vocab)
        estimate_seconds = time.perf_counter() - t
        # the model's own numbers, to check that this replays its estimate
        stored_levels = [np.array(level.logp, dtype=np.float32) for level in model.levels]
        del model

    tables = count_ngrams(stream, order, V)
    del stream
    adjusted = adjusted_counts(tables, V)
    discounts = np.stack([discounts_from(a, k) for k, a in enumerate(adjusted, 1)])
    sections = {k: v[1] for k, v in header["sections"].items()}
    n_total = sum(header["counts"])
    rows = []
    prob_lower = np.full(1, 1.0 / (V - 1))
    positive = []  # every probability and back-off the file holds the log of, float64
    for k in range(1, order + 1):
        table, a = tables[k - 1], adjusted[k - 1]
        n_ctx = 1 if k == 1 else len(tables[k - 2])
        S = np.bincount(table.prefix, weights=a, minlength=n_ctx)
        n1, n2, n3 = context_classes(table.prefix, a, n_ctx)
        gamma = backoff_of(S, discounted_mass(n1, n2, n3, discounts[k - 1]))
        D = discount_of(a, discounts[k - 1])
        with np.errstate(invalid="ignore", divide="ignore"):
            first = np.where(S[table.prefix] > 0, (a - D) / S[table.prefix], 0.0)
            p = first + gamma[table.prefix] * prob_lower[table.suffix]
            stored = np.log(p).astype(np.float32)
            # what a reader holds: float32 log gamma(h) and float32 log p(w | h')
            log_gamma32 = np.log(gamma).astype(np.float32).astype(np.float64)
            log_lower32 = np.log(prob_lower).astype(np.float32).astype(np.float64)
            predicted = np.log(first + np.exp(log_gamma32[table.prefix]
                                              + log_lower32[table.suffix])).astype(np.float32)
        if k >= 2:
            # the replay must be the model's estimate, value for value (its levels are
            # stored in another order: compare the multisets)
            same = np.array_equal(np.sort(stored.view(np.int32)),
                                  np.sort(stored_levels[k - 2].view(np.int32)))
        else:
            same = True
        finite = np.isfinite(stored)
        residual = zigzag(ulps(stored[finite], predicted[finite]))
        distinct = len(np.unique(stored.view(np.int32)))
        row = {"order": k, "ngrams": int(len(a)), "replays_the_model": bool(same),
               # the values as numbers: how many distinct, and their entropy (a table's
               # index would take log2 distinct bits)
               "distinct_values": distinct,
               "value_entropy_bits": round(entropy(stored.view(np.int32)), 2),
               "residual_zero": round(float(np.mean(residual == 0)), 4),
               "residual_within_1": round(float(np.mean(residual <= 2)), 4),
               "residual_max_ulps": int((residual.max() + 1) // 2) if len(residual) else 0}
        fields = {"a": a.astype(np.int64), "residual": residual}
        # context fields live on the (k-1)-grams, all of them (0 where nothing extends)
        context = {"S": S.astype(np.int64), "N1": n1.astype(np.int64),
                   "N2": n2.astype(np.int64), "N3+": n3.astype(np.int64)} if k >= 2 else {}
        bits = {}
        for key, x in {**fields, **context}.items():
            w, per = fixed_width(x)
            bits[key] = {"entropy": round(entropy(x), 3), "width": w,
                         "fixed_bits": round(per, 3), "count": int(len(x))}
        # joint codes: an entry's (a, residual) as one ranked symbol, a context's
        # (S, N1, N2, N3+) as another; each order keeps a table of the 2^w - 1 symbols
        # its width holds (4 bytes a number in them), counted in table_bytes
        joint = {"a+residual": ranked(fields["a"][finite], residual),
                 # a reader carrying p in float64 predicts the value itself: a alone
                 "a_ranked": ranked(fields["a"])}
        if k >= 2:
            joint["S+N"] = ranked(*context.values())
        for key, x in joint.items():
            w, per = fixed_width(x)
            numbers = {"a+residual": 2, "a_ranked": 1, "S+N": 4}[key]
            bits[key] = {"entropy": round(entropy(x), 3), "width": w,
                         "fixed_bits": round(per, 3), "count": int(len(x)),
                         "symbols": int(x.max() + 1),
                         "table_bytes": 4 * numbers * min((1 << w) - 1, int(x.max() + 1))}
        row["fields"] = bits
        rows.append(row)
        positive += [p[p > 0], gamma[gamma > 0]]
        prob_lower = p

    # the file with log p coded (a, residual on the entries; S on the contexts), and with
    # the back-offs too (N1, N2, N3+ on the contexts, their residual 0: the same formula)
    logp_bytes = sum(v for s, v in sections.items() if s.startswith("logp_"))
    bow_bytes = sum(v for s, v in sections.items() if s.startswith("log_bow_"))
    coded_logp = sum((r["fields"]["a"]["fixed_bits"] + r["fields"]["residual"]["fixed_bits"])
                     * r["ngrams"] + r["fields"]["S"]["fixed_bits"] * r["fields"]["S"]["count"]
                     for r in rows if r["order"] >= 2) / 8
    # back-offs of the k-grams (k = 2 .. order - 1) from the counts of the (k+1)-grams'
    # contexts, which are the k-grams: rows of orders 3 .. order
    coded_bow = sum(sum(r["fields"][f]["fixed_bits"] for f in ("N1", "N2", "N3+"))
                    * r["fields"]["S"]["count"] for r in rows if r["order"] >= 3) / 8

    def coded_bytes(entry_field: str) -> float:
        """Bytes of an order's entry codes, its contexts' codes and both tables."""
        return sum(r["fields"][entry_field]["fixed_bits"] * r["ngrams"] / 8
                   + r["fields"]["S+N"]["fixed_bits"] * r["fields"]["S+N"]["count"] / 8
                   + r["fields"][entry_field]["table_bytes"] + r["fields"]["S+N"]["table_bytes"]
                   for r in rows if r["order"] >= 2)

    chain_bytes = coded_bytes("a_ranked")
    joint_bytes = coded_bytes("a+residual")
    entropy_logp = sum((r["fields"]["a"]["entropy"] + r["fields"]["residual"]["entropy"])
                       * r["ngrams"] + r["fields"]["S"]["entropy"] * r["fields"]["S"]["count"]
                       for r in rows if r["order"] >= 2) / 8
    out = {
        "name": name, "text": str(text), "order": order, "ngrams": n_total,
        "estimate_seconds": round(estimate_seconds, 1),
        "file_bytes": file_bytes, "file_bytes_per_ngram": round(file_bytes / n_total, 3),
        "logp_bytes_per_ngram": round(logp_bytes / n_total, 3),
        "bow_bytes_per_ngram": round(bow_bytes / n_total, 3),
        "coded_logp_bytes_per_ngram": round(coded_logp / n_total, 3),
        "entropy_logp_bytes_per_ngram": round(entropy_logp / n_total, 3),
        "coded_bow_bytes_per_ngram": round(coded_bow / n_total, 3),
        "file_with_logp_coded": round((file_bytes - logp_bytes + coded_logp) / n_total, 3),
        "file_with_logp_and_bow_coded": round(
            (file_bytes - logp_bytes - bow_bytes + coded_logp + coded_bow) / n_total, 3),
        "joint_codes_bytes_per_ngram": round(joint_bytes / n_total, 3),
        "file_with_joint_codes": round(
            (file_bytes - logp_bytes - bow_bytes + joint_bytes) / n_total, 3),
        # the same with p carried in float64 down the walk: no residual, a alone
        "float64_codes_bytes_per_ngram": round(chain_bytes / n_total, 3),
        "file_with_float64_codes": round(
            (file_bytes - logp_bytes - bow_bytes + chain_bytes) / n_total, 3),
        "log_functions": log_agreement(np.concatenate(positive)),
        "orders": rows,
    }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--text", type=Path, required=True, help="training text")
    ap.add_argument("--order", type=int, default=5)
    ap.add_argument("--name", help="the row's name (default: the text's)")
    ap.add_argument("--out", type=Path, help="JSON to add this row to")
    a = ap.parse_args()
    if a.order < 2:
        ap.error("--order must be >= 2")
    row = measure(a.text, a.order, a.name or a.text.stem)
    print(json.dumps({k: v for k, v in row.items() if k != "orders"}, indent=1))
    for r in row["orders"]:
        f = r["fields"]
        print(f"order {r['order']}: {r['ngrams']:,} n-grams, residual 0 in "
              f"{r['residual_zero']:.1%}, |r| <= 1 in {r['residual_within_1']:.2%}; "
              + ", ".join(f"{k} {v['entropy']:.2f}/{v['fixed_bits']:.2f} bits (w {v['width']})"
                          for k, v in f.items()))
    if a.out:
        data = json.loads(a.out.read_text()) if a.out.exists() else {}
        data[row["name"]] = row
        a.out.parent.mkdir(parents=True, exist_ok=True)
        harness.write_record(a.out, data)


if __name__ == "__main__":
    main()

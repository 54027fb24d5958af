"""Sentence embeddings on Brown's genres: do nnlm's embeddings carry what a text is about?

Every paragraph of Brown (15,667, NLTK's ``brown.paras()``, tokens joined by spaces) is
labelled with its file's genre (``brown.categories(fileid)``: 15 genres). Protocol v1's
splits cut the corpus in file order, so they hold different genres; here every
paragraph is used. A multinomial logistic regression (L2, fitted by L-BFGS in torch;
its strength chosen per fold on a held-out group of the training files) is scored by
5-fold cross-validation with the folds grouped by file, so no file is on both sides.

Representations, each a vector per paragraph:

- ``nnlm embed`` of each MODEL given (sqrt-n sum of rows of C, buckets for rare words);
- random word vectors of the same size, combined the same way (what the recipe gives
  without training);
- a bag of words reduced to the same size by a Gaussian random projection of the counts;
- TF-IDF over every word type at full size (the ceiling: nothing thrown away).

    NLTK_DATA=... python bench/neural/embeddings.py runs/mlp1 runs/modern [--out JSON]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from nnlm.models import load_model
from nnlm.neural.sentence import SentenceEncoder

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: the harness
import harness  # noqa: E402 - after its folder is on the path

FOLDS = 5
STRENGTHS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


def brown_genre_paragraphs() -> tuple[list[str], list[str], list[str]]:
    """(paragraph texts, genres, file ids), every paragraph of Brown."""
    from nltk.corpus import brown

    texts, genres, files = [], [], []
    for f in brown.fileids():
        (genre,) = brown.categories(f)
        for para in brown.paras(fileids=f):
            texts.append(" ".join(w for sent in para for w in sent))
            genres.append(genre)
            files.append(f)
    return texts, genres, files


def grouped_folds(files: list[str], k: int, seed: int = 0) -> np.ndarray:
    """Fold of each paragraph: its file's, files dealt to folds in a seeded order."""
    names = sorted(set(files))
    rng = np.random.default_rng(seed)
    rng.shuffle(names)
    fold_of = {f: i % k for i, f in enumerate(names)}
    return np.array([fold_of[f] for f in files])


def fit_logistic(X, y: np.ndarray, classes: int, strength: float) -> torch.Tensor:
    """Weights (d + 1, classes) of an L2 multinomial logistic regression (no penalty on
    the bias), by L-BFGS. ``X``: dense float32 tensor or sparse CSR tensor."""
    n, d = X.shape
    W = torch.zeros(d, classes, requires_grad=True)
    b = torch.zeros(classes, requires_grad=True)
    t = torch.from_numpy(y)
    opt = torch.optim.LBFGS([W, b], lr=1, max_iter=200, history_size=20,
                            line_search_fn="strong_wolfe", tolerance_grad=1e-6)

    def closure():
        opt.zero_grad()
        logits = (X @ W) + b
        loss = torch.nn.functional.cross_entropy(logits, t) + strength * W.square().sum()
        loss.backward()
        return loss

    opt.step(closure)
    return torch.cat([W.detach(), b.detach()[None]])


def predict(X, Wb: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return ((X @ Wb[:-1]) + Wb[-1]).argmax(1).numpy()


def macro_f1(y: np.ndarray, p: np.ndarray, classes: int) -> float:
    f1 = []
    for c in range(classes):
        tp = np.sum((p == c) & (y == c))
        fp, fn = np.sum((p == c) & (y != c)), np.sum((p != c) & (y == c))
        f1.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1))


def rows(X, idx: np.ndarray):
    if isinstance(X, torch.Tensor) and X.is_sparse_csr:
        return X.to_sparse_coo().index_select(0, torch.from_numpy(idx)).to_sparse_csr()
    return X[torch.from_numpy(idx)]


def cross_validate(X, y: np.ndarray, folds: np.ndarray, classes: int,
                   standardize: bool) -> dict:
    """Accuracy and macro-F1 over the 5 grouped folds (predictions pooled)."""
    pred = np.empty_like(y)
    chosen = []
    for k in range(FOLDS):
        train, test = np.flatnonzero(folds != k), np.flatnonzero(folds == k)
        Xtr, Xte = rows(X, train), rows(X, test)
        if standardize:
            mu, sd = Xtr.mean(0), Xtr.std(0).clamp_min(1e-6)
            Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
        # the L2 strength: the best on one held-out fold of the training files
        inner = folds[train]
        hold = (k + 1) % FOLDS
        fit_i, val_i = np.flatnonzero(inner != hold), np.flatnonzero(inner == hold)
        scores = []
        for s in STRENGTHS:
            Wb = fit_logistic(rows(Xtr, fit_i), y[train][fit_i], classes, s)
            scores.append(np.mean(predict(rows(Xtr, val_i), Wb) == y[train][val_i]))
        best = STRENGTHS[int(np.argmax(scores))]
        chosen.append(best)
        pred[test] = predict(Xte, fit_logistic(Xtr, y[train], classes, best))
    return {"accuracy": float(np.mean(pred == y)), "macro_f1": macro_f1(y, pred, classes),
            "l2_per_fold": chosen}


def tfidf(texts: list[str]) -> torch.Tensor:
    """Sublinear TF-IDF over every word type, rows L2-normalized: a sparse CSR tensor."""
    index: dict[str, int] = {}
    rows_, cols, vals = [], [], []
    for i, t in enumerate(texts):
        for w, c in Counter(t.split()).items():
            rows_.append(i)
            cols.append(index.setdefault(w, len(index)))
            vals.append(1 + math.log(c))
    cols_a = np.array(cols)
    df = np.bincount(cols_a, minlength=len(index))
    idf = np.log((1 + len(texts)) / (1 + df)) + 1
    v = np.array(vals) * idf[cols_a]
    r = np.array(rows_)
    norms = np.sqrt(np.bincount(r, weights=v * v, minlength=len(texts)))
    v = v / np.maximum(norms[r], 1e-12)
    coo = torch.sparse_coo_tensor(np.stack([r, cols_a]), torch.tensor(v, dtype=torch.float32),
                                  (len(texts), len(index)))
    return coo.coalesce().to_sparse_csr()


def random_projection(texts: list[str], dim: int, seed: int = 0) -> np.ndarray:
    """Counts of every word type times a Gaussian (types, dim) matrix."""
    index: dict[str, int] = {}
    ids = [[index.setdefault(w, len(index)) for w in t.split()] for t in texts]
    R = np.random.default_rng(seed).normal(size=(len(index), dim)).astype(np.float32)
    return np.stack([R[i].sum(0) if i else np.zeros(dim, np.float32) for i in ids])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("bench/results/embeddings.json"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    texts, genres, files = brown_genre_paragraphs()
    names = sorted(set(genres))
    y = np.array([names.index(g) for g in genres])
    folds = grouped_folds(files, FOLDS)
    print(f"{len(texts):,} paragraphs, {len(set(files))} files, {len(names)} genres",
          file=sys.stderr)
    results = []

    def run(name: str, X, dim: int, standardize: bool = True, **extra) -> None:
        t = time.perf_counter()
        X = torch.as_tensor(X) if not isinstance(X, torch.Tensor) else X
        r = cross_validate(X, y, folds, len(names), standardize)
        results.append({"representation": name, "dim": dim, **r, **extra,
                        "seconds": time.perf_counter() - t})
        print(f"{name:40s} d={dim:6d} accuracy {r['accuracy']:.3f} macro-F1 "
              f"{r['macro_f1']:.3f}", file=sys.stderr)

    from nltk.corpus import brown

    sentences = [" ".join(s) for s in brown.sents()]  # 57,340 lines, 20.3 tokens on average
    by_dim: dict[int, object] = {}
    speeds = {}
    for path in args.models:
        lm = load_model(path)
        lm.embed(sentences[:100])
        best = min(harness.timed(lm.embed, sentences)[1] for _ in range(3))
        speeds[path.name] = {"sentences_per_second": len(sentences) / best,
                             "tokens_per_second": sum(len(x.split()) for x in sentences) / best}
        print(f"{path.name}: {len(sentences) / best:,.0f} Brown sentences/s", file=sys.stderr)
        t = time.perf_counter()
        X = lm.embed(texts)
        speed = len(texts) / (time.perf_counter() - t)
        m = X.shape[1]
        by_dim.setdefault(m, lm)
        run(f"nnlm embed {path.name}", X, m, paragraphs_per_second=speed)
        run(f"nnlm embed {path.name} --normalize", lm.embed(texts, normalize=True), m)
    for m, lm in sorted(by_dim.items(), key=lambda d: d[0]):
        rng = np.random.default_rng(1)
        C = rng.normal(size=(len(lm.vocab), m)).astype(np.float32)
        run("random word vectors (same recipe)", SentenceEncoder(lm.vocab, C).embed(texts), m)
        run("bag of words, random projection", random_projection(texts, m), m)
    X = tfidf(texts)
    run("TF-IDF, every word type (ceiling)", X, X.shape[1], standardize=False)
    out = {"corpus": "Brown, every paragraph (NLTK), 15 genres",
           "protocol": f"{FOLDS}-fold cross-validation grouped by file; L2 logistic "
                       "regression, strength from " + ", ".join(map(str, STRENGTHS)),
           "paragraphs": len(texts), "files": len(set(files)), "genres": names,
           "majority_class_accuracy": float(np.bincount(y).max() / len(y)),
           "embedding_speed": {"threads": args.threads, "lines": len(sentences), **speeds},
           "rows": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    harness.write_record(args.out, out)


if __name__ == "__main__":
    main()

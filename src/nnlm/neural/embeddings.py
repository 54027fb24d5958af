"""A 2D map of word feature vectors (rows of C): PCA by SVD, or t-SNE with scikit-learn."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..base.errors import NnlmError
from ..plots import png_figure

MIN_WORDS = {"pca": 2, "tsne": 5}  # t-SNE's perplexity needs a few neighbours


def project(vectors: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """2D coordinates of ``vectors`` (one row a word)."""
    if len(vectors) < MIN_WORDS[method]:
        raise NnlmError(f"a {method.upper()} map needs at least {MIN_WORDS[method]} words, "
                        f"got {len(vectors)}")
    x = vectors - vectors.mean(axis=0)
    if method == "pca":
        _, _, vt = np.linalg.svd(x, full_matrices=False)
        return x @ vt[:2].T
    try:
        from sklearn.manifold import TSNE
    except ImportError:
        raise NnlmError("t-SNE needs scikit-learn (pip install scikit-learn); "
                        "or use method=pca") from None
    perplexity = max(2.0, min(30.0, (len(x) - 1) / 3))
    return TSNE(2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(x)


def plot_embeddings(model, words: list[str], path, method: str = "pca") -> Path:
    C = model.model.C.detach().numpy()
    xy = project(C[[model.vocab.index[w] for w in words]], method)
    with png_figure(path, size=(8, 8), dpi=110) as (fig, ax):
        ax.scatter(xy[:, 0], xy[:, 1], s=8, color="tab:blue")
        for (x, y), w in zip(xy, words):
            ax.annotate(w, (x, y), fontsize=8, xytext=(2, 2), textcoords="offset points")
        ax.set_title(f"word feature vectors C, {method.upper()}")
        ax.set_xticks([])
        ax.set_yticks([])
    return Path(path)


def nearest_words(lm, word: str, k: int = 10) -> list[tuple[str, float]]:
    """The k words whose feature vectors C in ``lm`` are closest to ``word``'s in cosine
    similarity (``NeuralLM.neighbors``): never the word itself, never ``<s>``."""
    C = lm.model.C.detach().float().cpu()
    C = C / C.norm(dim=1, keepdim=True).clamp_min(1e-12)
    i = lm.vocab.index[word]
    sims = (C @ C[i]).numpy()
    sims[[i, 1]] = -np.inf
    best = np.argsort(-sims)[:k]
    return [(lm.vocab.words[j], float(sims[j])) for j in best]

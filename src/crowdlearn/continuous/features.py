"""Item features for the end-to-end continuous heads: bag-of-words files in LDA-C format.

``movie_reviews`` (Rodrigues et al.) ships its reviews as ``bow.txt``, one line per task:
``M term:count term:count ...`` (M = number of distinct terms).  :func:`read_ldac` reads it as
a sparse count matrix; :func:`text_features` turns it into a small dense matrix (TF-IDF, then
a truncated SVD: latent semantic analysis) that the torch trainer can hold in memory.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

__all__ = ["read_ldac", "text_features"]


def read_ldac(path: str | Path, n_terms: int | None = None) -> sp.csr_matrix:
    """Sparse (lines, terms) count matrix of an LDA-C file; a malformed line is named."""
    rows, cols, vals = [], [], []
    with open(path) as fh:
        for i, line in enumerate(fh):
            parts = line.split()
            if not parts:
                continue
            try:
                pairs = [p.split(":") for p in parts[1:]]
                terms = [int(t) for t, _ in pairs]
                counts = [float(c) for _, c in pairs]
            except ValueError:
                raise ValueError(f"{path}: line {i + 1} is not 'M term:count ...'") from None
            rows.extend([i] * len(terms))
            cols.extend(terms)
            vals.extend(counts)
            n_lines = i + 1
    width = (max(cols) + 1 if cols else 0) if n_terms is None else n_terms
    return sp.csr_matrix((vals, (rows, cols)), shape=(n_lines, width))


def text_features(counts: sp.spmatrix, n_components: int = 100, seed: int = 0) -> np.ndarray:
    """Latent semantic features: sublinear TF-IDF of ``counts``, then a truncated SVD to
    ``n_components`` dimensions (unsupervised: no answer or gold is used)."""
    from sklearn.decomposition import TruncatedSVD
    from sklearn.feature_extraction.text import TfidfTransformer

    tfidf = TfidfTransformer(sublinear_tf=True).fit_transform(counts)
    return TruncatedSVD(n_components, random_state=seed).fit_transform(tfidf)

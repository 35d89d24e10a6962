"""The one standardisation, the one PCA and the one rule for folds of lgcexp: the feature maps
(:mod:`lgcexp.features`), the graph builders (:mod:`lgcexp.graph.knn_approx`), the noise models and the
label-issue views (:mod:`lgcexp.issues`) all use these, so a number means the same wherever it appears.

- :func:`column_moments` / :func:`standardize`: per-feature mean and population standard deviation, and the
  z-scores ``(x - mean) / sd`` (a constant feature keeps sd 1, i.e. it is only centred);
- :func:`pca_axes` / :func:`pca_transform`: the exact leading principal axes (eigenvectors of the covariance,
  or right singular vectors of the centred rows where there are more features than rows), each axis signed so
  that its largest-magnitude entry is positive (scikit-learn's convention), and the projection on them;
- :func:`fold_of` / :func:`fold_splits`: ``k`` folds of the labelled points by a seeded permutation that does
  not look at the labels, so a point's judgement from the other folds depends on its own label in no way
  (neither through training nor through the split).
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

__all__ = ["column_moments", "unit_rows", "standardize", "pca_axes", "pca_transform", "fold_of", "fold_splits"]


def column_moments(X: np.ndarray, rows: np.ndarray | None = None,
                   block: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and population standard deviation (float64, shape (d,)) of the rows ``rows`` of X
    (default all). ``block``: read X that many rows at a time (a memory map is never copied whole), the
    blocks' moments merged by Chan, Golub & LeVeque's pairwise update (no sum-of-squares cancellation);
    None: in one piece (numpy's ``mean`` and ``std``)."""
    if block is None:
        A = np.asarray(X if rows is None else X[np.asarray(rows)], dtype=np.float64)
        return A.mean(axis=0), A.std(axis=0)
    rows = np.arange(X.shape[0]) if rows is None else np.asarray(rows, dtype=np.int64)
    d = X.shape[1]
    count, mean, m2 = 0, np.zeros(d), np.zeros(d)
    for start in range(0, rows.size, int(block)):
        B = np.asarray(X[rows[start:start + int(block)]], dtype=np.float64)
        nb = B.shape[0]
        mb = B.mean(axis=0)
        m2b = ((B - mb) ** 2).sum(axis=0)
        delta = mb - mean
        total = count + nb
        mean = mean + delta * (nb / total)
        m2 = m2 + m2b + delta * delta * (count * nb / total)
        count = total
    return mean, np.sqrt(m2 / max(count, 1))


def unit_rows(X: np.ndarray, block: int = 16_384, key: str = "X") -> np.ndarray:
    """The rows of X scaled to unit Euclidean length (the Euclidean distance of two such rows is
    ``sqrt(2 - 2 cos)``, so their nearest neighbours are the cosine's). A new array of X's precision (float64
    for float64 input, float32 otherwise), filled block by block with the norms in float64: a wide float32 X
    (or a memory map) is never copied whole to float64, and X is never modified. A row of zeros has no
    direction: refused in one line naming ``key``."""
    from .errors import UserError

    n, d = X.shape
    out = np.empty((n, d), dtype=np.float64 if np.asarray(X[:0]).dtype == np.float64 else np.float32)
    for start in range(0, n, block):
        B = np.asarray(X[start:start + block])
        norms = np.sqrt(np.einsum("ij,ij->i", B, B, dtype=np.float64))
        zero = np.flatnonzero(norms == 0)
        if zero.size:
            raise UserError(f"{key}: row {start + int(zero[0])} is all zeros; the cosine metric needs every row to "
                            "have a direction (drop such rows or use metric='euclidean')")
        np.divide(B, norms[:, None], out=out[start:start + block], casting="unsafe")
    return out


def standardize(X: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    """Per-feature z-scores ``(X - mean) / sd`` over the rows given (:func:`column_moments`; a constant
    feature is only centred), computed in float64 and returned as ``dtype``."""
    X = np.asarray(X, dtype=np.float64)
    mu, sd = column_moments(X)
    Z = (X - mu) / np.where(sd > 0, sd, 1.0)
    return Z if np.dtype(dtype) == np.float64 else Z.astype(dtype)


def _sign_fix(axes: np.ndarray) -> np.ndarray:
    """Each column signed so that its largest-magnitude entry is positive (scikit-learn's ``svd_flip``
    with ``u_based_decision=False``): the axes are then a function of the data, not of the solver."""
    if axes.size == 0:
        return axes
    top = axes[np.argmax(np.abs(axes), axis=0), np.arange(axes.shape[1])]
    return axes * np.where(top < 0, -1.0, 1.0)


def pca_axes(X: np.ndarray, p: int, block: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Mean (d,) and the ``p`` leading principal axes (d, p) of the rows of X (Pearson 1901; Jolliffe,
    *Principal Component Analysis*, 2002, §1.1): the eigenvectors of the covariance ``(X - mean)^T (X - mean)``
    with the largest eigenvalues, the covariance accumulated in float64 ``block`` rows at a time (X may be a
    memory map or float32); where there are more features than rows, the right singular vectors of the
    centred rows instead (the same axes, without a d x d matrix). Exact and deterministic; signs by
    :func:`_sign_fix`. ``p`` is clipped to min(n, d)."""
    m, d = X.shape
    p = int(min(p, m, d))
    mean = np.zeros(d)
    for start in range(0, m, block):
        mean += np.asarray(X[start:start + block]).sum(axis=0, dtype=np.float64)
    mean /= max(m, 1)
    if d > m:
        _, _, Vt = np.linalg.svd(np.asarray(X, dtype=np.float64) - mean, full_matrices=False)
        return mean, _sign_fix(np.ascontiguousarray(Vt[:p].T))
    C = np.zeros((d, d))
    for start in range(0, m, block):
        B = np.asarray(X[start:start + block], dtype=np.float64) - mean
        C += B.T @ B
    _, vecs = np.linalg.eigh(C)
    return mean, _sign_fix(np.ascontiguousarray(vecs[:, ::-1][:, :p]))


def pca_transform(X: np.ndarray, p: int) -> np.ndarray:
    """The rows of X on their ``p`` leading principal axes, ``(X - mean) V_p`` (float64; :func:`pca_axes`)."""
    X = np.asarray(X, dtype=np.float64)
    mean, axes = pca_axes(X, p)
    return (X - mean) @ axes


def fold_of(n_labeled: int, folds: int, seed: int, n_unlabeled: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(fold of each labelled point, fold of each unlabelled point): each set dealt round robin in the order
    of a seeded permutation (NumPy's ``default_rng((seed, "oof"))``, labelled points first), so the folds never
    look at the labels and their sizes differ by at most one."""
    rng = np.random.default_rng([int(seed), 0x6F6F66])  # stream "oof"
    f_lab = np.empty(int(n_labeled), dtype=np.int64)
    f_lab[rng.permutation(int(n_labeled))] = np.arange(int(n_labeled)) % int(folds)
    f_unl = np.empty(int(n_unlabeled), dtype=np.int64)
    f_unl[rng.permutation(int(n_unlabeled))] = np.arange(int(n_unlabeled)) % int(folds)
    return f_lab, f_unl


def fold_splits(l: int, folds: int, seed: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(train, test) indices of the ``folds`` folds of :func:`fold_of` over ``l`` labelled points, fold 0
    first (``folds`` clipped to [2, l])."""
    k = int(max(2, min(int(folds), int(l))))
    f, _ = fold_of(int(l), k, seed)
    for j in range(k):
        yield np.flatnonzero(f != j), np.flatnonzero(f == j)

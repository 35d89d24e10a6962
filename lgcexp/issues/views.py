"""The views of a label besides the method's own evidence: out-of-fold models on the features.

- :func:`feature_probs`: the *feature view*, a shrinkage LDA (:func:`shrinkage_lda`), a logistic regression
  or a small network fitted out-of-fold on the labels the method's evidence keeps;
- :func:`combine_views`: the geometric mean of the method's evidence and the feature view;
- :func:`knn_oof_probs`: out-of-sample k-NN class frequencies (the baseline's probabilities), by
  :func:`nearest_rows` (exact, ties in index order);
- :func:`view_rows` / :func:`project_rows`: the labelled rows of a large or memory-mapped X in bounded memory.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..preprocess import column_moments, fold_splits, pca_axes, pca_transform, standardize
from .judgement import _has_evidence, normalize_rows
from .out_of_fold import oof_logistic_probs, oof_mlp_probs, out_of_fold_probs

__all__ = ["MAX_FEATURES", "FEATURE_MODELS", "LOGISTIC_PCA", "FULL_LABELLED_SHARE", "shrinkage_lda",
           "choose_feature_model", "feature_probs", "combine_views", "knn_oof_probs", "knn_oof_from_neighbors",
           "nearest_rows", "project_rows", "view_rows", "RowSubset"]

#: above this many features, the feature view first projects the labelled rows on their leading principal
#: axes (a d x d covariance would not fit otherwise)
MAX_FEATURES = 1024


def shrinkage_lda(Z_train: np.ndarray, y_train: np.ndarray, Z_test: np.ndarray, n_classes: int) -> np.ndarray:
    """Class probabilities of a linear discriminant analysis with a Ledoit-Wolf shrunk covariance.

    Class means and priors from the training rows; one covariance for all classes: the within-class
    scatter (rows minus their class mean) shrunk towards a multiple of the identity by Ledoit & Wolf's
    formula (scikit-learn's ``ledoit_wolf``). Scores ``z^T S^-1 m_k - m_k^T S^-1 m_k / 2 + log prior_k``,
    softmax over the classes present in training (0 for the others). A singular covariance (no
    within-class scatter: one training row per class) is solved in the least-squares sense."""
    from sklearn.covariance import ledoit_wolf

    y_train = np.asarray(y_train, dtype=np.int64)
    present = np.unique(y_train)
    means = np.stack([Z_train[y_train == k].mean(axis=0) for k in present])
    pos = np.searchsorted(present, y_train)
    cov, _ = ledoit_wolf(Z_train - means[pos], assume_centered=True)
    try:
        coef = np.linalg.solve(cov, means.T)  # d x k
    except np.linalg.LinAlgError:  # no within-class scatter at all (one row per class, constant features)
        coef = np.linalg.lstsq(cov, means.T, rcond=None)[0]
    prior = np.bincount(pos, minlength=present.size) / y_train.size
    logits = Z_test @ coef - 0.5 * np.einsum("kd,dk->k", means, coef) + np.log(prior)
    logits -= logits.max(axis=1, keepdims=True)
    E = np.exp(logits)
    out = np.zeros((Z_test.shape[0], int(n_classes)))
    out[:, present] = E / E.sum(axis=1, keepdims=True)
    return out


#: feature models of the feature view (:func:`feature_probs`)
FEATURE_MODELS = ("lda", "logistic", "mlp", "cnn")


#: principal axes the logistic and mlp feature views project on first (where there are more features)
LOGISTIC_PCA = 50


#: the feature view's model where at least this share of the points is labelled (a fully labelled data
#: set; :func:`choose_feature_model`); below it, the shrinkage LDA of the paper's protocol
FULL_LABELLED_SHARE = 0.5


def choose_feature_model(n_labeled: int, n: int, image_shape: Any = None) -> str:
    """``mlp`` (:func:`oof_mlp_probs`) where at least :data:`FULL_LABELLED_SHARE` of the points are labelled —
    ``cnn`` (:func:`lgcexp.issues.image_view.oof_cnn_probs`) instead where the rows are images
    (``image_shape`` given) —, else ``lda`` (chosen against ``logistic`` on ``idn`` and ``confusion`` noise with
    every point labelled, digits, ISOLET and MNIST: docs/label_issues.md#realistic)."""
    if not (n and n_labeled >= FULL_LABELLED_SHARE * n):
        return "lda"
    return "mlp" if image_shape is None else "cnn"


class RowSubset:
    """The rows ``rows`` of X as an array-like that reads only what is indexed (``subset[idx]`` is
    ``X[rows[idx]]``), so the image view reads a memory-mapped X a batch at a time."""

    def __init__(self, X: Any, rows: np.ndarray):
        self.X, self.rows = X, np.asarray(rows, dtype=np.int64)

    @property
    def shape(self) -> tuple[int, int]:
        return (int(self.rows.size), int(self.X.shape[1]))

    def __getitem__(self, idx: Any) -> np.ndarray:
        block = self.X[self.rows[idx]]
        return np.asarray(block.toarray() if hasattr(block, "toarray") else block)


def feature_probs(X: Any, y: np.ndarray, n_classes: int, train: np.ndarray | None = None, *,
                  folds: int = 5, seed: int = 0, model: str = "lda", image_shape: Any = None) -> np.ndarray | None:
    """Out-of-fold class probabilities from the features alone (the *feature view*).

    A linear discriminant analysis with a Ledoit-Wolf shrunk covariance (:func:`shrinkage_lda`) on the
    standardised features of the labelled points; each point's probabilities come from the model fitted on
    the other folds (``folds`` folds of :func:`lgcexp.preprocess.fold_splits`, seeded with ``seed``), using
    only the labels in ``train``
    (default: all), so a label the graph rejects never teaches the model. Above :data:`MAX_FEATURES`
    features the rows are first projected on their leading principal axes. Returns None where it cannot be
    fitted (a fold whose training labels hold fewer than two classes). ``model="logistic"``: a multinomial
    logistic regression instead (:func:`oof_logistic_probs`, on :data:`LOGISTIC_PCA` principal axes), on the
    same folds and training labels; ``model="mlp"``: a small neural network on the same axes
    (:func:`oof_mlp_probs`); ``model="cnn"``: a convolutional network on the pixels (X: rows of flattened
    images of ``image_shape``, e.g. a :class:`RowSubset`; :func:`lgcexp.issues.image_view.oof_cnn_probs`)."""

    y = np.asarray(y, dtype=np.int64)
    l = y.size
    if model == "cnn":
        from .image_view import oof_cnn_probs

        return oof_cnn_probs(X, np.arange(l), y, n_classes, image_shape, folds=folds, seed=seed, train=train,
                             strict=True)
    if model in ("logistic", "mlp"):
        oof = oof_logistic_probs if model == "logistic" else oof_mlp_probs
        return oof(X, y, n_classes, folds=folds, pca=LOGISTIC_PCA, seed=seed, train=train, strict=True)
    Z = standardize(X)
    if Z.shape[1] > MAX_FEATURES:
        Z = pca_transform(Z, min(MAX_FEATURES, l))
    return out_of_fold_probs(Z, y, n_classes, folds, seed, train, lambda n_train: _ShrinkageLDA(n_classes), strict=True)


class _ShrinkageLDA:
    """:func:`shrinkage_lda` as a model for :func:`lgcexp.issues.out_of_fold.out_of_fold_probs`."""

    def __init__(self, n_classes: int) -> None:
        self.n_classes = int(n_classes)
        self.classes_ = np.arange(self.n_classes)

    def fit(self, Z: np.ndarray, y: np.ndarray) -> "_ShrinkageLDA":
        self._Z, self._y = Z, y
        return self

    def predict_proba(self, Z: np.ndarray) -> np.ndarray:
        return shrinkage_lda(self._Z, self._y, Z, self.n_classes)


def combine_views(graph: np.ndarray, features: np.ndarray, floor: float = 1e-4) -> np.ndarray:
    """The two views' geometric mean, renormalised: ``sqrt((g + floor)(f + floor))`` per class (a product
    of experts; the floor keeps one view's zero from vetoing the other). Rows where the graph has no
    evidence stay zero."""
    g = np.asarray(graph, dtype=np.float64)
    f = np.asarray(features, dtype=np.float64)
    P = normalize_rows(np.sqrt((g + floor) * (f + floor)))
    P[~_has_evidence(g)] = 0.0
    return P


def nearest_rows(X_train: np.ndarray, X_query: np.ndarray, k: int, *, block_bytes: int = 256 << 20) -> np.ndarray:
    """(q, k): each query row's ``k`` nearest training rows by Euclidean distance, nearest first, equally distant
    rows in index order. Brute force, query rows in blocks of about ``block_bytes`` of distances (scikit-learn's
    ``euclidean_distances``, squared: ``|a|^2 + |b|^2 - 2 a.b`` by BLAS, exact on integer-valued X). The order of
    ties is the rule here, not the threads': scikit-learn's own k-NN search breaks ties by the order its threads
    meet the rows, so its lists differ with ``OMP_NUM_THREADS`` where X has equally distant points (digits'
    integer pixels: 15 of 899 queries between one and two threads)."""
    from sklearn.metrics.pairwise import euclidean_distances

    k = int(k)
    X_train = np.asarray(X_train, dtype=np.float64)
    X_query = np.asarray(X_query, dtype=np.float64)
    q, t = X_query.shape[0], X_train.shape[0]
    if k > t:
        raise ValueError(f"nearest_rows: k={k} is more than the {t} training rows")
    out = np.zeros((q, max(k, 0)), dtype=np.int64)
    if k <= 0 or not q:
        return out
    train_sq = np.einsum("ij,ij->i", X_train, X_train)[None, :]
    step = max(1, int(block_bytes) // (8 * max(t, 1)))
    for s in range(0, q, step):
        D = euclidean_distances(X_query[s:s + step], X_train, Y_norm_squared=train_sq, squared=True)
        part = np.argpartition(D, k - 1, axis=1)[:, :k]
        kth = np.take_along_axis(D, part, axis=1).max(axis=1)
        rows, cols = np.nonzero(D <= kth[:, None])  # the k nearest and every row tied with the k-th
        order = np.lexsort((cols, D[rows, cols], rows))  # by query row, then distance, then index
        rows, cols = rows[order], cols[order]
        rank = np.arange(rows.size) - np.searchsorted(rows, rows)
        out[s:s + step] = cols[rank < k].reshape(-1, k)
    return out


def knn_oof_probs(X: np.ndarray, y: np.ndarray, n_classes: int, *, k: int = 10, folds: int = 5,
                  seed: int = 0) -> np.ndarray:
    """Out-of-sample k-NN class frequencies (the baseline's predicted probabilities).

    The labelled points are split into ``folds`` folds (:func:`lgcexp.preprocess.fold_splits`, seeded with
    ``seed``); each point's
    distribution is the class share among its ``k`` nearest neighbours (Euclidean, on the features as
    given) in the other folds. Exact search by brute force (:func:`nearest_rows`: equally distant neighbours
    in index order, so the frequencies do not depend on the number of threads)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    l = y.size
    out = np.zeros((l, int(n_classes)))
    for train, test in fold_splits(l, folds, seed):
        kk = int(min(k, train.size))
        idx = nearest_rows(X[train], X[test], kk)
        votes = y[train][idx]
        for j in range(kk):
            np.add.at(out, (test, votes[:, j]), 1.0)
    return normalize_rows(out)


def knn_oof_from_neighbors(X: np.ndarray, neighbors: np.ndarray, y: np.ndarray, n_classes: int, *, k: int = 10,
                           folds: int = 5, seed: int = 0) -> np.ndarray:
    """:func:`knn_oof_probs` from neighbour lists computed once (they do not depend on the labels).

    ``neighbors`` (l, K): each point's nearest other points, nearest first (e.g. the exact search of
    :func:`lgcexp.graph.knn.exact_search` with K well above k; -1: none). On the folds of
    :func:`knn_oof_probs`, a point's k nearest among the other folds are the first k entries of its list
    outside its own fold; a point whose list holds fewer than k of them is searched by brute force among the
    other folds, as there. The same class frequencies where the lists order equally distant neighbours by index
    (:func:`lgcexp.graph.knn.exact_search` does) and the distances are exact (integer-valued X); on other data
    they may differ at a near-tie, where float32 and float64 distances round differently."""
    y = np.asarray(y, dtype=np.int64)
    nb = np.asarray(neighbors, dtype=np.int64)
    l = y.size
    out = np.zeros((l, int(n_classes)))
    fold = np.empty(l, dtype=np.int64)
    splits = list(fold_splits(l, folds, seed))
    for f, (_, te) in enumerate(splits):
        fold[te] = f
    for f, (train, te) in enumerate(splits):
        kk = int(min(k, train.size))
        L = nb[te]
        ok = (L >= 0) & (fold[np.maximum(L, 0)] != f)
        take = ok & (np.cumsum(ok, axis=1) <= kk)
        rows = np.broadcast_to(te[:, None], L.shape)
        np.add.at(out, (rows[take], y[L[take]]), 1.0)
        short = te[take.sum(axis=1) < kk]
        if short.size:
            out[short] = 0.0
            Xd = np.asarray(X, dtype=np.float64)
            idx = nearest_rows(Xd[train], Xd[short], kk)
            for j in range(kk):
                np.add.at(out, (short, y[train][idx[:, j]]), 1.0)
    return normalize_rows(out)


#: above this many bytes (the labelled rows as float64) the feature view's rows are first projected on
#: principal axes in bounded memory (:func:`project_rows`) instead of being copied whole
LARGE_VIEW_BYTES = 2 << 30


#: rows of the seeded sample that fits those axes
LARGE_VIEW_SAMPLE = 20_000


def project_rows(X: np.ndarray, rows: np.ndarray, p: int, seed: int = 0, sample: int = LARGE_VIEW_SAMPLE,
                 block: int = 16_384, standardize: bool = True) -> np.ndarray:
    """The rows ``rows`` of X, standardised (or, ``standardize=False``, only centred) and projected on their
    ``p`` leading principal axes, in bounded
    memory: per-feature means and deviations merged block by block over those rows
    (:func:`lgcexp.preprocess.column_moments`), the axes fitted on
    a seeded sample of ``sample`` of them (:func:`lgcexp.preprocess.pca_axes`), the rows projected
    block by block (float32 arithmetic, float64 result (len(rows), p)); X (e.g. a memory map) is never copied
    whole. The same projection as the in-memory path's standardisation + PCA up to the sampled fit."""
    rows = np.asarray(rows, dtype=np.int64)
    d = X.shape[1]
    mu, sd = column_moments(X, rows, block=block)
    sd = np.where(sd > 0, sd, 1.0) if standardize else np.ones(d)
    pick = np.sort(np.random.default_rng(seed).choice(rows, size=min(sample, rows.size), replace=False))
    centre, axes = pca_axes((np.asarray(X[pick], dtype=np.float64) - mu) / sd, int(min(p, d)))
    A = (axes / sd[:, None]).astype(np.float32)
    shift = ((mu / sd + centre) @ axes).astype(np.float32)
    out = np.empty((rows.size, A.shape[1]))
    for start in range(0, rows.size, block):
        out[start:start + block] = np.asarray(X[rows[start:start + block]], dtype=np.float32) @ A - shift
    return out


def view_rows(X: Any, labeled: np.ndarray, standardize: bool = True) -> np.ndarray | None:
    """The labelled rows of X for the feature view (None without X): float64 rows (a sparse X densified), or,
    above :data:`LARGE_VIEW_BYTES`, the rows projected block by block on :data:`LOGISTIC_PCA` principal axes
    (:func:`project_rows`; ``standardize``: per feature first, as the logistic and LDA views do, or only
    centred, as the network's input), so that a large or memory-mapped X is never copied whole."""
    if X is None:
        return None
    import scipy.sparse as sp

    labeled = np.asarray(labeled)
    if sp.issparse(X):
        return np.asarray(X[labeled].toarray(), dtype=np.float64)
    if labeled.size * X.shape[1] * 8 > LARGE_VIEW_BYTES and X.shape[1] > LOGISTIC_PCA:
        return project_rows(X, labeled, LOGISTIC_PCA, standardize=standardize)
    return np.asarray(X[labeled], dtype=np.float64)

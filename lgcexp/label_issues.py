"""Label issues: which given labels are wrong, and what they should be (docs/label_issues.md).

A method that can judge labels gives, for every labelled point, a class distribution built from the
evidence of the *other* labels (:class:`LabelJudgement`). Everything else is a pure function of that
distribution ``probs`` (l x c) and the given labels ``y`` (l,):

- :func:`label_quality`: ``probs[i, y_i]``, the share of the evidence that backs the given label: in
  [0, 1], higher = more trustworthy, the same meaning for every method;
- :func:`suggested_labels`: the class with the most evidence (``argmax``);
- :func:`feature_probs` and :func:`combine_views`: the *feature view*, a shrinkage LDA fitted out-of-fold
  on the labels the method's evidence keeps, combined with that evidence by a geometric mean where it
  agrees with the kept labels often enough (:func:`judge`);
- :func:`decide`: the decision ``is_label_issue`` by one of the cut rules (:data:`CUTS`), none of which
  needs clean labels: ``consensus`` (default: the method's evidence and the combined view both prefer
  another class), ``suggested`` (the suggested label differs from the given one), confident learning
  (:func:`confident_learning`: per-class thresholds on ``probs``), a fixed ``threshold`` on the quality,
  or the method's own decision (``method``: AutoL's omega <= 0);
- :func:`detection_metrics`: how well quality and decision find the flipped labels (when known);
- :func:`issues_frame`: ``label_issues.csv``, one row per labelled point, most suspicious first.

Baselines, on the same labelled points and labels: :func:`graph_loo_probs` (the graph's leave-one-out
class distribution, no learning: the rows of ``P_LL`` without the diagonal, times the one-hot labels) and
:func:`knn_oof_probs` (out-of-sample k-NN class frequencies on the features, k-fold), each with any cut,
confident learning being the usual one for the latter.

Python entry point without Hydra: :func:`lgcexp.find_issues.find_label_issues` (a layer above this module
and the algorithms, which import it for their judgements).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is made: config checks (lgcexp.config) need none of it
    import pandas as pd

from .out_of_fold import (  # noqa: F401
    _standardize,
    fold_splits,
    mlp_epochs,
    oof_logistic_probs,
    oof_mlp_probs,
    out_of_fold_probs,
)
from .params import Boolean, Configurable, Interval, Options

__all__ = [
    "ISSUES_FILE", "CUTS", "CL_FILTERS", "LabelJudgement", "DetectOptions", "normalize_rows", "label_quality",
    "suggested_labels", "graph_loo_probs", "shrinkage_lda", "feature_probs", "oof_logistic_probs", "combine_views",
    "issue_probability",
    "confident_thresholds", "confident_joint", "calibrated_counts", "estimate_issues", "confident_learning", "decide",
    "knn_oof_probs", "detection_metrics", "issues_frame",
    "JudgedLabels", "judge", "judge_labels", "judge_run", "view_rows", "run_metrics", "run_frame",
]

ISSUES_FILE = "label_issues.csv"
#: the confident-learning filters (Northcutt et al. 2021, section 3.2)
CL_FILTERS = ("prune_by_noise_rate", "prune_by_class", "both", "confident_joint")
#: decision rules: ``consensus`` (default), ``suggested``, confident learning (each filter), ``threshold``,
#: ``method``
CUTS = ("consensus", "suggested", *CL_FILTERS, "threshold", "method")
#: the columns of label_issues.csv, in order (``is_flipped`` only where clean labels are known)
COLUMNS = ("index", "given_label", "suggested_label", "label_quality", "issue_probability", "is_label_issue",
           "is_flipped")


# --------------------------------------------------------------------------------------------------------
# What a method hands over
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LabelJudgement:
    """A method's judgement of its labelled points.

    ``probs`` (l, c): for each labelled point, its class distribution from the evidence of the other
    labels (rows sum to 1; a row of zeros where there is no evidence: such a label keeps quality 1 and is
    never flagged). ``decision``: the method's own yes/no verdict, used by ``cut=method`` (None: the method
    has none of its own). ``source``: a short description of ``probs`` for the record.
    """

    probs: np.ndarray
    decision: np.ndarray | None = None
    source: str = ""
    extra: dict[str, np.ndarray] = field(default_factory=dict)


class DetectOptions(Configurable):
    """The ``detect`` section of the config: how a judging method's evidence becomes ``label_issues.csv``.

    ``features`` (default true): add the *feature view* where the points have features: a model fitted
    out-of-fold on the labels the method's own evidence keeps (:func:`feature_probs`; its model by the
    labelled share, :func:`choose_feature_model`: a shrinkage LDA for a few sampled labels, the out-of-fold
    network where most points are labelled). It is used
    only when it agrees with those kept labels (out-of-fold) at least ``min_agreement`` of the time (a
    weak feature model would only blur the graph's evidence); the reported distribution is then the
    geometric mean of the two views (:func:`combine_views`), else the method's evidence alone. ``folds``:
    folds of the feature view. ``cut``: one of :data:`CUTS`:

    - ``consensus`` (default): flagged where the method's evidence *and* the reported distribution both
      prefer another class (without the feature view: the same as ``suggested``);
    - ``suggested``: flagged where the reported distribution prefers another class;
    - ``prune_by_noise_rate``, ``prune_by_class``, ``both``, ``confident_joint``: confident learning on the
      reported distribution (:func:`confident_learning`; ``min_per_class`` labels of each class are kept);
    - ``threshold``: flagged where the quality is below ``threshold``;
    - ``method``: the method's own verdict (AutoL: omega <= 0; SIIS: corrected labels).
    """

    name = "detect"
    config_prefix = "detect."
    _parameter_constraints = {
        "cut": [Options(CUTS)],
        "features": [Boolean()],
        "folds": [Interval("int", 2, None)],
        "min_agreement": [Interval("real", 0, 1, "both")],
        "threshold": [Interval("real", 0, 1, "both")],
        "min_per_class": [Interval("int", 0, None)],
    }

    def __init__(self, cut: str = "consensus", features: bool = True, folds: int = 5, min_agreement: float = 0.8,
                 threshold: float = 0.5, min_per_class: int = 1):
        self.cut = cut
        self.features = features
        self.folds = folds
        self.min_agreement = min_agreement
        self.threshold = threshold
        self.min_per_class = min_per_class

    @classmethod
    def _owner(cls) -> str:
        return "detect"


# --------------------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------------------


def normalize_rows(V: np.ndarray) -> np.ndarray:
    """Rows divided by their sums (non-negative input); a row summing to 0 stays 0."""
    V = np.asarray(V, dtype=np.float64)
    s = V.sum(axis=1, keepdims=True)
    out = np.zeros_like(V)
    np.divide(V, s, out=out, where=s > 0)
    return out


def _has_evidence(probs: np.ndarray) -> np.ndarray:
    return np.asarray(probs).sum(axis=1) > 0


def label_quality(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``probs[i, y_i]``: the share of the evidence for the given label, in [0, 1]; 1 where a row has no
    evidence (nothing speaks against the label)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    q = probs[np.arange(y.size), y] if y.size else np.zeros(0)
    return np.clip(np.where(_has_evidence(probs), q, 1.0), 0.0, 1.0)


def suggested_labels(probs: np.ndarray, y: np.ndarray) -> np.ndarray:
    """The class with the most evidence; the given label where a row has no evidence or where the given
    label ties with the best class."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return y.copy()
    best = probs.argmax(axis=1)
    keep = ~_has_evidence(probs) | (probs[np.arange(y.size), y] >= probs[np.arange(y.size), best])
    return np.where(keep, y, best)


def graph_loo_probs(P_LL: np.ndarray, y: np.ndarray, n_classes: int, weights: np.ndarray | None = None) -> np.ndarray:
    """The graph's leave-one-out class distribution of every labelled point, with no learning.

    ``P_LL`` (l x l): the labelled block of the propagation matrix ``(1 - alpha)(I - alpha S)^-1`` (any
    positive scale). Without its diagonal (a label's influence on itself), row i of ``P~ diag(w) B`` holds
    how much each class's labels (weighted by ``weights``, default 1) reach point i; rows are normalised to
    sum to 1. This is LGC's prediction at a labelled point with that point's own label left out."""
    P = np.array(P_LL, dtype=np.float64, copy=True)
    np.fill_diagonal(P, 0.0)
    y = np.asarray(y, dtype=np.int64)
    w = np.ones(y.size) if weights is None else np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    V = np.zeros((y.size, int(n_classes)))
    for k in range(int(n_classes)):  # P~ @ (w * B) without forming B
        m = y == k
        if m.any():
            V[:, k] = P[:, m] @ w[m]
    return normalize_rows(np.maximum(V, 0.0))


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
FEATURE_MODELS = ("lda", "logistic", "mlp")
#: principal axes the logistic and mlp feature views project on first (where there are more features)
LOGISTIC_PCA = 50
#: the feature view's model where at least this share of the points is labelled (a fully labelled data
#: set; :func:`choose_feature_model`); below it, the shrinkage LDA of the paper's protocol
FULL_LABELLED_SHARE = 0.5


def choose_feature_model(n_labeled: int, n: int) -> str:
    """``mlp`` (:func:`oof_mlp_probs`) where at least :data:`FULL_LABELLED_SHARE` of the points are labelled,
    else ``lda`` (chosen against ``logistic`` on ``idn`` and ``confusion`` noise with every point labelled,
    digits, ISOLET and MNIST: docs/label_issues.md#realistic)."""
    return "mlp" if n and n_labeled >= FULL_LABELLED_SHARE * n else "lda"


def feature_probs(X: np.ndarray, y: np.ndarray, n_classes: int, train: np.ndarray | None = None, *,
                  folds: int = 5, seed: int = 0, model: str = "lda") -> np.ndarray | None:
    """Out-of-fold class probabilities from the features alone (the *feature view*).

    A linear discriminant analysis with a Ledoit-Wolf shrunk covariance (:func:`shrinkage_lda`) on the
    standardised features of the labelled points; each point's probabilities come from the model fitted on
    the other folds (``folds`` stratified folds, shuffled with ``seed``), using only the labels in ``train``
    (default: all), so a label the graph rejects never teaches the model. Above :data:`MAX_FEATURES`
    features the rows are first projected on their leading principal axes. Returns None where it cannot be
    fitted (a fold whose training labels hold fewer than two classes). ``model="logistic"``: a multinomial
    logistic regression instead (:func:`oof_logistic_probs`, on :data:`LOGISTIC_PCA` principal axes), on the
    same folds and training labels; ``model="mlp"``: a small neural network on the same axes
    (:func:`oof_mlp_probs`)."""

    y = np.asarray(y, dtype=np.int64)
    l = y.size
    if model in ("logistic", "mlp"):
        oof = oof_logistic_probs if model == "logistic" else oof_mlp_probs
        return oof(X, y, n_classes, folds=folds, pca=LOGISTIC_PCA, seed=seed, train=train, strict=True)
    Z = _standardize(X)
    if Z.shape[1] > MAX_FEATURES:
        from sklearn.decomposition import PCA

        Z = PCA(n_components=min(MAX_FEATURES, l), svd_solver="randomized", random_state=seed).fit_transform(Z)
    return out_of_fold_probs(Z, y, n_classes, folds, seed, train, lambda n_train: _ShrinkageLDA(n_classes), strict=True)


class _ShrinkageLDA:
    """:func:`shrinkage_lda` as a model for :func:`lgcexp.out_of_fold.out_of_fold_probs`."""

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


def knn_oof_probs(X: np.ndarray, y: np.ndarray, n_classes: int, *, k: int = 10, folds: int = 5,
                  seed: int = 0) -> np.ndarray:
    """Out-of-sample k-NN class frequencies (the baseline's predicted probabilities).

    The labelled points are split into ``folds`` stratified folds (shuffled with ``seed``); each point's
    distribution is the class share among its ``k`` nearest neighbours (Euclidean, on the features as
    given) in the other folds. Exact search (scikit-learn, brute force)."""
    from sklearn.neighbors import NearestNeighbors

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    l = y.size
    out = np.zeros((l, int(n_classes)))
    for train, test in fold_splits(y, n_classes, folds, seed):
        kk = int(min(k, train.size))
        nn = NearestNeighbors(n_neighbors=kk, algorithm="brute").fit(X[train])
        idx = nn.kneighbors(X[test], return_distance=False)
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
    other folds, as there. The same class frequencies, up to the order of equally distant neighbours."""
    y = np.asarray(y, dtype=np.int64)
    nb = np.asarray(neighbors, dtype=np.int64)
    l = y.size
    out = np.zeros((l, int(n_classes)))
    fold = np.empty(l, dtype=np.int64)
    splits = list(fold_splits(y, n_classes, folds, seed))
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
            from sklearn.neighbors import NearestNeighbors

            out[short] = 0.0
            nn = NearestNeighbors(n_neighbors=kk, algorithm="brute").fit(np.asarray(X, dtype=np.float64)[train])
            idx = nn.kneighbors(np.asarray(X, dtype=np.float64)[short], return_distance=False)
            for j in range(kk):
                np.add.at(out, (short, y[train][idx[:, j]]), 1.0)
    return normalize_rows(out)


# --------------------------------------------------------------------------------------------------------
# Cuts
# --------------------------------------------------------------------------------------------------------


def confident_thresholds(probs: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """Per-class thresholds ``t_j``: the mean of ``probs[:, j]`` over the points labelled j (confident
    learning's "expected self-confidence"); 1 for a class nobody is labelled with (never reached)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    t = np.ones(int(n_classes))
    for j in range(int(n_classes)):
        m = y == j
        if m.any():
            t[j] = probs[m, j].mean()
    return t


def confident_joint(probs: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Confident learning's count matrix ``C[given, true]`` and each point's confident class (-1: none).

    A point is counted where at least one class reaches its threshold (``probs[:, j] >= t_j``); its
    confident class is the most likely of those. Returns (C, confident class)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    c = int(n_classes)
    t = confident_thresholds(probs, y, c)
    above = probs >= t[None, :] - 1e-12
    masked = np.where(above, probs, -np.inf)
    guess = np.where(above.any(axis=1), masked.argmax(axis=1) if y.size else 0, -1)
    C = np.zeros((c, c), dtype=np.int64)
    ok = guess >= 0
    np.add.at(C, (y[ok], guess[ok]), 1)
    return C, guess


def estimate_issues(probs: np.ndarray, y: np.ndarray) -> int:
    """Confident learning's estimate of the number of wrong labels: the off-diagonal sum of the calibrated
    confident joint (:func:`calibrated_counts`), from the distribution ``probs`` alone (no clean labels)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if not y.size:
        return 0
    C, _ = confident_joint(probs, y, probs.shape[1])
    N = calibrated_counts(C, y)
    return int(N.sum() - np.trace(N))


def issue_probability(views: Sequence[np.ndarray], y: np.ndarray, prior: np.ndarray | None = None,
                      floor: float = 1e-4) -> np.ndarray:
    """How sure each flag is: the probability that the given label is wrong, in [0, 1].

    ``views``: one or more class distributions of the labelled points (l x c each), each made without the
    point's own label (the method's leave-one-out evidence; the out-of-fold feature view). Read as
    conditionally independent experts, their posterior is the product of the views divided by the class
    prior once per extra view, ``P(j | views) ∝ prod_v (p_vj + floor) / prior_j^(V-1)`` (``prior``: the
    label fractions by default; with one view it is that view), and the probability of a wrong label is
    ``1 - P(y_i | views)``. The geometric mean that ranks the labels (:func:`combine_views`) is this
    posterior at temperature V. Rows where the first view has no evidence get 0. The sum over the labels
    estimates how many are wrong; docs/label_issues.md#probability measures both against the truth."""
    y = np.asarray(y, dtype=np.int64)
    views = [np.asarray(v, dtype=np.float64) for v in views]
    out = np.zeros(y.size)
    if not y.size or not views:
        return out
    c = views[0].shape[1]
    if len(views) == 1:
        P = normalize_rows(views[0])
    else:
        pi = (np.bincount(y, minlength=c) / y.size) if prior is None else np.asarray(prior, dtype=np.float64)
        logp = sum(np.log(v + floor) for v in views) - (len(views) - 1) * np.log(np.maximum(pi, floor))[None, :]
        logp -= logp.max(axis=1, keepdims=True)
        P = normalize_rows(np.exp(logp))
    out = 1.0 - P[np.arange(y.size), y]
    out[~_has_evidence(views[0])] = 0.0
    return np.clip(out, 0.0, 1.0)


def _round_rows(M: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Integers per cell whose row sums are ``totals``: each cell's floor, plus one for the cells with the
    largest remainders (largest-remainder rounding, row by row)."""
    F = np.floor(M).astype(np.int64)
    rem = M - F
    for i in range(M.shape[0]):
        extra = int(round(float(totals[i]))) - int(F[i].sum())
        if extra > 0:
            F[i, np.argsort(-rem[i], kind="stable")[:extra]] += 1
    return F


def calibrated_counts(C: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Confident learning's calibration of the confident joint, as integer counts: each class keeps at
    least one confident point of its own (diagonal >= 1), each row is scaled to the number of points given
    that label and rounded preserving that number (so ``counts[i, j] = l Q[i, j]``, Q the estimated joint
    distribution of given and true labels)."""
    C = np.array(C, dtype=np.float64)
    np.fill_diagonal(C, np.maximum(np.diag(C), 1.0))
    counts = np.bincount(y, minlength=C.shape[0]).astype(np.float64)
    Ct = C * (counts / C.sum(axis=1))[:, None]
    return _round_rows(Ct, counts)


def confident_learning(probs: np.ndarray, y: np.ndarray, n_classes: int | None = None, *,
                       filter_by: str = "prune_by_noise_rate", min_per_class: int = 1) -> np.ndarray:
    """Confident learning (Northcutt, Jiang & Chuang 2021, JAIR 70): which labels to prune.

    ``t_j`` = mean ``probs[:, j]`` over points labelled j; ``C[i, j]`` counts points labelled i whose most
    likely class among those reaching their threshold is j; ``N`` = C calibrated (:func:`calibrated_counts`:
    row i scaled to the number of points labelled i, rounded preserving it). Then:

    - ``confident_joint``: the off-diagonal entries of C (a point labelled i counted under j != i);
    - ``prune_by_noise_rate``: for every i != j, the ``N[i, j]`` points labelled i with the largest margin
      ``probs[:, j] - probs[:, i]`` (chosen for each j independently: a point may be chosen for two);
    - ``prune_by_class``: for every class i, the ``sum_{j != i} N[i, j]`` points labelled i with the lowest
      ``probs[:, i]``;
    - ``both``: flagged by both prunings.

    In every filter a point whose given label is its most likely class is not flagged; the two prunings
    never plan to remove so many labels of a class that fewer than ``min_per_class`` remain (the counts
    are scaled down). Written from the paper (cleanlab, AGPL, is not used; ``tests/test_label_issues.py``
    compares with it where it is installed)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    c = int(probs.shape[1] if n_classes is None else n_classes)
    l = y.size
    flag = np.zeros(l, dtype=bool)
    if l == 0:
        return flag
    if filter_by not in CL_FILTERS:
        raise ValueError(f"filter_by={filter_by!r}: choose one of {', '.join(CL_FILTERS)}")
    C, guess = confident_joint(probs, y, c)
    if filter_by == "confident_joint":
        flag = (guess >= 0) & (guess != y)
    else:
        N = calibrated_counts(C, y)
        by_rate = np.zeros(l, dtype=bool)
        by_class = np.zeros(l, dtype=bool)
        for i in range(c):
            members = np.flatnonzero(y == i)
            if not members.size:
                continue
            off = N[i].copy()
            off[i] = 0
            budget = max(0, members.size - int(min_per_class))
            if off.sum() > budget:
                off = np.floor(off * budget / off.sum()).astype(np.int64)
            if filter_by in ("prune_by_noise_rate", "both"):
                for j in np.flatnonzero(off > 0):
                    margin = probs[members, j] - probs[members, i]
                    by_rate[members[np.argsort(-margin, kind="stable")[:off[j]]]] = True
            if filter_by in ("prune_by_class", "both") and off.sum() > 0:
                by_class[members[np.argsort(probs[members, i], kind="stable")[:off.sum()]]] = True
        flag = by_rate if filter_by == "prune_by_noise_rate" else by_class if filter_by == "prune_by_class" \
            else by_rate & by_class
    # never flag a label that is its point's most likely class
    flag &= suggested_labels(probs, y) != y
    return flag


def decide(probs: np.ndarray, y: np.ndarray, cut: str = "suggested", *, threshold: float = 0.5,
           decision: np.ndarray | None = None, min_per_class: int = 1,
           evidence: np.ndarray | None = None) -> np.ndarray:
    """``is_label_issue`` by the rule ``cut`` (:data:`CUTS`); none uses clean labels.

    ``suggested``: the suggested label differs from the given one; ``consensus``: that, and the same in
    the method's own ``evidence`` (l x c; default ``probs``); a confident-learning filter
    (:func:`confident_learning`); ``threshold``: quality below ``threshold``; ``method``: the method's own
    ``decision`` (refused when it has none)."""
    probs = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    if cut == "suggested":
        return suggested_labels(probs, y) != y
    if cut == "consensus":
        own = suggested_labels(probs if evidence is None else evidence, y) != y
        return own & (suggested_labels(probs, y) != y)
    if cut in CL_FILTERS:
        return confident_learning(probs, y, probs.shape[1], filter_by=cut, min_per_class=min_per_class)
    if cut == "threshold":
        return label_quality(probs, y) < float(threshold)
    if cut == "method":
        if decision is None:
            raise ValueError("cut='method': this method makes no decision of its own")
        return np.asarray(decision, dtype=bool).copy()
    raise ValueError(f"cut={cut!r}: choose one of {', '.join(CUTS)}")


# --------------------------------------------------------------------------------------------------------
# Metrics and the table
# --------------------------------------------------------------------------------------------------------


def detection_metrics(quality: np.ndarray, is_issue: np.ndarray, flipped: np.ndarray,
                      suggested: np.ndarray | None = None, y_clean: np.ndarray | None = None) -> dict[str, Any]:
    """How well a judgement finds the flipped labels (``flipped``: the truth, over the scored points).

    From the quality (ranking; lower = more suspicious): ``detect_auc`` (ROC AUC; None when only one kind
    of label is present), ``detect_ap`` (average precision; None without flips), ``detect_precision_at_k``
    (share of flips among the k labels of lowest quality, k = the number of flips; ties in index order;
    None without flips). From the decision: ``detect_precision``, ``detect_recall``, ``detect_f1`` (0, not
    NaN, when nothing is flagged or nothing is flipped, as scikit-learn's ``zero_division=0``),
    ``n_label_issues`` and ``detect_false_alarms`` (clean labels flagged) with ``detect_false_alarm_rate``
    (over all scored labels). From the suggestion: ``detect_suggest_acc``, the share of flipped labels whose
    suggested label is the clean one (None without flips)."""
    q = np.asarray(quality, dtype=np.float64)
    d = np.asarray(is_issue, dtype=bool)
    f = np.asarray(flipped, dtype=bool)
    n, k = f.size, int(f.sum())
    tp = int(np.sum(d & f))
    fp = int(np.sum(d & ~f))
    fn = k - tp
    out: dict[str, Any] = {}
    out["detect_precision"] = tp / (tp + fp) if tp + fp else 0.0
    out["detect_recall"] = tp / k if k else 0.0
    out["detect_f1"] = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0
    out["detect_auc"] = None
    out["detect_ap"] = None
    out["detect_precision_at_k"] = None
    if 0 < k < n:
        from sklearn.metrics import roc_auc_score

        out["detect_auc"] = float(roc_auc_score(f, -q))
    if k:
        from sklearn.metrics import average_precision_score

        out["detect_ap"] = float(average_precision_score(f, -q)) if k < n else 1.0
        order = np.argsort(q, kind="stable")
        out["detect_precision_at_k"] = float(f[order[:k]].mean())
    out["n_label_issues"] = int(d.sum())
    out["detect_false_alarms"] = fp
    out["detect_false_alarm_rate"] = fp / n if n else 0.0
    out["detect_suggest_acc"] = None
    if suggested is not None and y_clean is not None and k:
        s = np.asarray(suggested)
        out["detect_suggest_acc"] = float(np.mean(s[f] == np.asarray(y_clean)[f]))
    return {key: (float(v) if isinstance(v, (float, np.floating)) else v) for key, v in out.items()}


def issues_frame(index: np.ndarray, given: np.ndarray, suggested: np.ndarray, quality: np.ndarray,
                 is_issue: np.ndarray, flipped: np.ndarray | None = None,
                 probability: np.ndarray | None = None) -> pd.DataFrame:
    """``label_issues.csv`` as a DataFrame: one row per labelled point, the flagged labels first, each group
    by increasing quality (most suspicious first), ties by index. ``flipped``: None where no clean label is
    known (the column is left out); an object array with None where only some are. ``probability``: each
    label's probability of being wrong (column ``issue_probability`` after ``label_quality``; None: left
    out)."""
    cols: dict[str, Any] = {
        "index": np.asarray(index),
        "given_label": np.asarray(given),
        "suggested_label": np.asarray(suggested),
        "label_quality": np.asarray(quality, dtype=np.float64),
    }
    if probability is not None:
        cols["issue_probability"] = np.asarray(probability, dtype=np.float64)
    cols["is_label_issue"] = np.asarray(is_issue, dtype=bool)
    if flipped is not None:
        cols["is_flipped"] = np.asarray(flipped)
    import pandas as pd

    df = pd.DataFrame(cols)
    order = np.lexsort((np.asarray(index), cols["label_quality"], ~cols["is_label_issue"]))
    return df.iloc[order].reset_index(drop=True)


@dataclass(frozen=True)
class JudgedLabels:
    """The outcome of :func:`judge` on the labelled points (in the order of the labelled set): ``probs``
    the reported distribution, ``quality``, ``suggested``, ``is_issue``, the ``cut`` applied, the
    judgement's ``source``, whether the feature view took part (``features``) and its out-of-fold agreement
    with the labels the method keeps (``feature_agreement``; None where it was not fitted), confident
    learning's estimate of the number of wrong labels (``estimated_issues``), each label's probability of
    being wrong (``issue_probability``, :func:`issue_probability` over the views that took part) and the
    feature view's out-of-fold distribution (``feature_view``; None where it was not fitted)."""

    probs: np.ndarray
    quality: np.ndarray
    suggested: np.ndarray
    is_issue: np.ndarray
    cut: str
    source: str
    features: bool
    feature_agreement: float | None = None
    estimated_issues: int | None = None
    issue_probability: np.ndarray | None = None
    feature_model: str | None = None
    feature_view: np.ndarray | None = None

    @property
    def expected_issues(self) -> float | None:
        """The expected number of wrong labels: the sum of :attr:`issue_probability`."""
        return None if self.issue_probability is None else float(np.sum(self.issue_probability))


def _options(options: DetectOptions | Mapping[str, Any] | None) -> DetectOptions:
    if options is None:
        return DetectOptions()
    if isinstance(options, DetectOptions):
        return options
    return DetectOptions(**dict(options))


def judge(judgement: LabelJudgement | None, y: np.ndarray, options: DetectOptions | Mapping[str, Any] | None = None,
          X: np.ndarray | None = None, feature_model: str = "lda") -> JudgedLabels | None:
    """Quality, suggestion and decision from a method's judgement under the ``detect`` options (None when
    the method does not judge labels). ``X``: the features of the labelled points (same order as ``y``), for
    the feature view; None (or ``features=false``) leaves it out; ``feature_model``: its model
    (:data:`FEATURE_MODELS`; the callers pick it by :func:`choose_feature_model`). ``cut=method`` falls back to
    ``consensus`` for a method that has no verdict of its own (logged)."""
    if judgement is None:
        return None
    opts = _options(options)
    y = np.asarray(y, dtype=np.int64)
    evidence = np.asarray(judgement.probs, dtype=np.float64)
    n_classes = evidence.shape[1]
    probs, used, agreement, fp = evidence, False, None, None
    views = [evidence]
    if opts.features and X is not None and y.size:
        own_issue = suggested_labels(evidence, y) != y
        fp = feature_probs(X, y, n_classes, ~own_issue, folds=opts.folds, model=feature_model)
        if fp is not None and (~own_issue).any():
            agreement = float(np.mean(fp.argmax(axis=1)[~own_issue] == y[~own_issue]))
            if agreement >= opts.min_agreement:
                probs, used = combine_views(evidence, fp), True
                views.append(fp)
    cut = opts.cut
    if cut == "method" and judgement.decision is None:
        import logging

        logging.getLogger("lgcexp").warning("detect.cut=method: this method makes no decision of its own; "
                                            "using detect.cut=consensus")
        cut = "consensus"
    is_issue = decide(probs, y, cut, threshold=opts.threshold, decision=judgement.decision,
                      min_per_class=opts.min_per_class, evidence=evidence)
    return JudgedLabels(probs=probs, quality=label_quality(probs, y), suggested=suggested_labels(probs, y),
                        is_issue=is_issue, cut=cut, source=judgement.source, features=used,
                        feature_agreement=agreement, estimated_issues=estimate_issues(probs, y),
                        issue_probability=issue_probability(views, y), feature_model=feature_model if used else None,
                        feature_view=fp)


#: above this many bytes (the labelled rows as float64) the feature view's rows are first projected on
#: principal axes in bounded memory (:func:`project_rows`) instead of being copied whole
LARGE_VIEW_BYTES = 2 << 30
#: rows of the seeded sample that fits those axes
LARGE_VIEW_SAMPLE = 20_000


def project_rows(X: np.ndarray, rows: np.ndarray, p: int, seed: int = 0, sample: int = LARGE_VIEW_SAMPLE,
                 block: int = 16_384, standardize: bool = True) -> np.ndarray:
    """The rows ``rows`` of X, standardised (or, ``standardize=False``, only centred) and projected on their
    ``p`` leading principal axes, in bounded
    memory: per-feature means and deviations accumulated block by block over those rows, the axes fitted on
    a seeded sample of ``sample`` of them (:func:`lgcexp.graph.knn_approx.pca_axes`), the rows projected
    block by block (float32 arithmetic, float64 result (len(rows), p)); X (e.g. a memory map) is never copied
    whole. The same projection as the in-memory path's standardisation + PCA up to the sampled fit."""
    from .graph.knn_approx import pca_axes

    rows = np.asarray(rows, dtype=np.int64)
    d = X.shape[1]
    total, squares = np.zeros(d), np.zeros(d)
    for start in range(0, rows.size, block):
        B = np.asarray(X[rows[start:start + block]], dtype=np.float64)
        total += B.sum(axis=0)
        squares += (B * B).sum(axis=0)
    mu = total / max(rows.size, 1)
    sd = np.sqrt(np.maximum(squares / max(rows.size, 1) - mu * mu, 0.0))
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


def judge_labels(judgement: LabelJudgement | None, labeled: np.ndarray, y: np.ndarray, n: int,
                 options: DetectOptions | Mapping[str, Any] | None = None, X: Any = None) -> JudgedLabels | None:
    """:func:`judge` of a method's judgement of the ``labeled`` points among ``n`` (the one entry of the
    command, the estimators and :func:`lgcexp.find_issues.find_label_issues`): the feature view reads the
    labelled rows of ``X`` (all the data's features, or None) through :func:`view_rows` (a large or
    memory-mapped X is never copied whole) and its model is chosen by the labelled share
    (:func:`choose_feature_model`)."""
    if judgement is None:
        return None
    opts = _options(options)
    model = choose_feature_model(len(labeled), n)
    Xl = view_rows(X, labeled, standardize=model != "mlp") if opts.features else None
    return judge(judgement, y, opts, X=Xl, feature_model=model)


def judge_run(algorithm: Any, split: Any, options: DetectOptions | Mapping[str, Any] | None = None,
              X: np.ndarray | None = None) -> JudgedLabels | None:
    """:func:`judge_labels` for a fitted algorithm on a run's labelled set (``X``: all the data's features, or
    None)."""
    n = len(split.labeled) if X is None else int(X.shape[0])
    return judge_labels(algorithm.label_judgement(), np.asarray(split.labeled), split.y_observed, n, options, X)


def run_metrics(judged: JudgedLabels | None, split: Any) -> dict[str, Any]:
    """The detection metrics of a run (``result.json``) over the labelled points with a known clean label;
    empty when the method does not judge labels or no clean label is known."""
    if judged is None:
        return {}
    known = np.asarray(split.y_clean) >= 0
    out: dict[str, Any] = {"detect_cut": judged.cut, "detect_features": judged.features,
                           "detect_feature_agreement": judged.feature_agreement, "detect_source": judged.source,
                           "detect_estimated_issues": judged.estimated_issues,
                           "detect_expected_issues": judged.expected_issues,
                           "detect_feature_model": judged.feature_model,
                           "n_label_issues": int(judged.is_issue.sum())}
    if known.any():
        out.update(detection_metrics(judged.quality[known], judged.is_issue[known], split.flipped[known],
                                     judged.suggested[known], split.y_clean[known]))
    return out


def run_frame(judged: JudgedLabels, split: Any, label_values: np.ndarray | None = None) -> pd.DataFrame:
    """``label_issues.csv`` of a run; ``label_values``: the file's label values (class k is
    ``label_values[k]``) for a diagnosis run, else the class numbers are written."""
    known = np.asarray(split.y_clean) >= 0
    flipped: np.ndarray | None = None
    if known.all():
        flipped = np.asarray(split.flipped, dtype=bool)
    elif known.any():
        flipped = np.full(split.labeled.size, None, dtype=object)
        flipped[known] = split.flipped[known]

    def values(k: np.ndarray) -> np.ndarray:
        return np.asarray(k) if label_values is None else np.asarray(label_values)[np.asarray(k)]

    return issues_frame(split.labeled, values(split.y_observed), values(judged.suggested), judged.quality,
                        judged.is_issue, flipped, judged.issue_probability)

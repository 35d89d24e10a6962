"""``find_label_issues``: which given labels look wrong, from Python without Hydra (docs/label_issues.md).

A thin front end over the command's stages: the graph (the kNN graph of X, or the user's matrix through the
one rule of ``graph=precomputed``), the eigenpairs, the fit and the judgement all run in
:func:`lgcexp.stages.fit_on_graph`; a user's ``pred_probs`` are a view of their own
(:mod:`lgcexp.issues.pred_probs`). No input array is modified.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .frames import issues_frame
from .judge import judge
from .judgement import LabelJudgement
from .options import DetectOptions
from .views import knn_oof_probs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BASELINE_METHODS", "METRICS", "default_method", "find_label_issues"]


#: ``method`` values of :func:`find_label_issues` besides the registered algorithms that judge labels
BASELINE_METHODS = ("knn",)

#: ``metric`` values of :func:`find_label_issues`: how the neighbours of X are found
METRICS = ("euclidean", "cosine")


def _judging() -> str:
    """The registered methods that judge their labels, for messages."""
    from ..algorithms import method_names

    return method_names("judging")


def default_method(n_labeled: int, n: int) -> str:
    """The judging method when none is named: ``lgc`` where at least
    :data:`lgcexp.issues.views.FULL_LABELLED_SHARE` of the points are labelled (measured on realistic noise
    with every point labelled, docs/label_issues.md#realistic: as good as AutoL's or better, and several
    times faster) or above :data:`lgcexp.algorithms.propagation.DENSE_MAX_LABELS` labels; ``autoL`` otherwise
    (the paper's setting: a few sampled labels, where its learnt weights win)."""
    from ..algorithms.propagation import DENSE_MAX_LABELS
    from .views import FULL_LABELLED_SHARE

    if n_labeled > DENSE_MAX_LABELS or (n and n_labeled >= FULL_LABELLED_SHARE * n):
        return "lgc"
    return "autoL"


def _builder(X: Any, graph: Any, n: int, k: int, sigma: float | str) -> tuple[Any, dict[str, Any]]:
    """The graph stage's builder and its build options: ``graph`` (a matrix or a :class:`lgcexp.graph.Graph`)
    through the rule of ``graph=precomputed`` (:class:`PrecomputedGraph`, self-loops dropped; checked here,
    before any work, each refusal naming ``graph``), or the exact kNN graph of ``X``."""
    from ..errors import UserError
    from ..graph import Graph

    if graph is not None:
        from ..graph.precomputed import PrecomputedGraph

        builder = PrecomputedGraph(diagonal="drop")
        W = builder.check_argument(graph.W if isinstance(graph, Graph) else graph, n, "graph")
        lonely = int((np.asarray(W.sum(axis=1)).ravel() <= 0).sum())
        if lonely:
            raise UserError(f"graph: {lonely} point(s) have no neighbour; every point needs an edge")
        return builder, {"adjacency": W}
    if X is None:
        raise UserError("find_label_issues: give X (features), graph (an affinity matrix) or pred_probs")
    from ..graph.knn import KnnGraph

    builder = KnnGraph(k=k, sigma=sigma)
    builder._validate_params("")
    builder.check_data(n, 0, "")
    return builder, {}


def _features(X: Any, n: int, image_shape: Any = None) -> tuple[Any, Any]:
    """X checked (2-D, finite, n rows; never copied or modified) and the images' shape — ``image_shape`` as
    given, or X's own for images given as an (n, h, w) or (n, h, w, channels) array, which is read as rows of
    flattened images (a view, not a copy) —, or a one-line refusal naming ``X`` or ``image_shape``."""
    import scipy.sparse as sp

    from ..data.dataset import check_features, image_rows
    from ..errors import UserError

    if sp.issparse(X):
        raise UserError("X: a scipy sparse matrix is not allowed; give dense features (X.toarray() where it "
                        "fits) or the affinity matrix as graph=")
    X, image_shape = image_rows(X, image_shape)
    X = check_features(X, "X")
    if X.shape[0] != n:
        raise UserError(f"X has {X.shape[0]} rows but labels has {n} values; they must be equal")
    return X, image_shape


def find_label_issues(X: np.ndarray | None = None, labels: Any = None, *, pred_probs: Any = None,
                      graph: Any = None, method: str | None = None, params: Mapping[str, Any] | None = None,
                      cut: str | None = None, features: bool = True, folds: int = 5, min_agreement: float = 0.8,
                      threshold: float = 0.5, min_per_class: int = 1, k: int = 10, sigma: float | str = "mean",
                      unlabeled_value: Any = -1, clean_labels: Any = None, cache: Any = None,
                      evidence: bool = False,
                      metric: str = "euclidean",
                      image_shape: Any = None) -> pd.DataFrame | tuple[pd.DataFrame, pd.DataFrame]:
    """Which given labels look wrong, and what they should be: a DataFrame shaped like ``label_issues.csv``.

    What a user brings (docs/label_issues.md):

    - ``X``: (n, d) features — or images: (n, h, w) or (n, h, w, channels), or (n, d) rows of flattened images
      with ``image_shape=(h, w[, channels])``, whose feature view is then the image view
      (:mod:`lgcexp.issues.image_view`) —: a ``k``-nearest-neighbour graph with Gaussian weights (width
      ``sigma``) is built from them, fitted by ``method`` and judged with the out-of-fold feature view (the
      command's stages, :func:`lgcexp.stages.fit_on_graph`);
    - ``graph``: a symmetric (n x n) affinity matrix (sparse or dense) or a :class:`lgcexp.graph.Graph`,
      checked by the rules of ``graph=precomputed`` (:class:`lgcexp.graph.precomputed.PrecomputedGraph`,
      self-loops dropped), instead of the kNN graph;
    - ``pred_probs``: (n, c) out-of-fold probabilities of the user's own model (:mod:`lgcexp.issues.pred_probs`;
      column j is the j-th sorted label value). Alone, they are the judgement (ranked by self-confidence,
      ``cut="count"``); with ``X`` or ``graph`` they are the second view beside the graph's evidence, instead
      of the feature view;
    - ``metric``: how the neighbours of ``X`` are found, ``euclidean`` (default) or ``cosine`` (the rows scaled
      to unit length first, :func:`lgcexp.preprocess.unit_rows`, for every use of X: the graph, the feature
      view, ``method="knn"``). Measured on network embeddings (docs/label_issues.md#embeddings).

    ``labels``: one value per point (ints or strings), ``unlabeled_value``, empty or NaN where a point has no
    label. ``method``: an algorithm that judges labels (``autoL``, ``lgc``, ``siis``, ``poissonL``, ``poissonBayes``,
    ...: :func:`lgcexp.algorithms.method_names` with ``kind="judging"``) with its ``params``, or ``knn``
    (the baseline: out-of-sample 10-NN frequencies on
    ``X``); None: :func:`default_method`. A dense method that cannot fit in memory is refused before any work.
    ``cut``, ``features``, ``folds``, ``min_agreement``, ``threshold``, ``min_per_class``: the six ``detect``
    options (:class:`DetectOptions`; ``cut`` None: ``count`` for ``pred_probs`` alone, else ``auto``: ``count``
    where every point is labelled, ``consensus`` where some are not, :func:`lgcexp.issues.options.resolve_cut`).
    ``clean_labels``: trusted labels where known (same form as ``labels``), only to add ``is_flipped``; never
    used to judge. ``cache``: a :class:`lgcexp.cache.Cache` (or a directory) for the graph and P_LL. No
    argument is modified.

    ``df.attrs["estimated_issues"]``: the estimated number of wrong labels (the one count,
    :func:`lgcexp.issues.count.estimate_wrong_labels`); ``df.attrs["expected_issues"]``: the sum of the column
    ``issue_probability`` (a sum of doubts, which overestimates the count); ``df.attrs["cut"]``: the cut
    applied; ``df.attrs["method"]``: the method used (``pred_probs`` where they alone judged).
    ``evidence=True``: returns (that table, the evidence of every flag:
    :func:`lgcexp.issues.explain.evidence_frame`, the table of ``label_issue_evidence.csv``).
    Column ``issue_type``: ``wrong`` (the evidence clearly names another class) or ``ambiguous`` (it is split)
    for a flagged label, the clearly wrong first.

    Rows: one per labelled point, the flagged labels first, most suspicious (lowest ``label_quality``) first;
    ``index`` is the point's row in ``X``/``labels``; ``given_label`` and ``suggested_label`` are in the
    values of ``labels``.
    """
    from ..cache import Cache
    from ..data.own import parse_labels, same_kind
    from ..errors import UserError

    if labels is None:
        raise UserError("find_label_issues: labels is required (one value per point, -1 = unlabelled)")
    col = parse_labels(labels, "labels", unlabeled_value)
    n = col.n
    labeled = np.flatnonzero(col.present)
    classes, y = np.unique(col.values[labeled], return_inverse=True)
    y = y.reshape(-1).astype(np.int64)
    c = int(classes.size)
    if c < 2:
        raise UserError(f"labels: {c} distinct label(s) among the labelled points; need at least 2 classes")
    if not isinstance(evidence, (bool, np.bool_)):
        raise UserError(f"evidence={evidence!r} is not allowed: use True or False")
    if not isinstance(features, (bool, np.bool_)):
        raise UserError(f"features={features!r} is not allowed: use True or False")
    if metric not in METRICS:
        raise UserError(f"metric={metric!r} is not allowed: choose one of {', '.join(METRICS)}")
    if X is not None:
        X, image_shape = _features(X, n, image_shape)
        if metric == "cosine":
            from ..preprocess import unit_rows

            X = unit_rows(X)
    elif metric != "euclidean":
        raise UserError(f"metric={metric!r} needs the features X (it says how their neighbours are found)")
    elif image_shape is not None:
        raise UserError("image_shape needs the images' pixels as X")
    P = None
    if pred_probs is not None:
        from .pred_probs import check_pred_probs

        P = check_pred_probs(pred_probs, n, classes)[labeled]
    alone = P is not None and X is None and graph is None
    if cut is None:
        cut = "count" if alone else "auto"
    opts = DetectOptions(cut=cut, features=bool(features), folds=folds, min_agreement=min_agreement,
                         threshold=threshold, min_per_class=min_per_class)
    opts._validate_params("")
    if isinstance(cache, (str, bytes)) or hasattr(cache, "__fspath__"):
        cache = Cache(cache)
    y_clean = np.full(labeled.size, -1, dtype=np.int64)
    if clean_labels is not None:
        cc = parse_labels(clean_labels, "clean_labels", unlabeled_value)
        if cc.n != n:
            raise UserError(f"clean_labels has {cc.n} values but labels has {n}; they must be equal")
        same_kind(col, cc)  # numbers never equal text: every label would count as flipped
        known = cc.present[labeled]
        pos = np.searchsorted(classes, cc.values[labeled][known])
        ok = (pos < c) & (classes[np.minimum(pos, c - 1)] == cc.values[labeled][known])
        yk = np.where(ok, pos, -2)
        y_clean[np.flatnonzero(known)] = yk
    from ..algorithms.propagation import DENSE_METHODS, dense_refusal

    W = None
    if alone:
        if method is not None:
            raise UserError(f"method={method} needs X (features) or graph; pred_probs alone are judged as given")
        from .pred_probs import pred_probs_judgement

        method = "pred_probs"
        judged = judge(pred_probs_judgement(P), y, DetectOptions(**{**opts.get_params(), "features": False}))
    else:
        if method is None:
            method = default_method(labeled.size, n)
        why = dense_refusal(method, labeled.size, "method") if method in DENSE_METHODS else None
        if why:
            raise UserError(why)
        if method in BASELINE_METHODS:
            if X is None:
                raise UserError("method=knn needs the features X")
            Xl = np.asarray(X[labeled], dtype=np.float64)
            judgement = LabelJudgement(probs=knn_oof_probs(Xl, y, c, k=min(10, max(1, labeled.size - 1))),
                                       source="knn: out-of-sample 10-NN class frequencies")
            judged = judge(judgement, y, DetectOptions(**{**opts.get_params(), "features": False}), view=P,
                           every_point_labelled=labeled.size == n)
        else:
            from ..algorithms import make_algorithm
            from ..stages import fit_on_graph

            builder, build_options = _builder(X, graph, n, k, sigma)
            algorithm = make_algorithm(method, dict(params or {}))
            if algorithm.required_eigenpairs() >= n:
                raise UserError(f"method={method}: needs {algorithm.required_eigenpairs()} eigenpairs "
                                f"but there are only {n} points")
            if not algorithm.judges_labels():
                raise UserError(f"method={method} does not judge labels; use one that does ({_judging()}) or knn")
            fitted = fit_on_graph(builder, algorithm, X, labeled, y, c, cache=cache, detect=opts,
                                  build_options=build_options, features=X, view=P, image_shape=image_shape)
            judged, W = fitted.issues, fitted.graph.W
            if judged is None:
                raise UserError(f"method={method} does not judge labels; use one that does ({_judging()}) or knn")

    flipped: np.ndarray | None = None
    if clean_labels is not None:
        known = y_clean != -1
        flipped = np.full(labeled.size, None, dtype=object)
        flipped[known] = (y_clean != y)[known]
        if known.all():
            flipped = flipped.astype(bool)
    df = issues_frame(labeled, classes[y], classes[judged.suggested], judged.quality, judged.is_issue, flipped,
                      judged.issue_probability, judged.issue_type)
    df.attrs["estimated_issues"] = judged.estimated_issues  # the estimated number of wrong labels (the one count)
    df.attrs["expected_issues"] = judged.expected_issues  # the sum of issue_probability (a sum of doubts)
    df.attrs["method"] = method
    df.attrs["cut"] = judged.cut  # the cut applied (``auto`` resolved: count or consensus)
    df.attrs["feature_model"] = judged.feature_model  # the second view's model (None: none was used)
    if evidence:
        from .explain import evidence_frame

        return df, evidence_frame(judged, labeled, y, classes, None if W is None else W)
    return df

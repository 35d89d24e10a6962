"""``find_label_issues``: which given labels look wrong, from Python without Hydra (docs/label_issues.md).

It builds a graph, fits a method that judges labels and applies the ``detect`` rules of
:mod:`lgcexp.issues`; it sits above both that module and the algorithms (which import
:mod:`lgcexp.issues` for their judgements), so no import runs in a circle.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from .frames import issues_frame
from .judge import judge, judge_labels
from .judgement import LabelJudgement
from .options import DetectOptions
from .views import knn_oof_probs

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["BASELINE_METHODS", "default_method", "find_label_issues"]


#: ``method`` values of :func:`find_label_issues` besides the registered algorithms that judge labels
BASELINE_METHODS = ("knn",)


def default_method(n_labeled: int, n: int) -> str:
    """The judging method when none is named: ``lgc`` where at least
    :data:`lgcexp.issues.views.FULL_LABELLED_SHARE` of the points are labelled (measured on realistic noise
    with every point labelled, docs/label_issues.md#realistic: as good as AutoL's or better, and several
    times faster) or above :data:`lgcexp.issues.loo.DENSE_MAX_LABELS` labels; ``autoL`` otherwise (the paper's
    setting: a few sampled labels, where its learnt weights win)."""
    from .loo import DENSE_MAX_LABELS
    from .views import FULL_LABELLED_SHARE

    if n_labeled > DENSE_MAX_LABELS or (n and n_labeled >= FULL_LABELLED_SHARE * n):
        return "lgc"
    return "autoL"


def _as_graph(graph: Any, n: int) -> Any:
    """A :class:`lgcexp.graph.Graph` from a Graph or an (n x n) affinity matrix, checked by the rules of
    ``graph=precomputed`` (:func:`lgcexp.graph.precomputed.graph_from_matrix`; self-loops dropped)."""
    from ..errors import UserError
    from ..graph import Graph
    from ..graph.precomputed import graph_from_matrix

    G = graph if isinstance(graph, Graph) else graph_from_matrix(graph, n, "graph", diagonal="drop")
    if G.n != n:
        raise UserError(f"graph: it has {G.n} nodes but there are {n} labels (one per point, -1 = unlabelled)")
    if (G.degree <= 0).any():
        raise UserError(f"graph: {int((G.degree <= 0).sum())} point(s) have no neighbour; every point needs an edge")
    return G


def find_label_issues(X: np.ndarray | None = None, labels: Any = None, *, graph: Any = None,
                      method: str | None = None, params: Mapping[str, Any] | None = None, cut: str = "consensus",
                      features: bool = True, min_agreement: float = 0.8, k: int = 10, sigma: float | str = "mean",
                      unlabeled_value: Any = -1,
                      clean_labels: Any = None, cache: Any = None) -> pd.DataFrame:
    """Which given labels look wrong, and what they should be: a DataFrame shaped like ``label_issues.csv``.

    ``X``: (n, d) features (None: ``graph`` is required and the feature view is left out). ``labels``: one
    value per point (ints or strings), ``unlabeled_value``, empty or NaN where a point has no label.
    ``graph``: None (a ``k``-nearest-neighbour graph with Gaussian weights, width ``sigma``, is built from
    ``X``), a :class:`lgcexp.graph.Graph`, or a symmetric (n x n) affinity matrix (sparse or dense).
    ``method``: an algorithm that judges labels (``autoL``; ``lgc``; ``siis``; see :mod:`lgcexp.algorithms`)
    with its ``params``, or ``knn`` (the baseline: out-of-sample 10-NN frequencies on ``X``); None (default):
    :func:`default_method` (``autoL`` for a few sampled labels, ``lgc`` where most points are labelled or
    above :data:`lgcexp.issues.loo.DENSE_MAX_LABELS` labels: its leave-one-out needs no l x l matrix,
    :mod:`lgcexp.issues.loo`). A dense method that cannot fit in memory is refused before any work.
    ``cut``, ``features``, ``min_agreement``: the ``detect`` options (:class:`DetectOptions`). ``clean_labels``:
    trusted labels where known (same form as ``labels``), only to add ``is_flipped``; never used to judge.
    ``cache``: a :class:`lgcexp.cache.Cache` (or a directory) for the graph and P_LL.

    ``df.attrs["estimated_issues"]``: confident learning's estimate of how many labels are wrong
    (:func:`lgcexp.issues.cuts.estimate_issues`); ``df.attrs["expected_issues"]``: the sum of the column
    ``issue_probability`` (each label's probability of being wrong,
    :func:`lgcexp.issues.cuts.issue_probability`); ``df.attrs["method"]``: the method used.

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
    if X is not None:
        from ..data.dataset import check_features

        X = check_features(X, "X")
        if X.shape[0] != n:
            raise UserError(f"X has {X.shape[0]} rows but labels has {n} values; they must be equal")
    opts = DetectOptions(cut=cut, features=bool(features), min_agreement=min_agreement)
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
    from .loo import DENSE_METHODS, dense_refusal

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
        judged = judge(judgement, y, DetectOptions(cut=cut, features=False))
    else:
        from ..algorithms import make_algorithm

        if graph is None:
            if X is None:
                raise UserError("find_label_issues: give X (features) or graph (an affinity matrix)")
            from ..graph import build_graph

            graph, _ = build_graph(X, k=k, sigma=sigma, cache=cache)
        graph = _as_graph(graph, n)
        algorithm = make_algorithm(method, dict(params or {}))
        if algorithm.required_eigenpairs() >= n:
            raise UserError(f"method={method}: needs {algorithm.required_eigenpairs()} eigenpairs "
                            f"but there are only {n} points")
        algorithm.fit(graph, labeled, y, c, cache=cache, features=X)
        judged = judge_labels(algorithm.label_judgement(), labeled, y, n, opts, X)
        if judged is None:
            raise UserError(f"method={method} does not judge labels; use autoL, lgc or siis (or knn)")
    flipped: np.ndarray | None = None
    if clean_labels is not None:
        known = y_clean != -1
        flipped = np.full(labeled.size, None, dtype=object)
        flipped[known] = (y_clean != y)[known]
        if known.all():
            flipped = flipped.astype(bool)
    df = issues_frame(labeled, classes[y], classes[judged.suggested], judged.quality, judged.is_issue, flipped,
                      judged.issue_probability)
    df.attrs["estimated_issues"] = judged.estimated_issues  # confident learning's estimate of the wrong labels
    df.attrs["expected_issues"] = judged.expected_issues  # the sum of issue_probability
    df.attrs["method"] = method
    return df

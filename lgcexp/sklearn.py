"""scikit-learn estimators over lgcexp's stage objects: ``fit(X, y)`` with ``y == -1`` for unlabelled points.

::

    from lgcexp.algorithms.lgc import LGC
    from lgcexp.graph import KnnGraph
    from lgcexp.sklearn import GraphSSLClassifier, AutoLClassifier

    clf = GraphSSLClassifier(LGC(alpha=0.99), KnnGraph(k=15)).fit(X, y)   # y: -1 where a point has no label
    GridSearchCV(GraphSSLClassifier(LGC()), {"algorithm__alpha": [0.9, 0.99], "graph__k": [10, 15]})
    AutoLClassifier().fit(X, y).label_issues_                              # the given labels judged wrong

:class:`GraphSSLClassifier` holds three stage objects and nothing else: ``algorithm`` (an algorithm of
:mod:`lgcexp.algorithms`, or its ``algo=`` name), ``graph`` (a graph builder of :mod:`lgcexp.graph`, or its
``graph=`` name; None: the algorithm's own default, the kNN graph for most) and ``detect`` (the
:class:`lgcexp.issues.options.DetectOptions` that turn a method's judgement into ``label_issues_``), plus
``cache_dir`` (the command's on-disk cache). Their parameters are theirs: scikit-learn reaches them as
nested parameters (``algorithm__alpha``, ``graph__k``), so nothing is restated here. ``fit`` runs the stages
the command runs, in the same function (:func:`lgcexp.stages.fit_on_graph`): graph, Laplacian eigenpairs,
the algorithm's fit, and the label judgement of the algorithm's ``label_judgement()`` hook, so
``label_issues_`` is the command's ``label_issues.csv`` for the same fit. Parameters are validated at
``fit`` by each stage object's own table; a bad value raises scikit-learn's ``InvalidParameterError`` naming
the nested parameter (``algorithm__alpha=1.5 is not allowed: it must be a number in (0, 1)``).

The named classes (:class:`LGCClassifier`, :class:`AutoLClassifier`, ...; one per registered algorithm,
made from the registry: :data:`ESTIMATORS`) only fix the default algorithm. They also take the algorithm's
and the graph builder's parameters as keywords, so that a named class reads like scikit-learn's own
``LabelSpreading`` (``LGCClassifier(alpha=0.7, n_neighbors=8)``; ``n_neighbors`` is LabelSpreading's name for
the kNN graph's ``k``, ``n_eigenfunctions`` the eigenfunction graph's), and ``set_params``/``GridSearchCV``
accept those names too; ``get_params`` reports the stage objects. ``max_iter`` (scikit-learn's glossary name) is
taken for an algorithm whose parameter is spelt ``maxiter``: that spelling is its yaml key, part of recorded
runs' config hashes.
``LGCClassifier``'s default algorithm is ``LGC(stop="tol")``: its conjugate gradient runs to the
relative residual ``tol`` (scikit-learn's meaning), while the command (and ``LGC()``) stops once every row's
argmax is certified (``stop="argmax"``).

Input: ``graph="precomputed"`` takes X as the n x n affinity matrix (sparse or dense), checked by
:class:`lgcexp.graph.precomputed.PrecomputedGraph` exactly as the command's ``graph=precomputed`` file (a
nonzero diagonal is refused unless ``PrecomputedGraph(diagonal="drop")``; an asymmetric matrix unless
``symmetrize``; a graph without an edge always). Sparse feature matrices are accepted only by builders that
read them (the precomputed graph); the kNN graph (faiss), the anchor graph (k-means) and the eigenfunctions
(PCA) read dense rows, and scikit-learn's refusal says so. Labels may be any values; -1 (the number, or the
string '-1') marks an unlabelled point and never becomes a class. An iterative solver that reaches its
iteration cap warns with scikit-learn's ``ConvergenceWarning`` and returns its last iterate (the command
stops instead).

Fitted attributes: ``classes_``, ``transduction_`` (the method's label for every training row),
``label_distributions_`` (scores clipped at 0 and normalised per row; uniform where a row has no score),
``n_iter_``, ``graph_`` (:class:`lgcexp.graph.Graph`), ``graph_builder_`` and ``algorithm_`` (the fitted
stage objects), ``sigma_`` (the Gaussian kernel's width as used, else None), and for methods that judge
their labels ``label_quality_``, ``issue_probability_``, ``label_issues_`` and ``suggested_labels_`` (one
entry per row of X; NaN, NaN, False and -1 at unlabelled rows); ``fit(X, y, pred_probs=P)`` judges them with
your model's out-of-fold probabilities as the second view, as ``find_label_issues`` and the command's
``detect.pred_probs`` do (docs/label_issues.md#pred-probs). New points (``predict``, ``predict_proba``)
are placed by the graph builder's own rule (:meth:`lgcexp.graph.GraphBuilder.extension`): the kernel-weighted
vote of the kNN neighbours (scikit-learn's ``LabelSpreading`` rule), a new point's anchor codes, the eigenfunctions read
at the point, or (precomputed) the (m, n_train) affinities of the new points to the training points; a builder
without a rule of its own predicts its training rows only.
``score(X, y)`` is the accuracy on the rows of ``y`` that carry a label, so ``GridSearchCV`` works on partly
labelled data.
"""
from __future__ import annotations

import os
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context, clone
from sklearn.metrics import accuracy_score
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, InvalidParameterError, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .algorithms import ALGORITHMS, GraphSSLAlgorithm
from .algorithms.propagation import DENSE_METHODS, dense_refusal
from .cache import Cache
from .errors import UserError
from .graph import GRAPH_BUILDERS
from .graph.extension import label_distributions
from .params import constructor_defaults
from .solvers.cg import on_maxiter
from .stages import fit_on_graph

__all__ = ["GraphSSLClassifier", "ESTIMATORS", "expected_failed_checks", "label_distributions"]

#: the mark of an unlabelled point in ``y`` (scikit-learn's semi-supervised convention)
UNLABELED = -1
#: LabelSpreading's keyword -> the graph builder's parameter, per builder (``LGCClassifier(n_neighbors=8)``)
_GRAPH_ALIASES = {"knn": {"n_neighbors": "k"}, "knn_approx": {"n_neighbors": "k"},
                  "eigenfunction": {"n_eigenfunctions": "k"}}


def _unlabeled_mask(y: np.ndarray) -> np.ndarray:
    """True where ``y`` marks an unlabelled point: the number -1 (any numeric type) or the string '-1'."""
    y = np.asarray(y)
    if y.dtype.kind in "iuf":
        return y == UNLABELED
    if y.dtype.kind in "US":
        return np.char.strip(y.astype(str)) == "-1"
    if y.dtype.kind == "O":
        def mark(v: Any) -> bool:
            if isinstance(v, (str, bytes)):
                return (v.decode() if isinstance(v, bytes) else v).strip() == "-1"
            return isinstance(v, (Integral, Real, np.number)) and not isinstance(v, bool) and v == UNLABELED
        return np.fromiter((mark(v) for v in y), dtype=bool, count=y.size)
    return np.zeros(y.shape, dtype=bool)


def _common_dtype(values: np.ndarray) -> np.ndarray:
    """An object array of labels (the -1 entries taken out) as a plain array when its values allow (all
    strings, all numbers); mixed types stay objects and are refused by the target check."""
    try:
        out = np.asarray(values.tolist())
    except (TypeError, ValueError):
        return values
    return out if out.dtype.kind in "iufUSb" else values


def _invalid(exc: UserError) -> InvalidParameterError:
    """A stage object's one-line refusal as scikit-learn's parameter error (a ValueError and TypeError)."""
    return InvalidParameterError(str(exc))


class GraphSSLClassifier(ClassifierMixin, BaseEstimator):
    """A graph SSL method as a scikit-learn classifier: ``algorithm`` on the graph of ``graph`` (see the
    module docstring). ``algorithm``: an lgcexp algorithm object or its ``algo=`` name (None: the class's
    default, LGC here); ``graph``: a graph builder object or its ``graph=`` name (None: the algorithm's
    ``default_graph``; ``"precomputed"``: X is the affinity matrix); ``detect``: the label-judgement
    options (a :class:`lgcexp.issues.options.DetectOptions`, a dict of them, or None for the defaults);
    ``cache_dir``: the command's on-disk cache (None: none)."""

    #: the algorithm used when ``algorithm`` is None (a registry name)
    _default_algo: ClassVar[str] = "lgc"
    #: parameters of the default algorithm that differ from its class's defaults
    _default_algo_params: ClassVar[dict[str, Any]] = {}

    _parameter_constraints: ClassVar[dict] = {
        "algorithm": [None, StrOptions(set(ALGORITHMS.names())), HasMethods(["fit", "label_judgement"])],
        "graph": [None, StrOptions(set(GRAPH_BUILDERS.names())), HasMethods(["build", "extension"])],
        "detect": [None, dict, HasMethods(["get_params"])],
        "cache_dir": [None, str, os.PathLike],
    }

    def __init__(self, algorithm=None, graph=None, *, detect=None, cache_dir=None, **stage_params):
        self.algorithm = algorithm
        self.graph = graph
        self.detect = detect
        self.cache_dir = cache_dir
        if stage_params:  # LGCClassifier(alpha=0.7, n_neighbors=8): the stage objects' own parameters
            try:
                self._route(stage_params)
            except Exception as exc:  # scikit-learn's rule: nothing raises in __init__; fit reports it
                self._init_error = exc

    # ---- the stage objects ---------------------------------------------------------------------------------
    def _algorithm(self) -> GraphSSLAlgorithm:
        """A fresh (unfitted) copy of the algorithm this estimator names."""
        a = self.algorithm
        if a is None:
            return ALGORITHMS.get(self._default_algo)(**self._default_algo_params)
        if isinstance(a, str):
            return ALGORITHMS.get(a)()
        return clone(a, safe=False)

    def _graph_builder(self, algorithm: GraphSSLAlgorithm | None = None) -> Any:
        """A fresh (unbuilt) copy of the graph builder: the one given, the one named, or the algorithm's
        ``default_graph``."""
        g = self.graph
        if g is None:
            g = (algorithm or self._algorithm()).default_graph
        if isinstance(g, str):
            return GRAPH_BUILDERS.get(g)()
        return clone(g, safe=False)

    def _detect_options(self) -> Any:
        from .issues.options import DetectOptions

        d = self.detect
        if d is None:
            return DetectOptions()
        if isinstance(d, dict):
            return DetectOptions(**d)
        return clone(d, safe=False)

    def _route(self, params: dict[str, Any]) -> None:
        """Set stage-object parameters given by their own names (the named classes' keywords, and
        ``set_params``/``GridSearchCV`` with those names): an algorithm parameter goes to the algorithm, a
        graph parameter (``n_neighbors`` for the kNN graph's ``k``) to the graph builder."""
        algo = self._algorithm() if not isinstance(self.algorithm, GraphSSLAlgorithm) else self.algorithm
        builder = self._graph_builder(algo) if self.graph is None or isinstance(self.graph, str) else self.graph
        a_names = constructor_defaults(type(algo))
        g_names = constructor_defaults(type(builder))
        aliases = _GRAPH_ALIASES.get(builder.name, {})
        # scikit-learn's glossary name for an algorithm whose parameter (and yaml key, in recorded config hashes)
        # is spelt maxiter
        a_alias = {"max_iter": "maxiter"} if "maxiter" in a_names and "max_iter" not in a_names else {}
        to_algo, to_graph = {}, {}
        for k, v in params.items():
            if a_alias.get(k, k) in a_names:
                to_algo[a_alias.get(k, k)] = v
            elif aliases.get(k, k) in g_names:
                to_graph[aliases.get(k, k)] = v
            else:
                raise TypeError(f"{type(self).__name__} got an unexpected parameter {k!r}: not a parameter of "
                                f"{type(self).__name__}, of its algorithm ({type(algo).__name__}: "
                                f"{', '.join(a_names) or 'none'}) or of its graph ({type(builder).__name__}: "
                                f"{', '.join([*g_names, *aliases]) or 'none'})")
        if to_algo:
            self.algorithm = algo.set_params(**to_algo)
        if to_graph:
            self.graph = builder.set_params(**to_graph)

    def set_params(self, **params):
        """scikit-learn's ``set_params`` (own and nested ``algorithm__alpha`` parameters), plus the stage
        objects' parameters by their own names (``alpha``, ``n_neighbors``), routed as the constructor's
        keywords."""
        own = self._get_param_names()
        mine = {k: v for k, v in params.items() if k in own or "__" in k}
        rest = {k: v for k, v in params.items() if k not in mine}
        nested = {k.split("__", 1)[0] for k in mine if "__" in k}
        # nested parameters of a stage given by name or left to its default: the object itself first
        if "algorithm" in nested and "algorithm" not in mine and not hasattr(self.algorithm, "set_params"):
            self.algorithm = self._algorithm()
        if "graph" in nested and "graph" not in mine and not hasattr(self.graph, "set_params"):
            self.graph = self._graph_builder()
        if "detect" in nested and "detect" not in mine and not hasattr(self.detect, "set_params"):
            self.detect = self._detect_options()
        if mine:
            super().set_params(**mine)
        if rest:
            try:
                self._route(rest)
            except Exception as exc:  # scikit-learn's rule: set_params never raises; fit reports it
                self._init_error = exc
        return self

    def min_points(self) -> int:
        """The fewest training points this configuration can fit: the graph builder's, and for spectral
        methods more points than eigenpairs."""
        algo = self._algorithm()
        return max(self._graph_builder(algo).min_points(), int(algo.required_eigenpairs()) + 1)

    def _expected_failed_checks(self) -> dict[str, str]:
        """scikit-learn estimator checks that cannot apply here, each with its reason."""
        out = {
            "check_classifiers_classes": (
                "the check's last problem labels its two classes -1 and 1, but -1 marks an unlabelled point "
                "for a semi-supervised estimator, which leaves one class (scikit-learn exempts its own "
                "LabelSpreading/LabelPropagation from those labels by name)"
            ),
        }
        need = self.min_points()
        if need > 10:
            why = (f"the check fits 10 points, and this configuration needs at least {need} (a kNN graph needs "
                   f"more points than n_neighbors, sigma='mean' a 10th neighbour, the self_tuning kernel more "
                   f"points than local_scale, an anchor graph at least n_anchors points, a spectral method more "
                   f"points than eigenpairs); the refusal is a ValueError that names the parameter, not the "
                   f"words the check looks for")
            out["check_fit2d_1feature"] = why
            out["check_estimators_nan_inf"] = why + " (NaN and inf themselves are refused at fit and predict)"
        return out

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        try:
            builder = self._graph_builder()
        except Exception:  # an invalid graph is reported by fit
            return tags
        tags.input_tags.pairwise = builder.pairwise
        tags.input_tags.sparse = builder.accepts_sparse
        return tags

    # ---- fit ----------------------------------------------------------------------------------------------
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y, pred_probs=None, image_shape=None):
        """Fit on X (n x d features; with ``graph="precomputed"`` the n x n affinity) and y (n labels, -1
        for an unlabelled point). ``pred_probs``: (n x c) out-of-fold class probabilities of your own model
        (column j: ``classes_[j]``), the second view of the label judgement instead of the feature view,
        checked and used as :func:`lgcexp.issues.find_label_issues` does (:mod:`lgcexp.issues.pred_probs`;
        only for a method that judges labels). ``image_shape``: (h, w) or (h, w, channels) where the rows of X
        are flattened images: a fully labelled set's labels are then judged with the image view
        (:mod:`lgcexp.issues.image_view`), as :func:`lgcexp.issues.find_label_issues` does. Returns self."""
        if getattr(self, "_init_error", None) is not None:
            raise self._init_error
        algo = self._algorithm()
        builder = self._graph_builder(algo)
        detect = self._detect_options()
        # each stage object's own table, its keys named as nested parameters
        for obj, prefix in ((algo, "algorithm__"), (builder, "graph__"), (detect, "detect__")):
            try:
                obj._validate_params(prefix=prefix)
            except UserError as exc:
                raise _invalid(exc) from None
        pairwise = builder.pairwise
        X, y = validate_data(self, X, y, accept_sparse="csr" if builder.accepts_sparse else False,
                             dtype=np.float64 if pairwise else np.float32, ensure_min_samples=2)
        n = X.shape[0]
        labeled = np.flatnonzero(~_unlabeled_mask(y))
        if labeled.size == 0:
            raise ValueError("y has no labelled point: every entry is -1, the mark of an unlabelled point")
        y_given = y[labeled]
        if y_given.dtype == object:
            y_given = _common_dtype(y_given)
        check_classification_targets(y_given)
        classes, y_enc = np.unique(y_given, return_inverse=True)
        if classes.size < 2:
            raise ValueError(f"{type(self).__name__} needs labelled points of at least 2 classes; "
                             f"y has 1 class ({classes[0]!r})")
        for obj, prefix in ((algo, "algorithm__"), (builder, "graph__")):
            try:
                obj.check_data(n, classes.size, prefix=prefix)
            except UserError as exc:
                raise ValueError(str(exc)) from None
        if algo.name in DENSE_METHODS:  # the memory rule of every front end, before the graph
            why = dense_refusal(algo.name, labeled.size, "algorithm")
            if why:
                raise ValueError(f"{type(self).__name__}: {why}")
        view = None
        if pred_probs is not None:
            from .config import judges_labels
            from .issues.pred_probs import check_pred_probs

            if not judges_labels(algo):
                raise ValueError(f"pred_probs: algorithm={algo.name} does not judge its labels (no label_issues_), "
                                 "so it has no use for them; they are for the methods that do (e.g. lgc, autoL)")
            try:
                view = check_pred_probs(pred_probs, n, classes, rows=f"X has {n} rows")[labeled]
            except UserError as exc:
                raise ValueError(str(exc)) from None
        if image_shape is not None:
            from .data.dataset import check_image_shape

            if pairwise:
                raise ValueError("image_shape: X is an affinity matrix here (graph='precomputed'), not images")
            try:
                check_image_shape(image_shape, X.shape[1])
            except UserError as exc:
                raise ValueError(str(exc)) from None
        build_options = {"adjacency": X} if pairwise else {}
        with on_maxiter("warn"):
            fitted = fit_on_graph(builder, algo, None if pairwise else X, labeled, y_enc, classes.size,
                                  cache=Cache(self.cache_dir), detect=detect, build_options=build_options,
                                  features=None if pairwise else X, view=view, image_shape=image_shape)
        graph = fitted.graph
        self.classes_ = classes
        self.algorithm_ = algo
        self.graph_builder_ = builder
        self.graph_ = graph
        self.extension_ = builder.extension(None if pairwise else X, graph)
        self.sigma_ = float(graph.sigma) if np.isfinite(graph.sigma) else None
        self.local_scales_ = getattr(self.extension_, "local_scales", None)
        self.label_distributions_ = label_distributions(algo.scores_)
        self.transduction_ = classes[algo.predict()]
        self.n_iter_ = int(algo.info_.get(algo.n_iter_key, 0))
        issues = fitted.issues
        if issues is not None:
            self.label_quality_ = np.full(n, np.nan)
            self.label_quality_[labeled] = issues.quality
            self.label_issues_ = np.zeros(n, dtype=bool)
            self.label_issues_[labeled] = issues.is_issue
            self.suggested_labels_ = np.full(n, None, dtype=object)
            self.suggested_labels_[labeled] = classes[issues.suggested]
            self.issue_probability_ = np.full(n, np.nan)
            self.issue_probability_[labeled] = issues.issue_probability
        return self

    # ---- new points ---------------------------------------------------------------------------------------
    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities of new points, by the graph builder's rule (see the module docstring)."""
        check_is_fitted(self)
        pairwise = self.graph_builder_.pairwise
        Xq = validate_data(self, X, accept_sparse="csr" if self.graph_builder_.accepts_sparse else False,
                           dtype=np.float64 if pairwise else np.float32, reset=False)
        return self.extension_.predict_proba(Xq, self.algorithm_)

    def predict(self, X) -> np.ndarray:
        """Labels of new points: the argmax of :meth:`predict_proba`, in ``classes_``."""
        check_is_fitted(self)
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy of :meth:`predict` on the rows of (X, y) that carry a label; rows with y == -1 are left
        out (so cross-validation scores partly labelled folds on their labelled points)."""
        y = column_or_1d(y, warn=True)
        keep = ~_unlabeled_mask(y)
        if not keep.any():
            raise ValueError("y has no labelled row to score: every entry is -1")
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)[keep]
        pred = self.predict(_safe_indexing(X, np.flatnonzero(keep)))
        return float(accuracy_score(y[keep], pred, sample_weight=sample_weight))


def _class_name(algo: str) -> str:
    cls = ALGORITHMS.get(algo)
    return f"{cls.__name__}Classifier"


def _named_class(algo: str) -> type[GraphSSLClassifier]:
    """The named estimator of a registered algorithm: :class:`GraphSSLClassifier` whose default algorithm
    is that one (nothing else)."""
    cls = ALGORITHMS.get(algo)
    doc = (f"{cls.__name__} (``algo={algo}``, :class:`{cls.__module__}.{cls.__name__}`) as a scikit-learn "
           f"classifier: :class:`GraphSSLClassifier` with that default algorithm.\n\n"
           + (cls.__doc__ or "").split("\n\n")[0])
    extra = {"stop": "tol"} if "stop" in constructor_defaults(cls) else {}
    return type(_class_name(algo), (GraphSSLClassifier,), {
        "_default_algo": algo, "_default_algo_params": extra, "__doc__": doc, "__module__": __name__,
    })


def _estimators() -> dict[str, type[GraphSSLClassifier]]:
    return {name: _named_class(name) for name in ALGORITHMS.names()}


#: algorithm name (``algo=`` of the command) -> its named estimator class, one per registered algorithm
ESTIMATORS: dict[str, type[GraphSSLClassifier]] = _estimators()
globals().update({cls.__name__: cls for cls in ESTIMATORS.values()})
__all__ += [cls.__name__ for cls in ESTIMATORS.values()]


#: named estimators of algorithms registered after import (kept apart: :data:`ESTIMATORS` is the registry's
#: built-ins and yaml plug-ins at import time)
_LATER: dict[str, type[GraphSSLClassifier]] = {}


def estimator_for(algo: str) -> type[GraphSSLClassifier]:
    """The named estimator of ``algo`` (made on first use for an algorithm registered after import)."""
    if algo in ESTIMATORS:
        return ESTIMATORS[algo]
    if algo not in _LATER:
        _LATER[algo] = _named_class(algo)
    return _LATER[algo]


def quick_estimators() -> list[GraphSSLClassifier]:
    """One estimator per registered algorithm with the algorithm's and its graph builder's
    ``quick_params`` (fits on tens of points): what the estimator checks run on."""
    out = []
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        g = GRAPH_BUILDERS.get(cls.default_graph)
        params = dict(cls.quick_params)
        if "stop" in constructor_defaults(cls):
            params.setdefault("stop", "tol")
        out.append(GraphSSLClassifier(cls(**params), g(**g.quick_params)))
    return out


def expected_failed_checks(estimator: Any) -> dict[str, str]:
    """The scikit-learn estimator checks that cannot apply to a transductive graph method, each with the
    reason: pass it to ``check_estimator(est, expected_failed_checks=...)`` or
    ``parametrize_with_checks(..., expected_failed_checks=expected_failed_checks)``."""
    return estimator._expected_failed_checks()

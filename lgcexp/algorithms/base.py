"""The small protocol every graph SSL method follows (scikit-learn style).

An algorithm is built from its parameters (stored by ``__init__``, validated by ``fit`` and by the
pipeline's pre-flight before any heavy work), fitted on a graph and the observed labels of the labelled points,
and then holds:

- ``scores_``: (n, c) class scores for every point; predictions are the row argmax (ties and all-zero rows
  go to class 0, as numpy's argmax does, matching the authors' code);
- ``labeled_pred_``: the prediction on the labelled points "after label correction" (defaults to the
  argmax of ``scores_`` on those rows; AutoL and SIIS override it);
- ``info_``: extra scalar results for ``result.json``;
- ``label_info_``: extra per-label columns for ``labels.csv`` (arrays aligned with the labelled points).

Hooks, each declared here with its default (the pipeline never probes with ``hasattr``):
``required_eigenpairs()`` (0), ``check_data(n, c)`` (no check), ``plot(out_dir, y_true, split)`` (no
figure), ``label_judgement()`` (None: the method does not judge its labels; see
:mod:`lgcexp.issues`); ``dropped_``/``suspicion_`` (a method's own verdict on its labels) and
``lgc_labeled_pred_`` default to None.
Parameters are declared once in ``_parameter_constraints`` (see :mod:`lgcexp.params`); ``__init__`` only
stores them and ``fit`` validates them.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..graph import Graph
from ..params import Configurable
from ..priors import prior_vector, volume_projection


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    Y = np.zeros((y.size, n_classes))
    Y[np.arange(y.size), y] = 1.0
    return Y


def label_matrix(n: int, labeled: np.ndarray, y_labeled: np.ndarray, n_classes: int) -> np.ndarray:
    """The n x c label matrix Y: one-hot rows at the labelled points, zero rows elsewhere."""
    Y = np.zeros((n, n_classes))
    Y[labeled, y_labeled] = 1.0
    return Y


class GraphSSLAlgorithm(Configurable):
    """Base class: subclasses declare ``_parameter_constraints`` and implement ``_fit``, which sets
    ``scores_`` (and optionally ``labeled_pred_``, the label judgement and the rest)."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "algo.params."
    #: losses this algorithm accepts through the top-level ``loss`` option (empty: it takes none)
    losses: ClassVar[tuple[str, ...]] = ()
    #: the ``label_info_`` columns that hold class numbers 0..c-1 (written in the file's own label values by
    #: a diagnosis run, :mod:`lgcexp.issues.diagnosis`)
    class_columns: ClassVar[tuple[str, ...]] = ()
    #: the graph builder (``graph=`` name) this method runs on when none is asked for: ``knn`` for a method
    #: on any affinity graph; a method that needs a graph of its own names it (LSSC: anchor)
    default_graph: ClassVar[str] = "knn"
    #: the ``info_`` entry that counts the method's iterations (the estimators' ``n_iter_``)
    n_iter_key: ClassVar[str] = "solver_iterations"
    #: parameters for a quick fit on tens of points (scikit-learn's estimator checks; the paper's defaults,
    #: e.g. 300 eigenpairs, need more points than that)
    quick_params: ClassVar[dict[str, Any]] = {}
    #: during ``fit``: the ``pll_alphas`` to solve with every P_LL (None: the method's own alphas only)
    _pll_alphas: tuple[float, ...] | None = None

    # ----- optional hooks, each with its default --------------------------------------------------------
    def required_eigenpairs(self) -> int:
        """Number of smallest Laplacian eigenpairs the method needs (0: no eigendecomposition stage)."""
        return 0

    def plot(self, out_dir: Any, y_true: np.ndarray | None = None, split: Any = None) -> list[str]:
        """Figures/CSVs written when ``plot=true`` (``y_true`` only for evaluation curves). Default: none."""
        return []

    def propagation_alphas(self) -> tuple[float, ...]:
        """The diffusion rates whose ``P_LL`` (:mod:`lgcexp.algorithms.propagation`) ``fit`` solves by conjugate
        gradient with its parameters as set (empty: none), the ones ``pll_alphas`` can share. A sweep's
        ``pll_alphas`` lists those of all its methods."""
        return ()

    @classmethod
    def judges_labels(cls) -> bool:
        """Does the method judge its labels (a ``label_judgement()`` of its own, so a run writes
        ``label_issues.csv`` and the ``detect`` options apply)?"""
        return cls.label_judgement is not GraphSSLAlgorithm.label_judgement

    def label_judgement(self) -> Any:
        """After ``fit``: the method's judgement of its labelled points, a
        :class:`lgcexp.issues.judgement.LabelJudgement` (each labelled point's class distribution from the
        evidence of the *other* labels, and optionally the method's own yes/no verdict), or None when the
        method does not judge labels (default). The pipeline turns it into ``label_issues.csv`` and the
        ``detect_*`` metrics under the ``detect`` options."""
        return None

    # ----- fitting ----------------------------------------------------------------------------------------
    def fit(
        self,
        graph: Graph,
        labeled: np.ndarray,
        y_labeled: np.ndarray,
        n_classes: int,
        *,
        eig: Any = None,
        progress: bool = False,
        cache: Any = None,
        class_priors: Any = None,
        features: Any = None,
        pll_alphas: Any = None,
    ) -> "GraphSSLAlgorithm":
        """Fit on the observed labels of the labelled points.

        ``eig``: Laplacian eigenpairs when ``required_eigenpairs() > 0``; ``cache``: an optional
        :class:`lgcexp.cache.Cache` for seed-level intermediates (e.g. AutoL's P_LL); ``class_priors``:
        ``None``, ``"uniform"``, ``"labels"`` or c numbers: the scores are then replaced by their volume label
        projection onto those class fractions (:mod:`lgcexp.priors`; the unprojected ones stay in
        ``raw_scores_``), for every method. ``features``: the points' features the graph was built on, for the
        methods that read them (the properly weighted Laplacian); held during ``_fit`` only. ``pll_alphas``: more
        diffusion rates to solve with every ``P_LL`` the method needs (the ``pll_alphas`` option: one multi-shift
        solve per labelled set serves every method of a sweep through ``cache``; None: the method's own only)."""
        self._validate_params()
        labeled = np.asarray(labeled, dtype=np.int64)
        y_labeled = np.asarray(y_labeled, dtype=np.int64)
        if labeled.shape != y_labeled.shape or labeled.ndim != 1:
            raise ValueError("labeled and y_labeled must be 1-D arrays of the same length")
        if np.unique(labeled).size != labeled.size:
            raise ValueError("labeled indices must be distinct")
        if y_labeled.size and (y_labeled.min() < 0 or y_labeled.max() >= n_classes):
            raise ValueError("labels must lie in 0..n_classes-1")
        self.check_data(graph.n, n_classes)
        self.info_: dict[str, Any] = {}
        self.label_info_: dict[str, np.ndarray] = {}
        self.labeled_pred_: np.ndarray | None = None
        #: label judgement (methods that judge labels): True where the method rejects the given label, and a
        #: score that is higher for more suspicious labels
        self.dropped_: np.ndarray | None = None
        self.suspicion_: np.ndarray | None = None
        #: methods that correct labels and then propagate also give the propagated readout on labelled rows
        self.lgc_labeled_pred_: np.ndarray | None = None
        self._features = features
        self._pll_alphas = None if pll_alphas is None else tuple(float(a) for a in pll_alphas)
        try:
            self._fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress, cache=cache)
        finally:
            self._features = None
            self._pll_alphas = None
        priors = prior_vector(class_priors, y_labeled, n_classes)
        if priors is not None:
            self.raw_scores_ = self.scores_
            self.scores_, weights, err = volume_projection(self.scores_, priors)
            self.info_["class_priors_error"] = err
        if self.labeled_pred_ is None:
            self.labeled_pred_ = self.scores_[labeled].argmax(axis=1)
        return self

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        raise NotImplementedError  # pragma: no cover

    def predict(self) -> np.ndarray:
        """Row argmax of the class scores for every point."""
        return self.scores_.argmax(axis=1)

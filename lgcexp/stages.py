"""The stages every fit runs, in one function: graph -> eigenpairs -> optimize -> judge the labels.

:func:`fit_on_graph` is what both front ends call: the ``lgcexp`` command (:func:`lgcexp.pipeline.run`,
after loading the data and drawing the labels) and the scikit-learn estimators (:mod:`lgcexp.sklearn`, with
the labels the user gave). The label judgement is the algorithm's own hook
(:meth:`lgcexp.algorithms.base.GraphSSLAlgorithm.label_judgement`) under the ``detect`` options
(:func:`lgcexp.issues.judge.judge`), so an estimator's ``label_issues_`` is the command's
``label_issues.csv`` for the same fit.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

from .graph import Graph


class StageTimer:
    """Wall-clock seconds per stage name (a stage entered twice adds up)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.perf_counter() - t0, 4)


@dataclass
class FittedStages:
    """What :func:`fit_on_graph` produced: the graph (and whether it came from the cache), the eigenpairs
    (None when the method needs none), the fitted algorithm and its judged labels (None when the method does
    not judge labels; a :class:`lgcexp.issues.judge.JudgedLabels` otherwise)."""

    graph: Graph
    graph_hit: bool
    eig: Any
    eig_hit: bool | None
    algorithm: Any
    issues: Any


def fit_on_graph(builder: Any, algorithm: Any, X: Any, labeled: np.ndarray, y_labeled: np.ndarray, n_classes: int,
                 *, cache: Any = None, data_fingerprint: str | None = None, n_eigenpairs: int | None = None,
                 eig_options: Mapping[str, Any] | None = None, detect: Any = None, progress: bool = False,
                 timer: StageTimer | None = None, build_options: Mapping[str, Any] | None = None,
                 features: Any = None, class_priors: Any = None, pll_alphas: Any = None,
                 view: Any = None, image_shape: Any = None) -> FittedStages:
    """Build the graph of ``X`` with ``builder``, compute the Laplacian eigenpairs the method needs
    (``n_eigenpairs``, default ``algorithm.required_eigenpairs()``; ``eig_options`` the ``eig`` section),
    fit ``algorithm`` on (``labeled``, ``y_labeled``) and judge the labels (``detect`` options; the labelled
    rows of ``features``, the points' feature matrix or None, feed the feature view). ``class_priors``: the
    volume label projection every method can take (:mod:`lgcexp.priors`; None: none). ``pll_alphas``: rates
    solved with every P_LL the method needs (the ``pll_alphas`` option; None: its own only). ``view``: a
    user's out-of-fold class distribution of the labelled points (``pred_probs``), the second view of the
    judgement instead of the feature view (:func:`lgcexp.issues.judge.judge`). ``image_shape``: where the rows of
    ``features`` are flattened images, their shape (the feature view is then the image view,
    :mod:`lgcexp.issues.image_view`).

    Times the stages ``graph``, ``eig``, ``optimize`` and ``evaluate`` (the judgement) on ``timer``.
    ``algorithm`` and ``builder`` are fitted in place."""
    from .issues import judge as label_issues

    timer = timer or StageTimer()
    with timer.stage("graph"):
        graph, graph_hit = builder.build(X, cache=cache, data_fingerprint=data_fingerprint, **dict(build_options or {}))
    p = algorithm.required_eigenpairs() if n_eigenpairs is None else n_eigenpairs
    eig, eig_hit = None, None
    with timer.stage("eig"):
        if p:
            from .spectral import laplacian_eigenpairs

            eig, eig_hit = laplacian_eigenpairs(graph, p, cache=cache, progress=progress, **dict(eig_options or {}))
    with timer.stage("optimize"):
        algorithm.fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress, cache=cache,
                      class_priors=class_priors, features=features, pll_alphas=pll_alphas)
    with timer.stage("evaluate"):
        issues = label_issues.judge_labels(algorithm.label_judgement(), np.asarray(labeled), y_labeled, graph.n,
                                           detect, features, view=view, image_shape=image_shape)
    return FittedStages(graph, graph_hit, eig, eig_hit, algorithm, issues)

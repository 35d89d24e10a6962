"""CutSSL-L (``algo=cutsslL``): PoissonL's leave-one-out label reweighting (:mod:`lgcexp.algorithms.poissonl`), then
CutSSL (:mod:`lgcexp.algorithms.cutssl`; Holtz, Chen, Wan, Cheng & Mishne, NeurIPS 2024) on the labels it trusts.

CutSSL clamps every labelled row to its label and solves a cardinality-constrained cut for the rest, so a wrong
label is a hard constraint. PoissonL learns a weight ``w_j >= 0`` per label from the exact leave-one-out matrix of
the mean-shifted Poisson operator; a label its neighbours' labels contradict gets ``w_j = 0`` (dropped). CutSSL
then runs with

- ``sources=kept`` (default): only the labels PoissonL keeps (``w_j > 0``); the dropped points become unlabelled
  and CutSSL assigns them like any other;
- ``sources=corrected``: every labelled point, with PoissonL's corrected label (the argmax of its leave-one-out
  distribution Q) in place of the given one.

Where nothing is dropped or changed this is CutSSL itself. Parameters: PoissonL's (``loss``, ``lr``, ``steps``,
``beta1``/``beta2``/``epsilon``, ``dtype``, ``xla``, ``chunk``, ``min_iter``, ``max_iter``), CutSSL's (``s``,
``iterations``, ``rho``, ``priors``, ``tol``, ``maxiter``) and ``sources``. After ``fit``: PoissonL's attributes
(``omega_``, ``corrected_``, ``dropped_``, ``labeled_pred_``, ``suspicion_``) and ``scores_``, CutSSL's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph import Graph
from ..params import Options
from .cutssl import CutSSL
from .poissonl import PoissonL

SOURCES = ("kept", "corrected")


class CutSSLL(PoissonL):
    """CutSSL-L (module docstring)."""

    name = "cutsslL"
    _parameter_constraints = {**PoissonL._parameter_constraints, **CutSSL._parameter_constraints,
                              "sources": [Options(SOURCES)]}
    quick_params = {"iterations": [10, 20], "steps": 200}

    def __init__(self, loss: str = "xent", lr: float = 0.7, steps: int = 5000,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-7, dtype: str = "float32",
                 xla: bool = True, chunk: int = 500, min_iter: int = 50, max_iter: int = 1000,
                 s: list[float] = [0.0, 0.1], iterations: list[int] = [100, 400],  # noqa: B006 (never mutated)
                 rho: float | str = "degree", priors="uniform", tol: float = 1e-6, maxiter: int = 20_000,
                 sources: str = "kept"):
        super().__init__(loss=loss, lr=lr, steps=steps, beta1=beta1, beta2=beta2, epsilon=epsilon, dtype=dtype,
                         xla=xla, chunk=chunk, min_iter=min_iter, max_iter=max_iter)
        self.s = s
        self.iterations = iterations
        self.rho = rho
        self.priors = priors
        self.tol = tol
        self.maxiter = maxiter
        self.sources = sources

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        PoissonL._check_relations(params, prefix)
        CutSSL._check_relations(params, prefix)

    def _cutssl(self) -> CutSSL:
        return CutSSL(s=self.s, iterations=self.iterations, rho=self.rho, priors=self.priors, tol=self.tol,
                      maxiter=self.maxiter)

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        self._cutssl().check_data(n, n_classes, prefix or self.config_prefix)

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        super()._fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress, cache=cache)
        labeled = np.asarray(labeled)
        if self.sources == "kept":
            keep = ~self.dropped_
            lab, y = labeled[keep], np.asarray(y_labeled)[keep]
        else:
            lab, y = labeled, self.labeled_pred_
        cut = self._cutssl().fit(graph, lab, y, n_classes)
        self.scores_ = cut.scores_
        self.info_["rho"] = cut.info_.get("rho")
        self.info_["cutssl_iterations"] = cut.info_.get("solver_iterations")

"""The properly weighted graph Laplacian (Calder & Slepčev, "Properly-weighted graph Laplacian for
semi-supervised learning", Appl. Math. Optim. 82, 2020): Laplace learning (GFHF,
:mod:`lgcexp.algorithms.gfhf`) on ``W'_ij = (γ_i + γ_j) W_ij`` with

    γ_i = 1 + (r / max(dist(x_i, labelled set), r_ζ))^p,   r_ζ = r / (ζ − 1)^(1/p),

``dist`` the Euclidean distance in feature space to the nearest labelled point (so ``1 < γ ≤ ζ``: the weight
blows up near the labels, which keeps Laplace learning from degenerating to a constant at low label rates).
Their defaults ``p = 2`` (``power``), ``ζ = 10^7`` (``zeta``), ``r = 0.1`` (``radius``, in the features'
units), as GraphLearning's ``laplace(reweighting='properly')``; the same weights as that. The method needs the
features the graph was built on (``fit(..., features=X)``; the command and the estimators pass them): it is
refused on a precomputed graph without features.

The node weights span seven orders of magnitude, and so do the rows of the Laplace system: CG stops on the
residual of the Jacobi-scaled system (every row relative to its own degree, :func:`lgcexp.solvers.cg.cg`'s
``residual="preconditioned"``), not on ``||r|| / ||b||``, which the rows next to the labels dominate (that
criterion stopped while points far from the labels were still wrong: 1 of 1,797 digits points in 6 of 30
trials against a direct solve). GraphLearning preconditions the same way.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UserError
from ..params import Interval, positive
from .gfhf import GFHF
from .wnll import WNLL


def distance_to_labelled(X: Any, labeled: np.ndarray, block: int = 8192) -> np.ndarray:
    """Euclidean distance of every row of X to its nearest labelled row (0 at the labelled rows), exact,
    block by block in float64."""
    L = np.asarray(X[np.asarray(labeled)], dtype=np.float64)
    sq_l = (L * L).sum(axis=1)
    n = X.shape[0]
    out = np.empty(n)
    for start in range(0, n, block):
        B = np.asarray(X[start:start + block], dtype=np.float64)
        d2 = (B * B).sum(axis=1)[:, None] - 2.0 * B @ L.T + sq_l[None, :]
        out[start:start + block] = np.sqrt(np.maximum(d2.min(axis=1), 0.0))
    out[np.asarray(labeled)] = 0.0
    return out


class ProperlyWeighted(WNLL):
    """GFHF on the properly weighted graph (WNLL's reweighting with the node weights γ). Parameters as GFHF
    (``tol``, ``maxiter``, ``cmn``) and ``power``
    (p), ``zeta`` (ζ, the largest weight), ``radius`` (r, in the features' units)."""

    name = "properly"
    residual = "preconditioned"
    _parameter_constraints = {**GFHF._parameter_constraints, "power": [positive()],
                              "zeta": [Interval("real", 1, None, "neither")], "radius": [positive()]}

    def __init__(self, tol: float = 1e-8, maxiter: int = 20_000, cmn: bool = False, power: float = 2.0,
                 zeta: float = 1e7, radius: float = 0.1):
        super().__init__(tol=tol, maxiter=maxiter, cmn=cmn)
        self.power = power
        self.zeta = zeta
        self.radius = radius

    def gamma(self, X: Any, labeled: np.ndarray) -> np.ndarray:
        """``γ_i`` of every point (module docstring)."""
        p, r = float(self.power), float(self.radius)
        floor = r / (float(self.zeta) - 1.0) ** (1.0 / p)
        dist = np.maximum(distance_to_labelled(X, labeled), floor)
        return 1.0 + (r / dist) ** p

    def node_weights(self, graph, labeled) -> np.ndarray:
        X = getattr(self, "_features", None)
        if X is None:
            raise UserError("algo=properly needs the features the graph was built on (a graph given without "
                            "features, e.g. graph=precomputed, has none); use algo=wnll there")
        if X.shape[0] != graph.n:
            raise UserError(f"algo=properly: the features have {X.shape[0]} rows but the graph {graph.n} points")
        self.gamma_ = self.gamma(X, labeled)
        return self.gamma_

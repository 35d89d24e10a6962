"""``features=pca``: the leading principal components. The data are centred and the top ``n_components``
right singular vectors ``V_k`` of the centred matrix give ``Z = (X - mean) V_k`` (scaled to unit variance
per component with ``whiten``). scikit-learn's PCA does the work (exact solver: deterministic; its sign
convention fixes each component's sign)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..params import Boolean, Interval
from .base import FeatureMap, refuse_above


class PCAFeatures(FeatureMap):
    """=============  ==============  ==============================================================
    n_components   int >= 1, 50    components kept (at most min(n, d))
    whiten         bool, false     divide each component by its standard deviation
    =============  ==============  =============================================================="""

    name = "pca"
    _parameter_constraints = {"n_components": [Interval("int", 1, None)], "whiten": [Boolean()]}

    def __init__(self, n_components: int = 50, whiten: bool = False):
        self.n_components = n_components
        self.whiten = whiten

    def check_data(self, n: int, n_classes: int, prefix: str | None = None, n_features: int | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        limit = n if n_features is None else min(n, n_features)
        refuse_above(f"{prefix}n_components", self.n_components, limit,
                     f"the data have {n} points and {n_features} features")

    def _compute(self, X: np.ndarray, **_: Any) -> tuple[np.ndarray, dict[str, Any]]:
        from sklearn.decomposition import PCA

        Xd = np.asarray(X, dtype=np.float64)
        solver = "covariance_eigh" if Xd.shape[0] >= 10 * Xd.shape[1] else "full"
        pca = PCA(n_components=int(self.n_components), whiten=bool(self.whiten), svd_solver=solver)
        Z = pca.fit_transform(Xd)
        return Z, {"explained_variance_ratio": float(pca.explained_variance_ratio_.sum()), "solver": solver}

"""``features=pca``: the leading principal components. The data are centred and the top ``n_components``
right singular vectors ``V_k`` of the centred matrix give ``Z = (X - mean) V_k`` (scaled to unit variance
per component with ``whiten``, the variance with ``n - 1`` as scikit-learn's). The axes are lgcexp's one PCA,
:func:`lgcexp.preprocess.pca_axes` (exact, deterministic; each axis signed as scikit-learn's PCA signs it)."""
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
        from ..preprocess import pca_axes

        Xd = np.asarray(X, dtype=np.float64)
        mean, axes = pca_axes(Xd, int(self.n_components))
        Z = (Xd - mean) @ axes
        n = Xd.shape[0]
        variance = (Z * Z).sum(axis=0) / max(n - 1, 1)
        total = ((Xd - mean) ** 2).sum() / max(n - 1, 1)
        if self.whiten:
            Z = Z / np.sqrt(np.where(variance > 0, variance, 1.0))
        return Z, {"explained_variance_ratio": float(variance.sum() / total) if total > 0 else 1.0}

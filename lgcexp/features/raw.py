"""``features=raw`` (the default): the data's own features, unchanged. The graph is keyed by the data's
fingerprint as before, so raw runs keep their graphs, cache entries and config hashes."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..cache import Cache
from .base import FeatureMap, FeatureResult


class RawFeatures(FeatureMap):
    """The identity map (no parameters)."""

    name = "raw"
    _parameter_constraints: dict[str, list] = {}

    def transform(self, X: np.ndarray, *, data_fingerprint: str, cache: Cache | None = None,
                  **_: Any) -> FeatureResult:
        return FeatureResult(X=X, key=None)

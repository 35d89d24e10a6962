"""The :class:`FeatureMap` protocol: data (and, for supervised maps, the given labels) -> the n x d'
representation the graph is built on, cached on disk by a content key."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from ..cache import Cache, stable_hash
from ..errors import UserError
from ..params import Configurable, fmt_value

#: bump when a map's numbers change for the same parameters (old cache entries are then not reused)
KEY_VERSION = 1


@dataclass
class FeatureResult:
    """``X`` (n, d') the features; ``key`` their content key (None for ``raw``: the data's own fingerprint
    keys the graph, as before); ``cache_hit``; ``info`` facts for result.json (training loss, device...)."""

    X: np.ndarray
    key: str | None
    cache_hit: bool | None = None
    info: dict[str, Any] = field(default_factory=dict)


def labels_digest(labeled: np.ndarray, y: np.ndarray) -> str:
    """sha256 of the labelled indices and their given labels (what a supervised map depends on)."""
    h = hashlib.sha256()
    for a in (np.asarray(labeled, dtype=np.int64), np.asarray(y, dtype=np.int64)):
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


class FeatureMap(Configurable):
    """Base class. Subclasses set ``name``, ``_parameter_constraints``, ``uses_labels`` and implement
    :meth:`_compute` (the features as an array) and, where they need it, :meth:`check_data`."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "features."
    #: True: the map is fitted on the given labels (its key then holds them)
    uses_labels: ClassVar[bool] = False

    def check_data(self, n: int, n_classes: int, prefix: str | None = None, n_features: int | None = None) -> None:
        """Checks that need the data size (after loading, before any heavy work). Default: none."""

    def check_labels(self, n_labeled: int, prefix: str | None = None) -> None:
        """Checks that need the number of given labels (supervised maps). Default: none."""

    def key(self, data_fingerprint: str, labeled: np.ndarray | None = None, y: np.ndarray | None = None) -> str:
        spec: dict[str, Any] = {"features": self.name, "params": self.get_params(), "data": data_fingerprint,
                                "v": KEY_VERSION}
        if self.uses_labels:
            spec["labels"] = labels_digest(labeled, y)
        return stable_hash(spec, 32)

    def transform(self, X: np.ndarray, *, data_fingerprint: str, labeled: np.ndarray | None = None,
                  y: np.ndarray | None = None, n_classes: int | None = None, cache: Cache | None = None,
                  progress: bool = False) -> FeatureResult:
        """The features of ``X`` (n, d); ``labeled``/``y``/``n_classes``: the given labels (supervised maps)."""
        self._validate_params()
        n = int(X.shape[0])
        if self.uses_labels:
            if labeled is None or y is None or n_classes is None:
                raise ValueError(f"features={self.name} needs the given labels")
            self.check_labels(int(np.asarray(labeled).size))
        key = self.key(data_fingerprint, labeled, y)

        def compute() -> dict[str, np.ndarray]:
            Z, facts = self._compute(X, labeled=labeled, y=y, n_classes=n_classes, progress=progress)
            Z = np.ascontiguousarray(Z)
            if Z.ndim != 2 or Z.shape[0] != n or not np.isfinite(Z).all():
                raise RuntimeError(f"features={self.name} produced no finite (n, d) array (shape {Z.shape})")
            # the training facts travel with the entry, so a cache hit records what the training did
            return {"X": Z, "info": np.array(json.dumps(facts, sort_keys=True, default=float))}

        def validate(a: dict[str, np.ndarray]) -> str | None:
            Z = a.get("X")
            if Z is None or Z.ndim != 2 or Z.shape[0] != n:
                return f"features are not an array of {n} rows"
            return None

        cache = cache if cache is not None else Cache(None)
        arrays, hit = cache.get_or_compute("features", key, compute, validate)
        info = json.loads(str(arrays["info"])) if "info" in arrays else {}
        return FeatureResult(X=arrays["X"], key=key, cache_hit=hit, info=info)

    def _compute(self, X: np.ndarray, *, labeled: np.ndarray | None, y: np.ndarray | None,
                 n_classes: int | None, progress: bool) -> tuple[np.ndarray, dict[str, Any]]:  # pragma: no cover
        raise NotImplementedError


def refuse_above(key: str, value: Any, limit: int, why: str) -> None:
    """One-line UserError: ``key=value`` above a limit the data sets."""
    if value is not None and int(value) > limit:
        raise UserError(f"{key}={fmt_value(value)} is not allowed for this dataset: it must be at most {limit} ({why})")

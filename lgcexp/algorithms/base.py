"""The small protocol every graph SSL method follows (scikit-learn style).

An algorithm is built from its parameters (validated in ``__init__``, before any heavy work), fitted on a
graph and the observed labels of the labelled points, and then holds:

- ``scores_``: (n, c) class scores for every point; predictions are the row argmax (ties and all-zero rows
  go to class 0, as numpy's argmax does, matching the authors' code);
- ``labeled_pred_``: the prediction on the labelled points "after label correction" (defaults to the
  argmax of ``scores_`` on those rows; AutoL and SIIS override it);
- ``info_``: extra scalar results for ``result.json``;
- ``label_info_``: extra per-label columns for ``labels.csv`` (arrays aligned with the labelled points).

Optional hooks the pipeline uses when present:

- ``dropped_`` (bool per label) and ``suspicion_`` (float per label, higher = more likely noisy): the
  evaluate stage scores them against the flipped labels (precision/recall/F1, ROC AUC);
- ``plot(out_dir, y_true, split) -> list[str]``: figures/CSVs written when ``plot=true``; ``y_true`` is
  for evaluation curves only.
"""
from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..errors import UserError
from ..graph import Graph


def one_hot(y: np.ndarray, n_classes: int) -> np.ndarray:
    Y = np.zeros((y.size, n_classes))
    Y[np.arange(y.size), y] = 1.0
    return Y


def label_matrix(n: int, labeled: np.ndarray, y_labeled: np.ndarray, n_classes: int) -> np.ndarray:
    """The n x c label matrix Y: one-hot rows at the labelled points, zero rows elsewhere."""
    Y = np.zeros((n, n_classes))
    Y[labeled, y_labeled] = 1.0
    return Y


def check_alpha(alpha: float, name: str = "alpha") -> float:
    if not (isinstance(alpha, (int, float)) and 0.0 < float(alpha) < 1.0):
        raise UserError(f"{name}={alpha!r} is not allowed: it must be in (0, 1)")
    return float(alpha)


def check_positive(value: Any, name: str, integer: bool = False) -> Any:
    ok = isinstance(value, (int, np.integer)) if integer else isinstance(value, (int, float, np.floating))
    if isinstance(value, bool) or not ok or not np.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise UserError(f"{name}={value!r} is not allowed: it must be {kind}")
    return value


def check_bool(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise UserError(f"{name}={value!r} is not allowed: use true or false")
    return bool(value)


def check_choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UserError(f"{name}={value!r} is not allowed: choose one of {', '.join(choices)}")
    return value


class GraphSSLAlgorithm:
    """Base class: subclasses implement ``_fit`` and set ``scores_`` (and optionally the rest)."""

    name: ClassVar[str] = "base"
    #: losses this algorithm accepts through the top-level ``loss`` option (empty: it takes none)
    losses: ClassVar[tuple[str, ...]] = ()

    def required_eigenpairs(self) -> int:
        """Number of smallest Laplacian eigenpairs the method needs (0: no eigendecomposition stage)."""
        return 0

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
    ) -> "GraphSSLAlgorithm":
        """Fit on the observed labels of the labelled points.

        ``eig``: Laplacian eigenpairs when ``required_eigenpairs() > 0``; ``cache``: an optional
        :class:`lgcexp.cache.Cache` for seed-level intermediates (e.g. AutoL's P_LL)."""
        labeled = np.asarray(labeled, dtype=np.int64)
        y_labeled = np.asarray(y_labeled, dtype=np.int64)
        if labeled.shape != y_labeled.shape or labeled.ndim != 1:
            raise ValueError("labeled and y_labeled must be 1-D arrays of the same length")
        if np.unique(labeled).size != labeled.size:
            raise ValueError("labeled indices must be distinct")
        if y_labeled.size and (y_labeled.min() < 0 or y_labeled.max() >= n_classes):
            raise ValueError("labels must lie in 0..n_classes-1")
        self.info_: dict[str, Any] = {}
        self.label_info_: dict[str, np.ndarray] = {}
        self._cache = cache
        self._fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress)
        if not hasattr(self, "labeled_pred_") or self.labeled_pred_ is None:
            self.labeled_pred_ = self.scores_[labeled].argmax(axis=1)
        return self

    def _fit(self, graph, labeled, y_labeled, n_classes, *, eig=None, progress=False) -> None:  # pragma: no cover
        raise NotImplementedError

    def predict(self) -> np.ndarray:
        """Row argmax of the class scores for every point."""
        return self.scores_.argmax(axis=1)

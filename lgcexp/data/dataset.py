"""The `Dataset` record and the checks every loader's output goes through."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from lgcexp.errors import UserError


@dataclass(frozen=True, eq=False)
class Dataset:
    """Features `X` (n, d), labels `y` (n,) int64 in 0..n_classes-1, and a name."""

    name: str
    X: np.ndarray
    y: np.ndarray
    n_classes: int

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.X.shape[0])

    def fingerprint(self) -> str:
        """sha256 hex of the name, shapes, dtypes and raw bytes of X and y."""
        h = hashlib.sha256()
        h.update(f"{self.name}|{self.X.shape}|{self.X.dtype.str}|{self.y.shape}|{self.y.dtype.str}|".encode())
        for a in (self.X, self.y):
            h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
        return h.hexdigest()

    def __repr__(self) -> str:
        return f"Dataset(name={self.name!r}, n={self.n}, d={self.X.shape[1]}, n_classes={self.n_classes}, X.dtype={self.X.dtype})"


def _as_features(X: np.ndarray, source: str) -> np.ndarray:
    """Keep float32/float64; uint8 -> float32 (values kept); other numbers -> float64."""
    if X.dtype in (np.float32, np.float64):
        return X
    if X.dtype == np.uint8 or X.dtype == np.float16:
        return X.astype(np.float32)
    if X.dtype.kind in "biuf":
        return X.astype(np.float64)
    try:
        return X.astype(np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{source}: X has dtype {X.dtype}, which is not numeric; X must hold numbers") from None


def make_dataset(name: str, X, y, *, source: str | None = None) -> Dataset:
    """Check X and y, remap labels to 0..c-1 (sorted unique), and build a Dataset.

    Raises UserError (one line, starting with `source`) for wrong shapes, NaN/Inf
    features, length mismatch or fewer than two classes.
    """
    source = source or f"dataset {name!r}"
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise UserError(f"{source}: X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if y.ndim != 1:
        raise UserError(f"{source}: y must be 1-D (n_samples,), got shape {y.shape}")
    if X.shape[0] != y.shape[0]:
        raise UserError(f"{source}: X has {X.shape[0]} rows but y has {y.shape[0]} labels; they must be equal")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise UserError(f"{source}: X is empty (shape {X.shape}); need at least one row and one feature")
    X = _as_features(X, source)
    bad = ~np.isfinite(X).all(axis=1)
    if bad.any():
        rows = np.flatnonzero(bad)
        raise UserError(f"{source}: X has NaN or Inf in {rows.size} of {X.shape[0]} rows "
                        f"(first bad row: {rows[0]}); remove or impute them")
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise UserError(f"{source}: y has {int((~np.isfinite(y)).sum())} NaN/Inf labels; labels must be ints or strings")
    try:
        classes, y_idx = np.unique(y, return_inverse=True)
    except TypeError:
        raise UserError(f"{source}: y has labels of mixed types ({y.dtype}); use all ints or all strings") from None
    if classes.size < 2:
        found = f" ({classes[0]!r})" if classes.size else ""
        raise UserError(f"{source}: y has {classes.size} distinct label(s){found}; need at least 2 classes")
    return Dataset(name=name, X=X, y=y_idx.reshape(-1).astype(np.int64), n_classes=int(classes.size))

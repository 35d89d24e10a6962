"""The `Dataset` record and the checks every loader's output goes through."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from lgcexp.errors import UserError


@dataclass(frozen=True, eq=False)
class Dataset:
    """Features `X` (n, d), labels `y` (n,) int64 in 0..n_classes-1, and a name.

    Own data (``csv``, ``npy``, ``npz`` files) may carry more; every extra field is optional:

    - `labeled`, `y_observed`: the file's own labelled set (ascending point indices) and its given labels
      (0..n_classes-1, aligned with `labeled`). When present, the run is a *diagnosis run*: no labels are
      sampled, no noise is added, and the algorithms are fitted on exactly these labels.
    - `y` then holds the trusted clean label where the file has one and -1 where the truth is unknown
      (all -1 for a file without clean labels). It is only ever used for scoring.
    - `classes`: the original label values; `classes[k]` is class k as the file spells it (ints or strings).
    - `pred_probs`: out-of-fold class probabilities of the user's own model (n, c), as the file holds them
      (``dataset=npz`` array ``pred_probs``; checked when a run uses them,
      :func:`lgcexp.issues.pred_probs.run_pred_probs`).

    `image_shape`: (height, width) or (height, width, channels) where each row of X is a flattened image
    (MNIST: 28 x 28), else None; it makes the label-issue feature view the image view
    (:mod:`lgcexp.issues.image_view`).
    """

    name: str
    X: np.ndarray
    y: np.ndarray
    n_classes: int
    classes: np.ndarray | None = None
    labeled: np.ndarray | None = None
    y_observed: np.ndarray | None = None
    pred_probs: np.ndarray | None = None
    image_shape: tuple | None = None

    @property
    def has_given_labels(self) -> bool:
        """True when the file carries its own labelled set (a diagnosis run)."""
        return self.labeled is not None

    @property
    def truth_known(self) -> np.ndarray:
        """Boolean mask of the points whose true label is known (all of them, except for own data)."""
        return self.y >= 0

    def original_labels(self, k: np.ndarray) -> np.ndarray:
        """Class numbers 0..c-1 -> the label values of the file (identity when there is no mapping)."""
        k = np.asarray(k)
        return k if self.classes is None else self.classes[k]

    @property
    def n(self) -> int:
        """Number of samples."""
        return int(self.X.shape[0])

    def fingerprint(self) -> str:
        """sha256 hex of the name, shapes, dtypes and raw bytes of X and y (computed once per object: a
        Dataset's arrays are not changed after loading)."""
        fp = self.__dict__.get("_fingerprint")
        if fp is None:
            fp = self._compute_fingerprint()
            object.__setattr__(self, "_fingerprint", fp)
        return fp

    def _compute_fingerprint(self) -> str:
        h = hashlib.sha256()
        h.update(f"{self.name}|{self.X.shape}|{self.X.dtype.str}|{self.y.shape}|{self.y.dtype.str}|".encode())
        for a in (self.X, self.y):
            h.update(memoryview(np.ascontiguousarray(a)).cast("B"))
        return h.hexdigest()

    def __repr__(self) -> str:
        return (f"Dataset(name={self.name!r}, n={self.n}, d={self.X.shape[1]}, n_classes={self.n_classes}, "
                f"X.dtype={self.X.dtype})")


#: the finiteness check reads X in blocks of about this many values (a memory-mapped X is never copied whole)
FINITE_CHECK_ELEMENTS = 1 << 22


def _as_features(X: np.ndarray, source: str) -> np.ndarray:
    """Keep float32/float64 as they are (no copy: a memory-mapped X stays on disk); uint8 -> float32 (values
    kept); other numbers -> float64."""
    if X.dtype.kind == "f" and X.dtype.itemsize in (4, 8):
        return X if X.dtype.isnative else X.astype(X.dtype.newbyteorder("="))
    if X.dtype == np.uint8 or X.dtype == np.float16:
        return X.astype(np.float32)
    if X.dtype.kind in "biuf":
        return X.astype(np.float64)
    try:
        return X.astype(np.float64)
    except (TypeError, ValueError):
        raise UserError(f"{source}: X has dtype {X.dtype}, which is not numeric; X must hold numbers") from None


def check_finite_rows(X: np.ndarray, source: str) -> None:
    """Raise UserError when a row of X holds NaN or Inf. Reads X block by block (no full-size temporary)."""
    if X.dtype.kind not in "fc":
        return
    n, d = X.shape
    step = max(1, FINITE_CHECK_ELEMENTS // max(1, d))
    n_bad, first = 0, -1
    for start in range(0, n, step):
        ok = np.isfinite(X[start:start + step]).all(axis=1)
        if not ok.all():
            bad = np.flatnonzero(~ok)
            n_bad += bad.size
            if first < 0:
                first = start + int(bad[0])
    if n_bad:
        raise UserError(f"{source}: X has NaN or Inf in {n_bad} of {n} rows "
                        f"(first bad row: {first}); remove or impute them")


def check_features(X, source: str) -> np.ndarray:
    """X as a checked 2-D float32/float64 array (a float32/float64 input, memory-mapped or not, is not copied)."""
    X = np.asarray(X)
    if X.ndim != 2:
        raise UserError(f"{source}: X must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise UserError(f"{source}: X is empty (shape {X.shape}); need at least one row and one feature")
    if X.dtype.kind == "c":
        raise UserError(f"{source}: X has complex values (dtype {X.dtype}); X must hold real numbers (split a complex "
                        "feature into its real and imaginary parts, or use its magnitude)")
    X = _as_features(X, source)
    check_finite_rows(X, source)
    return X


def continuous_labels(values: np.ndarray, key: str) -> None:
    """Refuse labels that are numbers with fractions (a regression target, or features given as labels)."""
    frac = np.flatnonzero(np.asarray(values) != np.round(values))
    first = np.asarray(values).reshape(-1)[frac[0]].item()
    raise UserError(f"{key}: {frac.size} label(s) are numbers with a fraction (first: {first!r}); they look "
                    "continuous, and class labels must be ints or strings (a regression target is not a label)")


def check_image_shape(image_shape: Any, n_features: int, what: str = "image_shape") -> tuple[int, int, int]:
    """``image_shape`` as (height, width, channels) — given as (h, w) or (h, w, c) — whose product is the number
    of columns; UserError naming ``what`` otherwise."""
    try:
        shape = tuple(int(s) for s in image_shape)
        ok = len(shape) in (2, 3) and all(s >= 1 for s in shape) and all(
            float(s) == float(t) for s, t in zip(shape, image_shape))
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise UserError(f"{what}: expected (height, width) or (height, width, channels) of positive integers, "
                        f"got {image_shape!r}")
    if len(shape) == 2:
        shape = (*shape, 1)
    if math.prod(shape) != int(n_features):
        raise UserError(f"{what}: {tuple(image_shape)} holds {math.prod(shape)} values per image but X has "
                        f"{int(n_features)} columns; they must be equal")
    return shape


def image_rows(X: Any, image_shape: Any = None, what: str = "image_shape") -> tuple[Any, tuple | None]:
    """X as rows of flattened images and their shape: an (n, h, w) or (n, h, w, channels) array is reshaped to
    (n, h*w*channels) (a view, not a copy) and its own shape taken — a given ``image_shape`` must describe the
    same images —; any other X is returned as it is, with ``image_shape`` checked against its columns
    (:func:`check_image_shape`; None stays None). The one rule of ``find_label_issues`` and ``dataset=npz``."""
    if np.ndim(X) in (3, 4):
        X = np.asarray(X) if not hasattr(X, "reshape") else X
        own = tuple(int(s) for s in X.shape[1:])
        size = math.prod(own)
        if image_shape is not None and check_image_shape(image_shape, size, what) != check_image_shape(own, size):
            raise UserError(f"{what}={tuple(image_shape)} does not match X's images {own}")
        return X.reshape(X.shape[0], -1), own
    if image_shape is not None and np.ndim(X) == 2:
        check_image_shape(image_shape, np.shape(X)[1], what)
    return X, image_shape


def make_dataset(name: str, X, y, *, source: str | None = None, image_shape: tuple | None = None) -> Dataset:
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
    X = check_features(X, source)
    if y.dtype.kind == "f" and not np.isfinite(y).all():
        raise UserError(f"{source}: y has {int((~np.isfinite(y)).sum())} NaN/Inf labels; "
                        "labels must be ints or strings")
    if y.dtype.kind == "f" and not np.array_equal(y, np.round(y)):
        continuous_labels(y, f"{source}: y")
    if y.dtype.kind == "c":
        raise UserError(f"{source}: y has complex values; labels must be ints or strings")
    try:
        classes, y_idx = np.unique(y, return_inverse=True)
    except TypeError:
        raise UserError(f"{source}: y has labels of mixed types ({y.dtype}); use all ints or all strings") from None
    if classes.size < 2:
        found = f" ({classes[0]!r})" if classes.size else ""
        raise UserError(f"{source}: y has {classes.size} distinct label(s){found}; need at least 2 classes")
    return Dataset(name=name, X=X, y=y_idx.reshape(-1).astype(np.int64), n_classes=int(classes.size), classes=classes,
                   image_shape=image_shape)

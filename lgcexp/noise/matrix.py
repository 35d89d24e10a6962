"""Label noise from a given transition matrix ``T[i, j] = P(observed j | true i)`` (c x c, rows summing to
1): class-conditional noise in the "noise as a matrix" form of cleanlab and of Patrini et al. (CVPR 2017).

Counts are exact, not sampled. For each true class ``i`` with ``n_i`` labelled points, the counts
``n_i T[i, j]`` are rounded by the largest-remainder method (Hamilton's method): every entry gets
``floor(n_i T[i, j])`` and the ``n_i - sum_j floor(.)`` units left go, one each, to the entries with the
largest fractional parts; ties go to the diagonal first (the label is kept), then to the other classes in a
seeded random order. So every class keeps exactly its ``n_i`` points, and the number of flipped labels,
``sum_i (n_i - counts[i, i])``, is fixed by ``T`` and the per-class label counts alone (not by the seed).
Which points of class ``i`` receive each new class is then a uniform, seeded choice.

``T`` is given inline (``noise.matrix=[[0.8,0.2],[0.1,0.9]]``) or read from a file (``noise.path=T.npy`` or
a ``.csv`` of comma-separated numbers, one row per line); rows are renormalised to sum exactly to 1 after
the check ``|sum - 1| <= 1e-6``. The recorded ``noise_rate`` is the realised flip fraction.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from ..params import Array, Interval, NoneValue, String, fmt_value
from .base import NoiseModel

#: how far a row sum may stray from 1
ROW_SUM_TOL = 1e-6


def _entry(i: int, j: int) -> str:
    return f"[{i}][{j}]"


def check_matrix(T: Any, key: str) -> np.ndarray:
    """``T`` as a float array when it is a square, finite, non-negative, row-stochastic matrix; else a
    one-line UserError starting with ``key`` (``noise.matrix=...`` or ``noise.path=...``)."""
    try:
        A = np.asarray(T, dtype=float)
    except (TypeError, ValueError):
        raise UserError(f"{key} is not allowed: it must be a matrix of numbers (rows of equal length)") from None
    if A.ndim != 2:
        raise UserError(f"{key} is not allowed: it must be a matrix (a list of rows), not a {A.ndim}-D array")
    if A.shape[0] != A.shape[1] or A.shape[0] < 1:
        raise UserError(f"{key} is not allowed: it must be square (c x c), not {A.shape[0]} x {A.shape[1]}")
    bad = np.argwhere(~np.isfinite(A))
    if bad.size:
        i, j = bad[0]
        raise UserError(f"{key} is not allowed: entry {_entry(i, j)} is {A[i, j]}, not a finite number")
    bad = np.argwhere(A < 0)
    if bad.size:
        i, j = bad[0]
        raise UserError(f"{key} is not allowed: entry {_entry(i, j)} = {A[i, j]:g} is negative")
    sums = A.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > ROW_SUM_TOL)
    if off.size:
        i = off[0]
        raise UserError(f"{key} is not allowed: row {i} sums to {sums[i]:.10g}, not 1 (T[i, j] = P(noisy j | "
                        f"true i); each row must sum to 1 within {ROW_SUM_TOL:g})")
    return A / sums[:, None]


def load_matrix(path: str, key: str) -> np.ndarray:
    """The raw array in a ``.npy`` or ``.csv`` file; a one-line UserError starting with ``key`` otherwise."""
    p = Path(os.path.expanduser(str(path)))
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".csv"):
        raise UserError(f"{key} is not allowed: it must be a .npy or .csv file")
    if not p.is_file():
        raise UserError(f"{key} is not allowed: no such file")
    try:
        if suffix == ".npy":
            return np.load(p, allow_pickle=False)
        return np.loadtxt(p, delimiter=",", dtype=float, ndmin=2)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()
        raise UserError(f"{key} is not allowed: cannot read a matrix from it ({first[0] if first else exc})") from None


def allocate_counts(n_per_class: np.ndarray, T: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Integer counts ``C[i, j]`` with ``sum_j C[i, j] = n_i``, by largest remainder from ``n_i T[i, j]``
    (ties: the diagonal first, then a seeded random order)."""
    c = T.shape[0]
    C = np.zeros((c, c), dtype=np.int64)
    for i in range(c):
        n_i = int(n_per_class[i])
        if n_i == 0:
            continue
        q = n_i * T[i]
        near = np.abs(q - np.rint(q)) < 1e-9 * max(1, n_i)
        q = np.where(near, np.rint(q), q)
        base = np.floor(q).astype(np.int64)
        left = n_i - int(base.sum())
        if left > 0:
            rem = np.round(q - base, 9)
            tie = rng.permutation(c).astype(float)
            tie[i] = -1.0  # the diagonal first among equal remainders
            order = np.lexsort((tie, -rem))  # largest remainder first
            base[order[:left]] += 1
        C[i] = base
    return C


class MatrixNoise(NoiseModel):
    """Class-conditional label noise from a transition matrix, with exact counts.

    ======  ==========================  =========================================================
    matrix  null or c lists of c        ``T[true][noisy]``, rows summing to 1, e.g.
            numbers, null               ``[[0.8,0.2],[0.1,0.9]]``
    path    null or a file path, null   a .npy or .csv file holding T (instead of ``matrix``)
    ======  ==========================  =========================================================

    Exactly one of ``matrix`` and ``path`` is given; ``T`` must be c x c for the data's c classes.
    """

    name = "matrix"
    _parameter_constraints = {
        "matrix": [NoneValue(), Array(Array(Interval("real", None, None), min_length=1),
                                      "a list of rows of finite numbers, e.g. [[0.8,0.2],[0.1,0.9]]", min_length=1)],
        "path": [NoneValue(), String("a .npy or .csv file path")],
    }

    def __init__(self, matrix: list[list[float]] | None = None, path: str | None = None):
        self.matrix = matrix
        self.path = path

    @staticmethod
    def _key(params: dict[str, Any], prefix: str) -> str:
        if params.get("matrix") is not None:
            return f"{prefix}matrix={fmt_value(params['matrix'])}"
        return f"{prefix}path={fmt_value(params['path'])}"

    @classmethod
    def _load(cls, params: dict[str, Any], prefix: str) -> np.ndarray:
        """The checked, row-normalised matrix of a parameter mapping."""
        m, path = params.get("matrix"), params.get("path")
        if m is None and path is None:
            raise UserError(f"noise={cls.name} needs a transition matrix: set {prefix}matrix=[[...],...] or "
                            f"{prefix}path=FILE (.npy or .csv)")
        if m is not None and path is not None:
            raise UserError(f"{prefix}path={fmt_value(path)} is not allowed: {prefix}matrix is set too; give one "
                            "of them")
        key = cls._key(params, prefix)
        return check_matrix(m if m is not None else load_matrix(path, key), key)

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        cls._load(params, prefix)

    def get_matrix(self, prefix: str | None = None) -> np.ndarray:
        """The checked, row-normalised transition matrix."""
        return self._load(self.get_params(), self.config_prefix if prefix is None else prefix)

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        T = self.get_matrix(prefix)
        if T.shape[0] != n_classes:
            raise UserError(f"{self._key(self.get_params(), prefix)} is not allowed for this dataset: it is "
                            f"{T.shape[0]} x {T.shape[0]} but the data have {n_classes} classes")

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        self.check_data(0, int(n_classes))
        return self.get_matrix()

    @property
    def rate_(self) -> float:
        """The realised flip fraction after :meth:`corrupt` (fixed by T and the class counts); before it, the
        mean off-diagonal mass of T's rows."""
        counts = getattr(self, "counts_", None)
        if counts is not None and counts.sum():
            return float((counts.sum() - np.trace(counts)) / counts.sum())
        return float(np.mean(1.0 - np.diag(self.get_matrix())))

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        T = self.get_matrix()
        rng = np.random.default_rng([seed, 0x6E6F697365])
        counts = allocate_counts(np.bincount(y_clean, minlength=n_classes), T, rng)
        y_obs = y_clean.copy()
        for i in range(n_classes):
            idx = rng.permutation(np.flatnonzero(y_clean == i))
            y_obs[idx] = np.repeat(np.arange(n_classes), counts[i])
        return y_obs, y_obs != y_clean

"""No label noise: the observed labels are the clean ones (transition matrix: the identity).

It keeps a ``rate`` parameter fixed at 0, so that everything keyed on ``noise.rate`` (sweep directory
names, SIIS's per-rate lambda1 table, the tables' noise column) treats a ``noise=none`` run as a 0 % run.
A dataset whose config sets a nonzero default rate (``digits``: 0.2) needs ``noise=none noise.rate=0``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..params import Constraint
from .base import NoiseModel


class _Zero(Constraint):
    def is_satisfied_by(self, v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and v == 0

    def __str__(self) -> str:
        return "0 (noise=none flips no labels; set noise.rate=0, or choose noise=uniform)"


class NoNoise(NoiseModel):
    """The clean labels, unchanged.

    ========  ===============  ==========================================
    rate      0 only, 0.0      fixed: present so that ``noise.rate`` reads 0
    ========  ===============  ==========================================
    """

    name = "none"
    _parameter_constraints = {"rate": [_Zero()]}

    def __init__(self, rate: float = 0.0):
        self.rate = rate

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        return np.eye(int(n_classes))

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        return y_clean.copy(), np.zeros(y_clean.size, dtype=bool)

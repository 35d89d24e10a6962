"""Uniform label noise ("noisy completely at random"; paper §4): exactly ``m = l - round(l (1 - rate))``
labelled points, chosen uniformly, each moved to a class drawn uniformly among the other ``c - 1``."""
from __future__ import annotations

import numpy as np

from ..errors import UserError
from .base import RATE, NoiseModel, noisy_count


class UniformNoise(NoiseModel):
    """Exact-count uniform label noise. Parameter: ``rate`` in [0, 1)."""

    name = "uniform"
    _parameter_constraints = {"rate": RATE}

    def __init__(self, rate: float = 0.0):
        self.rate = rate

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([seed, 0x6E6F697365])  # stream "noise", independent of sampling
        m = noisy_count(y_clean.size, float(self.rate))
        flipped = np.zeros(y_clean.size, dtype=bool)
        y_obs = y_clean.copy()
        if m == 0:
            return y_obs, flipped
        if n_classes < 2:
            raise UserError("label noise needs at least 2 classes")
        picks = rng.choice(y_clean.size, size=m, replace=False)
        # a uniform class among the other c-1: draw 1..c-1 and add it modulo c
        shift = rng.integers(1, n_classes, size=m)
        y_obs[picks] = (y_clean[picks] + shift) % n_classes
        flipped[picks] = True
        return y_obs, flipped

"""Uniform label noise ("noisy completely at random"; paper §4): exactly ``m = l - round(l (1 - rate))``
labelled points, chosen uniformly, each moved to a class drawn uniformly among the other ``c - 1``.

The count is exact and not stratified by class, as in the authors' code (docs/fidelity.md#noise); the draw
itself is this package's own (numpy ``default_rng``). ``noise=reference`` reproduces the authors' draw.
"""
from __future__ import annotations

import numpy as np

from .base import RATE, NoiseModel, noisy_count, uniform_transition


class UniformNoise(NoiseModel):
    """Exact-count uniform label noise.

    ========  ===============  =========================================================
    rate      [0, 1), 0.0      fraction of the labelled points flipped (count rounded as
                               ``l - round(l (1 - rate))``)
    ========  ===============  =========================================================

    Expected transition matrix: ``1 - rate`` on the diagonal, ``rate / (c - 1)`` elsewhere.
    """

    name = "uniform"
    _parameter_constraints = {"rate": RATE}

    def __init__(self, rate: float = 0.0):
        self.rate = rate

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        return uniform_transition(n_classes, float(self.rate))

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([seed, 0x6E6F697365])  # stream "noise", independent of sampling
        m = noisy_count(y_clean.size, float(self.rate))
        flipped = np.zeros(y_clean.size, dtype=bool)
        y_obs = y_clean.copy()
        if m == 0:
            return y_obs, flipped
        picks = rng.choice(y_clean.size, size=m, replace=False)
        # a uniform class among the other c-1: draw 1..c-1 and add it modulo c
        shift = rng.integers(1, n_classes, size=m)
        y_obs[picks] = (y_clean[picks] + shift) % n_classes
        flipped[picks] = True
        return y_obs, flipped

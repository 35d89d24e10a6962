"""Pairwise (class-flip) label noise: every flipped label of true class ``k`` becomes the one class
``permutation[k]`` (default ``k + 1 mod c``, the "pair flipping" of Han et al., Co-teaching, NeurIPS 2018).

Exactly ``m = l - round(l (1 - rate))`` labelled points flip (the count of ``noise=uniform``); which ones is
a uniform, seeded choice among all labelled points (not stratified by class).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UserError
from ..params import Array, Interval, NoneValue, fmt_value
from .base import RATE, NoiseModel, noisy_count


class PairwiseNoise(NoiseModel):
    """Exact-count pair-flip label noise.

    ===========  ==========================  ====================================================
    rate         [0, 1), 0.0                 fraction of the labelled points flipped
    permutation  null or a list of c ints,   ``permutation[true] = noisy`` class; a permutation of
                 null                        0..c-1 without fixed points; null: ``k -> k+1 mod c``
    ===========  ==========================  ====================================================

    Expected transition matrix: ``1 - rate`` on the diagonal, ``rate`` at ``(k, permutation[k])``.
    """

    name = "pairwise"
    _parameter_constraints = {
        "rate": RATE,
        "permutation": [NoneValue(), Array(Interval("int", 0, None), "a list of class indices", min_length=2)],
    }

    def __init__(self, rate: float = 0.0, permutation: list[int] | None = None):
        self.rate = rate
        self.permutation = permutation

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        perm = params.get("permutation")
        if perm is None:
            return
        c = len(perm)
        if sorted(perm) != list(range(c)):
            raise UserError(f"{prefix}permutation={fmt_value(perm)} is not allowed: it must be a permutation of "
                            f"0..{c - 1} (each class exactly once)")
        fixed = [k for k in range(c) if perm[k] == k]
        if fixed:
            raise UserError(f"{prefix}permutation={fmt_value(perm)} is not allowed: class {fixed[0]} maps to "
                            "itself; every class must move to another one")

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        super().check_data(n, n_classes, prefix)
        prefix = self.config_prefix if prefix is None else prefix
        perm = self.permutation
        if perm is not None and len(perm) != n_classes:
            raise UserError(f"{prefix}permutation={fmt_value(perm)} is not allowed for this dataset: it has "
                            f"{len(perm)} entries but the data have {n_classes} classes")

    def target(self, n_classes: int) -> np.ndarray:
        """The noisy class of each true class."""
        if self.permutation is None:
            return (np.arange(n_classes) + 1) % n_classes
        return np.asarray(self.permutation, dtype=np.int64)

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        c = int(n_classes)
        if c == 1:
            return np.ones((1, 1))
        T = np.eye(c) * (1.0 - float(self.rate))
        T[np.arange(c), self.target(c)] += float(self.rate)
        return T

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng([seed, 0x6E6F697365])  # the stream of noise=uniform
        m = noisy_count(y_clean.size, float(self.rate))
        y_obs = y_clean.copy()
        flipped = np.zeros(y_clean.size, dtype=bool)
        if m == 0:
            return y_obs, flipped
        picks = rng.choice(y_clean.size, size=m, replace=False)
        y_obs[picks] = self.target(n_classes)[y_clean[picks]]
        flipped[picks] = True
        return y_obs, flipped

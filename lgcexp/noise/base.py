"""The noise-model protocol: a seeded, exact-count corruption of the labelled points' labels.

A noise model is a :class:`~lgcexp.params.Configurable` (``__init__`` only stores; a parameter table) with
``corrupt(y_clean, n_classes, seed) -> (y_observed, flipped)``. Draws are pure functions of the clean labels
and the seed, so the same config and seed give the same flips.
"""
from __future__ import annotations

from typing import ClassVar

import numpy as np

from ..params import Configurable, Interval

#: the ``rate`` parameter shared by the noise models: the fraction of labels flipped, in [0, 1)
RATE = [Interval("real", 0, 1, "left")]


def noisy_count(n_labeled: int, rate: float) -> int:
    """Number of flipped labels: ``l - round(l (1 - rate))`` (the authors' round-off; docs/fidelity.md)."""
    return int(n_labeled - round(n_labeled * (1.0 - rate)))


class NoiseModel(Configurable):
    """Base class: subclasses declare ``_parameter_constraints`` and implement ``_corrupt``."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "noise."

    def corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(observed labels, flipped mask) for the labelled points' clean labels ``y_clean``."""
        self._validate_params()
        y_clean = np.asarray(y_clean, dtype=np.int64)
        y_obs, flipped = self._corrupt(y_clean, int(n_classes), int(seed))
        y_obs = np.asarray(y_obs, dtype=np.int64)
        flipped = np.asarray(flipped, dtype=bool)
        if not np.array_equal(flipped, y_obs != y_clean):
            raise RuntimeError(f"noise model {self.name!r} marked labels as flipped that it did not change")
        return y_obs, flipped

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    @property
    def rate_(self) -> float:
        """The nominal flip rate recorded with the run (0 for models without one)."""
        return float(getattr(self, "rate", 0.0))

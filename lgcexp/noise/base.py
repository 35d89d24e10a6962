"""The noise-model protocol: a seeded, exact-count corruption of the labelled points' labels.

A noise model is a :class:`~lgcexp.params.Configurable` (``__init__`` only stores; a parameter table) with

* ``corrupt(y_clean, n_classes, seed, X=None) -> (y_observed, flipped)``: a pure function of the clean
  labels, the seed and (for a model with ``needs_features = True``: instance-dependent noise) the features
  ``X`` of the labelled points, one row per label, so the same config and seed give the same flips; after
  a call, ``counts_`` holds the realised c x c count matrix ``counts_[true, observed]`` (its diagonal: the
  labels kept per class);
* ``transition_matrix(n_classes)``: the expected c x c transition matrix ``T[i, j] = P(observed j | true i)``
  (the "noise as a matrix" view of cleanlab), row-stochastic.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ..errors import UserError
from ..params import Configurable, Interval, fmt_value

#: the ``rate`` parameter shared by the noise models: the fraction of labels flipped, in [0, 1)
RATE = [Interval("real", 0, 1, "left")]


def noisy_count(n_labeled: int, rate: float) -> int:
    """Number of flipped labels: ``l - round(l (1 - rate))`` (the authors' round-off; docs/fidelity.md)."""
    return int(n_labeled - round(n_labeled * (1.0 - rate)))


def count_matrix(y_clean: np.ndarray, y_observed: np.ndarray, n_classes: int) -> np.ndarray:
    """The c x c matrix of (true, observed) label counts."""
    counts = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(counts, (np.asarray(y_clean, dtype=np.int64), np.asarray(y_observed, dtype=np.int64)), 1)
    return counts


def uniform_transition(n_classes: int, rate: float) -> np.ndarray:
    """Diagonal ``1 - rate``, off-diagonal ``rate / (c - 1)`` (the identity when c = 1)."""
    c = int(n_classes)
    if c == 1:
        return np.ones((1, 1))
    T = np.full((c, c), float(rate) / (c - 1))
    np.fill_diagonal(T, 1.0 - float(rate))
    return T


def weighted_sample(weights: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` distinct indices drawn without replacement with probability proportional to ``weights``
    (successive draws, each among the indices not yet drawn), by Efraimidis & Spirakis' keys
    (Inf. Process. Lett. 97, 2006): the ``m`` largest ``log(u_i) / w_i``, ``u_i`` uniform on (0, 1).
    Zero weights are drawn last (after every positive one), uniformly among themselves. Sorted ascending."""
    w = np.asarray(weights, dtype=np.float64)
    m = int(m)
    if m <= 0:
        return np.zeros(0, dtype=np.int64)
    u = rng.random(w.size)
    u = np.where(u > 0, u, np.nextafter(0.0, 1.0))
    pos = w > 0
    keys = np.where(pos, np.log(u) / np.where(pos, w, 1.0), -np.inf)
    tie = rng.random(w.size)  # order among zero weights
    order = np.lexsort((-tie, -keys))
    return np.sort(order[:m]).astype(np.int64)


def flip_exact_count(y_clean: np.ndarray, n_classes: int, rate: float,
                     draw: Any) -> tuple[np.ndarray, np.ndarray]:
    """Exactly :func:`noisy_count` labels flipped, chosen by an instance-dependent model: ``draw(m)``
    returns (the ``m`` indices to flip, their new labels). Nothing is drawn when no label flips or there
    is a single class. Returns (observed labels, flipped mask)."""
    m = noisy_count(y_clean.size, float(rate))
    y_obs = y_clean.copy()
    flipped = np.zeros(y_clean.size, dtype=bool)
    if m == 0 or n_classes < 2:
        return y_obs, flipped
    picks, labels = draw(m)
    y_obs[picks] = labels
    flipped[picks] = True
    return y_obs, flipped


class NoiseModel(Configurable):
    """Base class: subclasses declare ``_parameter_constraints`` and implement ``_corrupt`` and
    ``transition_matrix``."""

    name: ClassVar[str] = "base"
    config_prefix: ClassVar[str] = "noise."
    #: instance-dependent models read the labelled points' features (``corrupt(..., X=...)``); the others
    #: never see them, so the pipeline only slices ``X`` for a model that asks
    needs_features: ClassVar[bool] = False

    def corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int,
                X: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(observed labels, flipped mask) for the labelled points' clean labels ``y_clean``; ``X``: their
        features (one row per label), read only by a model with ``needs_features``."""
        self._validate_params()
        y_clean = np.asarray(y_clean, dtype=np.int64)
        n_classes = int(n_classes)
        if y_clean.size and (y_clean.min() < 0 or y_clean.max() >= n_classes):
            raise ValueError(f"labels must lie in 0..{n_classes - 1}")
        self.check_data(int(y_clean.size), n_classes)
        if self.needs_features:
            if X is None:
                raise UserError(f"noise={self.name} needs the features of the labelled points (X), and none were given")
            X = np.asarray(X, dtype=np.float64)
            if X.ndim != 2 or X.shape[0] != y_clean.size:
                raise ValueError(f"X must hold one row per label: shape {X.shape} for {y_clean.size} labels")
            y_obs, flipped = self._corrupt(y_clean, n_classes, int(seed), X=X)
        else:
            y_obs, flipped = self._corrupt(y_clean, n_classes, int(seed))
        y_obs = np.asarray(y_obs, dtype=np.int64)
        flipped = np.asarray(flipped, dtype=bool)
        if not np.array_equal(flipped, y_obs != y_clean):
            raise RuntimeError(f"noise model {self.name!r} marked labels as flipped that it did not change")
        self.counts_ = count_matrix(y_clean, y_obs, n_classes)
        return y_obs, flipped

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError  # pragma: no cover

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        """The expected (nominal) transition matrix ``T[true, observed]``, c x c, rows summing to 1."""
        raise NotImplementedError  # pragma: no cover

    @property
    def rate_(self) -> float:
        """The nominal flip rate recorded with the run (0 for models without one)."""
        return float(getattr(self, "rate", 0.0))

    @classmethod
    def check_config(cls, params: Mapping[str, Any], prefix: str | None = None) -> None:
        prefix = cls.config_prefix if prefix is None else prefix
        if "rate" in params and "rate" not in cls._parameter_constraints:
            raise UserError(f"{prefix}rate={fmt_value(params['rate'])} is not allowed: noise={cls.name} takes no "
                            f"rate; drop it with ~{prefix}rate")
        super().check_config(params, prefix)

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """Flipping a label needs a second class."""
        prefix = self.config_prefix if prefix is None else prefix
        rate = getattr(self, "rate", None)
        if rate and n_classes < 2:
            raise UserError(f"{prefix}rate={fmt_value(rate)} is not allowed for this dataset: it has one class, "
                            "so no label can be flipped")

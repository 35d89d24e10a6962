"""Built-in data sets that need no download: digits and spirals (a user's own npz: :mod:`.npzfile`)."""

from __future__ import annotations

import math

import numpy as np

from lgcexp.errors import UserError

from ..params import Interval
from .dataset import Dataset, make_dataset
from .source import DataSource


def load_digits() -> Dataset:
    """scikit-learn's 8x8 digits: 1797 x 64 float64 (values 0..16), 10 classes."""
    from sklearn.datasets import load_digits as _sk_digits

    d = _sk_digits()
    return make_dataset("digits", d.data, d.target)


def make_spirals(n_samples: int = 1000, noise: float = 0.0, seed: int = 0) -> Dataset:
    """Two interleaved spirals (class 0 and class 1), the classic graph-SSL toy.

    Angles t = sqrt(u) * 13/6 pi (u ~ U(0, 1], about 1.1 turns) give points t * (-cos t, sin t)
    scaled to radius <= 1; class 1 is class 0 rotated by 180 degrees. Gaussian noise with
    standard deviation `noise` is added to both coordinates. Rows are shuffled. Deterministic
    in `seed` (numpy default_rng).
    """
    if isinstance(n_samples, bool) or not isinstance(n_samples, (int, np.integer)) or n_samples < 2:
        raise UserError(f"spirals: n_samples must be an integer >= 2, got {n_samples!r}")
    try:
        noise = float(noise)
    except (TypeError, ValueError):
        raise UserError(f"spirals: noise must be a number >= 0, got {noise!r}") from None
    if not math.isfinite(noise) or noise < 0:
        raise UserError(f"spirals: noise must be a finite number >= 0, got {noise!r}")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))):
        raise UserError(f"spirals: seed must be an integer, got {seed!r}")
    n = int(n_samples)
    rng = np.random.default_rng(seed)
    y = np.repeat(np.array([0, 1], dtype=np.int64), [(n + 1) // 2, n // 2])
    t_max = 13.0 / 6.0 * np.pi
    t = np.sqrt(1.0 - rng.random(n)) * t_max  # in (0, t_max]
    X = np.stack([-np.cos(t) * t, np.sin(t) * t], axis=1) / t_max
    X[y == 1] *= -1.0
    if noise > 0:
        X += noise * rng.standard_normal(X.shape)
    order = rng.permutation(n)
    return make_dataset("spirals", X[order], y[order])


class Digits(DataSource):
    """scikit-learn's handwritten digits (1797 x 64, 10 classes), offline."""

    name = "digits"
    labels_always_sampled = True

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        return load_digits()


class Spirals(DataSource):
    """Two interleaved spirals (paper Figure 1). Parameters: ``n_samples``, ``noise`` (sd), ``seed``."""

    name = "spirals"
    labels_always_sampled = True
    _parameter_constraints = {
        "n_samples": [Interval("int", 2, None)],
        "noise": [Interval("real", 0, None)],
        "seed": [Interval("int", 0, 2**32 - 1)],
    }

    def __init__(self, n_samples: int = 1000, noise: float = 0.05, seed: int = 0):
        self.n_samples = n_samples
        self.noise = noise
        self.seed = seed

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        return make_spirals(self.n_samples, self.noise, self.seed)

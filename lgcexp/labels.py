"""Stage 2: label sampling and label noise (pure functions of the labels and the seed).

Sampling is stratified exactly as scikit-learn's ``train_test_split(stratify=y, random_state=seed)``
allocates it, which is what the paper's authors used (docs/fidelity.md#labels): ISOLET 1040 labels are 40 per
class; MNIST 100 labels are 11 of digit 1, 9 of digit 5 and 10 of every other digit.

Noise is uniform ("NCAR", docs/fidelity.md#noise): exactly ``m = l - round(l * (1 - rate))`` labelled points, chosen
uniformly, each flipped to a class drawn uniformly among the other ``c - 1``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import UserError


@dataclass(frozen=True)
class LabelSplit:
    """The labelled set of one run.

    ``labeled`` holds ascending point indices; ``y_clean``/``y_observed`` are their true and (possibly
    noisy) labels in that order; ``flipped`` is a boolean mask over ``labeled``.
    """

    labeled: np.ndarray
    y_clean: np.ndarray
    y_observed: np.ndarray
    flipped: np.ndarray

    @property
    def n_labeled(self) -> int:
        return int(self.labeled.size)

    @property
    def n_flipped(self) -> int:
        return int(self.flipped.sum())

    def unlabeled_mask(self, n: int) -> np.ndarray:
        mask = np.ones(n, dtype=bool)
        mask[self.labeled] = False
        return mask


def check_label_count(n_labels: int, n: int, n_classes: int) -> None:
    """Refuse a labelled-set size that stratified sampling cannot honour."""
    if not isinstance(n_labels, (int, np.integer)) or isinstance(n_labels, bool):
        raise UserError(f"labels.n={n_labels!r} must be an integer")
    if n_labels < n_classes or n_labels >= n:
        raise UserError(
            f"labels.n={n_labels} is not allowed for this dataset: it must be at least the number of "
            f"classes ({n_classes}) and less than the number of points ({n})"
        )


def check_noise_rate(rate: float) -> None:
    if not (isinstance(rate, (int, float)) and 0.0 <= float(rate) < 1.0):
        raise UserError(f"noise.rate={rate!r} is not allowed: it must be a number in [0, 1)")


def sample_labeled(y: np.ndarray, n_labels: int, seed: int) -> np.ndarray:
    """Indices (ascending) of a class-stratified sample of exactly ``n_labels`` points."""
    from sklearn.model_selection import train_test_split

    n_classes = int(y.max()) + 1
    check_label_count(n_labels, y.size, n_classes)
    counts = np.bincount(y, minlength=n_classes)
    if counts.min() < 2:
        raise UserError(
            f"class {int(counts.argmin())} has {int(counts.min())} point(s); stratified sampling needs at "
            "least 2 per class"
        )
    train, _ = train_test_split(
        np.arange(y.size), train_size=int(n_labels), stratify=y, random_state=int(seed)
    )
    return np.sort(train)


def noisy_count(n_labeled: int, rate: float) -> int:
    """Number of flipped labels: ``l - round(l (1 - rate))`` (docs/fidelity.md#noise)."""
    return int(n_labeled - round(n_labeled * (1.0 - rate)))


def flip_labels(y_clean: np.ndarray, n_classes: int, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform label noise with an exact count; returns (observed labels, flipped mask)."""
    check_noise_rate(rate)
    rng = np.random.default_rng([int(seed), 0x6E6F697365])  # stream "noise", independent of sampling
    m = noisy_count(y_clean.size, rate)
    flipped = np.zeros(y_clean.size, dtype=bool)
    y_obs = y_clean.copy()
    if m == 0:
        return y_obs, flipped
    if n_classes < 2:
        raise UserError("label noise needs at least 2 classes")
    picks = rng.choice(y_clean.size, size=m, replace=False)
    # A uniform class among the other c-1: draw 1..c-1 and add it modulo c.
    shift = rng.integers(1, n_classes, size=m)
    y_obs[picks] = (y_clean[picks] + shift) % n_classes
    flipped[picks] = True
    return y_obs, flipped


def sample_and_corrupt(y: np.ndarray, n_labels: int, rate: float, seed: int) -> LabelSplit:
    """Stage 2 in one call: stratified labelled set, then exact-count uniform noise on it."""
    labeled = sample_labeled(y, n_labels, seed)
    y_clean = y[labeled].astype(np.int64)
    y_obs, flipped = flip_labels(y_clean, int(y.max()) + 1, rate, seed)
    return LabelSplit(labeled=labeled, y_clean=y_clean, y_observed=y_obs, flipped=flipped)

"""Stage 2: label sampling and label noise (pure functions of the labels and the seed).

Sampling is stratified exactly as scikit-learn's ``train_test_split(stratify=y, random_state=seed)``
allocates it, which is what the paper's authors used (docs/fidelity.md#labels): ISOLET 1040 labels are 40 per
class; MNIST 100 labels are 11 of digit 1, 9 of digit 5 and 10 of every other digit.

Noise comes from a noise model (:mod:`lgcexp.noise`; default uniform with an exact count, docs/fidelity.md#noise).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UserError
from .params import Interval, NoneValue, check_value


@dataclass(frozen=True)
class LabelSplit:
    """The labelled set of one run.

    ``labeled`` holds ascending point indices; ``y_clean``/``y_observed`` are their true and (possibly
    noisy) labels in that order; ``flipped`` is a boolean mask over ``labeled``. For a file with its own
    labelled set (:func:`given_labels`), ``y_clean`` is -1 where the file has no trusted label.
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


#: the ``labels`` section of the config (``n: null`` for files that carry their own labelled set)
LABELS_PARAMETERS = {"n": [Interval("int", 1, None), NoneValue()]}


def check_label_count(n_labels: int | None, n: int, n_classes: int) -> None:
    """Refuse a labelled-set size that stratified sampling cannot honour."""
    if n_labels is None:
        raise UserError(
            f"labels.n has no value: this data has no labelled set of its own, so labels are sampled; set "
            f"labels.n=... (at least the number of classes, {n_classes}, and less than the number of points, {n})"
        )
    check_value("labels.n", n_labels, LABELS_PARAMETERS["n"])
    if n_labels < n_classes or n_labels >= n:
        raise UserError(
            f"labels.n={n_labels} is not allowed for this dataset: it must be at least the number of "
            f"classes ({n_classes}) and less than the number of points ({n})"
        )


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


def flip_labels(y_clean: np.ndarray, n_classes: int, rate: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Uniform label noise with an exact count (shorthand for ``UniformNoise(rate).corrupt``)."""
    from .noise.uniform import UniformNoise

    return UniformNoise(rate).corrupt(y_clean, n_classes, seed)


def sample_and_corrupt(y: np.ndarray, n_labels: int, rate: float = 0.0, seed: int = 0, *,
                       noise: Any = None, X: Any = None) -> LabelSplit:
    """Stage 2 in one call: stratified labelled set, then label noise on it (``noise``: a
    :class:`lgcexp.noise.NoiseModel`; default exact-count uniform noise at ``rate``). ``X``: all the
    points' features; only an instance-dependent model (``noise.needs_features``) reads them, at the
    labelled rows."""
    if noise is None:
        from .noise.uniform import UniformNoise

        noise = UniformNoise(rate)
    labeled = sample_labeled(y, n_labels, seed)
    y_clean = y[labeled].astype(np.int64)
    Xl = None
    if getattr(noise, "needs_features", False):
        if X is None:
            raise UserError(f"noise={noise.name} needs the features of the points; this data set has none here")
        Xl = np.asarray(X[labeled], dtype=np.float64)
    y_obs, flipped = noise.corrupt(y_clean, int(y.max()) + 1, seed, X=Xl)
    return LabelSplit(labeled=labeled, y_clean=y_clean, y_observed=y_obs, flipped=flipped)


def given_labels(data: Any) -> LabelSplit:
    """Stage 2 for a file that carries its own labelled set (a diagnosis run): the labels as given, nothing
    sampled, nothing flipped by us. ``y_clean`` holds the file's trusted label where it has one and -1
    elsewhere; ``flipped`` marks the given labels that a trusted label contradicts (all False without one)."""
    labeled = np.asarray(data.labeled, dtype=np.int64)
    y_observed = np.asarray(data.y_observed, dtype=np.int64)
    y_clean = np.asarray(data.y, dtype=np.int64)[labeled]
    flipped = (y_clean >= 0) & (y_clean != y_observed)
    return LabelSplit(labeled=labeled, y_clean=y_clean, y_observed=y_observed, flipped=flipped)

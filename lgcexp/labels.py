"""Stage 2: label sampling and label noise (pure functions of the labels and the seed).

Sampling is stratified exactly as scikit-learn's ``train_test_split(stratify=y, random_state=seed)``
allocates it, which is what the paper's authors used (docs/fidelity.md#labels): ISOLET 1040 labels are 40 per
class; MNIST 100 labels are 11 of digit 1, 9 of digit 5 and 10 of every other digit.

The low-label protocol (GraphLearning's, Calder et al.): ``labels.per_class=k`` draws exactly k labelled points
of every class (``numpy.random.default_rng(seed)``, classes in order, each without replacement), so trials are
seeds; ``labels.sets=file.npz`` reads the labelled sets from a file of index rows (array ``indices``, or the
file's only array; one row per trial, row ``seed`` is the run's set), so a published split can be rerun, and
:func:`write_label_sets` (``scripts/label_sets.py``) writes lgcexp's own. ``sets`` wins over ``per_class``,
which wins over ``n``.

Noise comes from a noise model (:mod:`lgcexp.noise`; default uniform with an exact count, docs/fidelity.md#noise).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UserError
from .params import Interval, NoneValue, String, check_value


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
LABELS_PARAMETERS = {
    "n": [Interval("int", 1, None), NoneValue()],
    "per_class": [Interval("int", 1, None), NoneValue()],
    "sets": [String("a path to an .npz of labelled index rows"), NoneValue()],
}
SETS_ARRAY = "indices"


def label_protocol(config: dict[str, Any]) -> bool:
    """Whether a (resolved) config draws its labels by ``per_class`` or reads them from ``sets``."""
    lab = config.get("labels") or {}
    return lab.get("per_class") is not None or lab.get("sets") is not None


def sample_per_class(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Indices (ascending) of exactly ``k`` points of every class, drawn by ``default_rng(seed)``."""
    y = np.asarray(y, dtype=np.int64)
    counts = np.bincount(y)
    if counts.min() < k + 1:
        c = int(counts.argmin())
        raise UserError(f"labels.per_class={k} is not allowed for this dataset: class {c} has {int(counts[c])} "
                        f"point(s), and every class needs more than {k}")
    rng = np.random.default_rng(int(seed))
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), k, replace=False)
                                   for c in range(counts.size)]))


#: arrays :func:`write_label_sets` adds beside the rows, so a file is not applied to another data set: the
#: number of points and a digest of their labels (:func:`labels_digest`)
SETS_N, SETS_DIGEST = "n_points", "labels_sha256"
_SETS_META = (SETS_N, SETS_DIGEST, "seeds")


def labels_digest(y: np.ndarray) -> str:
    """sha256 hex of the labels of every point (as int64): which data set a label-set file belongs to."""
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(np.asarray(y, dtype=np.int64)).tobytes()).hexdigest()


def _load_rows(path: str) -> tuple[np.ndarray, str, dict[str, Any]]:
    """(rows, array name, metadata) of a label-set file: an ``.npz`` (array ``indices``, or its only array) or
    an ``.npy`` of rows; one-line UserErrors for a missing file, a directory, or a file of another kind."""
    import os
    import zipfile

    key = f"labels.sets={path}"
    where = os.path.expanduser(str(path))
    if os.path.isdir(where):
        raise UserError(f"{key} is not allowed: it is a directory, not a file")
    if not os.path.isfile(where):
        raise UserError(f"{key} is not allowed: no such file ({os.path.abspath(where)})")
    try:
        with open(where, "rb") as fh:
            head = fh.read(6)
    except OSError as exc:
        raise UserError(f"{key} is not allowed: cannot read it ({exc.strerror or exc})") from None
    meta: dict[str, Any] = {}
    try:
        if head == b"\x93NUMPY":  # an .npy: the rows themselves
            return np.load(where, allow_pickle=False), "the array", meta
        if not zipfile.is_zipfile(where):
            raise UserError(f"{key} is not allowed: it is not an .npz or .npy file (write one with "
                            f"scripts/label_sets.py, or np.savez(path, {SETS_ARRAY}=rows))")
        with np.load(where, allow_pickle=False) as f:
            names = [x for x in f.files if x not in _SETS_META] if SETS_ARRAY not in f.files else [SETS_ARRAY]
            if len(names) != 1:
                raise UserError(f"{key} is not allowed: the file needs an array '{SETS_ARRAY}' "
                                f"(it has {', '.join(f.files) or 'none'})")
            name = names[0]
            rows = np.asarray(f[name])
            for m in (SETS_N, SETS_DIGEST):
                if m in f.files:
                    meta[m] = f[m].item()
    except UserError:
        raise
    except ValueError as exc:
        why = ("it holds pickled objects, which are never loaded; save the rows as an integer array"
               if "pickle" in str(exc) else f"cannot read it ({str(exc).splitlines()[0] if str(exc) else exc})")
        raise UserError(f"{key} is not allowed: {why}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as exc:
        raise UserError(f"{key} is not allowed: cannot read it ({exc})") from None
    return rows, f"'{name}'", meta


def read_label_set(path: str, seed: int, n: int, y: np.ndarray | None = None) -> np.ndarray:
    """Row ``seed`` of the label-set file (module docstring), checked: a non-empty row of distinct indices in
    0..n-1, from a file written for this data set (when it says which: :func:`write_label_sets`); with the
    points' labels ``y``, a row that labels every class."""
    rows, name, meta = _load_rows(path)
    key = f"labels.sets={path}"
    if rows.ndim != 2 or not np.issubdtype(rows.dtype, np.integer):
        raise UserError(f"{key} is not allowed: {name} must be a 2-D integer array (one row per trial), "
                        f"not {rows.dtype} of shape {rows.shape}")
    if rows.shape[1] == 0:
        raise UserError(f"{key} is not allowed: its rows are empty ({rows.shape[0]} rows of 0 indices)")
    if SETS_N in meta and int(meta[SETS_N]) != n:
        raise UserError(f"{key} is not allowed: it was written for a data set of {int(meta[SETS_N])} points, "
                        f"and this one has {n}")
    if y is not None and SETS_DIGEST in meta and str(meta[SETS_DIGEST]) != labels_digest(y):
        raise UserError(f"{key} is not allowed: it was written for another data set of {n} points (their "
                        "labels differ from this one's)")
    if seed >= rows.shape[0]:
        raise UserError(f"seed={seed} is not allowed with {key}: the file has {rows.shape[0]} rows "
                        f"(seeds 0..{rows.shape[0] - 1})")
    row = rows[seed].astype(np.int64)
    if row.min() < 0 or row.max() >= n or np.unique(row).size != row.size:
        raise UserError(f"{key} is not allowed: row {seed} must hold distinct indices in 0..{n - 1}")
    if y is not None:
        y = np.asarray(y, dtype=np.int64)
        counts = np.bincount(y[row], minlength=int(y.max()) + 1)
        if (counts == 0).any():
            missing = np.flatnonzero(counts == 0)
            shown = ", ".join(str(int(c)) for c in missing[:10]) + (", ..." if missing.size > 10 else "")
            raise UserError(f"{key} is not allowed: row {seed} labels {int((counts > 0).sum())} of {counts.size} "
                            f"classes (none of class {shown}); every class needs a labelled point, since a "
                            "method cannot predict a class it has never seen")
    return np.sort(row)


def choose_labeled(y: np.ndarray, n_labels: int | None, seed: int, labels: dict[str, Any] | None = None) -> np.ndarray:
    """The labelled points of a sampled run (ascending): ``labels.sets``, else ``labels.per_class``, else a
    stratified ``n_labels`` (module docstring)."""
    lab = labels or {}
    if lab.get("sets") is not None:
        return read_label_set(lab["sets"], seed, y.size, y)
    if lab.get("per_class") is not None:
        return sample_per_class(y, int(lab["per_class"]), seed)
    return sample_labeled(y, n_labels, seed)


def write_label_sets(path: str, y: np.ndarray, seeds, *, per_class: int | None = None,
                     n_labels: int | None = None) -> np.ndarray:
    """Write lgcexp's labelled sets for ``seeds`` (rows in that order; ``per_class`` or ``n_labels``) to an .npz
    that ``labels.sets=`` reads back; returns the rows. The file also records the number of points and a
    digest of their labels, so it is refused on another data set."""
    seeds = list(seeds)
    if per_class is not None:
        rows = [sample_per_class(y, per_class, s) for s in seeds]
    else:
        rows = [sample_labeled(y, int(n_labels), s) for s in seeds]
    arr = np.stack(rows).astype(np.int64)
    np.savez(path, **{SETS_ARRAY: arr, "seeds": np.asarray(seeds, dtype=np.int64),
                      SETS_N: np.int64(np.asarray(y).size), SETS_DIGEST: np.str_(labels_digest(y))})
    return arr


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


def sample_and_corrupt(y: np.ndarray, n_labels: int | None, rate: float = 0.0, seed: int = 0, *,
                       noise: Any = None, X: Any = None, labels: dict[str, Any] | None = None) -> LabelSplit:
    """Stage 2 in one call: stratified labelled set, then label noise on it (``noise``: a
    :class:`lgcexp.noise.NoiseModel`; default exact-count uniform noise at ``rate``). ``X``: all the
    points' features; only an instance-dependent model (``noise.needs_features``) reads them, at the
    labelled rows. ``labels``: the config's ``labels`` section; its ``sets`` or ``per_class`` replace
    ``n_labels`` (module docstring)."""
    if noise is None:
        from .noise.uniform import UniformNoise

        noise = UniformNoise(rate)
    labeled = choose_labeled(y, n_labels, seed, labels)
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

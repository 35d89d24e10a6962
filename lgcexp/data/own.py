"""Your own data: labels read from a file, as given (nobody has checked them), and optional trusted ones.

Shared by the ``csv``, ``npy`` and ``npz`` sources. A file's labels are parsed by :func:`parse_labels` into
a :class:`LabelColumn` (values plus a mask of the rows that have one), and :func:`make_own_dataset` turns
features and label columns into a checked :class:`~lgcexp.data.dataset.Dataset`:

- *given* labels (the file's own labelled set): every row with a label is labelled, exactly as written.
  The run is then a diagnosis run: nothing is sampled and no noise is added.
- *clean* labels (trusted, a benchmark): used only for scoring, never for fitting. Rows without one are
  left out of the scores.

Label values may be ints or strings. Classes are the distinct values among the given labels (sorted),
mapped to 0..c-1 for the algorithms and back to the file's values in the outputs (``Dataset.classes``).
Decisions: a clean label whose value no labelled row carries is refused (a method cannot predict a class
it has never seen labelled, so such a benchmark would score a guaranteed error); fewer than two classes
among the labelled rows is refused.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from lgcexp.errors import UserError

from ..params import Interval, NoneValue, String
from .dataset import Dataset, check_features, continuous_labels

__all__ = ["LabelColumn", "parse_labels", "make_own_dataset", "existing_file", "same_kind", "continuous_labels",
           "UNLABELED_VALUE", "LABEL_VALUE"]

#: the default sentinel of an unlabelled row (scikit-learn's convention); empty values always mark one
UNLABELED_VALUE = -1
#: how ``dataset.unlabeled_value`` may be typed: an integer, a non-empty string, or null (no sentinel)
LABEL_VALUE = [Interval("int", None, None), String("a label value"), NoneValue()]
#: an integer as text, also as a column of floats writes it (``3.0``): group 1 is the integer part
_INT = re.compile(r"([+-]?\d+)(?:\.0*)?")


@dataclass(frozen=True)
class LabelColumn:
    """Labels of every row as read from a file: ``values`` (n,) int64, float or str, meaningful where
    ``present`` (n,) is True; ``key`` names where they came from, as the user typed it (for messages)."""

    values: np.ndarray
    present: np.ndarray
    key: str

    @property
    def n(self) -> int:
        return int(self.values.shape[0])


def _show(v: Any) -> str:
    return repr(v.item() if isinstance(v, np.generic) else v)


def _sentinel_mask(values: np.ndarray, unlabeled_value: Any) -> np.ndarray:
    """Rows equal to the sentinel (compared as text for string labels, as a number for numeric ones)."""
    if unlabeled_value is None:
        return np.zeros(values.shape[0], dtype=bool)
    if values.dtype.kind in "iuf":
        try:
            return values == float(unlabeled_value)
        except (TypeError, ValueError):  # a text sentinel never matches a number
            return np.zeros(values.shape[0], dtype=bool)
    if values.dtype.kind == "b":
        return np.zeros(values.shape[0], dtype=bool)
    return values == str(unlabeled_value)


def parse_labels(raw: Any, key: str, unlabeled_value: Any = UNLABELED_VALUE) -> LabelColumn:
    """Labels of a file as a :class:`LabelColumn`: empty, NaN or ``unlabeled_value`` -> no label.

    Text that spells integers canonically (``"3"``, ``"-1"``, not ``"07"``), or as a float column saves them
    (``"3.0"``, ``"-1.0"``: then ``-1.0`` is the sentinel ``-1``), becomes int64, so ``2 < 10`` sorts as numbers
    and the outputs spell them as integers; floats with integral values become int64 too; other text stays
    text (stripped)."""
    a = np.asarray(raw)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise UserError(f"{key}: labels must be one value per row (1-D), got shape {a.shape}")
    if a.dtype.kind in "iub":
        present = ~_sentinel_mask(a, unlabeled_value)
        values = a if a.dtype.kind == "b" else a.astype(np.int64)
        return LabelColumn(values, present, key)
    if a.dtype.kind == "f":
        present = ~np.isnan(a) & ~_sentinel_mask(a, unlabeled_value)
        if np.isinf(a[present]).any():
            raise UserError(f"{key}: labels hold Inf; labels must be ints or strings (empty or NaN = unlabelled)")
        vals = a[present]
        if not np.array_equal(vals, np.round(vals)):
            continuous_labels(vals, key)
        out = np.zeros(a.shape[0], dtype=np.int64)
        out[present] = vals.astype(np.int64)
        return LabelColumn(out, present, key)
    if a.dtype.kind not in "USO":
        raise UserError(f"{key}: labels of dtype {a.dtype} are not supported; use ints or strings")
    text = np.array(["" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v).strip()
                     for v in a.tolist()], dtype=str) if a.dtype.kind == "O" else np.char.strip(a.astype(str))
    present = (text != "") & ~_sentinel_mask(text, unlabeled_value)
    spelled = text[present].tolist()
    whole = [_INT.fullmatch(t) for t in spelled]
    if spelled and all(m and str(int(m.group(1))) == m.group(1) for m in whole):  # "07", "+3" stay text
        out = np.zeros(a.shape[0], dtype=np.int64)
        out[present] = np.array([int(m.group(1)) for m in whole], dtype=np.int64)
        # labels saved as floats ("3.0", "-1.0" by pandas' to_csv): the sentinel -1 is "-1.0" too
        present &= ~_sentinel_mask(out, unlabeled_value)
        return LabelColumn(out, present, key)
    return LabelColumn(text, present, key)


def same_kind(ref: LabelColumn, other: LabelColumn) -> None:
    """Refuse ``other`` (e.g. clean labels) spelled as numbers where ``ref`` holds text, or the other way round:
    no value of one can equal a value of the other."""
    def kind(col: LabelColumn) -> str | None:
        if not col.present.any():
            return None
        return "numbers" if col.values.dtype.kind in "iufb" else "text"

    a, b = kind(ref), kind(other)
    if a and b and a != b:
        raise UserError(f"{other.key}: holds {b} but {ref.key} holds {a}; they must be labels of the same kind "
                        f"(e.g. {_show(other.values[other.present][0])} can never equal "
                        f"{_show(ref.values[ref.present][0])})")


def _class_numbers(values: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index into classes, found mask) for every value."""
    if (classes.dtype.kind in "iufb") != (values.dtype.kind in "iufb"):  # numbers never equal text
        return np.zeros(values.shape[0], dtype=np.int64), np.zeros(values.shape[0], dtype=bool)
    pos = np.searchsorted(classes, values)
    pos = np.minimum(pos, classes.size - 1)
    return pos.astype(np.int64), classes[pos] == values


def make_own_dataset(name: str, X: Any, *, given: LabelColumn | None, clean: LabelColumn | None,
                     source: str, hint: str = "") -> Dataset:
    """Check features and labels of a user's file and build the Dataset.

    ``given``: the file's own labels (a diagnosis run); ``clean``: trusted labels (scoring only). With only
    ``clean``, it must label every row: the run then samples and corrupts labels as for the built-in sets.
    ``source`` starts every message (``dataset.path=my.csv``); ``hint`` ends the too-few-classes message."""
    if given is None and clean is None:
        raise UserError(f"{source}: no labels: name the given labels (a diagnosis run) or the clean labels")
    X = check_features(X, source)
    n = int(X.shape[0])
    for col in (given, clean):
        if col is not None and col.n != n:
            raise UserError(f"{col.key}: holds {col.n} labels but X has {n} rows; they must be equal")

    ref = given if given is not None else clean
    assert ref is not None
    try:
        classes = np.unique(ref.values[ref.present])
    except TypeError:
        raise UserError(f"{ref.key}: labels of mixed types; use all ints or all strings") from None
    if classes.size < 2:
        found = f" ({_show(classes[0])})" if classes.size else ""
        what = "the labelled rows hold" if given is not None else "the clean labels hold"
        raise UserError(f"{ref.key}: {what} {classes.size} distinct label(s){found}; need at least 2 classes"
                        + (f" ({hint})" if hint else ""))

    y = np.full(n, -1, dtype=np.int64)
    if clean is not None and given is not None:
        same_kind(given, clean)
    if clean is not None:
        k, found = _class_numbers(clean.values, classes)
        unseen = clean.present & ~found
        if unseen.any():
            vals = np.unique(clean.values[unseen])
            shown = ", ".join(_show(v) for v in vals[:5]) + (", ..." if vals.size > 5 else "")
            raise UserError(f"{clean.key}: clean label(s) {shown} ({int(unseen.sum())} rows) never appear among "
                            f"the given labels ({given.key if given else ''}); every class needs a labelled row, "
                            "since a method cannot predict a class it has never seen")
        y[clean.present] = k[clean.present]
        if given is None and not clean.present.all():
            missing = np.flatnonzero(~clean.present)
            raise UserError(f"{clean.key}: {missing.size} of {n} rows have no clean label (first: row "
                            f"{int(missing[0])}); without given labels every row needs one")
    if given is None:
        return Dataset(name=name, X=X, y=y, n_classes=int(classes.size), classes=classes)
    labeled = np.flatnonzero(given.present).astype(np.int64)
    y_observed, _ = _class_numbers(given.values[labeled], classes)
    return Dataset(name=name, X=X, y=y, n_classes=int(classes.size), classes=classes,
                   labeled=labeled, y_observed=y_observed)


def existing_file(key: str, value: Any, what: str) -> str:
    """The path ``value`` of option ``key`` with ``~`` expanded; a one-line UserError when it is no file."""
    import os

    if value is None or str(value).strip() == "":
        raise UserError(f"{key} has no value: pass {key}=/path/to/{what}")
    p = os.path.expanduser(os.fspath(value))
    if os.path.isdir(p):
        raise UserError(f"{key}={value} is not allowed: it is a directory, not a file")
    if not os.path.isfile(p):
        where = f" ({os.path.abspath(p)})" if os.path.abspath(p) != str(value) else ""
        raise UserError(f"{key}={value} is not allowed: no such file{where}")
    return p

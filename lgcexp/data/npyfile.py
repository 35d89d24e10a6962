"""``dataset=npy``: features from a ``.npy`` file, labels from a separate file.

``dataset.path``: a 2-D numeric ``.npy`` (n, d). It is memory-mapped (``np.load(mmap_mode='r')``), and a
float32/float64 array is used in place: loading a 1,000,000 x 64 float32 file adds no second copy of it
in memory (the finiteness check reads it in blocks). ``dataset.mmap=false`` reads it into memory instead.

``dataset.labels_path``: the given labels, one per row of X: a ``.npy`` (ints or strings) or a text file
(``.csv``/``.txt``) with one label per line, no header. -1 (``dataset.unlabeled_value``), an empty line or
NaN marks an unlabelled row; every other row is labelled as given, and the run is a diagnosis run.

``dataset.clean_labels_path``: optional trusted labels in the same formats (a benchmark), used only for
scoring; -1 or empty = truth unknown. With ``labels_path=null`` and a ``clean_labels_path`` (which must
then label every row), labels are sampled and corrupted as for the built-in sets.
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np

from lgcexp.errors import UserError

from ..params import Boolean, NoneValue, String, fmt_value
from .dataset import Dataset
from .download import one_line
from .own import LABEL_VALUE, UNLABELED_VALUE, existing_file, make_own_dataset, parse_labels
from .source import DataSource

LABEL_FILE_SUFFIXES = (".npy", ".csv", ".txt")


def read_npy(key: str, value: Any, mmap: bool = True) -> np.ndarray:
    """An array from a ``.npy`` file, memory-mapped read-only when ``mmap`` (object arrays are refused)."""
    p = existing_file(key, value, "file.npy")
    with open(p, "rb") as fh:
        if fh.read(6) != b"\x93NUMPY":  # numpy would call any other file "pickled data"
            raise UserError(f"{key}={value} is not allowed: it is not a .npy file (save the array with np.save)")
    try:
        return np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except ValueError as e:
        if "pickle" in str(e) or "object" in str(e).lower():
            raise UserError(f"{key}={value}: holds Python objects; save plain numbers or strings") from None
        raise UserError(f"{key}={value}: not a readable .npy file ({one_line(e)})") from None
    except (OSError, EOFError) as e:
        raise UserError(f"{key}={value}: not a readable .npy file ({one_line(e)})") from None


def read_label_file(key: str, value: Any) -> np.ndarray:
    """Labels from a ``.npy`` or from a text file with one label per line (an empty line: no label)."""
    p = existing_file(key, value, "labels.npy")
    suffix = os.path.splitext(p)[1].lower()
    if suffix not in LABEL_FILE_SUFFIXES:
        raise UserError(f"{key}={value} is not allowed: use a .npy file or a text file (.csv, .txt) "
                        "with one label per line")
    if suffix == ".npy":
        return np.asarray(read_npy(key, value, mmap=False))
    try:
        with open(p, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except UnicodeDecodeError as e:
        raise UserError(f"{key}={value}: not UTF-8 text ({one_line(e)})") from None
    return np.array([s.strip() for s in lines], dtype=object)


class NpyFile(DataSource):
    """Features from a ``.npy`` (memory-mapped), given labels and optional clean labels from other files."""

    name = "npy"
    _parameter_constraints = {
        "path": [String("a path to a .npy file")],
        "labels_path": [String("a path to a .npy, .csv or .txt file"), NoneValue()],
        "clean_labels_path": [String("a path to a .npy, .csv or .txt file"), NoneValue()],
        "unlabeled_value": LABEL_VALUE,
        "mmap": [Boolean()],
    }

    def __init__(self, path: str | None = None, labels_path: str | None = None,
                 clean_labels_path: str | None = None, unlabeled_value: int | str | None = UNLABELED_VALUE,
                 mmap: bool = True):
        self.path = path
        self.labels_path = labels_path
        self.clean_labels_path = clean_labels_path
        self.unlabeled_value = unlabeled_value
        self.mmap = mmap

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        if params.get("labels_path") is None and params.get("clean_labels_path") is None:
            raise UserError(f"{prefix}labels_path has no value: pass {prefix}labels_path=labels.npy (or .csv/.txt, "
                            "one label per row of X; -1 or empty = unlabelled)")

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        X = read_npy("dataset.path", self.path, mmap=bool(self.mmap))
        given = trusted = None
        if self.labels_path is not None:
            key = f"dataset.labels_path={self.labels_path}"
            given = parse_labels(read_label_file("dataset.labels_path", self.labels_path), key, self.unlabeled_value)
        if self.clean_labels_path is not None:
            key = f"dataset.clean_labels_path={self.clean_labels_path}"
            trusted = parse_labels(read_label_file("dataset.clean_labels_path", self.clean_labels_path), key,
                                   self.unlabeled_value)
        hint = (f"rows labelled {fmt_value(self.unlabeled_value)} or empty are unlabelled; see "
                "dataset.unlabeled_value") if self.unlabeled_value is not None else "empty rows are unlabelled"
        return make_own_dataset("npy", X, given=given, clean=trusted, source=f"dataset.path={self.path}", hint=hint)

"""``dataset=npz``: a user's ``.npz`` with arrays ``X`` (n, d) and ``y`` (n,). An ``X`` of images, (n, h, w) or
(n, h, w, channels), is read as rows of flattened pixels and its image shape recorded (the label-issue feature
view is then the image view, :mod:`lgcexp.issues.image_view`).

Without more arrays, ``y`` holds the true labels (ints or strings, remapped to 0..c-1) and labels are
sampled and corrupted as for the built-in sets (``labels.n``, ``noise.*``).

Optional arrays make it a file with its own labelled set (a diagnosis run: nothing sampled, no noise):

- ``labeled``: the file's labelled set, a boolean mask (n,) or integer row indices; ``y[labeled]`` are the
  given labels, taken as written (``y`` elsewhere is ignored);
- ``y_clean`` (n,): trusted clean labels, used for scoring only, never for fitting; -1, NaN or an empty
  string where the truth is unknown. It needs ``labeled``;
- ``pred_probs`` (n, c): out-of-fold class probabilities of the user's own model for the given labels
  (column j: the j-th sorted label value), the second view of the label judgement instead of the feature
  view (docs/label_issues.md#pred-probs; checked when the run starts,
  :func:`lgcexp.issues.pred_probs.run_pred_probs`). It needs ``labeled``.

Memory: the arrays of an npz written by ``np.savez`` are stored uncompressed, and ``X`` is then
memory-mapped in place (numpy's ``np.load(mmap_mode=...)`` ignores npz files; this module maps the zip
member itself). An npz written by ``np.savez_compressed`` cannot be memory-mapped: ``X`` is decompressed
into memory. For big data prefer ``np.savez`` or ``dataset=npy``.
"""
from __future__ import annotations

import os
import struct
import zipfile

import numpy as np

from lgcexp.errors import UserError

from ..params import String
from .dataset import Dataset, image_rows, make_dataset
from .download import one_line
from .own import LabelColumn, make_own_dataset, parse_labels
from .source import DataSource


def memmap_npz_member(path: str, name: str) -> np.ndarray | None:
    """Array ``name`` of the npz at ``path`` memory-mapped read-only, or None when that is not possible
    (a compressed member, an object array, an unknown .npy header version)."""
    with zipfile.ZipFile(path) as zf:
        try:
            info = zf.getinfo(name + ".npy")
        except KeyError:
            return None
        if info.compress_type != zipfile.ZIP_STORED or info.flag_bits & 0x1:  # compressed or encrypted
            return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        if len(local) != 30 or local[:4] != b"PK\x03\x04":
            return None
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        start = info.header_offset + 30 + name_len + extra_len
        fh.seek(start)
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                return None
        except ValueError:
            return None
        offset = fh.tell()
    if dtype.hasobject or offset - start + int(np.prod(shape)) * dtype.itemsize > info.file_size:
        return None
    if int(np.prod(shape)) == 0:
        return None
    return np.memmap(path, dtype=dtype, mode="r", shape=shape, order="F" if fortran else "C", offset=offset)


def _labeled_mask(labeled: np.ndarray, n: int, p: str) -> np.ndarray:
    """The file's labelled set as a boolean mask over the n rows."""
    labeled = np.asarray(labeled)
    if labeled.ndim == 1 and labeled.dtype.kind == "b":
        if labeled.size != n:
            raise UserError(f"{p}: array 'labeled' is a mask of {labeled.size} values but y has {n}; "
                            "they must be equal")
        return labeled.copy()
    if labeled.ndim == 1 and labeled.dtype.kind in "iu":
        if labeled.size and (labeled.min() < 0 or labeled.max() >= n):
            raise UserError(f"{p}: array 'labeled' holds row indices outside 0..{n - 1}")
        if np.unique(labeled).size != labeled.size:
            raise UserError(f"{p}: array 'labeled' holds a row index twice")
        mask = np.zeros(n, dtype=bool)
        mask[labeled] = True
        return mask
    raise UserError(f"{p}: array 'labeled' must be a boolean mask (n,) or integer row indices, "
                    f"got {labeled.dtype} {labeled.shape}")


def load_npz(path: str | os.PathLike | None) -> Dataset:
    """A user's npz: arrays ``X`` (n, d) and ``y`` (n,), optionally ``labeled``, ``y_clean`` and ``pred_probs``
    (module doc)."""
    if path is None or str(path) == "":
        raise UserError("dataset 'npz' needs a file: pass path=/path/to/file.npz (arrays X and y)")
    p = os.path.expanduser(os.fspath(path))
    if os.path.isdir(p):
        raise UserError(f"dataset.path={path} is not allowed: it is a directory, not a file")
    if not os.path.isfile(p):
        raise UserError(f"npz file not found: {p!r} (dataset 'npz' needs an existing .npz with arrays X and y)")
    if not zipfile.is_zipfile(p):
        raise UserError(f"{p}: not a readable npz file (not a zip archive)")
    try:
        with np.load(p, allow_pickle=False) as z:
            found = sorted(z.files)
            missing = [k for k in ("X", "y") if k not in found]
            if missing:
                raise UserError(f"{p}: missing array(s) {', '.join(missing)}; found {found or 'no arrays'}; "
                                "the npz needs arrays X (n, d) and y (n,)")
            X = memmap_npz_member(p, "X")
            X = z["X"] if X is None else X
            y = z["y"]
            labeled = z["labeled"] if "labeled" in found else None
            y_clean = z["y_clean"] if "y_clean" in found else None
            pred_probs = z["pred_probs"] if "pred_probs" in found else None
    except UserError:
        raise
    except ValueError as e:
        if "pickle" in str(e):
            raise UserError(f"{p}: holds object arrays (pickled); "
                            "save X and y as plain numeric/string arrays") from None
        raise UserError(f"{p}: not a readable npz file ({one_line(e)})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{p}: not a readable npz file ({one_line(e)})") from None
    X, image_shape = image_rows(X)  # images (n, h, w[, channels]): rows of flattened pixels (a view, not a copy)
    if labeled is None:
        if y_clean is not None:
            raise UserError(f"{p}: has y_clean but no array 'labeled'; trusted clean labels go with the file's "
                            "own labelled set (array 'labeled'); without one, y holds the true labels")
        if pred_probs is not None:
            raise UserError(f"{p}: has pred_probs but no array 'labeled'; out-of-fold probabilities judge the "
                            "file's own labelled set (array 'labeled'); without one, y holds the true labels")
        return make_dataset("npz", X, y, source=p, image_shape=image_shape)
    if np.ndim(y) != 1:
        raise UserError(f"{p}: y must be 1-D (n_samples,), got shape {np.shape(y)}")
    mask = _labeled_mask(labeled, int(np.shape(y)[0]), p)
    parsed = parse_labels(y, f"{p}: y", unlabeled_value=None)
    empty = mask & ~parsed.present
    if empty.any():
        raise UserError(f"{p}: y is empty or NaN at {int(empty.sum())} labelled row(s) (first: row "
                        f"{int(np.flatnonzero(empty)[0])}); every row in 'labeled' needs a label")
    given = LabelColumn(parsed.values, mask, f"{p}: y[labeled]")
    clean = None if y_clean is None else parse_labels(y_clean, f"{p}: y_clean")
    data = make_own_dataset("npz", X, given=given, clean=clean, source=p)
    from dataclasses import replace

    return replace(data, pred_probs=pred_probs, image_shape=image_shape)


class NpzFile(DataSource):
    """A user's ``.npz`` with arrays ``X`` (n, d) and ``y`` (n,), optionally ``labeled`` and ``y_clean``
    (a file with its own labelled set). Parameter: ``path``."""

    name = "npz"
    _parameter_constraints = {"path": [String("a path to an .npz file")]}

    def __init__(self, path: str | None = None):
        self.path = path

    def _load(self, *, data_dir=None, download=True) -> Dataset:
        return load_npz(self.path)

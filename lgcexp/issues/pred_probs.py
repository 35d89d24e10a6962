"""The user's own model as a view: ``find_label_issues(labels, pred_probs=...)`` (docs/label_issues.md#pred-probs).

``pred_probs`` (n x c) are out-of-fold class probabilities of the user's model, each row made by a model that
did not see that point's label (cleanlab's contract, Northcutt et al. 2021). Without features or a graph they
are the judgement itself: the ranking is the self-confidence ``pred_probs[i, given]`` (Kuan & Mueller 2022
measure it as the best simple score) and the flags are the estimated number of wrong labels, lowest
self-confidence first (``cut="count"``, :mod:`lgcexp.issues.count`). With features or a graph they are the
second view beside the graph's leave-one-out evidence, instead of the tool's own feature view
(:func:`lgcexp.issues.judge.judge`).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UserError
from .judgement import LabelJudgement

__all__ = ["NPZ_ARRAY", "ROW_SUM_TOL", "check_pred_probs", "pred_probs_judgement", "read_pred_probs", "run_pred_probs"]

#: how far a row of ``pred_probs`` may sum from 1 (float32 softmax rows are within ~1e-6)
ROW_SUM_TOL = 1e-3


def check_pred_probs(pred_probs: Any, n: int, classes: np.ndarray, key: str = "pred_probs",
                     rows: str | None = None) -> np.ndarray:
    """``pred_probs`` as a float64 (n x c) array, checked before any work; each refusal is one line naming
    ``key`` (the argument or option as the user typed it). Column j is the j-th class of ``classes`` (the
    sorted label values; with integer labels column j is class j, so the labels must be 0..c-1). ``rows``:
    what the row count is measured against (default: ``labels has n values``). The input is never
    modified. The one check of every front end: :func:`lgcexp.issues.find.find_label_issues`, the command's
    ``detect.pred_probs`` and npz array ``pred_probs`` (:func:`run_pred_probs`), the estimators' ``fit``."""
    import scipy.sparse as sp

    rows = rows or f"labels has {n} values"
    if sp.issparse(pred_probs):
        raise UserError(f"{key}: a sparse matrix is not allowed; give a dense (n x c) array of probabilities")
    P = np.asarray(pred_probs)
    if P.dtype == object or P.dtype.kind not in "biuf":
        raise UserError(f"{key}: its entries have dtype {P.dtype}; give an (n x c) array of probabilities")
    if P.ndim != 2:
        raise UserError(f"{key}: it has shape {P.shape}; it must be 2-D (one row per point, one column per "
                        "class)")
    if P.shape[0] != n:
        raise UserError(f"{key} has {P.shape[0]} rows but {rows}; they must be equal")
    c = int(classes.size)
    if P.shape[1] != c:
        more = "more" if P.shape[1] > c else "fewer"
        raise UserError(f"{key} has {P.shape[1]} columns, {more} than the {c} classes the labels name "
                        f"({', '.join(map(str, classes[:12]))}{', ...' if c > 12 else ''}); one column per class")
    if classes.dtype.kind in "iu" and not np.array_equal(classes, np.arange(c)):
        raise UserError(f"{key}: with integer labels column j is class j, so the labels must be 0..{c - 1}; "
                        f"they name {', '.join(map(str, classes[:12]))}{', ...' if c > 12 else ''}")
    P = np.asarray(P, dtype=np.float64)
    bad = ~np.isfinite(P)
    if bad.any():
        raise UserError(f"{key}: {int(bad.any(axis=1).sum())} row(s) hold NaN or infinite entries (first: "
                        f"row {int(np.flatnonzero(bad.any(axis=1))[0])}); probabilities must be finite")
    if (P < 0).any():
        neg = np.flatnonzero((P < 0).any(axis=1))
        raise UserError(f"{key}: {neg.size} row(s) hold negative entries (first: row {int(neg[0])}, "
                        f"{P[neg[0]].min():.6g}); probabilities must be >= 0")
    s = P.sum(axis=1)
    off = np.abs(s - 1.0) > ROW_SUM_TOL
    if off.any():
        i = int(np.flatnonzero(off)[0])
        raise UserError(f"{key}: {int(off.sum())} row(s) do not sum to 1 (first: row {i}, sum {s[i]:.6g}); "
                        "give probabilities (a softmax), not scores or log-probabilities")
    return P


#: the array a ``detect.pred_probs`` .npz file (and a ``dataset=npz`` file) holds the probabilities in
NPZ_ARRAY = "pred_probs"


def read_pred_probs(path: str, key: str) -> np.ndarray:
    """The array of a ``detect.pred_probs`` file: an ``.npy`` (the array itself) or an ``.npz`` (its array
    :data:`NPZ_ARRAY`); a missing, unreadable or pickled file, or an npz without that array, is one line
    naming ``key``. The values are checked by :func:`check_pred_probs`."""
    import zipfile

    from ..data.download import one_line
    from ..data.own import existing_file

    p = existing_file(key.split("=", 1)[0], path, "pred_probs.npy")
    try:
        if zipfile.is_zipfile(p):
            with np.load(p, allow_pickle=False) as z:
                if NPZ_ARRAY not in z.files:
                    raise UserError(f"{key}: the npz has no array '{NPZ_ARRAY}' (found {sorted(z.files) or 'none'}); "
                                    f"save the (n x c) probabilities as np.savez(file, {NPZ_ARRAY}=P) or as an .npy")
                return z[NPZ_ARRAY]
        with open(p, "rb") as fh:
            if fh.read(6) != b"\x93NUMPY":
                raise UserError(f"{key}: not a readable .npy or .npz file (no .npy header); save the (n x c) "
                                "probabilities with np.save")
        return np.load(p, allow_pickle=False)
    except UserError:
        raise
    except ValueError as e:
        if "pickle" in str(e):
            raise UserError(f"{key}: holds an object array (pickled); save a plain numeric (n x c) array") from None
        raise UserError(f"{key}: not a readable .npy or .npz file ({one_line(e)})") from None
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise UserError(f"{key}: not a readable .npy or .npz file ({one_line(e)})") from None


def run_pred_probs(option: str | None, data: Any,
                   data_key: str = "dataset") -> tuple[np.ndarray | None, str | None]:
    """The command's out-of-fold probabilities for a loaded data set, checked before any heavy work: the file
    of ``detect.pred_probs`` (``option``) or else the data's own array (``dataset=npz`` with an array
    ``pred_probs``; ``data_key`` names the file in messages, e.g. ``dataset.path=my.npz``), through
    :func:`check_pred_probs` against the data's rows and classes. Returns (the
    checked (n x c) array, where it came from), or (None, None) where there are none. They judge the labels
    a data set comes with, so a run that samples its labels (no labelled set of its own) is refused."""
    own = getattr(data, "pred_probs", None)
    if option is None and own is None:
        return None, None
    key = f"detect.pred_probs={option}" if option is not None else f"{data_key}: array '{NPZ_ARRAY}'"
    if not data.has_given_labels:
        raise UserError(f"{key} is not allowed with dataset={data.name}: out-of-fold probabilities judge the labels "
                        "a data set comes with (csv, npy or npz with its own labelled set); this run samples its "
                        "labels and adds noise")
    P = read_pred_probs(option, key) if option is not None else own
    classes = np.asarray(data.classes)
    return check_pred_probs(P, data.n, classes, key=key, rows=f"the data has {data.n} rows"), \
        (option if option is not None else f"{data_key}: array {NPZ_ARRAY}")


def pred_probs_judgement(P_labeled: np.ndarray) -> LabelJudgement:
    """The judgement of the labelled points from their rows of ``pred_probs`` alone (rows renormalised)."""
    from .judgement import normalize_rows

    return LabelJudgement(probs=normalize_rows(P_labeled),
                          source="pred_probs: the user's out-of-fold class probabilities")

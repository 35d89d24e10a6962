"""Data issues beyond labels, from the kNN lists of the features the graph is built on (in the spirit of
cleanlab's Datalab, which audits a data set from a kNN graph): outliers and near-duplicates, a score and a
flag for every point (``data_issues.csv`` of a diagnosis run; docs/label_issues.md#data-issues).

Everything below is a pure function of the kNN lists ``dist`` (n, k, ascending, self excluded) and ``idx``
(n, k) of the features (and, for exact duplicates, of the features themselves):

- :func:`outlier_scores`: ``m_i`` = mean distance to the k nearest neighbours; its logarithm's robust
  z-score against the data's own distribution, ``z_i = (log m_i - median) / (1.4826 MAD)`` (the modified
  z-score of Iglewicz & Hoaglin 1993; 1.4826 MAD estimates a normal's standard deviation). A point is an
  outlier when ``z_i > 3.5``, the threshold they recommend. The logarithm makes the ratio, not the
  difference, of distances count: "five times farther from its neighbours than a typical point".
- :func:`exact_duplicate_sets`: rows that are bitwise equal, grouped.
- :func:`near_duplicate_sets`: pairs (i, j), j among i's k nearest neighbours, whose distance is at most
  ``fraction`` (default 0.05) times the median nearest-neighbour distance of the data, joined with the exact
  duplicates into sets (connected components of those pairs). Score: the nearest-neighbour distance over
  that median (0: an exact copy; a typical point: about 1).
- :func:`find_data_issues`: both, as one table.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

if TYPE_CHECKING:
    import pandas as pd

DATA_ISSUES_FILE = "data_issues.csv"
#: the modified z-score above which a point is an outlier (Iglewicz & Hoaglin 1993)
OUTLIER_Z = 3.5
#: near-duplicate: nearest-neighbour distance at most this fraction of the data's median one
NEAR_DUPLICATE_FRACTION = 0.05
#: 1 / Phi^-1(3/4): MAD * this estimates the standard deviation of a normal sample
MAD_SCALE = 1.482602218505602


def knn_lists(X: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact kNN (distances, indices) of every row, self excluded (lgcexp.graph's faiss search)."""
    from ..graph import knn_search

    k = int(min(k, X.shape[0] - 1))
    return knn_search(X, k)


def robust_z(v: np.ndarray) -> np.ndarray:
    """``(v - median) / (1.4826 MAD)``; with MAD 0, the mean absolute deviation times sqrt(pi/2) instead;
    all zeros when v is constant."""
    v = np.asarray(v, dtype=np.float64)
    med = np.median(v)
    dev = np.abs(v - med)
    scale = MAD_SCALE * np.median(dev)
    if scale <= 0:
        scale = np.sqrt(np.pi / 2) * dev.mean()
    return np.zeros_like(v) if scale <= 0 else (v - med) / scale


def outlier_scores(dist: np.ndarray, z: float = OUTLIER_Z) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(score, is_outlier, mean kNN distance) of every point; score = the robust z-score of the log mean
    distance to its k nearest neighbours (higher: farther from its neighbours than the data's typical
    point)."""
    m = np.asarray(dist, dtype=np.float64).mean(axis=1)
    pos = m[m > 0]
    floor = pos.min() * 1e-3 if pos.size else 1.0  # an exact duplicate's m of 0: very typical, not -inf
    score = robust_z(np.log(np.maximum(m, floor)))
    return score, score > z, m


def _components(n: int, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """Connected-component label of every point of the graph with edges (i, j); -1 for points without an
    edge; components numbered 0, 1, ... in the order of their smallest member."""
    if i.size == 0:
        return np.full(n, -1, dtype=np.int64)
    A = sp.coo_matrix((np.ones(i.size), (i, j)), shape=(n, n)).tocsr()
    _, comp = sp.csgraph.connected_components(A, directed=False)
    in_edge = np.zeros(n, dtype=bool)
    in_edge[i] = in_edge[j] = True
    out = np.full(n, -1, dtype=np.int64)
    firsts = {}
    for p in np.flatnonzero(in_edge):
        out[p] = firsts.setdefault(int(comp[p]), len(firsts))
    return out


def _row_digests(B: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A 64-bit digest of every row's bytes: the rows as 64-bit words (zero-padded), each word times its
    odd random weight, summed with wrap-around, then mixed (splitmix64's finaliser). Equal rows give equal
    digests; :func:`exact_duplicate_sets` compares equal digests byte for byte."""
    raw = np.ascontiguousarray(B).view(np.uint8).reshape(B.shape[0], -1)
    pad = (-raw.shape[1]) % 8
    if pad:
        raw = np.hstack([raw, np.zeros((raw.shape[0], pad), dtype=np.uint8)])
    words = raw.view(np.uint64)
    with np.errstate(over="ignore"):
        h = (words * weights[: words.shape[1]]).sum(axis=1, dtype=np.uint64)
        h ^= h >> np.uint64(30)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(27)
        h *= np.uint64(0x94D049BB133111EB)
        h ^= h >> np.uint64(31)
    return h


def exact_duplicate_sets(X: np.ndarray, block: int = 65_536) -> np.ndarray:
    """Set number of every row that has a bitwise-equal copy (-1 for a row without), numbered in the order
    of each set's first row."""
    n = X.shape[0]
    row_bytes = int(np.dtype(X.dtype).itemsize) * (int(X.shape[1]) if X.ndim > 1 else 1)
    words = -(-row_bytes // 8)
    weights = np.random.default_rng(0x5EED).integers(0, 2**63, size=max(words, 1), dtype=np.uint64) * 2 + 1
    # a 64-bit digest per row, block by block (a memory map is never copied whole; at most ~64 MiB of words
    # at a time); equal digests are then compared byte for byte, so a collision never joins two different rows
    step = int(max(1, min(block, (64 << 20) // (8 * max(words, 1)))))
    digest = np.empty(n, dtype=np.uint64)
    for start in range(0, n, step):
        digest[start:start + step] = _row_digests(np.asarray(X[start:start + step]), weights)
    order = np.argsort(digest, kind="stable")
    sorted_digest = digest[order]
    starts = np.flatnonzero(np.r_[True, sorted_digest[1:] != sorted_digest[:-1]])
    sizes = np.diff(np.r_[starts, n])
    i, j = [], []
    for s0, size in zip(starts[sizes > 1], sizes[sizes > 1]):
        rows = {}
        for p in np.sort(order[s0:s0 + size]):  # in index order: each joins the first earlier row with its bytes
            key = np.ascontiguousarray(X[p]).tobytes()
            if key in rows:
                i.append(rows[key])
                j.append(int(p))
            else:
                rows[key] = int(p)
    return _components(n, np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64))


def near_duplicate_sets(dist: np.ndarray, idx: np.ndarray, fraction: float = NEAR_DUPLICATE_FRACTION,
                        exact: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(score, is_near_duplicate, set, threshold): ``score`` = nearest-neighbour distance / the median one;
    pairs within ``threshold = fraction * median`` (and the ``exact`` duplicate sets) join points into sets
    (``set`` -1: the point has no near duplicate)."""
    dist = np.asarray(dist, dtype=np.float64)
    n = dist.shape[0]
    d1 = dist[:, 0]
    med = float(np.median(d1))
    thr = fraction * med
    with np.errstate(divide="ignore", invalid="ignore"):
        score = d1 / med if med > 0 else np.where(d1 > 0, np.inf, 0.0)
    close = dist <= thr
    i = np.repeat(np.arange(n), dist.shape[1])[close.ravel()]
    j = np.asarray(idx).ravel()[close.ravel()]
    if exact is not None and (exact >= 0).any():  # join each exact set through its first member
        members = np.flatnonzero(exact >= 0)
        first = {}
        for p in members:
            first.setdefault(int(exact[p]), p)
        i = np.concatenate([i, members])
        j = np.concatenate([j, [first[int(exact[p])] for p in members]])
        keep = i != j
        i, j = i[keep], j[keep]
    sets = _components(n, i, j)
    return score, sets >= 0, sets, thr


@dataclass(frozen=True)
class DataIssues:
    """Per point: ``outlier_score``, ``is_outlier``, ``mean_knn_distance``; ``near_duplicate_score``,
    ``is_near_duplicate``, ``is_exact_duplicate``, ``near_duplicate_set``; ``nearest`` and its distance."""

    outlier_score: np.ndarray
    is_outlier: np.ndarray
    mean_knn_distance: np.ndarray
    near_duplicate_score: np.ndarray
    is_near_duplicate: np.ndarray
    is_exact_duplicate: np.ndarray
    near_duplicate_set: np.ndarray
    nearest: np.ndarray
    nearest_distance: np.ndarray
    k: int
    threshold: float

    def summary(self) -> dict[str, Any]:
        sets = self.near_duplicate_set
        return {"k": self.k, "n_outliers": int(self.is_outlier.sum()),
                "n_near_duplicates": int(self.is_near_duplicate.sum()),
                "n_exact_duplicates": int(self.is_exact_duplicate.sum()),
                "n_near_duplicate_sets": int(np.unique(sets[sets >= 0]).size),
                "near_duplicate_threshold": self.threshold}

    def frame(self) -> pd.DataFrame:
        """``data_issues.csv``: one row per point, in point order."""
        import pandas as pd

        return pd.DataFrame({
            "index": np.arange(self.outlier_score.size),
            "is_outlier": self.is_outlier, "outlier_score": self.outlier_score,
            "mean_knn_distance": self.mean_knn_distance,
            "is_near_duplicate": self.is_near_duplicate, "is_exact_duplicate": self.is_exact_duplicate,
            "near_duplicate_set": self.near_duplicate_set, "near_duplicate_score": self.near_duplicate_score,
            "nearest_neighbor": self.nearest, "nearest_distance": self.nearest_distance,
        })


def find_data_issues(X: np.ndarray, k: int = 10, *, knn: tuple[np.ndarray, np.ndarray] | None = None,
                     z: float = OUTLIER_Z, fraction: float = NEAR_DUPLICATE_FRACTION) -> DataIssues:
    """Outliers and near-duplicates of the rows of X (``knn``: its kNN lists, when already computed)."""
    dist, idx = knn if knn is not None else knn_lists(X, k)
    score, flag, m = outlier_scores(dist, z)
    exact = exact_duplicate_sets(np.asarray(X))
    nd_score, nd_flag, sets, thr = near_duplicate_sets(dist, idx, fraction, exact)
    return DataIssues(outlier_score=score, is_outlier=flag, mean_knn_distance=m, near_duplicate_score=nd_score,
                      is_near_duplicate=nd_flag, is_exact_duplicate=exact >= 0, near_duplicate_set=sets,
                      nearest=np.asarray(idx)[:, 0], nearest_distance=np.asarray(dist)[:, 0], k=int(dist.shape[1]),
                      threshold=float(thr))

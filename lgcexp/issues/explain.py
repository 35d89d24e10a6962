"""What kind of issue a flag is, and why it was raised (docs/label_issues.md#why).

- :func:`issue_types`: ``wrong`` where the evidence clearly names another class (the suggested class holds
  more than half of the reported distribution, :data:`lgcexp.issues.count.MAJORITY`, the rule the count uses),
  ``ambiguous`` where it is split between the given class and others (no other class holds a majority);
- :func:`evidence_frame`: for each flagged label, the labelled graph neighbours that voted (index, label, edge
  weight; the strongest :data:`NEIGHBOURS`) and each view's probability of the given and the suggested class
  (the method's own leave-one-out evidence, the feature view or the user's ``pred_probs``) — the companion file
  ``label_issue_evidence.csv``.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .count import MAJORITY

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ISSUE_TYPES", "EVIDENCE_FILE", "NEIGHBOURS", "issue_types", "table_order", "labelled_neighbours",
           "evidence_frame"]

#: the values of the ``issue_type`` column ("" for a label that is not flagged)
ISSUE_TYPES = ("wrong", "ambiguous")

EVIDENCE_FILE = "label_issue_evidence.csv"

#: labelled neighbours listed per flag (the strongest edges)
NEIGHBOURS = 5


def issue_types(probs: np.ndarray, y: np.ndarray, suggested: np.ndarray, is_issue: np.ndarray) -> np.ndarray:
    """``wrong`` / ``ambiguous`` per flagged label (module docstring), "" for the others (object array)."""
    P = np.asarray(probs, dtype=np.float64)
    s = np.asarray(suggested, dtype=np.int64)
    flag = np.asarray(is_issue, dtype=bool)
    out = np.full(flag.size, "", dtype=object)
    if not flag.any():
        return out
    clear = (s != np.asarray(y)) & (P[np.arange(s.size), s] > MAJORITY)
    out[flag & clear] = "wrong"
    out[flag & ~clear] = "ambiguous"
    return out


def table_order(index: np.ndarray, quality: np.ndarray, is_issue: np.ndarray,
                issue_type: np.ndarray | None = None) -> np.ndarray:
    """The row order of ``label_issues.csv`` (positions in the labelled set): the flagged labels first, the
    clearly ``wrong`` before the ``ambiguous`` (``issue_type``; None: one group), each group by increasing
    quality, ties by index. The flags' pictures and evidence follow it too."""
    flag = np.asarray(is_issue, dtype=bool)
    kind = np.zeros(flag.size, dtype=np.int64) if issue_type is None else \
        (np.asarray(issue_type, dtype=object) != "wrong").astype(np.int64)
    return np.lexsort((np.asarray(index), np.asarray(quality, dtype=np.float64), kind, ~flag))


def labelled_neighbours(W: Any, labeled: np.ndarray, y: np.ndarray, rows: np.ndarray, k: int,
                        cls: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each labelled row ``rows[t]`` (a position in ``labeled``): its ``k`` heaviest edges of positive
    weight in ``W`` to other labelled points — of given class ``cls[t]`` where ``cls`` is given —, as (data
    rows, weights), heaviest first, ties by data row. The neighbours that voted, for the evidence table and the
    flags' pages (:mod:`lgcexp.issues.pages`)."""
    import scipy.sparse as sp

    W = W if sp.isspmatrix_csr(W) else sp.csr_matrix(W)
    labeled = np.asarray(labeled)
    y = np.asarray(y)
    pos = np.full(W.shape[0], -1, dtype=np.int64)
    pos[labeled] = np.arange(labeled.size)
    out = []
    for t, r in enumerate(np.asarray(rows)):
        i = int(labeled[r])
        cols = W.indices[W.indptr[i]:W.indptr[i + 1]]
        w = np.asarray(W.data[W.indptr[i]:W.indptr[i + 1]], dtype=np.float64)
        keep = (pos[cols] >= 0) & (cols != i) & (w > 0)
        if cls is not None:
            keep[keep] = y[pos[cols[keep]]] == cls[t]
        cols, w = cols[keep], w[keep]
        top = np.lexsort((cols, -w))[:k]
        out.append((cols[top].astype(np.int64), w[top]))
    return out


def evidence_frame(judged: Any, labeled: np.ndarray, y: np.ndarray, classes: np.ndarray,
                   W: Any = None, k: int = NEIGHBOURS) -> pd.DataFrame:
    """One row per flagged label, in the order of ``label_issues.csv``'s flagged rows: ``index``,
    ``given_label``, ``suggested_label``, ``issue_type``, ``method_p_given`` / ``method_p_suggested`` (the
    method's own evidence, without the label), ``view_p_given`` / ``view_p_suggested`` (the second view: the
    feature view or ``pred_probs``; empty where none took part), ``reported_p_given`` /
    ``reported_p_suggested`` (the distribution that ranks), and ``neighbours`` (``W``: the graph, None: left
    out)."""
    import pandas as pd

    labeled = np.asarray(labeled)
    y = np.asarray(y, dtype=np.int64)
    types = issue_types(judged.probs, y, judged.suggested, judged.is_issue)
    order = table_order(labeled, judged.quality, judged.is_issue, types)[: int(np.sum(judged.is_issue))]
    s = judged.suggested[order]
    g = y[order]

    def at(M: Any, cls: np.ndarray) -> np.ndarray:
        return np.full(order.size, np.nan) if M is None else np.asarray(M, dtype=np.float64)[order, cls]

    view = judged.feature_view if judged.features else None
    cols: dict[str, Any] = {"index": labeled[order], "given_label": classes[g], "suggested_label": classes[s],
                            "issue_type": types[order],
                            "method_p_given": at(judged.evidence, g), "method_p_suggested": at(judged.evidence, s),
                            "view_p_given": at(view, g), "view_p_suggested": at(view, s),
                            "reported_p_given": at(judged.probs, g), "reported_p_suggested": at(judged.probs, s)}
    if W is not None:
        pos = np.full(W.shape[0], -1, dtype=np.int64)
        pos[labeled] = np.arange(labeled.size)
        cols["neighbours"] = [";".join(f"{int(j)}:{classes[y[pos[j]]]}:{wj:.4g}" for j, wj in zip(js, ws))
                              for js, ws in labelled_neighbours(W, labeled, y, order, k)]
    return pd.DataFrame(cols)

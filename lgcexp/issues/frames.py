"""Detection metrics and the ``label_issues.csv`` table of a run."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a table is made: config checks need none of it
    import pandas as pd

from .explain import table_order
from .judge import JudgedLabels

__all__ = ["ISSUES_FILE", "COLUMNS", "detection_metrics", "issues_frame", "run_metrics", "run_frame"]

ISSUES_FILE = "label_issues.csv"


#: the columns of label_issues.csv, in order (``is_flipped`` only where clean labels are known)
COLUMNS = ("index", "given_label", "suggested_label", "label_quality", "issue_probability", "is_label_issue",
           "issue_type", "is_flipped")


def detection_metrics(quality: np.ndarray, is_issue: np.ndarray, flipped: np.ndarray,
                      suggested: np.ndarray | None = None, y_clean: np.ndarray | None = None) -> dict[str, Any]:
    """How well a judgement finds the flipped labels (``flipped``: the truth, over the scored points).

    From the quality (ranking; lower = more suspicious): ``detect_auc`` (ROC AUC; None when only one kind
    of label is present), ``detect_ap`` (average precision; None without flips), ``detect_precision_at_k``
    (share of flips among the k labels of lowest quality, k = the number of flips; ties in index order;
    None without flips). From the decision: ``detect_precision``, ``detect_recall``, ``detect_f1`` (0, not
    NaN, when nothing is flagged or nothing is flipped, as scikit-learn's ``zero_division=0``),
    ``n_label_issues`` and ``detect_false_alarms`` (clean labels flagged) with ``detect_false_alarm_rate``
    (over all scored labels). From the suggestion: ``detect_suggest_acc``, the share of flipped labels whose
    suggested label is the clean one (None without flips)."""
    q = np.asarray(quality, dtype=np.float64)
    d = np.asarray(is_issue, dtype=bool)
    f = np.asarray(flipped, dtype=bool)
    n, k = f.size, int(f.sum())
    tp = int(np.sum(d & f))
    fp = int(np.sum(d & ~f))
    fn = k - tp
    out: dict[str, Any] = {}
    out["detect_precision"] = tp / (tp + fp) if tp + fp else 0.0
    out["detect_recall"] = tp / k if k else 0.0
    out["detect_f1"] = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else 0.0
    out["detect_auc"] = None
    out["detect_ap"] = None
    out["detect_precision_at_k"] = None
    if 0 < k < n:
        from sklearn.metrics import roc_auc_score

        out["detect_auc"] = float(roc_auc_score(f, -q))
    if k:
        from sklearn.metrics import average_precision_score

        out["detect_ap"] = float(average_precision_score(f, -q)) if k < n else 1.0
        order = np.argsort(q, kind="stable")
        out["detect_precision_at_k"] = float(f[order[:k]].mean())
    out["n_label_issues"] = int(d.sum())
    out["detect_false_alarms"] = fp
    out["detect_false_alarm_rate"] = fp / n if n else 0.0
    out["detect_suggest_acc"] = None
    if suggested is not None and y_clean is not None and k:
        s = np.asarray(suggested)
        out["detect_suggest_acc"] = float(np.mean(s[f] == np.asarray(y_clean)[f]))
    return {key: (float(v) if isinstance(v, (float, np.floating)) else v) for key, v in out.items()}


def issues_frame(index: np.ndarray, given: np.ndarray, suggested: np.ndarray, quality: np.ndarray,
                 is_issue: np.ndarray, flipped: np.ndarray | None = None,
                 probability: np.ndarray | None = None, issue_type: np.ndarray | None = None) -> pd.DataFrame:
    """``label_issues.csv`` as a DataFrame: one row per labelled point, the flagged labels first (the clearly
    ``wrong`` before the ``ambiguous``, ``issue_type``: :func:`lgcexp.issues.explain.issue_types`; None: the
    column is left out), each group by increasing quality (most suspicious first), ties by index. ``flipped``:
    None where no clean label is
    known (the column is left out); an object array with None where only some are. ``probability``: each
    label's probability of being wrong (column ``issue_probability`` after ``label_quality``; None: left
    out)."""
    cols: dict[str, Any] = {
        "index": np.asarray(index),
        "given_label": np.asarray(given),
        "suggested_label": np.asarray(suggested),
        "label_quality": np.asarray(quality, dtype=np.float64),
    }
    if probability is not None:
        cols["issue_probability"] = np.asarray(probability, dtype=np.float64)
    cols["is_label_issue"] = np.asarray(is_issue, dtype=bool)
    if issue_type is not None:
        cols["issue_type"] = np.asarray(issue_type, dtype=object)
    if flipped is not None:
        cols["is_flipped"] = np.asarray(flipped)
    import pandas as pd

    df = pd.DataFrame(cols)
    order = table_order(cols["index"], cols["label_quality"], cols["is_label_issue"], issue_type)
    return df.iloc[order].reset_index(drop=True)


def run_metrics(judged: JudgedLabels | None, split: Any) -> dict[str, Any]:
    """The detection metrics of a run (``result.json``) over the labelled points with a known clean label;
    empty when the method does not judge labels or no clean label is known."""
    if judged is None:
        return {}
    known = np.asarray(split.y_clean) >= 0
    out: dict[str, Any] = {"detect_cut": judged.cut, "detect_features": judged.features,
                           "detect_feature_agreement": judged.feature_agreement, "detect_source": judged.source,
                           "detect_estimated_issues": judged.estimated_issues,
                           "detect_expected_issues": judged.expected_issues,
                           "detect_feature_model": judged.feature_model,
                           "n_label_issues": int(judged.is_issue.sum())}
    if known.any():
        out.update(detection_metrics(judged.quality[known], judged.is_issue[known], split.flipped[known],
                                     judged.suggested[known], split.y_clean[known]))
    return out


def run_frame(judged: JudgedLabels, split: Any, label_values: np.ndarray | None = None) -> pd.DataFrame:
    """``label_issues.csv`` of a run; ``label_values``: the file's label values (class k is
    ``label_values[k]``) for a diagnosis run, else the class numbers are written."""
    known = np.asarray(split.y_clean) >= 0
    flipped: np.ndarray | None = None
    if known.all():
        flipped = np.asarray(split.flipped, dtype=bool)
    elif known.any():
        flipped = np.full(split.labeled.size, None, dtype=object)
        flipped[known] = split.flipped[known]

    def values(k: np.ndarray) -> np.ndarray:
        return np.asarray(k) if label_values is None else np.asarray(label_values)[np.asarray(k)]

    return issues_frame(split.labeled, values(split.y_observed), values(judged.suggested), judged.quality,
                        judged.is_issue, flipped, judged.issue_probability, judged.issue_type)

"""Judging labels and data: one wing (docs/label_issues.md, docs/architecture.md).

Modules, bottom up (a module imports only those above it in this list):

- :mod:`.judgement`: the record a judging algorithm hands over (numpy only; the one module the
  algorithms import);
- :mod:`.options`: the ``detect`` options;
- :mod:`.out_of_fold`: out-of-fold classifiers (also used by the classifier-confusion noise model);
- :mod:`.image_view`: the image view, an out-of-fold convolutional network on the pixels;
- :mod:`.views`: the feature view and the k-NN baseline's probabilities;
- :mod:`.count`: the one count of wrong labels and the cut at it;
- :mod:`.cuts`: confident learning, the issue probability, the decision rules;
- :mod:`.explain`: wrong versus ambiguous, and the evidence of each flag (``label_issue_evidence.csv``);
- :mod:`.judge`: a judgement plus options -> judged labels (the one entry of every front end);
- :mod:`.frames`: detection metrics and ``label_issues.csv``;
- :mod:`.data_audit`: outliers and near-duplicates;
- :mod:`.pages`: ``label_issue_pages.pdf``, every flag of image data beside its neighbours;
- :mod:`.diagnosis`: the diagnosis run's outputs (tables, pictures, summary);
- :mod:`.pred_probs`: the user's out-of-fold probabilities as a view (checks and judgement);
- :mod:`.find`: :func:`find_label_issues`, the front end without Hydra.

Names are imported on first use, so ``import lgcexp.issues.judgement`` stays light.
"""
from __future__ import annotations

import importlib

_HOME = {
    "LabelJudgement": "judgement", "normalize_rows": "judgement", "label_quality": "judgement",
    "suggested_labels": "judgement", "graph_loo_probs": "judgement",
    "DetectOptions": "options", "CUTS": "options", "CL_FILTERS": "options",
    "JudgedLabels": "judge", "judge": "judge", "judge_labels": "judge", "judge_run": "judge",
    "confident_learning": "cuts", "confident_joint": "cuts", "estimate_issues": "cuts",
    "issue_probability": "cuts", "decide": "cuts",
    "feature_probs": "views", "knn_oof_probs": "views", "combine_views": "views",
    "detection_metrics": "frames", "issues_frame": "frames", "ISSUES_FILE": "frames",
    "find_data_issues": "data_audit",
    "find_label_issues": "find",
    "estimate_wrong_labels": "count", "count_cut": "count", "issue_types": "explain", "evidence_frame": "explain",
    "check_pred_probs": "pred_probs",
}

__all__ = sorted(_HOME)


def __getattr__(name: str):
    if name in _HOME:
        return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))

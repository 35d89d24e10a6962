"""From a method's :class:`~lgcexp.issues.judgement.LabelJudgement` to judged labels under the ``detect``
options: the feature view (:mod:`lgcexp.issues.views`), the cut (:mod:`lgcexp.issues.cuts`), the quality,
the suggestion and the counts. One entry for the command, the estimators and ``find_label_issues``:
:func:`judge_labels`."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from .count import estimate_wrong_labels
from .cuts import decide, issue_probability
from .judgement import LabelJudgement, label_quality, suggested_labels
from .options import DetectOptions, resolve_cut
from .views import RowSubset, choose_feature_model, combine_views, feature_probs, view_rows

__all__ = ["JudgedLabels", "judge", "judge_labels", "judge_run"]


@dataclass(frozen=True)
class JudgedLabels:
    """The outcome of :func:`judge` on the labelled points (in the order of the labelled set): ``probs``
    the reported distribution, ``quality``, ``suggested``, ``is_issue``, the ``cut`` applied, the
    judgement's ``source``, whether the feature view took part (``features``) and its out-of-fold agreement
    with the labels the method keeps (``feature_agreement``; None where it was not fitted), the estimated
    number of wrong labels (``estimated_issues``, :func:`lgcexp.issues.count.estimate_wrong_labels`: the one
    count reported), each label's probability of
    being wrong (``issue_probability``, :func:`issue_probability` over the views that took part) and the
    feature view's out-of-fold distribution (``feature_view``; None where it was not fitted; the user's
    ``pred_probs`` where they were the second view), the method's own distribution (``evidence``) and the given
    labels (``y``)."""

    probs: np.ndarray
    quality: np.ndarray
    suggested: np.ndarray
    is_issue: np.ndarray
    cut: str
    source: str
    features: bool
    feature_agreement: float | None = None
    estimated_issues: int | None = None
    issue_probability: np.ndarray | None = None
    feature_model: str | None = None
    feature_view: np.ndarray | None = None
    evidence: np.ndarray | None = None
    y: np.ndarray | None = None

    @property
    def issue_type(self) -> np.ndarray:
        """``wrong`` / ``ambiguous`` per flagged label, "" otherwise (:func:`lgcexp.issues.explain.issue_types`)."""
        from .explain import issue_types

        return issue_types(self.probs, self.y, self.suggested, self.is_issue)

    @property
    def expected_issues(self) -> float | None:
        """The sum of :attr:`issue_probability` (not the estimate of the wrong labels: it also counts the
        share of doubt of every ambiguous label, and overestimates, docs/label_issues.md#count)."""
        return None if self.issue_probability is None else float(np.sum(self.issue_probability))


def _options(options: DetectOptions | Mapping[str, Any] | None) -> DetectOptions:
    if options is None:
        return DetectOptions()
    if isinstance(options, DetectOptions):
        return options
    return DetectOptions(**dict(options))


def judge(judgement: LabelJudgement | None, y: np.ndarray, options: DetectOptions | Mapping[str, Any] | None = None,
          X: Any = None, feature_model: str = "lda",
          view: np.ndarray | None = None, image_shape: Any = None,
          every_point_labelled: bool = False) -> JudgedLabels | None:
    """Quality, suggestion and decision from a method's judgement under the ``detect`` options (None when
    the method does not judge labels). ``X``: the features of the labelled points (same order as ``y``), for
    the feature view; None (or ``features=false``) leaves it out; ``feature_model``: its model
    (:data:`FEATURE_MODELS`; the callers pick it by :func:`choose_feature_model`; ``image_shape``: the images'
    shape for ``cnn``). ``view``: an out-of-fold
    distribution of the labelled points given by the user (``pred_probs``, :mod:`lgcexp.issues.pred_probs`),
    taken as the second view instead of fitting one on ``X`` (no agreement gate: it is the user's model; its
    agreement is still recorded). ``cut=auto`` is :func:`resolve_cut` of ``every_point_labelled``. ``cut=method``
    falls back to
    ``consensus`` for a method that has no verdict of its own (logged)."""
    if judgement is None:
        return None
    opts = _options(options)
    y = np.asarray(y, dtype=np.int64)
    evidence = np.asarray(judgement.probs, dtype=np.float64)
    n_classes = evidence.shape[1]
    probs, used, agreement, fp = evidence, False, None, None
    views = [evidence]
    if view is not None and y.size:
        fp = np.asarray(view, dtype=np.float64)
        kept = suggested_labels(evidence, y) == y
        agreement = float(np.mean(fp.argmax(axis=1)[kept] == y[kept])) if kept.any() else None
        probs, used, feature_model = combine_views(evidence, fp), True, "pred_probs"
        views.append(fp)
    elif opts.features and X is not None and y.size:
        own_issue = suggested_labels(evidence, y) != y
        fp = feature_probs(X, y, n_classes, ~own_issue, folds=opts.folds, model=feature_model,
                           image_shape=image_shape)
        if fp is not None and (~own_issue).any():
            agreement = float(np.mean(fp.argmax(axis=1)[~own_issue] == y[~own_issue]))
            if agreement >= opts.min_agreement:
                probs, used = combine_views(evidence, fp), True
                views.append(fp)
    cut = resolve_cut(opts.cut, every_point_labelled)
    if cut == "method" and judgement.decision is None:
        import logging

        logging.getLogger("lgcexp").warning("detect.cut=method: this method makes no decision of its own; "
                                            "using detect.cut=consensus")
        cut = "consensus"
    # the count reads the graph's plain leave-one-out where the method has one (LabelJudgement.leave_one_out)
    loo = judgement.leave_one_out
    count_views = views if loo is None else [np.asarray(loo, dtype=np.float64), *views[1:]]
    estimated = estimate_wrong_labels(count_views, y, alone=loo is not None)
    is_issue = decide(probs, y, cut, threshold=opts.threshold, decision=judgement.decision,
                      min_per_class=opts.min_per_class, evidence=evidence, count=estimated)
    return JudgedLabels(probs=probs, quality=label_quality(probs, y), suggested=suggested_labels(probs, y),
                        is_issue=is_issue, cut=cut, source=judgement.source, features=used,
                        feature_agreement=agreement, estimated_issues=estimated,
                        issue_probability=issue_probability(views, y), feature_model=feature_model if used else None,
                        feature_view=fp, evidence=evidence, y=y)


def judge_labels(judgement: LabelJudgement | None, labeled: np.ndarray, y: np.ndarray, n: int,
                 options: DetectOptions | Mapping[str, Any] | None = None, X: Any = None,
                 view: np.ndarray | None = None, image_shape: Any = None) -> JudgedLabels | None:
    """:func:`judge` of a method's judgement of the ``labeled`` points among ``n`` (the one entry of the
    command, the estimators and :func:`lgcexp.issues.find.find_label_issues`): the feature view reads the
    labelled rows of ``X`` (all the data's features, or None) through :func:`view_rows` (a large or
    memory-mapped X is never copied whole) and its model is chosen by the labelled share
    (:func:`choose_feature_model`: ``image_shape``, where X's rows are flattened images, makes it the image
    view, which reads the rows a batch at a time through :class:`RowSubset`); ``view``: the user's out-of-fold
    distribution of the labelled points instead (:func:`judge`)."""
    if judgement is None:
        return None
    opts = _options(options)
    model = choose_feature_model(len(labeled), n, None if X is None else image_shape)
    Xl = None
    if opts.features and view is None and X is not None:
        Xl = RowSubset(X, labeled) if model == "cnn" else view_rows(X, labeled, standardize=model != "mlp")
    return judge(judgement, y, opts, X=Xl, feature_model=model, view=view, image_shape=image_shape,
                 every_point_labelled=len(labeled) == n)


def judge_run(algorithm: Any, split: Any, options: DetectOptions | Mapping[str, Any] | None = None,
              X: np.ndarray | None = None) -> JudgedLabels | None:
    """:func:`judge_labels` for a fitted algorithm on a run's labelled set (``X``: all the data's features, or
    None)."""
    n = len(split.labeled) if X is None else int(X.shape[0])
    return judge_labels(algorithm.label_judgement(), np.asarray(split.labeled), split.y_observed, n, options, X)

"""The ``detect`` options (the config's ``detect`` group, the estimators' ``detect=`` and
:func:`lgcexp.issues.find_label_issues`'s keywords): one declaration, checked once (:mod:`lgcexp.params`)."""
from __future__ import annotations

from ..params import Boolean, Configurable, Interval, Options

__all__ = ["CL_FILTERS", "CUTS", "DetectOptions", "resolve_cut"]

#: the confident-learning filters (Northcutt et al. 2021, section 3.2)
CL_FILTERS = ("prune_by_noise_rate", "prune_by_class", "both", "confident_joint")


#: decision rules: ``auto`` (default: ``count`` or ``consensus``, :func:`resolve_cut`), ``consensus``,
#: ``suggested``, confident learning (each filter), ``threshold``, ``method``, ``count``
CUTS = ("auto", "consensus", "suggested", *CL_FILTERS, "threshold", "method", "count")


def resolve_cut(cut: str, every_point_labelled: bool) -> str:
    """The cut ``auto`` stands for: ``count`` where every point carries a label (a user's data set, the fully
    labelled benchmarks: real data have 0.1-5 % wrong labels, where cutting at the count beat ``consensus``
    in 29 of 33 cells at 0.5-5 %, docs/label_issues.md#count), ``consensus`` where labels were sampled (the
    paper's protocol, 10-60 % noise, where it was measured). Any other cut is returned as given."""
    if cut != "auto":
        return cut
    return "count" if every_point_labelled else "consensus"


class DetectOptions(Configurable):
    """The ``detect`` section of the config: how a judging method's evidence becomes ``label_issues.csv``.

    ``features`` (default true): add the *feature view* where the points have features: a model fitted
    out-of-fold on the labels the method's own evidence keeps (:func:`feature_probs`; its model by the
    labelled share, :func:`choose_feature_model`: a shrinkage LDA for a few sampled labels, the out-of-fold
    network where most points are labelled). It is used
    only when it agrees with those kept labels (out-of-fold) at least ``min_agreement`` of the time (a
    weak feature model would only blur the graph's evidence); the reported distribution is then the
    geometric mean of the two views (:func:`combine_views`), else the method's evidence alone. ``folds``:
    folds of the feature view. ``cut``: one of :data:`CUTS`:

    - ``auto`` (default): ``count`` where every point is labelled, ``consensus`` where labels were sampled
      (:func:`resolve_cut`); the record's ``detect_cut`` names the one applied;
    - ``consensus``: flagged where the method's evidence *and* the reported distribution both
      prefer another class (without the feature view: the same as ``suggested``);
    - ``suggested``: flagged where the reported distribution prefers another class;
    - ``prune_by_noise_rate``, ``prune_by_class``, ``both``, ``confident_joint``: confident learning on the
      reported distribution (:func:`confident_learning`; ``min_per_class`` labels of each class are kept);
    - ``threshold``: flagged where the quality is below ``threshold``;
    - ``method``: the method's own verdict (AutoL: omega <= 0; SIIS: corrected labels);
    - ``count``: the estimated number of wrong labels (:func:`lgcexp.issues.count.estimate_wrong_labels`),
      lowest quality first (``auto``'s choice where every point is labelled, and for ``pred_probs`` alone).
    """

    name = "detect"
    config_prefix = "detect."
    _parameter_constraints = {
        "cut": [Options(CUTS)],
        "features": [Boolean()],
        "folds": [Interval("int", 2, None)],
        "min_agreement": [Interval("real", 0, 1, "both")],
        "threshold": [Interval("real", 0, 1, "both")],
        "min_per_class": [Interval("int", 0, None)],
    }

    def __init__(self, cut: str = "auto", features: bool = True, folds: int = 5, min_agreement: float = 0.8,
                 threshold: float = 0.5, min_per_class: int = 1):
        self.cut = cut
        self.features = features
        self.folds = folds
        self.min_agreement = min_agreement
        self.threshold = threshold
        self.min_per_class = min_per_class

    @classmethod
    def _owner(cls) -> str:
        return "detect"

"""Classifier-confusion label noise, in the spirit of Chen et al., "Beyond class-conditional assumption: a
primary attempt to combat instance-dependent label noise" (AAAI 2021): the labels that get flipped are those
a classifier trained on the clean labels confuses, and they are flipped to the class it confuses them with.

For ``l`` labelled points with features and clean labels over ``c`` classes:

1. out-of-fold class probabilities ``p_i`` of a multinomial logistic regression (scikit-learn, L2, ``C``) on
   the labelled rows' standardised features, projected on their ``pca`` leading principal axes when there
   are more features than that (:mod:`lgcexp.preprocess`'s exact PCA); ``folds`` folds of
   :func:`lgcexp.preprocess.fold_splits` (seeded, blind to the labels), so no point's own clean label trains the
   model that scores it;
2. each point's confusion ``1 - p_i[y_i]`` (the probability of the other classes) and its most confused
   class ``argmax_{k != y_i} p_i[k]``;
3. exactly ``m = l - round(l (1 - rate))`` points flip, drawn without replacement with probability
   proportional to their confusion (successive draws, :func:`~lgcexp.noise.base.weighted_sample`; seeded,
   NumPy's ``default_rng((seed, "confusion"))``), each to its most confused class.

Chen et al. flip the labels of a trained network's most uncertain examples to their top wrong class; here the
network is a linear model, the choice is a seeded draw (not the top-m, so the seed matters), and the count is
exact as for every noise model of this package.
"""
from __future__ import annotations

import numpy as np

from ..issues.out_of_fold import oof_logistic_probs
from ..params import Interval
from .base import RATE, NoiseModel, flip_exact_count, uniform_transition, weighted_sample

__all__ = ["ConfusionNoise", "oof_logistic_probs"]


class ConfusionNoise(NoiseModel):
    """Classifier-confusion noise (after Chen et al., AAAI 2021), with an exact count.

    ========  ===============  =========================================================
    rate      [0, 1), 0.0      fraction of the labelled points flipped (count rounded as
                               ``l - round(l (1 - rate))``)
    folds     int >= 2, 5      folds of the out-of-fold logistic regression
    pca       int >= 0, 50     principal axes the features are projected on first (0: none)
    C         (0, inf), 1.0    inverse L2 strength of the logistic regression
    ========  ===============  =========================================================

    Needs the labelled points' features. The transition matrix depends on the data: before a draw the
    nominal uniform one at ``rate``; the realised one is ``counts_`` (row-normalised).
    """

    name = "confusion"
    needs_features = True
    _parameter_constraints = {
        "rate": RATE,
        "folds": [Interval("int", 2, None)],
        "pca": [Interval("int", 0, None)],
        "C": [Interval("real", 0, None, "neither")],
    }

    def __init__(self, rate: float = 0.0, folds: int = 5, pca: int = 50, C: float = 1.0):
        self.rate = rate
        self.folds = folds
        self.pca = pca
        self.C = C

    def transition_matrix(self, n_classes: int) -> np.ndarray:
        return uniform_transition(n_classes, float(self.rate))

    def confusion(self, X: np.ndarray, y_clean: np.ndarray, n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
        """(each point's confusion ``1 - p_i[y_i]``, its most confused other class)."""
        P = oof_logistic_probs(X, y_clean, n_classes, folds=self.folds, pca=self.pca, C=self.C, seed=seed)
        idx = np.arange(y_clean.size)
        conf = np.clip(1.0 - P[idx, y_clean], 0.0, 1.0)
        others = P.copy()
        others[idx, y_clean] = -np.inf
        return conf, others.argmax(axis=1).astype(np.int64)

    def _corrupt(self, y_clean: np.ndarray, n_classes: int, seed: int, X: np.ndarray | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
        def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
            conf, target = self.confusion(X, y_clean, n_classes, seed)
            rng = np.random.default_rng([int(seed), 0x636F6E66])  # stream "conf"
            picks = weighted_sample(conf, m, rng)
            return picks, target[picks]

        return flip_exact_count(y_clean, n_classes, self.rate, draw)

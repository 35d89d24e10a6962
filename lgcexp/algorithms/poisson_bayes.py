"""PoissonBayes (``algo=poissonBayes``): Poisson learning on the posterior of each label's true class, from
Poisson learning's exact leave-one-out and a uniform label-noise rate fitted to the labels. Ours; it learns no
label weights, so it keeps PoissonL's reading of the other labels without its fit to them
(docs/poisson.md, "Label noise on ISOLET").

1. **Evidence without the label.** The exact leave-one-out scores of Poisson learning at the labelled points,
   ``Z = Ã Y_L`` (:func:`lgcexp.algorithms.poissonl.poisson_loo_matrix`, rows scaled to ``sum_j |A_ij| = 1``, as
   PoissonL's; then divided by their mean absolute value, so the temperature below is free of the graph's scale).
2. **Calibration under noise.** ``q = softmax(Z / T)`` with T and a uniform noise rate rho fitted jointly to the
   given labels (:func:`lgcexp.calibration.calibrate_under_noise`: a given label is the true class with
   probability ``1 - rho``, each other class with ``rho / (c - 1)``).
3. **Posterior.** Bayes' rule, ``pi_i ∝ q_i * P(y_i | true class)`` (:func:`lgcexp.calibration.
   noisy_label_posterior`): where the fitted rate is 0 the posterior is the given labels and the method is
   Poisson learning; a label changes only where the other labels' evidence outweighs ``(1 - rho) / (rho / (c -
   1))``. A label no other label reaches (an all-zero row of A), or the only label of its class (the others cannot
   speak for that class), keeps its one-hot and is left out of the fit.
4. **Propagation.** The posterior (``labels=soft``; ``hard``: its argmax one-hot) is Poisson learning's sources
   (mean-shifted, the same T from the mixing rule), and with ``balance=True`` the scores are rescaled by the
   class-size weights of Calder et al. 2020 (``algo=poisson balance=true``), ``s_j = (1/c) / mean_i pi_ij``,
   from the posterior: corrections change how much source mass each class has, and Poisson learning without
   the rescaling gives the extra mass to the classes that gained labels.
"""
from __future__ import annotations

import logging
import time
from typing import Any

import numpy as np

from ..calibration import calibrate_under_noise, noisy_label_posterior
from ..graph import Graph
from ..params import Boolean, Options, positive
from .base import GraphSSLAlgorithm, one_hot
from .poisson import poisson_iterate, poisson_sources, source_balance
from .poissonl import (
    PoissonL,
    judged_labels,
    loo_votes,
    normalise_rows,
    poisson_loo_matrix,
    poisson_operator,
    scale_free_softmax,
)

log = logging.getLogger(__name__)

LABELS = ("soft", "hard")


def loo_evidence(A: np.ndarray, y: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(P, reached): the leave-one-out distribution of every label, the softmax of its votes ``Ã Y`` divided by their
    mean absolute value over the labels that can be judged (``reached``: a nonzero row of A, and at least one other
    label of the same class; without one, the other labels cannot speak for the given class, only against it), a
    zero row for the others."""
    y = np.asarray(y, dtype=np.int64)
    At, isolated = normalise_rows(A)
    reached = judged_labels(isolated, y, n_classes)
    return scale_free_softmax(loo_votes(At, np.ones(y.size), y, n_classes), reached), reached


def label_posterior(P: np.ndarray, y: np.ndarray, reached: np.ndarray
                    ) -> tuple[np.ndarray, float, float, np.ndarray]:
    """(posterior, T, rho, q) of steps 2-3 of the module docstring from the leave-one-out distribution ``P``
    (:func:`loo_evidence`): ``q`` the calibrated distribution (the prior; a zero row where a label is not
    ``reached``), rows not ``reached`` keep their given label."""
    y = np.asarray(y, dtype=np.int64)
    c = P.shape[1]
    post = one_hot(y, c)
    prior = np.zeros((y.size, c))
    if not reached.any():
        return post, 1.0, 0.0, prior
    q, T, rho = calibrate_under_noise(P[reached], y[reached])
    post[reached] = noisy_label_posterior(q, y[reached], rho)
    prior[reached] = q
    return post, T, rho, prior


class PoissonBayes(GraphSSLAlgorithm):
    """PoissonBayes (module docstring). Parameters: ``labels`` (soft: the posterior as sources | hard: its argmax),
    ``balance`` (the class-size rescaling from the sources), and the Poisson iteration's ``min_iter``/``max_iter``
    (the mixing rule, as ``algo=poisson``).

    After ``fit``: ``scores_``, ``posterior_`` (m, c), ``labeled_pred_`` (the posterior's argmax),
    ``prior_`` (m, c: the calibrated leave-one-out distribution, step 2; zero rows for labels not judged),
    ``noise_rate_`` (the fitted rho), ``temperature_``, ``dropped_`` (the labels the posterior changes),
    ``suspicion_`` (1 - the posterior of the given label). :meth:`label_judgement` hands the prior and the changed
    labels to the label-issue finder."""

    name = "poissonBayes"
    class_columns = ("corrected_label",)
    _parameter_constraints = {
        "labels": [Options(LABELS)],
        "balance": [Boolean()],
        "min_iter": [positive("int")],
        "max_iter": [positive("int")],
    }

    def __init__(self, labels: str = "soft", balance: bool = True, min_iter: int = 50, max_iter: int = 1000):
        self.labels = labels
        self.balance = balance
        self.min_iter = min_iter
        self.max_iter = max_iter

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        PoissonL._check_relations(params, prefix)   # the same mixing rule's max_iter >= min_iter

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        t0 = time.perf_counter()
        G, T, hit = poisson_operator(graph, labeled, cache, min_iter=self.min_iter, max_iter=self.max_iter)
        t_op = time.perf_counter() - t0
        y = np.asarray(y_labeled, dtype=np.int64)
        P, reached = loo_evidence(poisson_loo_matrix(G), y, n_classes)
        post, temp, rho, prior = label_posterior(P, y, reached)
        S = post if self.labels == "soft" else one_hot(post.argmax(axis=1), n_classes)
        U, _ = poisson_iterate(graph.W, poisson_sources(graph.n, labeled, S), labeled, steps=T)
        if self.balance:
            U = U * source_balance(S)
        corrected = post.argmax(axis=1)
        changed = corrected != y
        self.scores_ = U
        self.posterior_ = post
        self.prior_ = prior
        self.labeled_pred_ = corrected
        self.noise_rate_ = rho
        self.temperature_ = temp
        self.dropped_ = changed
        self.suspicion_ = 1.0 - post[np.arange(y.size), y]
        self.label_info_ = {"corrected_label": corrected, "posterior_given": post[np.arange(y.size), y],
                            "changed": changed}
        log.info("poissonBayes: fitted noise rate %.3f, T=%.3g, %d labels changed", rho, temp, int(changed.sum()))
        self.info_.update({
            "solver_iterations": int(T),
            "noise_rate_fitted": round(float(rho), 6),
            "temperature": round(float(temp), 6),
            "n_changed": int(changed.sum()),
            "n_isolated": int((~reached).sum()),   # not judged: unreached, or the only label of its class
            "operator_seconds": round(t_op, 4),
            "operator_cache_hit": hit,
        })

    def label_judgement(self):
        """Each label's calibrated leave-one-out distribution (step 2: the other labels' evidence only, a zero row
        for a label not judged, which is never flagged); the method's own verdict: the posterior changes it."""
        from ..issues.judgement import LabelJudgement

        return LabelJudgement(probs=self.prior_.copy(), decision=self.dropped_.copy(),
                              source="poissonBayes: calibrated exact Poisson leave-one-out (prior of the posterior)")


"""PoissonL-MBO (``algo=poissonLMBO``): PoissonL's leave-one-out label reweighting
(:mod:`lgcexp.algorithms.poissonl`), then Poisson-MBO's volume-constrained rounds
(:mod:`lgcexp.algorithms.poisson_mbo`, Calder, Cook, Thorpe & Slepčev, ICML 2020, Algorithm 2) forced by the
reweighted labels instead of the given ones.

PoissonL learns a weight ``w_j >= 0`` per label from the exact leave-one-out matrix of the mean-shifted Poisson
operator; a label that its neighbours' labels contradict is down-weighted (``w_j = 0``: dropped). Its corrected
labels ``Q`` (softmax rows of the leave-one-out logits) are the new sources. The MBO rounds then run exactly as
in Poisson-MBO, from the decision of Poisson learning on the given labels (``start=given``, default: Poisson-MBO's
own start) or on the corrected ones (``start=reweighted``: PoissonL's prediction), with the mean-shifted sources
``B`` built from

- ``sources=corrected`` (default): the corrected labels ``Q`` (``Q_i - mean(Q)`` at the labelled rows), the
  sources PoissonL itself propagates;
- ``sources=kept``: the given one-hot labels of the labels PoissonL keeps (``w_j > 0``), the dropped ones removed.

So where no label is contradicted (``Q`` one-hot on the given labels, nothing dropped) the method is
Poisson-MBO. Measured on MNIST VAE codes under 40 % label noise (docs/poisson.md), it is level with Poisson-MBO,
not above it: where the noise leaves a class with few correct labels PoissonL relabels or drops all of them, and
the rounds started from PoissonL's own prediction lose that class (hence the default start).

Parameters: PoissonL's (``loss``, ``lr``, ``steps``, Adam's ``beta1``/``beta2``/``epsilon``, ``dtype``, ``xla``,
``chunk``, ``min_iter``, ``max_iter``) and Poisson-MBO's (``Ns``, ``mu``, ``T``, ``priors``), plus ``sources`` and
``start``.

After ``fit``: PoissonL's attributes (``omega_``, ``corrected_``, ``dropped_``, ``labeled_pred_``,
``suspicion_``) and ``scores_``, the one-hot MBO decision.
"""
from __future__ import annotations

import numpy as np

from ..graph import Graph
from ..params import Array, Interval, Options, positive
from ..priors import prior_vector
from .base import one_hot
from .poisson import Poisson, poisson_sources
from .poisson_mbo import mbo_rounds
from .poissonl import PoissonL

SOURCES = ("corrected", "kept")
STARTS = ("reweighted", "given")


class PoissonLMBO(PoissonL):
    """PoissonL-MBO (module docstring)."""

    name = "poissonLMBO"
    _parameter_constraints = {
        **PoissonL._parameter_constraints,
        "Ns": [positive("int")],
        "mu": [positive()],
        "T": [positive("int")],
        "priors": [Options(("uniform", "labels")), Array(Interval("real", 0, None), "a list of class fractions", 1)],
        "sources": [Options(SOURCES)],
        "start": [Options(STARTS)],
    }
    quick_params = {"steps": 200, "T": 4}

    def __init__(self, loss: str = "xent", lr: float = 0.7, steps: int = 5000,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-7, dtype: str = "float32",
                 xla: bool = True, chunk: int = 500, min_iter: int = 50, max_iter: int = 1000,
                 Ns: int = 40, mu: float = 1.0, T: int = 20, priors="uniform", sources: str = "corrected",
                 start: str = "given"):
        super().__init__(loss=loss, lr=lr, steps=steps, beta1=beta1, beta2=beta2, epsilon=epsilon, dtype=dtype,
                         xla=xla, chunk=chunk, min_iter=min_iter, max_iter=max_iter)
        self.Ns = Ns
        self.mu = mu
        self.T = T
        self.priors = priors
        self.sources = sources
        self.start = start

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        from .poisson_mbo import PoissonMBO

        PoissonMBO(priors=self.priors).check_data(n, n_classes, prefix or self.config_prefix)

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        super()._fit(graph, labeled, y_labeled, n_classes, eig=eig, progress=progress, cache=cache)
        if self.sources == "corrected":
            B = poisson_sources(graph.n, labeled, self.corrected_)
        else:
            keep = ~self.dropped_
            B = poisson_sources(graph.n, labeled[keep], one_hot(np.asarray(y_labeled)[keep], n_classes))
        b = prior_vector(self.priors, y_labeled, n_classes)
        if self.start == "reweighted":
            start = self.scores_.argmax(axis=1)
        else:
            B0 = poisson_sources(graph.n, labeled, one_hot(y_labeled, n_classes))
            U0, _ = Poisson(min_iter=self.min_iter, max_iter=self.max_iter).solve(graph.W, B0, labeled)
            start = U0.argmax(axis=1)
        labels, err = mbo_rounds(graph, B, start, b, Ns=self.Ns, mu=self.mu, T=self.T)
        self.scores_ = one_hot(labels, n_classes)
        self.info_["mbo_projection_error"] = float(err)

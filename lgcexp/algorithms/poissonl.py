"""PoissonL (``algo=poissonL``): AutoL's leave-one-out label reweighting (:mod:`lgcexp.algorithms.autol`) on the
Poisson learning operator (:mod:`lgcexp.algorithms.poisson`) instead of LGC's.

**The operator.** Poisson learning stopped after T steps (T from the paper's mixing rule, which depends only on
the graph and the labelled set L) is linear in its sources: ``U = G B`` with
``G = sum_{t<T} (D^-1 W)^t D^-1`` (symmetric). With m labels ``y_j`` (one-hot), label weights ``w_j >= 0``
and the mean shift of the paper, the sources are ``B_j = w_j y_j - (1/m) sum_k w_k y_k`` at the labelled points,
so at a labelled point i, ``U_i = sum_j (G_ij - gbar_i) w_j y_j`` with ``gbar_i = (1/m) sum_k G_ik``: the mean
shift couples every label to every row.

**Leave-one-out matrix.** Remove label i and solve again (same T): the sources are ``w_j y_j`` minus the mean
over the other m-1 labels, so

    U_i^(-i) = sum_{j != i} A_ij w_j y_j,    A_ij = G_ij - (1/(m-1)) sum_{k != i} G_ik   (j != i),  A_ii = 0,

exactly (not only the diagonal of ``G (I - 11^T/m)`` removed: the mean that is shifted out is that of the
other labels). Each row of A sums to zero. Only ``G_LL`` (m x m) is needed: the labelled rows of T steps of the
iteration on the m indicator columns. A positive scale per row leaves the leave-one-out decision unchanged;
rows are scaled to ``sum_j |A_ij| = 1`` (``Ã``) so the softmax below sees logits of one scale per row, as
AutoL's row-normalised matrix does.

**Loss and gradient.** As AutoL: ``Z = Ã diag(max(w, 0)) Y_L``, ``Q = softmax_row(Z)``, the loss
``ell = sum_i r_i ell_i(Q_i)`` (``r`` the normalised row weights; ``xent``: ``ell_i = -sum_c Q_ic log(Y_ic +
1e-6)``, ``mse``: ``sum_c (Q_ic - Y_ic)^2``, ...). With ``g_i = d ell_i / d Q_i`` and the softmax Jacobian,
``d ell / d Z_i = r_i Q_i * (g_i - <g_i, Q_i>)``, and since ``Z_ic = sum_j Ã_ij w_j Y_jc``,

    d ell / d w_j = 1[w_j > 0] sum_i Ã_ij (d ell / d Z_i)_{y_j}

(:func:`loo_gradient`, tested against finite differences and TensorFlow's autodiff, which the optimisation
uses: full-batch Adam, AutoL's :func:`lgcexp.algorithms.autol.optimize_weights`).

**Prediction.** The corrected labels ``Q`` (a label no other label reaches, or the only label of its class, keeps
its one-hot and is left out of the loss: the other labels can vote against its class, never for it) become the
Poisson sources (``Q_i - mean(Q)``), and Poisson learning with the mixing rule propagates them; predictions
are the argmax.
"""
from __future__ import annotations

import hashlib
import logging
import time
from typing import Any

import numpy as np

from ..errors import UserError
from ..graph import Graph
from ..params import Boolean, Interval, Options, fmt_value, positive
from .autol import DTYPES, LOG_EPS, LOSSES, LooModel, optimize_weights
from .base import GraphSSLAlgorithm, one_hot
from .poisson import mixing_steps, poisson_iterate, poisson_sources

log = logging.getLogger(__name__)


def poisson_submatrix(W, labeled: np.ndarray, steps: int) -> np.ndarray:
    """``G_LL``: the labelled rows of ``sum_{t<steps} (D^-1 W)^t D^-1`` on the labelled columns."""
    E = np.zeros((W.shape[0], labeled.size))
    E[labeled, np.arange(labeled.size)] = 1.0
    X, _ = poisson_iterate(W, E, labeled, steps=steps)
    G = X[labeled]
    return 0.5 * (G + G.T)   # symmetric in exact arithmetic


def poisson_operator(graph: Graph, labeled: np.ndarray, cache: Any = None, *, min_iter: int = 50,
                     max_iter: int = 1000) -> tuple[np.ndarray, int, bool]:
    """(G_LL, T, cache hit): T from the mixing rule, G_LL by :func:`poisson_submatrix`; from the on-disk cache
    when given (it depends on the graph and the labelled set only, not on the labels, the noise or the loss)."""
    T = mixing_steps(graph.W, labeled, min_iter=min_iter, max_iter=max_iter)

    def compute() -> dict[str, np.ndarray]:
        return {"G": poisson_submatrix(graph.W, labeled, T)}

    if cache is None:
        return compute()["G"], T, False
    from ..cache import stable_hash

    key = stable_hash({"graph": graph.key, "labeled": hashlib.sha256(labeled.tobytes()).hexdigest(),
                       "T": T, "v": 1})
    m = labeled.size

    def validate(a: dict[str, np.ndarray]) -> str | None:
        G = a.get("G")
        return None if G is not None and G.shape == (m, m) and np.all(np.isfinite(G)) else "bad G_LL"

    arr, hit = cache.get_or_compute("poisson_gll", key, compute, validate=validate)
    return np.asarray(arr["G"], dtype=np.float64), T, bool(hit)


def poisson_loo_matrix(G: np.ndarray) -> np.ndarray:
    """The exact leave-one-out matrix A of the mean-shifted Poisson operator (module docstring)."""
    G = np.asarray(G, dtype=np.float64)
    m = G.shape[0]
    off = G - np.diag(np.diag(G))
    gbar = off.sum(axis=1) / max(m - 1, 1)
    A = off - gbar[:, None]
    np.fill_diagonal(A, 0.0)
    return A


def normalise_rows(A: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``A / sum_j |A_ij|`` per row; (Ã, isolated), isolated rows (nothing left) stay zero."""
    s = np.abs(A).sum(axis=1)
    isolated = ~(s > 0)
    At = np.zeros_like(A)
    np.divide(A, s[:, None], out=At, where=~isolated[:, None])
    return At, isolated


def loo_votes(At: np.ndarray, omega: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """``Ã diag(max(omega, 0)) Y``: each label's leave-one-out votes at the label weights (a negative weight counts
    as 0, as in the loss)."""
    return At @ (np.maximum(np.asarray(omega, dtype=np.float64), 0.0)[:, None] * one_hot(y, n_classes))


def scale_free_softmax(Z: np.ndarray, judged: np.ndarray) -> np.ndarray:
    """The row softmax of the votes ``Z`` divided by their mean absolute value over the ``judged`` rows (so the
    distribution does not depend on the graph's or the weights' scale); zero rows where a label is not judged."""
    scale = np.abs(Z[judged]).mean() if judged.any() else 0.0
    if scale > 0:
        Z = Z / scale
    P = np.exp(Z - Z.max(axis=1, keepdims=True))
    return np.where(judged[:, None], P / P.sum(axis=1, keepdims=True), 0.0)


def judged_labels(isolated: np.ndarray, y: np.ndarray, n_classes: int) -> np.ndarray:
    """The labels a leave-one-out can judge: reached by another label (not ``isolated``) and not the only label of
    their class (the other labels can vote against that class, never for it)."""
    y = np.asarray(y, dtype=np.int64)
    return ~np.asarray(isolated, dtype=bool) & (np.bincount(y, minlength=n_classes)[y] > 1)


def loo_gradient(A: np.ndarray, w: np.ndarray, y: np.ndarray, n_classes: int, loss: str = "xent",
                 row_weight: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """The softmax leave-one-out loss and its gradient in w, in closed form (module docstring)."""
    Y = one_hot(y, n_classes)
    wp = np.maximum(w, 0.0)
    Z = A @ (wp[:, None] * Y)
    Z = Z - Z.max(axis=1, keepdims=True)
    Q = np.exp(Z)
    Q /= Q.sum(axis=1, keepdims=True)
    r = np.ones(A.shape[0]) if row_weight is None else np.asarray(row_weight, dtype=np.float64)
    r = r / r.sum()
    if loss == "xent":
        g = np.broadcast_to(-np.log(Y + LOG_EPS), Q.shape)
        per = (Q * g).sum(axis=1)
    elif loss == "ce":
        per = -(Y * np.log(Q + LOG_EPS)).sum(axis=1)
        g = -Y / (Q + LOG_EPS)
    elif loss == "mse":
        per = ((Q - Y) ** 2).sum(axis=1)
        g = 2.0 * (Q - Y)
    else:
        per = np.abs(Q - Y).sum(axis=1)
        g = np.sign(Q - Y)
    dZ = r[:, None] * Q * (g - (g * Q).sum(axis=1, keepdims=True))
    grad = np.einsum("ij,ij->j", A, dZ[:, y])           # sum_i A_ij dZ[i, y_j]
    return float((r * per).sum()), np.where(w > 0, grad, 0.0)


class PoissonL(GraphSSLAlgorithm):
    """PoissonL (module docstring). Parameters: ``loss``, Adam's ``lr``,
    ``steps``, ``beta1``, ``beta2``, ``epsilon``, ``dtype``, ``xla``, ``chunk`` (as AutoL), and the Poisson
    iteration's ``min_iter``/``max_iter``.

    After ``fit``: ``scores_`` (Poisson learning on the corrected labels), ``labeled_pred_`` (argmax of Q),
    ``omega_``, ``corrected_`` (Q), ``dropped_`` (omega <= 0), ``suspicion_`` (-omega)."""

    name = "poissonL"
    losses = LOSSES
    class_columns = ("corrected_label",)
    _parameter_constraints = {
        "loss": [Options(LOSSES)],
        "lr": [positive()],
        "steps": [positive("int")],
        "beta1": [Interval("real", 0, 1, "left")],
        "beta2": [Interval("real", 0, 1, "left")],
        "epsilon": [positive()],
        "dtype": [Options(DTYPES)],
        "xla": [Boolean()],
        "chunk": [positive("int")],
        "min_iter": [positive("int")],
        "max_iter": [positive("int")],
    }

    def __init__(self, loss: str = "xent", lr: float = 0.7, steps: int = 5000,
                 beta1: float = 0.9, beta2: float = 0.999, epsilon: float = 1e-7, dtype: str = "float32",
                 xla: bool = True, chunk: int = 500, min_iter: int = 50, max_iter: int = 1000):
        self.loss = loss
        self.lr = lr
        self.steps = steps
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.dtype = dtype
        self.xla = xla
        self.chunk = chunk
        self.min_iter = min_iter
        self.max_iter = max_iter

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        if params["max_iter"] < params["min_iter"]:
            raise UserError(f"{prefix}max_iter={fmt_value(params['max_iter'])} is not allowed: it must be >= "
                            f"{prefix}min_iter ({fmt_value(params['min_iter'])})")

    def operator(self, graph: Graph, labeled: np.ndarray, cache: Any = None) -> tuple[np.ndarray, int, bool]:
        """(G_LL, T, cache hit): :func:`poisson_operator` with this method's mixing rule."""
        return poisson_operator(graph, labeled, cache, min_iter=self.min_iter, max_iter=self.max_iter)

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        t0 = time.perf_counter()
        G, T, hit = self.operator(graph, labeled, cache)
        t_op = time.perf_counter() - t0
        A, isolated = normalise_rows(poisson_loo_matrix(G))
        y = np.asarray(y_labeled, dtype=np.int64)
        judged = judged_labels(isolated, y, n_classes)   # the others leave the loss and keep their one-hot
        model = LooModel(A, y_labeled, n_classes, loss=self.loss, normalize="softmax", dtype=self.dtype,
                         row_weight=judged.astype(float) if judged.any() else None)
        if judged.any():
            omega, ost = optimize_weights(model, steps=self.steps, lr=self.lr, beta1=self.beta1, beta2=self.beta2,
                                          epsilon=self.epsilon, xla=self.xla, chunk=self.chunk, progress=progress)
        else:  # nothing to judge (e.g. one label per class): every weight stays 1
            omega, ost = np.ones(y.size), {"loss_initial": None, "loss_final": None, "seconds": 0.0}
        Q = model.predict(omega)
        Yl = one_hot(y_labeled, n_classes)
        no_vote = ~judged | ~(Q.sum(axis=1) > 0)
        Q[no_vote] = Yl[no_vote]
        U, _ = poisson_iterate(graph.W, poisson_sources(graph.n, labeled, Q), labeled, steps=T)
        dropped = (omega <= 0.0) & judged   # a label that cannot be judged is never dropped
        self.omega_ = omega
        self.judged_ = judged
        self._loo_logits = loo_votes(A, omega, y, n_classes)
        self.corrected_ = Q
        self.scores_ = U
        self.labeled_pred_ = Q.argmax(axis=1)
        self.dropped_ = dropped
        self.suspicion_ = -omega
        self.label_info_ = {"omega": omega, "corrected_label": self.labeled_pred_, "confidence": Q.max(axis=1),
                            "dropped": dropped}
        self.info_.update({
            "solver_iterations": int(T),
            "n_dropped": int(dropped.sum()),
            "n_isolated": int(isolated.sum()),
            "n_unjudged": int((~judged).sum()),
            "n_changed": int((self.labeled_pred_ != y_labeled).sum()),
            "loss_initial": ost["loss_initial"],
            "loss_final": ost["loss_final"],
            "operator_seconds": round(t_op, 4),
            "operator_cache_hit": hit,
            "opt_seconds": round(ost["seconds"], 4),
            "opt_steps": int(self.steps),
        })

    def label_judgement(self):
        """Each judged label's leave-one-out class distribution at the learnt label weights: the softmax of the
        other labels' votes ``Ã diag(max(omega, 0)) Y`` divided by their mean absolute value over the judged labels
        (Adam drives the trusted weights to large values, so the loss's own softmax is near one-hot and its scale
        differs from run to run; as PoissonBayes's evidence, the division makes it scale-free); a zero row for a
        label not judged (never flagged). The method's own verdict: omega <= 0."""
        from ..issues.judgement import LabelJudgement

        return LabelJudgement(probs=scale_free_softmax(self._loo_logits, self.judged_), decision=self.dropped_.copy(),
                              source=f"{self.name}: exact Poisson leave-one-out at the learnt label weights")


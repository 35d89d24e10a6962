"""LGC_LVO_AutoD: choose LGC's diffusion rate alpha by the labelled leave-one-out loss
(paper §3.2, Eqs. (34)-(42), Fig. 2).

With the p smallest eigenpairs ``L u_k = lambda_k u_k`` of the normalised Laplacian, the propagation matrix
``P = (I - alpha S)^-1`` is approximated by ``U diag(lt) U^T`` with ``lt_k = 1 / (1 - alpha + alpha lambda_k)``
(exact for p = n). On the labelled rows (``U_L``, l x p) and with ``B = U_L^T Y_L`` (p x c) computed once:

- ``G = U_L diag(lt) B`` = ``P_LL Y_L``                          O(plc) per alpha
- ``s_i = sum_k U_ik^2 lt_k`` = ``P_ii`` (self-influence)       O(pl) per alpha, one product for all alphas
- ``H = G - diag(s) Y_L`` (``remove_diag=true``, the leave-one-out prediction) or ``H = G``
- ``H <- max(H, 0) + eps``, rows normalised to probabilities.

Losses against the observed labels (means over the labelled rows; docs/fidelity.md#autod-grid): MAE
``sum_c |H - Y|``, MSE ``sum_c (H - Y)^2`` and cross-entropy ``-sum_c Y log((1 - s) H + s / c)`` with a
light smoothing s (default 0.01; the authors used s / l instead of s / c, which changes only the floor
``-log(s / .)`` charged to a point whose own class gets zero score).

alpha is parametrised as ``alpha = 2^(-1/x)``, x >= 1 (Figure 2). ``search='grid'`` evaluates every x of
``x_min, x_min + x_step, ..., <= x_max`` at once (a few matrix products for the whole grid) and keeps the best
by ``select``: ``acc`` = highest labelled LOO accuracy, ties broken by the lowest ``loss`` and then the
smallest x; ``mae|mse|ce`` = lowest value of that loss (ties: smallest x). ``search='gradient'`` minimises the
loss (``select`` when it names a loss, otherwise ``loss``) over log x with TensorFlow's Adam, started at
``x0`` (a number, or ``grid``: the grid minimiser of that loss) and kept inside [x_min, x_max]; the iterate
with the lowest loss is returned. The losses are not convex in x: each labelled point whose leave-one-out
score for its own class is clipped to 0 adds a plateau/step (on MNIST the cross-entropy has a local minimum
at x = 13.2 besides the global one at x ~ 20), so a start far from the optimum can stop at a local minimum.

The final classification is LGC with the chosen alpha on the full graph (sparse conjugate-gradient solve,
exactly as ``algo=lgc``), so ``scores_`` do not depend on the truncation p. ``labeled_pred_`` is the
leave-one-out prediction ``argmax H`` at the chosen alpha: the label each point would get from the
others, i.e. the "after correction" readout (with ``remove_diag=false`` it is the in-sample prediction).

``plot()`` writes ``autod_curves.csv`` (one row per x: x, alpha, mae/mse/ce/loo_acc with suffix ``_rd``
(diagonal removed) and ``_nd`` (kept), and ``unl_acc``, one column since the diagonal only touches labelled
rows) and ``figure2.png``. ``unl_acc`` is the spectral prediction ``U diag(lt) U_L^T Y_L`` on the unlabelled
rows (evaluation only). With p = 300 on MNIST it underestimates exact LGC at small x (73% vs 89% at x = 1,
84% vs 94% at x = 6) and agrees within 1 point from x ~ 28 on, because a truncated basis cannot represent
the local propagation of a small alpha (``python -m benchmarks autod sweep --lgc-xs ...``).
"""
from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from ..cache import atomic_open
from ..errors import UserError
from ..graph import Graph
from ..params import Boolean, Interval, Options, fmt_value, positive
from .base import GraphSSLAlgorithm, one_hot
from .lgc import graph_degree, lgc_propagate

log = logging.getLogger(__name__)

SELECTS = ("acc", "mae", "mse", "ce")
LOSSES = ("mae", "mse", "ce")
SEARCHES = ("grid", "gradient")
LOOS = ("spectral", "exact")
CURVE_COLUMNS = ("mae", "mse", "ce", "loo_acc")
#: the paper's Figure 2 colours (matplotlib's default cycle, docs/fidelity.md#autod-grid)
COLORS = {"mae": "tab:orange", "mse": "tab:blue", "ce": "tab:green", "loo_acc": "tab:red",
          "unl_acc": "tab:purple"}
LABELS = {"mae": "MAE", "mse": "MSE", "ce": "cross-entropy", "loo_acc": "labelled acc. (LOO)",
          "unl_acc": "unlabelled acc. (spectral)"}


# -------------------------------------------------------------------------------------------------------------
# the spectral leave-one-out machinery (pure numpy; used by AutoD, the tests and the benchmark)
# -------------------------------------------------------------------------------------------------------------

def alpha_of_x(x) -> np.ndarray:
    """``alpha = 2^(-1/x)``."""
    return np.power(2.0, -1.0 / np.asarray(x, dtype=np.float64))


def x_of_alpha(alpha) -> np.ndarray:
    """Inverse of :func:`alpha_of_x`: ``x = -1 / log2(alpha)``."""
    return -1.0 / np.log2(np.asarray(alpha, dtype=np.float64))


def x_grid(x_min: float, x_max: float, x_step: float) -> np.ndarray:
    """``x_min, x_min + x_step, ...`` up to ``x_max`` (inclusive up to rounding)."""
    count = int(np.floor((x_max - x_min) / x_step + 1e-9)) + 1
    return x_min + x_step * np.arange(count)


def spectral_filter(values: np.ndarray, alphas) -> np.ndarray:
    """``lt[a, k] = 1 / (1 - alpha_a + alpha_a lambda_k)``; shape (len(alphas), p)."""
    a = np.atleast_1d(np.asarray(alphas, dtype=np.float64))[:, None]
    return 1.0 / (1.0 - a + a * np.asarray(values, dtype=np.float64)[None, :])


class SpectralLOO:
    """Precomputed pieces for evaluating the leave-one-out prediction at many alphas in O(plc) each.

    ``U_L`` (l, p): eigenvector rows of the labelled points; ``Y_L`` (l, c): one-hot observed labels.
    """

    def __init__(self, values: np.ndarray, U_L: np.ndarray, Y_L: np.ndarray):
        self.values = np.asarray(values, dtype=np.float64)
        self.U_L = np.ascontiguousarray(U_L, dtype=np.float64)
        self.Y_L = np.asarray(Y_L, dtype=np.float64)
        self.B = self.U_L.T @ self.Y_L          # (p, c), once: O(plc)
        self.U_L2 = self.U_L ** 2               # (l, p), for the self-influence

    @property
    def l(self) -> int:
        return self.U_L.shape[0]

    def propagated(self, alpha: float) -> np.ndarray:
        """``G = P_LL Y_L = U_L diag(lt) (U_L^T Y_L)`` (l, c)."""
        lt = spectral_filter(self.values, [alpha])[0]
        return self.U_L @ (lt[:, None] * self.B)

    def self_influence(self, alphas) -> np.ndarray:
        """``P_ii = sum_k U_ik^2 lt_k`` for every alpha: (len(alphas), l)."""
        return spectral_filter(self.values, alphas) @ self.U_L2.T

    def H_raw(self, alphas, remove_diag: bool = True) -> np.ndarray:
        """Unnormalised H for every alpha: (len(alphas), l, c)."""
        lt = spectral_filter(self.values, alphas)                     # (A, p)
        # G_a = U_L diag(lt_a) B for all a at once: (A, l, c)
        G = np.einsum("lp,ap,pc->alc", self.U_L, lt, self.B, optimize=True)
        if remove_diag:
            s = lt @ self.U_L2.T                                        # (A, l)
            G = G - s[:, :, None] * self.Y_L[None]
        return G


class ExactLOO:
    """The same pieces as :class:`SpectralLOO` without truncation, for a fixed list of alphas
    (``algo.params.loo=exact``): ``P = (I - alpha S)^-1`` solved by multi-shift conjugate gradient
    (:func:`lgcexp.algorithms.propagation.propagation_submatrices`, one Krylov space for every alpha):

    - ``s_i = P_ii`` from the l indicator columns, keeping only each column's own labelled entry;
    - ``G = P_LL Y_L = (P Y)_L`` from the c columns of ``Y`` (one-hot at the labelled rows, 0 elsewhere).

    ``H_raw`` answers only for the alphas it was built with (the grid); ``tol`` is CG's relative residual.
    """

    def __init__(self, S, labeled: np.ndarray, Y_L: np.ndarray, alphas, *, tol: float = 1e-6,
                 dtype: str = "float64"):
        from ..solvers.shifted import shifted_solve
        from .propagation import propagation_submatrices

        t0 = time.perf_counter()
        labeled = np.asarray(labeled, dtype=np.int64)
        self.alphas = np.asarray(alphas, dtype=np.float64).ravel()
        self.Y_L = np.asarray(Y_L, dtype=np.float64)
        diags, st = propagation_submatrices(S, labeled, self.alphas, tol=tol, dtype=dtype, diagonal_only=True,
                                            scale=False)
        Y = np.zeros((S.shape[0], self.Y_L.shape[1]), dtype=np.dtype(dtype))
        Y[labeled] = self.Y_L
        fused = st["path"].startswith("multishift-fused")     # G on the diagonals' recursion (pll_path's rule)
        Gs, it, rel = shifted_solve(S, Y, self.alphas, tol=tol, strategy="fused" if fused else "block",
                                    select=lambda M: M[labeled])
        self.s = np.array(diags)                       # (A, l)
        self.G = np.array(Gs)                          # (A, l, c)
        self.stats = {"seconds": time.perf_counter() - t0, "iterations": max(st["iterations"], it),
                      "residual": max(st["residual"], rel)}

    @property
    def l(self) -> int:
        return self.Y_L.shape[0]

    def _index(self, alphas) -> np.ndarray:
        a = np.atleast_1d(np.asarray(alphas, dtype=np.float64))
        idx = np.array([int(np.argmin(np.abs(self.alphas - v))) for v in a])
        if not np.allclose(self.alphas[idx], a, rtol=0, atol=1e-12):
            raise ValueError("ExactLOO answers only for the alphas it was built with")
        return idx

    def self_influence(self, alphas) -> np.ndarray:
        return self.s[self._index(alphas)]

    def H_raw(self, alphas, remove_diag: bool = True) -> np.ndarray:
        idx = self._index(alphas)
        G = self.G[idx]
        if remove_diag:
            G = G - self.s[idx][:, :, None] * self.Y_L[None]
        return G


def normalize_rows(H: np.ndarray, eps: float) -> np.ndarray:
    """Clip at 0, add eps, normalise rows (last axis) to sum 1."""
    Hc = np.maximum(H, 0.0) + eps
    return Hc / Hc.sum(axis=-1, keepdims=True)


def loo_losses(Q: np.ndarray, Y: np.ndarray, smoothing: float = 0.01) -> dict[str, np.ndarray]:
    """MAE, MSE, cross-entropy of row-stochastic predictions Q (..., l, c) against one-hot Y (l, c),
    averaged over the l rows; plus the accuracy of argmax Q against argmax Y."""
    c = Y.shape[-1]
    D = Q - Y
    mae = np.abs(D).sum(-1).mean(-1)
    mse = (D ** 2).sum(-1).mean(-1)
    ce = -(Y * np.log((1.0 - smoothing) * Q + smoothing / c)).sum(-1).mean(-1)
    acc = (Q.argmax(-1) == Y.argmax(-1)).mean(-1)
    return {"mae": mae, "mse": mse, "ce": ce, "loo_acc": acc}


def loo_curves(sl: SpectralLOO, xs: np.ndarray, remove_diag: bool = True, eps: float = 1e-7,
               smoothing: float = 0.01) -> dict[str, np.ndarray]:
    """The three losses and the labelled LOO accuracy for every x (arrays of len(xs))."""
    Q = normalize_rows(sl.H_raw(alpha_of_x(xs), remove_diag), eps)
    return loo_losses(Q, sl.Y_L, smoothing)


def select_index(curves: dict[str, np.ndarray], select: str, loss: str = "ce") -> int:
    """Index of the best grid point: max LOO accuracy (ties: lowest ``loss``, then first), or min loss."""
    if select == "acc":
        acc = curves["loo_acc"]
        cand = np.flatnonzero(acc >= acc.max() - 1e-12)
        return int(cand[np.argmin(curves[loss][cand])])  # argmin returns the first (smallest x) on ties
    return int(np.argmin(curves[select]))


def spectral_scores(U: np.ndarray, sl: SpectralLOO, alphas, rows: np.ndarray | None = None,
                    block: int = 8192) -> np.ndarray:
    """Spectral LGC class scores ``U_R diag(lt) U_L^T Y_L`` on ``rows`` (all if None) for every alpha:
    (len(alphas), |rows|, c); done in row blocks with one product per block for all alphas."""
    lt = spectral_filter(sl.values, alphas)                            # (A, p)
    A, p = lt.shape
    c = sl.B.shape[1]
    M = (lt[:, :, None] * sl.B[None]).transpose(1, 0, 2).reshape(p, A * c)  # (p, A*c)
    idx = np.arange(U.shape[0]) if rows is None else np.asarray(rows)
    out = np.empty((A, idx.size, c))
    for j in range(0, idx.size, block):
        Ub = U[idx[j:j + block]]
        out[:, j:j + block] = (Ub @ M).reshape(-1, A, c).transpose(1, 0, 2)
    return out


# -------------------------------------------------------------------------------------------------------------
# gradient search (TensorFlow, imported lazily)
# -------------------------------------------------------------------------------------------------------------

def gradient_search(sl: SpectralLOO, loss: str, *, x0: float, x_min: float, x_max: float, lr: float,
                    steps: int, remove_diag: bool = True, eps: float = 1e-7,
                    smoothing: float = 0.01) -> dict[str, Any]:
    """Minimise the chosen LOO loss over z = log x with Adam (x clipped to [x_min, x_max] after each step).

    Returns the iterate with the lowest loss: {"x", "loss", "steps", "trace_x", "trace_loss"}.
    """
    from ..devices import tensorflow

    tf = tensorflow()  # quiet (no retracing chatter from reused sweep workers), threads for this process
    U_L = tf.constant(sl.U_L)
    U_L2 = tf.constant(sl.U_L2)
    B = tf.constant(sl.B)
    Y = tf.constant(sl.Y_L)
    lam = tf.constant(sl.values)
    c = float(sl.Y_L.shape[1])
    z = tf.Variable(np.log(float(x0)), dtype=tf.float64)
    zmin, zmax = float(np.log(x_min)), float(np.log(x_max))
    opt = tf.keras.optimizers.Adam(learning_rate=lr)

    def objective():
        x = tf.exp(z)
        alpha = tf.pow(tf.constant(2.0, tf.float64), -1.0 / x)
        lt = 1.0 / (1.0 - alpha + alpha * lam)
        H = tf.matmul(U_L * lt[None, :], B)
        if remove_diag:
            s = tf.linalg.matvec(U_L2, lt)
            H = H - s[:, None] * Y
        H = tf.maximum(H, 0.0) + eps
        Q = H / tf.reduce_sum(H, axis=1, keepdims=True)
        if loss == "mae":
            return tf.reduce_mean(tf.reduce_sum(tf.abs(Q - Y), axis=1))
        if loss == "mse":
            return tf.reduce_mean(tf.reduce_sum(tf.square(Q - Y), axis=1))
        return -tf.reduce_mean(tf.reduce_sum(Y * tf.math.log((1.0 - smoothing) * Q + smoothing / c), axis=1))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            value = objective()
        grads = tape.gradient(value, [z])
        opt.apply_gradients(zip(grads, [z]))
        z.assign(tf.clip_by_value(z, zmin, zmax))
        return value

    trace_x, trace_loss = [], []
    for _ in range(int(steps)):
        x_before = float(np.exp(z.numpy()))
        value = float(step().numpy())  # loss at x_before
        trace_x.append(x_before)
        trace_loss.append(value)
    x_last = float(np.exp(z.numpy()))
    trace_x.append(x_last)
    trace_loss.append(float(objective().numpy()))
    best = int(np.argmin(trace_loss))
    return {"x": trace_x[best], "loss": trace_loss[best], "steps": int(steps),
            "trace_x": np.array(trace_x), "trace_loss": np.array(trace_loss)}


# -------------------------------------------------------------------------------------------------------------
# the algorithm
# -------------------------------------------------------------------------------------------------------------

class AutoD(GraphSSLAlgorithm):
    """LGC_LVO_AutoD. See the module docstring; parameters (conf/algo/autoD.yaml):

    ``p`` eigenpairs; ``remove_diag``; ``search`` grid|gradient; ``select`` acc|mae|mse|ce; ``loss``
    mae|mse|ce (accuracy tie-break and gradient objective when ``select=acc``); grid ``x_min``, ``x_max``,
    ``x_step``; gradient ``x0``, ``lr``, ``steps``; ``eps`` (row-normalisation constant); ``smoothing``
    (cross-entropy); ``tol``/``maxiter`` of the final LGC solve.
    """

    name = "autoD"
    quick_params = {"p": 10}
    class_columns = ("loo_pred",)
    #: empty: the top-level `loss` option (AutoL's xent|ce|mse|mae) is not mapped; AutoD is steered by its own
    #: `select` and `loss` parameters
    losses: ClassVar[tuple[str, ...]] = ()

    _parameter_constraints = {
        "p": [positive("int")],
        "loo": [Options(LOOS)],
        "loo_tol": [positive()],
        "remove_diag": [Boolean()],
        "search": [Options(SEARCHES)],
        "select": [Options(SELECTS)],
        "loss": [Options(LOSSES)],
        "x_min": [Interval("real", 1, None)],
        "x_max": [Interval("real", 1, None)],
        "x_step": [positive()],
        "x0": [Interval("real", 1, None), Options(("grid",))],
        "lr": [positive()],
        "steps": [positive("int")],
        "eps": [positive()],
        "smoothing": [Interval("real", 0, 1, "left")],
        "tol": [positive()],
        "maxiter": [positive("int")],
    }

    def __init__(self, p: int = 300, loo: str = "spectral", loo_tol: float = 1e-6, remove_diag: bool = True,
                 search: str = "grid", select: str = "acc",
                 loss: str = "ce", x_min: float = 1.0, x_max: float = 100.0, x_step: float = 1.0,
                 x0: float | str = 10.0, lr: float = 0.05, steps: int = 300, eps: float = 1e-7,
                 smoothing: float = 0.01, tol: float = 1e-10, maxiter: int = 10_000):
        self.p = p
        self.loo = loo
        self.loo_tol = loo_tol
        self.remove_diag = remove_diag
        self.search = search
        self.select = select
        self.loss = loss
        self.x_min = x_min
        self.x_max = x_max
        self.x_step = x_step
        self.x0 = x0
        self.lr = lr
        self.steps = steps
        self.eps = eps
        self.smoothing = smoothing
        self.tol = tol
        self.maxiter = maxiter

    @classmethod
    def _check_relations(cls, params: dict[str, Any], prefix: str) -> None:
        if params["x_max"] < params["x_min"]:
            raise UserError(f"{prefix}x_max={fmt_value(params['x_max'])} is not allowed: the x range is empty; "
                            f"it must be >= {prefix}x_min ({fmt_value(params['x_min'])})")
        if params.get("loo") == "exact" and params["search"] == "gradient":
            raise UserError(f"{prefix}search=gradient is not allowed with {prefix}loo=exact: the exact leave-one-out "
                            "is computed on the grid; use search=grid")
        x0 = params["x0"]
        if params["search"] == "gradient" and x0 != "grid" and not params["x_min"] <= x0 <= params["x_max"]:
            raise UserError(f"{prefix}x0={fmt_value(x0)} is not allowed: the gradient start must be grid or lie in "
                            f"[x_min, x_max] = [{params['x_min']:g}, {params['x_max']:g}]")

    def required_eigenpairs(self) -> int:
        return self.p if self.loo == "spectral" else 0

    @property
    def objective(self) -> str:
        """The leave-one-out loss that selects alpha: ``select`` when it names a loss, else ``loss`` (the
        accuracy tie-break and the gradient objective)."""
        return self.select if self.select in LOSSES else self.loss

    def check_data(self, n: int, n_classes: int, prefix: str | None = None) -> None:
        """Checks that need the data size (run by the pipeline right after loading, and by ``fit``)."""
        prefix = self.config_prefix if prefix is None else prefix
        if self.loo == "exact":
            return
        if self.p >= n:
            raise UserError(f"{prefix}p={self.p} is not allowed: it must be less than the number of points ({n})")
        if self.p < n_classes:
            raise UserError(f"{prefix}p={self.p} is not allowed: it must be at least the number of classes "
                            f"({n_classes})")

    # ---------------------------------------------------------------------------------------------------------
    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        n = graph.n
        Y_L = one_hot(y_labeled, n_classes)
        xs = x_grid(self.x_min, self.x_max, self.x_step)
        t0 = time.perf_counter()
        loo_info: dict[str, Any] = {"loo": self.loo}
        if self.loo == "exact":
            sl = ExactLOO(graph.S, labeled, Y_L, alpha_of_x(xs), tol=self.loo_tol)
            loo_info.update({"loo_seconds": round(sl.stats["seconds"], 4), "loo_iterations": sl.stats["iterations"],
                             "loo_residual": sl.stats["residual"]})
            U, p_used = None, 0
        else:
            if eig is None:
                from ..spectral import laplacian_eigenpairs

                eig, _ = laplacian_eigenpairs(graph, self.p, progress=progress)
            if eig.vectors.shape[0] != n:
                raise ValueError(f"eigenpairs are for {eig.vectors.shape[0]} points, the graph has {n}")
            if eig.p < self.p:
                raise ValueError(f"{eig.p} eigenpairs given, algo.p={self.p} needed")
            eig = eig.head(self.p)
            sl = SpectralLOO(eig.values, eig.vectors[labeled], Y_L)
            U, p_used = eig.vectors, int(eig.p)
        curves = {rd: loo_curves(sl, xs, rd, self.eps, self.smoothing) for rd in (True, False)}
        mine = curves[self.remove_diag]
        sweep_seconds = time.perf_counter() - t0

        grad_info: dict[str, Any] = {}
        if self.search == "grid":
            i = select_index(mine, self.select, self.objective)
            x_best = float(xs[i])
        else:
            t1 = time.perf_counter()
            # 'grid': start from the grid minimiser of the objective (the LOO losses are not convex in x)
            x0 = float(xs[int(np.argmin(mine[self.objective]))]) if self.x0 == "grid" else float(self.x0)
            grad_info["gradient_x0"] = x0
            g = gradient_search(sl, self.objective, x0=x0, x_min=self.x_min, x_max=self.x_max, lr=self.lr,
                                steps=self.steps, remove_diag=self.remove_diag, eps=self.eps,
                                smoothing=self.smoothing)
            x_best = g["x"]
            grad_info.update({"gradient_seconds": round(time.perf_counter() - t1, 4), "gradient_steps": g["steps"],
                              "gradient_loss": g["loss"]})
            self.gradient_trace_ = g
        alpha = float(alpha_of_x(x_best))

        # leave-one-out readout at the chosen alpha
        Q = normalize_rows(sl.H_raw([alpha], self.remove_diag), self.eps)[0]
        at = {k: float(v[0]) for k, v in loo_losses(Q[None], Y_L, self.smoothing).items()}

        # final classification: LGC with the chosen alpha on the full graph
        Y = np.zeros((n, n_classes))
        Y[labeled, y_labeled] = 1.0
        self.scores_, it = lgc_propagate(graph.S, Y, alpha, solver="cg", tol=self.tol, maxiter=self.maxiter,
                                         degree=graph_degree(graph))
        self.labeled_pred_ = Q.argmax(axis=1)

        self.alpha_, self.x_ = alpha, x_best
        self.xs_ = xs
        self.curves_ = curves
        self._sl, self._U, self._labeled = sl, U, np.asarray(labeled)
        self.info_.update({
            "alpha": alpha, "x": x_best, "search": self.search, "select": self.select,
            "selection_loss": self.objective, "remove_diag": self.remove_diag, "p_used": p_used, **loo_info,
            "loo_acc": at["loo_acc"], "loo_mae": at["mae"], "loo_mse": at["mse"], "loo_ce": at["ce"],
            "lgc_labeled_acc_observed": float(np.mean(self.scores_[labeled].argmax(1) == y_labeled)),
            "sweep_seconds": round(sweep_seconds, 4), "n_grid": int(xs.size),
            "solver_iterations": int(it), **grad_info,
        })
        self.label_info_ = {"loo_pred": self.labeled_pred_, "loo_prob_observed": Q[np.arange(Q.shape[0]), y_labeled]}
        log.info("autoD: x=%.4g alpha=%.6f (%s, select=%s), labelled LOO acc %.4f, sweep %.3fs over %d x",
                 x_best, alpha, self.search, self.select, at["loo_acc"], sweep_seconds, xs.size)

    # ---------------------------------------------------------------------------------------------------------
    def curve_table(self, y_true: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Per-x columns: x, alpha, the losses and LOO accuracy for removed (``_rd``) and kept (``_nd``)
        diagonals, and, when ``y_true`` is given, the unlabelled accuracy of the spectral prediction
        (evaluation only; identical for both, since the diagonal only touches labelled rows)."""
        xs = self.xs_
        table: dict[str, np.ndarray] = {"x": xs, "alpha": alpha_of_x(xs)}
        for rd, suffix in ((True, "rd"), (False, "nd")):
            for k in CURVE_COLUMNS:
                table[f"{k}_{suffix}"] = self.curves_[rd][k]
        if y_true is not None and self._U is not None:
            unl = np.ones(self._U.shape[0], dtype=bool)
            unl[self._labeled] = False
            rows = np.flatnonzero(unl)
            pred = spectral_scores(self._U, self._sl, alpha_of_x(xs), rows).argmax(-1)  # (A, |rows|)
            table["unl_acc"] = (pred == np.asarray(y_true)[rows][None]).mean(axis=1)
        return table

    def plot(self, out_dir, y_true=None, split=None) -> list[str]:
        """Write ``autod_curves.csv`` and ``figure2.png`` (Figure 2: (a) diagonal removed, (b) not)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        table = self.curve_table(y_true)
        cols = list(table)
        data = np.column_stack([table[k] for k in cols])
        with atomic_open(out / "autod_curves.csv") as fh:  # whole or absent, as every file a run writes
            np.savetxt(fh, data, delimiter=",", header=",".join(cols), comments="", fmt="%.10g")

        fig, axes = plt.subplots(1, 2, figsize=(12, 4.6), sharey=True)
        xs = table["x"]
        shown = [table[f"{k}_{sfx}"] for k in CURVE_COLUMNS for sfx in ("rd", "nd")]
        top = 1.03 * max(1.0, float(np.nanmax(np.concatenate(shown))))
        for ax, (sfx, title) in zip(axes, (("rd", "(a) Diagonal removed"), ("nd", "(b) Diagonal NOT removed"))):
            rd = sfx == "rd"
            for k in CURVE_COLUMNS:
                ax.plot(xs, table[f"{k}_{sfx}"], color=COLORS[k], label=LABELS[k])
            if "unl_acc" in table:
                ax.plot(xs, table["unl_acc"], color=COLORS["unl_acc"], label=LABELS["unl_acc"])
                j = int(np.argmax(table["unl_acc"]))
                ax.plot(xs[j], table["unl_acc"][j], "o", color=COLORS["unl_acc"], ms=5)
            for k in ("mae", "mse", "ce"):  # where each loss is minimal
                j = int(np.argmin(table[f"{k}_{sfx}"]))
                ax.plot(xs[j], table[f"{k}_{sfx}"][j], "o", color=COLORS[k], ms=5)
            # the x that `select` picks on this panel's grid (the fitted x on the fitted panel)
            x_sel = self.x_ if rd == self.remove_diag else float(xs[select_index(self.curves_[rd], self.select,
                                                                                     self.objective)])
            ax.axvline(x_sel, color="0.35", ls="--", lw=0.9, label=f"chosen x ({self.select})")
            ax.set_title(title)
            ax.set_xlabel(r"$x$   ($\alpha = 2^{-1/x}$)")
            ax.set_xlim(xs[0], xs[-1])
            ax.set_ylim(0.0, top)
            ax.grid(alpha=0.3)
        axes[0].legend(loc="best", fontsize=8)
        fig.text(0.5, 0.005, "dots: minimum of each loss and maximum of the unlabelled accuracy (evaluation only); "
                 "dashed: the x chosen by select=" + self.select, ha="center", va="bottom", fontsize=8, color="0.3")
        fig.suptitle(f"LGC_LVO_AutoD (p = {self.info_.get('p_used', self.p)}): chosen x = {self.x_:.3g}, "
                     f"alpha = {self.alpha_:.5f}")
        fig.tight_layout(rect=(0, 0.03, 1, 1))
        with atomic_open(out / "figure2.png") as fh:
            fig.savefig(fh, format="png", dpi=120)
        plt.close(fig)
        return ["autod_curves.csv", "figure2.png"]

"""LGC_LVO_AutoL: label reliability learned from the leave-one-out loss (paper §3.1, Tables 1-4).

What is computed (defaults follow the authors' code, docs/fidelity.md#autol; paper Eqs. (28)-(29)):

1. ``P_LL``: the rows at the labelled points of ``(1 - alpha)(I - alpha S)^-1 E``, ``E`` one indicator
   column per labelled point, ``alpha = 1 / (1 + mu)`` (mu = 0.1111, so alpha = 0.90001). Solved by
   conjugate gradient on the SPD system ``(I - alpha S) X = E`` (``solver='cg'``), columns in cache-sized
   blocks; ``solver='power'`` runs the authors' fixed-point recurrence ``F <- (1-alpha) E + alpha S F``
   for ``t`` steps. No n x n dense matrix is ever formed.
2. ``A``: ``P_LL`` without its diagonal (a point's influence on itself), row-normalised. A labelled point
   that reaches no other labelled point (zero row) is reported with a warning, left out of the loss, and
   keeps its label (its weight gets no gradient and stays 1).
3. One weight ``omega`` per label, initialised to 1; the forward pass uses ``max(omega, 0)``, so a weight
   that crosses 0 gets a zero gradient and stays there (Adam's momentum keeps it below 0): that label is
   *dropped* and no longer votes.
4. Leave-one-out prediction ``Q = softmax_row(A diag(max(omega, 0)) B)``, ``B`` the observed one-hot labels
   (``normalize='softmax'``, the code). ``normalize='degree'`` is the paper's text form
   ``deg(P~ Omega Y)^-1 P~ Omega Y`` (a row-normalisation, invariant to the scale of omega).
5. Losses, averaged over the labelled rows:

   - ``xent`` (the paper's "cross-entropy", as its numbers were produced): ``-sum_c Q_ic log(B_ic + 1e-6)``.
     The arguments are swapped with respect to the textbook cross-entropy: this is a *reverse*
     cross-entropy, equal to ``13.8 (1 - Q_i,true)`` up to 1e-6, i.e. proportional to the MAE. It is bounded
     and robust to label noise.
   - ``ce``: the textbook cross-entropy ``-sum_c B_ic log(Q_ic + 1e-6)`` (unbounded).
   - ``mse``: ``sum_c (Q_ic - B_ic)^2``;  ``mae``: ``sum_c |Q_ic - B_ic|``.
6. Adam (learning rate 0.7, Keras defaults beta1 0.9, beta2 0.999, epsilon 1e-7), 5000 full-batch steps;
   TensorFlow computes the gradients (``tf.GradientTape`` inside a ``tf.function`` that runs a block of
   steps in a ``tf.while_loop``; the update is TensorFlow's fused Adam kernel, the same formula as Keras').
   The block is XLA-compiled by default (``xla=True``): on the 2-core CPU we measured, the compiled loop
   needs about half the CPU time of the graph-mode loop (whose two Eigen threads mostly wait on each other
   on a loaded machine), for about 0.5 s of compilation. The compiled block is kept per process and reused by
   every later fit whose loss and array shapes are the same (:func:`_compiled_functions`), e.g. the next
   seeds of a sweep worker.
7. The corrected labels are ``Q`` at the final omega; they replace the labelled rows of Y and LGC
   (``lgc_alpha`` = 0.9) propagates them: unlabelled predictions are the row argmax.

Speed. B is one-hot, so ``A diag(omega) B`` is a class-wise sum of A's columns. The labels are grouped by
observed class in a padded layout: ``A3[k, j, i] = A[i, member_j(k)]`` (shape c x m x l, m the largest class
size, zero padding) and the weights live in the same c x m layout, so the logits are one batched
matrix-vector product, ``Z^T[k] = A3[k]^T w[k]``, and the gradient another one: a step costs O(l m c) ~
O(l^2) instead of O(l^2 c) (``A @ (omega * B)``) or O(l^3) (``A @ diag(omega) @ B``, the literal form).
Padding slots have zero columns, hence zero gradients, and never move. A label dropped for good
(``omega < 0`` with Adam's first moment ``>= 0``: it can never come back) adds exact zeros to every logit, so
after each block the compiled step is narrowed to the labels still in play (:func:`_narrowed_layout`,
keeping the kernel's summation order: the same bits, but for a last-bit difference where XLA fuses a narrowed
step of some widths differently). The compiled step's class width is padded to a multiple of 16 columns
(plus the tail of ``m mod 8``; :func:`_width_padding`, the same bits where tested), so the fits of a sweep
whose largest class sizes have the same tail and bucket share a compiled step instead of compiling one each. On ISOLET
at 20-60 % noise 35-80 % of the labels are dropped within the first 500 steps, and the remaining steps read
that much less of ``A3``.

Precision. ``dtype='float32'`` (default) for the linear solve and the optimisation: it is what the authors
used, the optimisation is memory-bound (A is l^2 numbers read twice per step) so float32 halves its time,
and a relative error of ~1e-7 in A is far below anything that changes the outcome. ``dtype='float64'`` is
available for checks (the tests use it for finite differences). Everything is deterministic: there is no
randomness (omega starts at 1, full batch) and the TensorFlow CPU kernels used reduce in a fixed order.
"""
from __future__ import annotations

import logging
import time
import warnings
from typing import Any

import numpy as np

from ..devices import tensorflow as _tf  # TensorFlow imported lazily, quiet, its pools sized for this process
from ..graph import Graph
from ..locations import env_switch
from ..params import Boolean, Interval, Options, check_params, positive, unit_open
from .base import GraphSSLAlgorithm, one_hot
from .propagation import cached_propagation_submatrix, graph_degree, lgc_propagate

log = logging.getLogger(__name__)

LOSSES = ("xent", "ce", "mse", "mae")
NORMALIZE = ("softmax", "degree")
SOLVERS = ("cg", "power")
DTYPES = ("float32", "float64")
LOG_EPS = 1e-6  # the constant inside the logarithms of xent (authors' value) and ce


# --------------------------------------------------------------------------------------------------------
# 1-2. Propagation submatrix and the leave-one-out matrix A
# --------------------------------------------------------------------------------------------------------


def loo_matrix(P: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Remove the diagonal of ``P_LL`` and row-normalise: (A, isolated).

    ``isolated[i]`` marks a labelled point whose row has nothing left (it reaches no other labelled
    point): its row of A stays 0 instead of 0/0 = NaN.
    """
    Pt = np.array(P, dtype=np.float64, copy=True)
    np.fill_diagonal(Pt, 0.0)
    rs = Pt.sum(axis=1)
    isolated = ~(rs > 0)
    A = np.zeros_like(Pt)
    np.divide(Pt, rs[:, None], out=A, where=~isolated[:, None])
    return A, isolated


# --------------------------------------------------------------------------------------------------------
# 3-5. The leave-one-out model in TensorFlow
# --------------------------------------------------------------------------------------------------------


def class_layout(y: np.ndarray, n_classes: int) -> np.ndarray:
    """Labelled positions grouped by observed class: a (c, m) index array, -1 in the padding slots."""
    y = np.asarray(y, dtype=np.int64)
    counts = np.bincount(y, minlength=n_classes)
    m = max(1, int(counts.max(initial=0)))
    members = np.full((n_classes, m), -1, dtype=np.int64)
    for k in range(n_classes):
        idx = np.flatnonzero(y == k)
        members[k, : idx.size] = idx
    return members


def _logits(tf, form: str, W, tensors):
    """``Z = A diag(max(omega, 0)) B`` from the model tensors (see :class:`LooModel`)."""
    A, B = tensors[0], tensors[1]
    w = tf.maximum(W, tf.zeros_like(W))
    if form == "fast":
        return tf.linalg.matrix_transpose(tf.linalg.matvec(A, w, transpose_a=True))
    if form == "dense":
        return tf.matmul(A, w[:, None] * B)
    return tf.matmul(tf.matmul(A, tf.linalg.diag(w)), B)


def _probs(tf, form: str, normalize: str, W, tensors):
    Z = _logits(tf, form, W, tensors)
    if normalize == "softmax":
        return tf.nn.softmax(Z, axis=-1)
    return tf.math.divide_no_nan(Z, tf.reduce_sum(Z, axis=-1, keepdims=True))


def _losses(tf, spec: tuple, W, tensors):
    """Each problem's loss: a scalar, or (K,) when batched (``spec`` as :meth:`LooModel.spec`)."""
    loss_name, normalize, form = spec[:3]
    _, B, logB, row_w = tensors
    Q = _probs(tf, form, normalize, W, tensors)
    if loss_name == "xent":  # reverse cross-entropy, as the authors' code (docs/fidelity.md#autol-loss)
        per_row = -tf.reduce_sum(Q * logB, axis=-1)
    elif loss_name == "ce":
        per_row = -tf.reduce_sum(B * tf.math.log(Q + LOG_EPS), axis=-1)
    elif loss_name == "mse":
        per_row = tf.reduce_sum(tf.square(Q - B), axis=-1)
    else:
        per_row = tf.reduce_sum(tf.abs(Q - B), axis=-1)
    return tf.reduce_sum(row_w * per_row, axis=-1)


class LooModel:
    """The leave-one-out prediction and loss as TensorFlow functions of the label weights.

    ``form='fast'`` (default): weights in the class-padded (c, m) layout, logits by one batched
    matrix-vector product (O(l^2) per step). ``form='dense'``: ``A @ (relu(omega) * B)`` with omega of shape
    (l,) (O(l^2 c)). ``form='dense_diag'``: the literal ``A @ diag(relu(omega)) @ B`` (O(l^3)). The dense
    forms exist for tests and the benchmark; all three compute the same function.

    ``row_weight``: per-row weights of the loss mean (isolated labelled points get 0).

    Batched (``A`` of shape (K, l, l), ``form='fast'`` only): K independent problems on the same labels
    (e.g. one per alpha; :mod:`lgcexp.algorithms.auto` used it for its grid search until issue 24 and now runs
    single problems), weights (K, l), logits (K, l, c). ``loss`` is the sum of
    the K losses, so its gradient with respect to problem k's weights is that of problem k's loss alone and
    Adam (per coordinate) runs the K optimisations independently in one compiled loop; ``losses`` gives them
    one by one.
    """

    FORMS = ("fast", "dense", "dense_diag")

    def __init__(self, A: np.ndarray, y: np.ndarray, n_classes: int, *, loss: str = "xent",
                 normalize: str = "softmax", dtype: str = "float32", form: str = "fast",
                 row_weight: np.ndarray | None = None):
        tf = _tf()
        self.tf = tf
        check_params({"loss": loss, "normalize": normalize, "form": form},
                     {"loss": [Options(LOSSES)], "normalize": [Options(NORMALIZE)], "form": [Options(self.FORMS)]})
        self.loss_name, self.normalize, self.form = loss, normalize, form
        self.dtype = tf.as_dtype(dtype)
        np_dt = np.dtype(dtype)
        A = np.asarray(A, dtype=np.float64)
        y = np.asarray(y, dtype=np.int64)
        self.batch = A.shape[0] if A.ndim == 3 else None
        if self.batch is not None and form != "fast":
            raise ValueError("a batched LooModel (A of shape (K, l, l)) needs form='fast'")
        self.l, self.c = A.shape[-1], int(n_classes)
        B = one_hot(y, self.c)
        self.B = tf.constant(B.astype(np_dt))
        self.logB = tf.constant(np.log(B + LOG_EPS).astype(np_dt))
        rw = np.ones(self.l) if row_weight is None else np.asarray(row_weight, dtype=np.float64)
        self.row_w = tf.constant((rw / max(rw.sum(), 1e-300)).astype(np_dt))
        self.members = class_layout(y, self.c)
        self.pad_mask = self.members >= 0
        if form == "fast":
            # A3[k, j, :] = column member_j(k) of A  (zero for padding)
            cols = np.where(self.pad_mask, self.members, 0)
            if self.batch is None:
                A3 = A.T[cols]  # (c, m, l)
                A3[~self.pad_mask] = 0.0
            else:
                A3 = np.swapaxes(A, 1, 2)[:, cols]  # (K, c, m, l)
                A3[:, ~self.pad_mask] = 0.0
            self.A3 = tf.constant(np.ascontiguousarray(A3, dtype=np_dt))
        else:
            self.A = tf.constant(A.astype(np_dt))

    # weights: (l,) numpy  <->  the variable's layout
    def pack(self, omega: np.ndarray) -> np.ndarray:
        omega = np.asarray(omega, dtype=np.float64)
        if self.form != "fast":
            return omega.copy()
        if self.batch is not None:
            omega = np.broadcast_to(omega, (self.batch, self.l))
            W = np.zeros((self.batch,) + self.members.shape)
            W[:, self.pad_mask] = omega[:, self.members[self.pad_mask]]
            return W
        W = np.zeros(self.members.shape)
        W[self.pad_mask] = omega[self.members[self.pad_mask]]
        return W

    def unpack(self, W: np.ndarray) -> np.ndarray:
        W = np.asarray(W, dtype=np.float64)
        if self.form != "fast":
            return W.copy()
        if self.batch is not None:
            omega = np.zeros((self.batch, self.l))
            omega[:, self.members[self.pad_mask]] = W[:, self.pad_mask]
            return omega
        omega = np.zeros(self.l)
        omega[self.members[self.pad_mask]] = W[self.pad_mask]
        return omega

    def tensors(self) -> tuple:
        """The model's constant tensors, in the order the compiled step (:func:`_compiled_functions`) takes
        them: (A3 or A, B, log(B + eps), row weights)."""
        return (self.A3 if self.form == "fast" else self.A, self.B, self.logB, self.row_w)

    def spec(self) -> tuple:
        """What the traced loss depends on besides the tensors (the key of the compiled step cache)."""
        return (self.loss_name, self.normalize, self.form, self.dtype.name, self.batch is not None)

    def logits(self, W):
        """``Z = A diag(max(omega, 0)) B`` as an (l, c) tensor."""
        return _logits(self.tf, self.form, W, self.tensors())

    def probs(self, W):
        """``Q``: softmax of the logits per row, or (``degree``) the logits divided by their row sum."""
        return _probs(self.tf, self.form, self.normalize, W, self.tensors())

    def losses(self, W):
        """The loss of each problem: a scalar, or (K,) when batched."""
        return _losses(self.tf, self.spec(), W, self.tensors())

    def loss(self, W):
        """The objective: the loss, or the sum of the K losses when batched."""
        return self.tf.reduce_sum(self.losses(W))

    def loss_and_grad(self, omega: np.ndarray) -> tuple[float, np.ndarray]:
        """Loss and its TensorFlow gradient with respect to omega (l,), eagerly (for checks)."""
        tf = self.tf
        W = tf.Variable(self.pack(omega).astype(self.dtype.as_numpy_dtype))
        with tf.GradientTape() as tape:
            L = self.loss(W)
        g = tape.gradient(L, W)
        return float(L.numpy()), self.unpack(g.numpy())

    def loss_value(self, omega: np.ndarray) -> float:
        tf = self.tf
        return float(self.loss(tf.constant(self.pack(omega).astype(self.dtype.as_numpy_dtype))).numpy())

    def predict(self, omega: np.ndarray) -> np.ndarray:
        """Q (l, c) as float64 for the given weights."""
        tf = self.tf
        return self.probs(tf.constant(self.pack(omega).astype(self.dtype.as_numpy_dtype))).numpy().astype(np.float64)


#: compiled Adam blocks and loss functions, one pair per (model spec, xla), shared by every fit in the process
_COMPILED: dict[tuple, tuple[Any, Any]] = {}
_COMPILED_MAX = 64


def _compiled_functions(tf, spec: tuple, shapes: tuple, xla: bool, compact: bool = False) -> tuple[Any, Any]:
    """(block, loss) ``tf.function``s for models of ``spec`` (:meth:`LooModel.spec`) and array ``shapes``,
    built once per process and reused by every later fit with the same key.

    Everything that changes from fit to fit is an argument, never a captured value: the weights and Adam's
    slots (variables), the model tensors, the hyper-parameters (scalar tensors) and the number of steps. So
    a second fit in a worker with the same shapes (l, c and the largest observed class size m) skips both
    the trace and the XLA compilation. Shapes are part of the key because TensorFlow does not retrace for a
    variable argument of another shape (it would run the old trace's static shapes). The operations are
    those of one fit's own function, so the numbers are identical (tests/test_autol.py checks the weights
    against the same fit in a fresh process). At most ``_COMPILED_MAX`` entries are kept (the least recently
    used dropped).
    ``compact``: the step of a :func:`_narrowed_layout` (tensors ``(A3 of the live labels, B, log(B + eps),
    row weights, index)``), whose gradient with respect to the full W is zero at every dropped weight.
    """
    key = (spec, xla, shapes, compact)
    if key in _COMPILED:
        _COMPILED[key] = _COMPILED.pop(key)  # the most recently used goes last
        return _COMPILED[key]
    dt = tf.as_dtype(spec[3])

    def objective(W, tensors):
        if not compact:
            return tf.reduce_sum(_losses(tf, spec, W, tensors))
        # the live weights only: W with one zero slot appended per row, gathered by the compact index
        # (padding points at the zero slot); A3 holds the live labels' columns (lgcexp.algorithms.autol,
        # _narrowed_layout)
        idx = tensors[4]
        W0 = tf.concat([W, tf.zeros_like(W[..., :1])], axis=-1)
        Wc = tf.gather(W0, idx, batch_dims=len(idx.shape) - 1)
        return tf.reduce_sum(_losses(tf, spec, Wc, tensors[:4]))

    def step(W, m, v, t, tensors, hyper):
        lr_c, b1, b2, eps = hyper
        with tf.GradientTape() as tape:
            L = objective(W, tensors)
        g = tf.convert_to_tensor(tape.gradient(L, W))
        t.assign_add(tf.constant(1.0, dt))
        tf.raw_ops.ResourceApplyAdam(
            var=W.handle, m=m.handle, v=v.handle, beta1_power=tf.pow(b1, t), beta2_power=tf.pow(b2, t),
            lr=lr_c, beta1=b1, beta2=b2, epsilon=eps, grad=g, use_locking=False, use_nesterov=False,
        )
        return L

    # autograph=False: the loop is an explicit while_loop, so tracing never reads this file's source (a
    # sweep worker that traces a new shape after the file was edited would otherwise convert the new text)
    @tf.function(jit_compile=xla, autograph=False)
    def run_block(k, W, m, v, t, tensors, hyper):
        def body(i, L):
            return i + 1, step(W, m, v, t, tensors, hyper)

        _, L = tf.while_loop(lambda i, L: i < k, body, (tf.constant(0, k.dtype), tf.constant(0.0, dt)))
        return L

    @tf.function(jit_compile=xla, autograph=False)
    def loss_fn(W, tensors):
        return objective(W, tensors)

    while len(_COMPILED) >= _COMPILED_MAX:
        _COMPILED.pop(next(iter(_COMPILED)))
    _COMPILED[key] = (run_block, loss_fn)
    return _COMPILED[key]


#: the compiled logits sum a class's label columns in blocks of this many, in order, then the last
#: ``m mod _COMPACT_BLOCK`` columns as a group (measured: XLA's CPU matrix-vector kernel)
_COMPACT_BLOCK = 8
#: narrow when the live width falls to at most this fraction of the width in use
_COMPACT_GAIN = 0.8
#: the whole blocks of a compiled step's class width come in multiples of this many columns (zero columns
#: added); widths with the same tail (m mod 8) in the same multiple of 16 (e.g. m = 42 and 50) then share one
#: compiled step
_WIDTH_QUANTUM = 16


def _round_up(x: int, q: int) -> int:
    """``x`` rounded up to a multiple of ``q``."""
    return -(-x // q) * q


def _width_padding(width: int) -> tuple[int, int]:
    """``(where, how many)`` zero columns the compiled step's layout inserts into a class width ``width``.

    Every new array shape costs a trace and an XLA compilation (about 0.5 s on the 2-core machine, more than
    the 5000 steps of a small fit); in a sweep the largest observed class size m, hence the shape, changes
    from one labelled set or noise draw to the next. The columns of whole blocks (``m - m mod 8``) are padded
    to a multiple of :data:`_WIDTH_QUANTUM` with zero columns inserted *before* the tail of ``m mod 8``
    columns: the argument of :func:`_narrowed_layout` read the other way (zero columns in whole blocks add
    exact zeros, the tail keeps its grouping). Tested, not only argued (the narrowed step shows that XLA's
    fusion can break such arguments): the same bits for class widths 17 to 73 with and without a tail
    (tests/test_autol.py, benchmarks/speed.py's 14 widths) and the same recorded results on the tables' 640 runs."""
    tail = width % _COMPACT_BLOCK
    head = width - tail
    return head, _round_up(head, _WIDTH_QUANTUM) - head


def _narrowed_layout(A3: np.ndarray, pad_mask: np.ndarray, W: np.ndarray, m: np.ndarray,
                     width: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """``(index, A3 of the labels still in play, its width)`` for a step that reads only their columns of
    ``A3``, or None when that would not narrow the step in use (``width``) by a fifth.

    A weight is *dropped for good* when ``omega < 0`` and Adam's first moment ``m >= 0``: its forward value
    ``max(omega, 0)`` is 0, so its gradient is exactly 0 (TensorFlow's ``maximum`` passes no gradient to an
    argument below the other), ``m`` then only decays (``m += (0 - m)(1 - beta1)`` keeps its sign) and every
    later Adam step moves omega down or not at all. Its column of ``A3`` adds exact zeros to the logits.
    Leaving it out changes no bit when the remaining terms are summed in the same order and grouping: the
    compiled kernel sums a row's columns in blocks of :data:`_COMPACT_BLOCK`, in order, and the last
    ``m mod _COMPACT_BLOCK`` columns as a group, so the live columns of the first ``m - r`` keep their order
    (zero-padded to a whole block) and the last ``r`` columns stay as they are, at the end
    (tests/test_autol.py compares the weights, dropped ones included, with the full step's). That holds for the
    logits and the gradient's products on their own; inside the whole step XLA fuses some narrowed widths
    differently (found on toy problems of class width 40 and 48, no tail, mse loss: one weight in a few hundred
    one float32 ulp apart after 80 steps), so the guarantee is the same dropped labels and weights equal to
    round-off (tested), and on the tables' 640 runs the same recorded results. Whether to narrow is judged on
    the live width (a fifth less than the width in use); the width of the live blocks is then rounded up to a
    multiple of :data:`_WIDTH_QUANTUM` (:func:`_width_padding`).
    The weights, Adam's moments and the update stay in the full layout (``A3``, ``pad_mask``: that layout's
    columns and real slots); the step gathers the live weights (``index``; padding points at an appended zero
    slot) and its gradient is scattered back, zero elsewhere.
    """
    B = _COMPACT_BLOCK
    full = W.shape[-1]
    tail = full % B
    head = full - tail
    dead = (W < 0) & (m >= 0)
    pad = ~np.broadcast_to(pad_mask, W.shape)
    live = ~(dead | pad)[..., :head]
    n_live = int(live.sum(axis=-1).max(initial=0))
    head_width = max(_round_up(n_live, B), B if tail == 0 else 0)
    if head_width + tail > _COMPACT_GAIN * width:  # the gain is judged on the live width itself
        return None
    head_width = min(head, _round_up(head_width, _WIDTH_QUANTUM))  # then bucketed (_width_padding)
    new_width = head_width + tail
    if new_width >= width:
        return None
    order = np.argsort(~live, axis=-1, kind="stable")[..., :head_width]  # live columns first, in order
    taken = np.take_along_axis(live, order, axis=-1)
    lead = W.shape[:-1]
    index = np.concatenate([np.where(taken, order, full),  # the zero slot
                            np.broadcast_to(np.arange(head, full), lead + (tail,))], axis=-1)
    used = np.concatenate([taken, np.ones(lead + (tail,), dtype=bool)], axis=-1)
    A3c = np.take_along_axis(A3, np.where(used, index, 0)[..., None], axis=-2)
    A3c[~used] = 0.0
    return index.astype(np.int32), np.ascontiguousarray(A3c), new_width


def optimize_weights(
    model: LooModel,
    *,
    steps: int = 5000,
    lr: float = 0.7,
    beta1: float = 0.9,
    beta2: float = 0.999,
    epsilon: float = 1e-7,
    omega0: np.ndarray | None = None,
    xla: bool = True,
    chunk: int = 500,
    progress: bool = False,
    compact: bool = True,
    keep: bool = False,
    resume: Any = None,
) -> tuple[np.ndarray, dict[str, Any]]:
    """Full-batch Adam on the label weights; returns (omega, stats).

    Blocks of ``chunk`` steps run inside one ``tf.function`` (a ``tf.while_loop``; XLA-compiled with
    ``xla=True``); the Python loop between blocks only drives the tqdm bar. Each step: the loss and its
    gradient under a ``GradientTape``, then TensorFlow's fused Adam update (``ResourceApplyAdam``:
    ``lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)``, ``m += (g - m)(1 - beta1)``,
    ``v += (g^2 - v)(1 - beta2)``, ``w -= lr_t m / (sqrt(v) + epsilon)``, i.e. Keras' Adam).
    With ``compact`` (``form='fast'`` and ``xla``; env ``LGCEXP_AUTOL_NARROW=0`` turns it off), after each
    block the step is narrowed to the labels still in play when that saves at least a fifth of its width
    (:func:`_narrowed_layout`: the same dropped labels, the weights to round-off, on the tables' runs the same
    recorded results; most dropped labels drop in the first few hundred steps, so later steps read a fraction
    of ``A3``).
    ``keep``: stats["state"] holds the optimiser (weights, Adam's moments and step count, the step in use);
    ``resume``: such a state of an earlier call on the same model, which this call continues with the state's
    own options (``lr``, ``beta1``, ``beta2``, ``epsilon``, ``omega0``, ``xla``, ``chunk`` and ``compact`` are
    then not read) up to ``steps`` steps in all: the steps of one uninterrupted call (it narrows after the same
    blocks, and where a block ends changes no bit), so the weights are the same bits (``algo=auto`` continues
    its search's run at the chosen alpha).
    stats: ``loss_initial``, ``loss_final``, ``seconds`` (this call's loop, compilation included),
    ``first_block_seconds`` (the first block: tracing, compilation and its steps; 0 when resumed), ``steps``,
    ``widths`` ((step, width) of each narrowing, the resumed run's included).
    """
    run = resume if resume is not None else _AdamRun(model, lr=lr, beta1=beta1, beta2=beta2, epsilon=epsilon,
                                                      omega0=omega0, xla=xla, chunk=chunk, compact=compact)
    if run.model is not model:
        raise ValueError("resume: the state of another model")
    if int(steps) < run.done:
        raise ValueError(f"resume: the state has run {run.done} steps already, more than steps={steps}")
    omega, stats = run.advance(int(steps), progress)
    if keep:
        stats["state"] = run
    return omega, stats


class _AdamRun:
    """One Adam optimisation of :func:`optimize_weights`, which can stop after a number of steps and go on.

    With XLA and the fast form the run keeps the weights, Adam's moments and ``A3`` in a layout whose class
    width is padded with zero columns (:func:`_width_padding`); :meth:`omega` reads the weights back."""

    def __init__(self, model: LooModel, *, lr, beta1, beta2, epsilon, omega0, xla, chunk, compact):
        self.created = time.perf_counter()
        tf = model.tf
        dt = model.dtype
        self.model, self.xla, self.chunk = model, bool(xla), int(chunk)
        # omega0 is broadcast over the K problems of a batched model
        self.omega0 = np.ones(model.l) if omega0 is None else np.asarray(omega0, dtype=np.float64)
        fast = model.form == "fast"
        self.pad_at, self.pad_n = _width_padding(model.members.shape[1]) if (self.xla and fast) else (0, 0)
        self.W = tf.Variable(self._widen(model.pack(self.omega0)).astype(dt.as_numpy_dtype), name="omega")
        self.m = tf.Variable(tf.zeros_like(self.W), name="adam_m")
        self.v = tf.Variable(tf.zeros_like(self.W), name="adam_v")
        self.t = tf.Variable(tf.constant(0.0, dt), name="adam_t")
        self.hyper = tuple(tf.constant(x, dt) for x in (lr, beta1, beta2, epsilon))
        self.tensors = model.tensors()
        self.pad_mask = model.pad_mask
        if self.pad_n:
            self.tensors = (tf.constant(self._widen(model.A3.numpy(), axis=-2)), *self.tensors[1:])
            self.pad_mask = self._widen(model.pad_mask)
        shapes = tuple(tuple(x.shape) for x in (self.W,) + self.tensors)
        self.block_fn, self.loss_fn = _compiled_functions(tf, model.spec(), shapes, self.xla)
        # the block structure _narrowed_layout relies on is that of XLA's kernel (graph mode sums differently)
        self.compact = bool(compact) and self.xla and fast and env_switch("LGCEXP_AUTOL_NARROW")
        self.width = int(self.W.shape[-1])
        self.widths: list[tuple[int, int]] = []
        self.step_fn, self.step_tensors = self.block_fn, self.tensors
        self.done = 0
        self.loss_initial = float(self.loss_fn(self.W, self.tensors))

    def _widen(self, a: np.ndarray, axis: int = -1) -> np.ndarray:
        """``a`` in the run's layout: :attr:`pad_n` zero (False) columns inserted at :attr:`pad_at` of ``axis``."""
        if not self.pad_n:
            return a
        return np.insert(a, [self.pad_at] * self.pad_n, 0, axis=axis)

    def omega(self) -> np.ndarray:
        """The weights now, in the model's layout (:meth:`LooModel.unpack`)."""
        W = self.W.numpy()
        if self.pad_n:
            W = np.delete(W, np.s_[self.pad_at:self.pad_at + self.pad_n], axis=-1)
        return self.model.unpack(W)

    def _narrow(self) -> None:
        tf = self.model.tf
        layout = _narrowed_layout(self.tensors[0].numpy(), self.pad_mask, self.W.numpy(), self.m.numpy(),
                                  self.width)
        if layout is None:
            return
        index, A3c, self.width = layout
        self.step_tensors = (tf.constant(A3c), *self.tensors[1:], tf.constant(index))
        c_shapes = tuple(tuple(x.shape) for x in (self.W,) + self.step_tensors)
        self.step_fn, _ = _compiled_functions(tf, self.model.spec(), c_shapes, self.xla, compact=True)
        self.widths.append((self.done, self.width))

    def advance(self, steps: int, progress: bool) -> tuple[np.ndarray, dict[str, Any]]:
        """Run blocks until ``steps`` steps in all; (omega, stats) at that point."""
        model, tf = self.model, self.model.tf
        first = self.done == 0
        t0 = self.created if first else time.perf_counter()  # the first call's time has the initial loss
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=steps, initial=self.done, desc="AutoL Adam", unit="step", leave=False)
        compile_s = 0.0
        try:
            if not first and self.compact and self.done < steps:
                self._narrow()  # where the uninterrupted run narrowed after this block (same bits either way)
            while self.done < steps:
                k = min(self.chunk, steps - self.done)
                tc = time.perf_counter()
                self.step_fn(tf.constant(k, tf.int32), self.W, self.m, self.v, self.t, self.step_tensors, self.hyper)
                if self.done == 0:
                    compile_s = time.perf_counter() - tc
                self.done += k
                if self.compact and self.done < steps:
                    self._narrow()
                if bar is not None:
                    bar.update(k)
        finally:
            if bar is not None:
                bar.close()
        loss_final = float(self.loss_fn(self.W, self.tensors))
        omega = self.omega()
        stats = {"loss_initial": self.loss_initial, "loss_final": loss_final, "seconds": time.perf_counter() - t0,
                 "first_block_seconds": compile_s, "steps": int(self.done), "widths": list(self.widths)}
        if model.batch is not None:  # the K problems' own losses (K,)
            np_dt = model.dtype.as_numpy_dtype
            stats["losses_initial"] = model.losses(tf.constant(model.pack(self.omega0).astype(np_dt))).numpy()
            stats["losses_final"] = model.losses(tf.constant(model.pack(omega).astype(np_dt))).numpy()
        return omega, stats


# --------------------------------------------------------------------------------------------------------
# The algorithm
# --------------------------------------------------------------------------------------------------------


class AutoL(GraphSSLAlgorithm):
    """LGC_LVO_AutoL (see the module docstring). Parameters:

    ``mu`` (> 0; alpha = 1/(1+mu)), ``loss`` (xent | ce | mse | mae), ``normalize`` (softmax | degree),
    ``lr``, ``steps``, ``beta1``, ``beta2``, ``epsilon`` (Adam), ``solver`` (cg | power), ``tol`` and
    ``maxiter`` (CG), ``t`` (power steps), ``lgc_alpha`` (the final LGC), ``dtype`` (float32 | float64),
    ``xla`` (compile the step loop with XLA), ``chunk`` (steps per compiled block).

    After ``fit``: ``scores_`` (LGC on the corrected labels), ``labeled_pred_`` (argmax of the corrected
    labels Q), ``lgc_labeled_pred_`` (argmax of the LGC output on the labelled rows), ``omega_``,
    ``corrected_`` (Q), ``dropped_`` (omega <= 0), ``suspicion_`` (-omega), ``info_``, ``label_info_``.

    Label judgement (:meth:`label_judgement`, docs/label_issues.md): each label's share of the
    leave-one-out vote of the other labels weighted by the learnt omega, ``normalize_rows(P~ diag(max(omega,
    0)) B)``. Unlike the softmax Q it does not depend on the scale of omega (which Adam drives to ~1000, a
    sharpening), so it is a proportion in [0, 1] with one meaning for every run. The method's own verdict
    (``detect.cut=method``) is omega <= 0.
    """

    name = "autoL"
    quick_params = {"steps": 50, "xla": False}
    losses = LOSSES
    class_columns = ("corrected_label", "lgc_label")
    _parameter_constraints = {
        "mu": [positive()],
        "loss": [Options(LOSSES)],
        "normalize": [Options(NORMALIZE)],
        "lr": [positive()],
        "steps": [positive("int")],
        "beta1": [Interval("real", 0, 1, "left")],
        "beta2": [Interval("real", 0, 1, "left")],
        "epsilon": [positive()],
        "solver": [Options(SOLVERS)],
        "tol": [positive()],
        "maxiter": [positive("int")],
        "t": [positive("int")],
        "lgc_alpha": [unit_open()],
        "dtype": [Options(DTYPES)],
        "xla": [Boolean()],
        "chunk": [positive("int")],
    }

    def __init__(
        self,
        mu: float = 0.1111,
        loss: str = "xent",
        normalize: str = "softmax",
        lr: float = 0.7,
        steps: int = 5000,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-7,
        solver: str = "cg",
        tol: float = 1e-6,
        maxiter: int = 10_000,
        t: int = 1000,
        lgc_alpha: float = 0.9,
        dtype: str = "float32",
        xla: bool = True,
        chunk: int = 500,
    ):
        self.mu = mu
        self.loss = loss
        self.normalize = normalize
        self.lr = lr
        self.steps = steps
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.solver = solver
        self.tol = tol
        self.maxiter = maxiter
        self.t = t
        self.lgc_alpha = lgc_alpha
        self.dtype = dtype
        self.xla = xla
        self.chunk = chunk

    @property
    def alpha(self) -> float:
        return 1.0 / (1.0 + float(self.mu))

    def propagation_alphas(self) -> tuple[float, ...]:
        """alpha (none with ``solver='power'``, whose P_LL is not shared)."""
        return (self.alpha,) if self.solver == "cg" else ()

    def _propagation_submatrix(self, graph: Graph, labeled: np.ndarray, progress: bool,
                               cache: Any = None) -> tuple[np.ndarray, dict]:
        """P_LL, from the on-disk cache when one is given: it depends on the graph, the labelled set and
        alpha, not on the labels, the noise or the loss, so a sweep computes it once per seed."""
        return cached_propagation_submatrix(graph, labeled, self.alpha, cache=cache, solver=self.solver,
                                            tol=self.tol, maxiter=self.maxiter, t=self.t, dtype=self.dtype,
                                            progress=progress, shared_alphas=self._pll_alphas)

    def learn_weights(self, P: np.ndarray, y_labeled: np.ndarray, n_classes: int, *, progress: bool = False
                      ) -> tuple[np.ndarray, "LooModel", np.ndarray, dict[str, Any]]:
        """Steps 2-6 on a given ``P_LL``: the leave-one-out matrix (Eq. for P~), then the label weights omega
        by Adam on the leave-one-out loss. Returns (omega, the model, the isolated labels, Adam's stats)."""
        A, isolated = loo_matrix(P)
        if isolated.any():
            msg = (f"AutoL: {int(isolated.sum())} labelled point(s) reach no other labelled point "
                   f"(positions {np.flatnonzero(isolated)[:10].tolist()}); their labels are kept as given")
            warnings.warn(msg, RuntimeWarning, stacklevel=3)
            log.warning(msg)
        model = LooModel(A, y_labeled, n_classes, loss=self.loss, normalize=self.normalize, dtype=self.dtype,
                         row_weight=(~isolated).astype(float))
        omega, ost = optimize_weights(model, steps=self.steps, lr=self.lr, beta1=self.beta1, beta2=self.beta2,
                                      epsilon=self.epsilon, xla=self.xla, chunk=self.chunk, progress=progress)
        log.info("AutoL: %d Adam steps in %.2fs, loss %.5f -> %.5f", self.steps, ost["seconds"],
                 ost["loss_initial"], ost["loss_final"])
        return omega, model, isolated, ost

    def _fit(self, graph: Graph, labeled, y_labeled, n_classes, *, eig=None, progress=False, cache=None) -> None:
        l = labeled.size
        # 1. propagation submatrix
        P, pst = self._propagation_submatrix(graph, labeled, progress, cache)
        log.info("P_LL (%d x %d) by %s in %.2fs (%d iterations)", l, l, self.solver, pst["seconds"], pst["iterations"])
        # 2-6. leave-one-out matrix, label weights
        omega, model, isolated, ost = self.learn_weights(P, y_labeled, n_classes, progress=progress)
        self._y = np.asarray(y_labeled, dtype=np.int64)
        # 7. corrected labels, then LGC on them
        Q = model.predict(omega)
        B = one_hot(y_labeled, n_classes)
        # no vote left (isolated point, or with normalize=degree every other label dropped): keep the label
        no_vote = isolated | ~(Q.sum(axis=1) > 0)
        Q[no_vote] = B[no_vote]
        dropped = omega <= 0.0
        Y = np.zeros((graph.n, n_classes))
        Y[labeled] = Q
        F, lgc_it = lgc_propagate(graph.S, Y, self.lgc_alpha, solver=self.solver, t=self.t, degree=graph_degree(graph))

        self.omega_ = omega
        self.corrected_ = Q
        self.scores_ = F
        self.labeled_pred_ = Q.argmax(axis=1)
        self.lgc_labeled_pred_ = F[labeled].argmax(axis=1)
        self.dropped_ = dropped
        self.suspicion_ = -omega
        self._P = P
        self.label_info_ = {
            "omega": omega,
            "corrected_label": self.labeled_pred_,
            "confidence": Q.max(axis=1),
            "dropped": dropped,
            "lgc_label": self.lgc_labeled_pred_,
        }
        self.info_.update({
            "n_dropped": int(dropped.sum()),
            "n_isolated": int(isolated.sum()),
            "n_no_vote": int(no_vote.sum()),
            "n_changed": int((self.labeled_pred_ != y_labeled).sum()),
            "loss_initial": ost["loss_initial"],
            "loss_final": ost["loss_final"],
            "pll_alpha": self.alpha,
            "pll_solver": self.solver,
            "pll_seconds": round(pst["seconds"], 4),
            "pll_cache_hit": pst["cache_hit"],
            "pll_iterations": pst["iterations"],
            "pll_residual": pst["residual"],
            "opt_seconds": round(ost["seconds"], 4),
            "opt_first_block_seconds": round(ost["first_block_seconds"], 4),
            "opt_steps": int(self.steps),
            "opt_narrowed": [list(w) for w in ost["widths"]],  # (step, width) of each narrowing of the step
            "lgc_iterations": int(lgc_it),
        })

    def label_judgement(self):
        """The vote share of every label among the omega-weighted leave-one-out votes of the other labels;
        the method's own verdict: omega <= 0 (see the class docstring); for the count of wrong labels, the plain
        leave-one-out at the same alpha (every other label counted once: omega was fitted to every label)."""
        from ..issues.judgement import weighted_loo_judgement

        return weighted_loo_judgement(self._P, self._y, self.corrected_.shape[1], self.omega_, self.dropped_.copy(),
                                      "autoL: leave-one-out vote share at the learnt label weights")

"""``features=oof``: out-of-fold logits of a small network trained on the given labels.

The labelled points are split into ``folds`` folds by a seeded permutation that does not look at the labels
(:func:`lgcexp.preprocess.fold_of`, the folds of every out-of-fold model of lgcexp);
fold model ``f`` is trained on the labels of every other fold. A labelled point's embedding is the output of
the one fold model that never saw its label (as cross-validated probabilities are), so the features a label
is judged on do not depend on that label: changing only ``y_i`` leaves point i's embedding unchanged. Every
unlabelled point is embedded by one fold model too (a seeded round robin), so labelled and unlabelled points
are embedded alike.

Network: inputs standardised per feature (:func:`lgcexp.preprocess.standardize` over all n points, no labels), an MLP
``d -> hidden[0] -> hidden[1] -> c`` with ReLU, Glorot-uniform weights, L2 weight decay (``weight_decay`` times the
sum of squared weights), softmax cross-entropy, Adam, a fixed number
of epochs (no early stopping: it would need held-out labels, i.e. the very labels being judged). The
embedding is the logit vector minus its mean (a logit shift changes no prediction), c-dimensional: the
logits of the fold models live in the same space (class j is coordinate j for all of them), which a hidden
layer's units do not.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UserError
from ..params import Array, Interval, NoneValue
from ..preprocess import fold_of, standardize
from . import nets
from .base import FeatureMap

AUTO_STEPS, MIN_EPOCHS, MAX_EPOCHS = 1500, 20, 200


class OOFFeatures(FeatureMap):
    """=============  ========================  ==============================================
    folds          int >= 2, 5               folds of the labelled points
    hidden         list of int >= 1, [256,128]  widths of the hidden layers
    epochs         int >= 1 or null (auto)   passes over a fold's training labels (auto:
                                             ~1,500 steps, 20-200 epochs)
    batch_size     int >= 1, 64              mini-batch size
    learning_rate  (0, 1), 0.001             Adam step size
    weight_decay   >= 0, 0.0001              L2 penalty on the weights
    seed           int >= 0, 0               folds, weights and batch order
    =============  ========================  =============================================="""

    name = "oof"
    uses_labels = True
    _parameter_constraints = {
        "folds": [Interval("int", 2, None)],
        "hidden": [Array(Interval("int", 1, None), "a list of positive integers")],
        "epochs": [Interval("int", 1, None), NoneValue()],
        "batch_size": [Interval("int", 1, None)],
        "learning_rate": [Interval("real", 0, 1, "neither")],
        "weight_decay": [Interval("real", 0, None)],
        "seed": [Interval("int", 0, 2**32 - 1)],
    }

    def __init__(self, folds: int = 5, hidden: list[int] | tuple[int, ...] = (256, 128), epochs: int | None = None,
                 batch_size: int = 64, learning_rate: float = 1e-3, weight_decay: float = 1e-4, seed: int = 0):
        self.folds = folds
        self.hidden = hidden
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.seed = seed

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        p = super().get_params(deep)
        p["hidden"] = [int(h) for h in p["hidden"]]
        return p

    def check_labels(self, n_labeled: int, prefix: str | None = None) -> None:
        prefix = self.config_prefix if prefix is None else prefix
        if n_labeled < 2 * int(self.folds):
            raise UserError(f"{prefix}folds={self.folds} is not allowed for this run: it has {n_labeled} labelled "
                            f"points, and each fold model needs training labels; use fewer folds or more labels")

    def _compute(self, X: np.ndarray, *, labeled: np.ndarray, y: np.ndarray, n_classes: int,
                 progress: bool = False, **_: Any) -> tuple[np.ndarray, dict[str, Any]]:
        Xs = standardize(X, dtype=np.float32)
        n, d = Xs.shape
        labeled = np.asarray(labeled, dtype=np.int64)
        y = np.asarray(y, dtype=np.int64)
        k, c, seed = int(self.folds), int(n_classes), int(self.seed)
        unl = np.setdiff1d(np.arange(n), labeled)
        f_lab, f_unl = fold_of(labeled.size, k, seed, unl.size)
        n_train = [int((f_lab != f).sum()) for f in range(k)]
        bs = int(min(self.batch_size, min(n_train)))
        epochs = nets.auto_epochs(self.epochs, int(np.mean(n_train)), bs, AUTO_STEPS, MIN_EPOCHS, MAX_EPOCHS)
        Z = np.zeros((n, c), dtype=np.float32)
        total = sum(epochs * -(-m // bs) for m in n_train)
        train_acc, oof_acc = [], []
        with nets.deterministic() as tf, nets.step_bar(progress, total, "features=oof") as bar:
            model = nets.MLP(tf, [d, *[int(w) for w in self.hidden], c])
            opt = nets.Adam(tf, model.variables, float(self.learning_rate))
            decay = float(self.weight_decay)

            @tf.function(input_signature=[tf.TensorSpec([None, d], tf.float32), tf.TensorSpec([None], tf.int64)])
            def step(xb, yb):
                with tf.GradientTape() as tape:
                    logits = model(xb)
                    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=yb, logits=logits))
                    loss = loss + decay * model.l2()
                opt.apply(tape.gradient(loss, model.variables))
                return loss

            for f in range(k):  # fold model f: trained on every fold but f
                rng = np.random.default_rng([seed, 0x6F6F66, f])
                model.reset(rng)
                opt.reset()
                tr, ytr = labeled[f_lab != f], y[f_lab != f]
                for _ in range(epochs):
                    for idx in nets.batches(tr.size, bs, rng):
                        step(tf.constant(Xs[tr[idx]]), tf.constant(ytr[idx]))
                        bar.update(1)
                own = np.concatenate([labeled[f_lab == f], unl[f_unl == f]])
                Z[own] = nets.predict(model, Xs[own])
                train_acc.append(float(np.mean(nets.predict(model, Xs[tr]).argmax(1) == ytr)))
                oof_acc.append(float(np.mean(Z[labeled[f_lab == f]].argmax(1) == y[f_lab == f])))
        Z -= Z.mean(axis=1, keepdims=True)
        return Z, {"epochs": epochs, "steps": total, "fold_train_agreement": float(np.mean(train_acc)),
                   "oof_agreement": float(np.mean(oof_acc))}

"""Out-of-fold classifiers on features: each point's class probabilities come from a model that never saw
its label (k shuffled folds). Shared by the feature view of the label-issue report (:mod:`lgcexp.issues`)
and the classifier-confusion noise model (:mod:`lgcexp.noise.confusion`), which therefore do not import each
other.

The folds, the standardisation and the principal axes are :mod:`lgcexp.preprocess`'s
(:func:`~lgcexp.preprocess.fold_splits`: a seeded permutation that does not look at the labels).

- :func:`oof_logistic_probs`: a multinomial logistic regression on principal axes;
- :func:`oof_mlp_probs`: a small network (scikit-learn's ``MLPClassifier``) on principal axes.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..preprocess import fold_splits, pca_transform, standardize

__all__ = ["out_of_fold_probs", "oof_logistic_probs", "oof_mlp_probs", "mlp_epochs", "network_inputs",
           "principal_inputs"]


def oof_logistic_probs(X: np.ndarray, y: np.ndarray, n_classes: int, *, folds: int = 5, pca: int = 50,
                       C: float = 1.0, seed: int = 0, train: np.ndarray | None = None,
                       strict: bool = False) -> np.ndarray | None:
    """Out-of-fold class probabilities (l x c) of a multinomial logistic regression (scikit-learn, L2,
    ``C``) on the standardised features (first projected on ``pca`` principal axes, fitted on all rows
    given, when there are more features; 0: no projection); ``folds`` folds seeded with ``seed``
    (:func:`lgcexp.preprocess.fold_splits`), each fold's model fitted on the other folds' rows in ``train``
    (default: all). A class absent from a fold's training rows gets probability 0 there. ``strict``: as in
    :func:`out_of_fold_probs`."""
    from sklearn.linear_model import LogisticRegression

    return out_of_fold_probs(principal_inputs(X, pca), y, n_classes, folds, seed, train,
                             lambda n_train: LogisticRegression(C=float(C), max_iter=1000), strict=strict)


def out_of_fold_probs(Z: np.ndarray, y: np.ndarray, n_classes: int, folds: int, seed: int,
                      train: np.ndarray | None, make_model: Any, *, strict: bool = False) -> np.ndarray | None:
    """Out-of-fold class probabilities (l x c) of the scikit-learn-style classifier ``make_model(n_train)``
    (``fit``, ``predict_proba``, ``classes_``) on the rows Z: on the folds of
    :func:`lgcexp.preprocess.fold_splits`, each fold's model fitted on the other folds' rows in ``train``
    (default: all; its convergence warnings silenced); a
    fold whose training rows hold one class gives that class probability 1, a class absent from a fold's
    training rows probability 0 there. ``strict``: None instead where a fold's training rows hold fewer than
    two classes (the label-issue views, which then do without that view)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    y = np.asarray(y, dtype=np.int64)
    train = np.ones(y.size, dtype=bool) if train is None else np.asarray(train, dtype=bool)
    out = np.zeros((y.size, int(n_classes)))
    for tr, te in fold_splits(y.size, folds, int(seed)):
        tr = tr[train[tr]]
        present = np.unique(y[tr])
        if present.size < 2 and strict:
            return None
        if present.size < 2:
            out[te, present] = 1.0 / max(1, present.size)
            continue
        model = make_model(tr.size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(Z[tr], y[tr])
        out[np.ix_(te, model.classes_)] = model.predict_proba(Z[te])
    return out


#: the network of the ``mlp`` feature view (:func:`oof_mlp_probs`): hidden ReLU layers, L2 weight, batch, Adam's
#: step size
MLP_HIDDEN = (128,)
MLP_ALPHA = 1e-3
MLP_BATCH = 256
MLP_LEARNING_RATE = 3e-3
#: its training length: about this many Adam steps, as epochs clipped to [MLP_MIN_EPOCHS, MLP_MAX_EPOCHS]
MLP_STEPS = 2000
MLP_MIN_EPOCHS = 5
MLP_MAX_EPOCHS = 200


def principal_inputs(X: np.ndarray, pca: int, standardize_features: bool = True) -> np.ndarray:
    """The features, standardised per feature (``standardize_features``) or only centred, projected on their
    ``pca`` leading principal axes when there are more features than that (0: no projection); float64.
    :func:`lgcexp.preprocess.standardize` and :func:`lgcexp.preprocess.pca_transform`."""
    Z = standardize(X) if standardize_features else np.asarray(X, dtype=np.float64) - np.mean(X, axis=0)
    if pca and Z.shape[1] > int(pca):
        Z = pca_transform(Z, int(min(pca, Z.shape[0])))
    return Z


def network_inputs(X: np.ndarray, pca: int) -> np.ndarray:
    """The ``mlp`` view's input: the centred features on their ``pca`` leading principal axes, on their own
    scale (no per-feature standardisation, no whitening), divided by one number so that the axes' variances
    average 1.

    Features that share one scale (pixels, a learnt code) keep it: standardising each pixel inflates the
    near-constant border pixels, and whitening the 50 axes inflates the weakest ones to the weight of the
    strongest. Out-of-fold accuracy of the network on clean labels, 5 folds, seed 0 (docs/label_issues.md,
    "The network's input"): MNIST 0.9811 against 0.9744 standardised and whitened (the input before), digits
    0.9816 against 0.9716, ISOLET 0.9527 against 0.9496."""
    Z = principal_inputs(X, pca, standardize_features=False)
    rms = float(np.sqrt(np.mean(Z.var(axis=0)))) if Z.size else 0.0
    return Z / rms if rms > 0 else Z


def mlp_epochs(n_train: int, batch: int = MLP_BATCH) -> int:
    """Epochs of the ``mlp`` view for ``n_train`` training rows: about :data:`MLP_STEPS` mini-batch steps,
    at least :data:`MLP_MIN_EPOCHS` and at most :data:`MLP_MAX_EPOCHS` epochs."""
    per_epoch = max(1, -(-int(n_train) // int(batch)))
    return int(np.clip(-(-MLP_STEPS // per_epoch), MLP_MIN_EPOCHS, MLP_MAX_EPOCHS))


def oof_mlp_probs(X: np.ndarray, y: np.ndarray, n_classes: int, *, folds: int = 5, pca: int = 50, seed: int = 0,
                  train: np.ndarray | None = None, strict: bool = False) -> np.ndarray | None:
    """Out-of-fold class probabilities (l x c) of a small neural network, on the folds of
    :func:`oof_logistic_probs` (each fold's network trained on the other folds' rows in ``train``, from its
    own seeded initialisation: no fold's network starts from weights another fold's labels trained).

    Input: :func:`network_inputs` (the centred features on their ``pca`` leading principal axes, on their
    own scale), in float32. Network (scikit-learn's ``MLPClassifier``): :data:`MLP_HIDDEN` ReLU units,
    softmax output, cross-entropy with L2 weight :data:`MLP_ALPHA`, Adam (step size
    :data:`MLP_LEARNING_RATE`, batches of :data:`MLP_BATCH`) for :func:`mlp_epochs` epochs, stopped earlier
    when the training loss has not fallen by 1e-4 for 10 epochs (scikit-learn's rule), initialised with
    ``seed``. A class absent from a fold's training rows gets probability 0 there. ``strict``: as in
    :func:`out_of_fold_probs`.

    Width, step size and length were chosen on fully labelled MNIST subsets (10,000 points, 10 % and 2 %
    uniform noise, seeds 1-3, the view alone behind LGC's leave-one-out and the ``consensus`` cut): 128 units
    at 3e-3 for ~2,000 steps judge as well as the 256 units at 1e-3 for ~4,000 steps before (F1 within 0.006
    per seed, no mean loss) in about a third of the time; ~1,000 steps lost 0.004 of F1 on average. End to
    end against the code before: ``python -m benchmarks small_fast``."""
    from sklearn.neural_network import MLPClassifier

    def network(n_train: int) -> MLPClassifier:
        batch = int(min(MLP_BATCH, n_train))
        return MLPClassifier(hidden_layer_sizes=MLP_HIDDEN, alpha=MLP_ALPHA, batch_size=batch,
                             learning_rate_init=MLP_LEARNING_RATE, max_iter=mlp_epochs(n_train, batch),
                             random_state=int(seed))

    Z = network_inputs(X, pca).astype(np.float32)
    return out_of_fold_probs(Z, y, n_classes, folds, seed, train, network, strict=strict)

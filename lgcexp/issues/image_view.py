"""The image view: an out-of-fold convolutional network on the pixels, for data whose rows are images.

Where the data are images (MNIST's source records 28 x 28; ``find_label_issues(image_shape=...)``), the feature
view of a fully labelled set is this network instead of the ``mlp`` on principal axes (:mod:`.views`): it sees
the pixels' neighbourhoods, so a digit written in an unusual style is still recognised where the network on
principal axes hesitates. As every view of :mod:`lgcexp.issues`, each point's probabilities come from the
network trained on the other folds (:func:`lgcexp.preprocess.fold_splits`), on the labels the method's own
evidence keeps; a point's own label never trains the network that judges it.

The network (LeCun et al. 1998's pattern, small enough for two CPU cores): 3 x 3 convolution with
:data:`CNN_CHANNELS` [0] ReLU maps, 2 x 2 max pooling, 3 x 3 convolution with :data:`CNN_CHANNELS` [1] maps, 2 x 2
max pooling, :data:`CNN_HIDDEN` dense ReLU units, softmax; cross-entropy with L2 weight :data:`CNN_L2` on the
dense layers, Adam (:class:`lgcexp.features.nets.Adam`, step :data:`CNN_LEARNING_RATE`) on batches of
:data:`CNN_BATCH` for about :data:`CNN_STEPS` steps (:func:`cnn_epochs`). TensorFlow with op determinism on;
every initial weight and batch order is drawn from a numpy generator seeded with ``seed``, so the same call
gives the same probabilities.

The rows are read a batch at a time (``X[rows[batch]]``), so a memory-mapped X is never copied whole, and
scaled by one mean and one deviation of the pixels (a seeded sample of rows).

Measured (``python -m benchmarks image_view``; docs/label_issues.md#images): out-of-fold accuracy against the
true labels and the average precision of self-confidence on fully labelled MNIST subsets with uniform noise,
against the ``mlp`` view in the same run.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from ..data.dataset import check_image_shape
from ..preprocess import fold_splits

__all__ = ["CNN_CHANNELS", "CNN_HIDDEN", "CNN_STEPS", "cnn_epochs", "oof_cnn_probs"]

#: feature maps of the two convolutions; dense units; L2 weight; Adam's step; batch
CNN_CHANNELS = (16, 32)
CNN_HIDDEN = 128
CNN_L2 = 1e-4
CNN_LEARNING_RATE = 2e-3
CNN_BATCH = 128
#: about this many Adam steps per fold, as whole epochs in [CNN_MIN_EPOCHS, CNN_MAX_EPOCHS]
CNN_STEPS = 500
CNN_MIN_EPOCHS = 1
CNN_MAX_EPOCHS = 30
#: training images are shifted by up to this share of their smaller side, rounded down (each image its own
#: shift, seeded): 2 pixels of MNIST's 28, none of digits' 8
SHIFT_SHARE = 0.08
#: rows sampled for the pixels' mean and deviation
SCALE_SAMPLE = 10_000


def cnn_epochs(n_train: int, batch: int = CNN_BATCH) -> int:
    """Epochs for ``n_train`` training rows: about :data:`CNN_STEPS` steps, clipped to
    [:data:`CNN_MIN_EPOCHS`, :data:`CNN_MAX_EPOCHS`]."""
    per_epoch = max(1, -(-int(n_train) // int(batch)))
    return int(np.clip(-(-CNN_STEPS // per_epoch), CNN_MIN_EPOCHS, CNN_MAX_EPOCHS))


def _he(rng: np.random.Generator, shape: Sequence[int], fan_in: int) -> np.ndarray:
    """He-normal weights (He et al. 2015), for the ReLU layers."""
    return rng.normal(0.0, np.sqrt(2.0 / fan_in), size=tuple(shape)).astype(np.float32)


class _Network:
    """The two convolutions, the dense layer and the output as plain variables (one traced step serves every
    fold; :meth:`reset` redraws them from a numpy generator)."""

    def __init__(self, tf: Any, shape: tuple[int, int, int], n_classes: int):
        h, w, ch = shape
        c1, c2 = CNN_CHANNELS
        self.tf, self.flat = tf, math.ceil(math.ceil(h / 2) / 2) * math.ceil(math.ceil(w / 2) / 2) * c2
        self.shapes = [(3, 3, ch, c1), (c1,), (3, 3, c1, c2), (c2,), (self.flat, CNN_HIDDEN), (CNN_HIDDEN,),
                       (CNN_HIDDEN, n_classes), (n_classes,)]
        self.fan_in = [9 * ch, 0, 9 * c1, 0, self.flat, 0, CNN_HIDDEN, 0]
        self.variables = [tf.Variable(np.zeros(s, np.float32)) for s in self.shapes]

    def reset(self, rng: np.random.Generator) -> None:
        for v, s, f in zip(self.variables, self.shapes, self.fan_in):
            v.assign(_he(rng, s, f) if f else np.zeros(s, np.float32))

    def __call__(self, x: Any) -> Any:
        tf = self.tf
        K1, b1, K2, b2, W3, b3, W4, b4 = self.variables
        x = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, K1, 1, "SAME") + b1), 2, 2, "SAME")
        x = tf.nn.max_pool2d(tf.nn.relu(tf.nn.conv2d(x, K2, 1, "SAME") + b2), 2, 2, "SAME")
        x = tf.nn.relu(tf.reshape(x, (-1, self.flat)) @ W3 + b3)
        return x @ W4 + b4

    def l2(self) -> Any:
        """The squared weights of the dense layers."""
        tf = self.tf
        return tf.reduce_sum(tf.square(self.variables[4])) + tf.reduce_sum(tf.square(self.variables[6]))


def _pixel_scale(X: Any, rows: np.ndarray, seed: int) -> tuple[float, float]:
    """One mean and one deviation of the pixel values, from a seeded sample of ``rows``."""
    pick = np.sort(np.random.default_rng(seed).choice(rows, size=min(SCALE_SAMPLE, rows.size), replace=False))
    S = np.asarray(X[pick], dtype=np.float64)
    sd = float(S.std())
    return float(S.mean()), sd if sd > 0 else 1.0


def oof_cnn_probs(X: Any, rows: np.ndarray, y: np.ndarray, n_classes: int, image_shape: Any, *, folds: int = 5,
                  seed: int = 0, train: np.ndarray | None = None, strict: bool = False) -> np.ndarray | None:
    """Out-of-fold class probabilities (l x c) of the convolutional network (module docstring) for the points
    ``rows`` of X (rows of flattened images, ``image_shape`` (h, w) or (h, w, c), channels last), labelled
    ``y``: ``folds`` folds of :func:`lgcexp.preprocess.fold_splits` seeded with ``seed``, each fold's network
    trained from its own seeded start on the other folds' points in ``train`` (default: all). A class absent
    from a fold's training points gets probability 0 there; ``strict``: None where a fold's training points
    hold fewer than two classes."""
    from ..features.nets import Adam, deterministic

    rows = np.asarray(rows, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    shape = check_image_shape(image_shape, X.shape[1])
    train = np.ones(y.size, dtype=bool) if train is None else np.asarray(train, dtype=bool)
    out = np.zeros((y.size, int(n_classes)))
    if not y.size:
        return out
    mu, sd = _pixel_scale(X, rows, seed)
    shift = int(SHIFT_SHARE * min(shape[0], shape[1]))
    rng = np.random.default_rng(seed)

    def images(idx: np.ndarray, shift: int = 0) -> np.ndarray:
        order = np.argsort(rows[idx], kind="stable")  # ascending reads (a memory map reads forward)
        block = np.empty((idx.size, X.shape[1]), dtype=np.float32)
        block[order] = np.asarray(X[rows[idx][order]], dtype=np.float32)
        imgs = ((block - mu) / sd).reshape(-1, *shape)
        if shift:
            h, w = shape[0], shape[1]
            pad = np.pad(imgs, ((0, 0), (shift, shift), (shift, shift), (0, 0)), constant_values=-mu / sd)
            offs = rng.integers(0, 2 * shift + 1, size=(idx.size, 2))
            imgs = np.stack([pad[i, a:a + h, b:b + w] for i, (a, b) in enumerate(offs)])
        return imgs

    with deterministic() as tf:
        net = _Network(tf, shape, int(n_classes))
        opt = Adam(tf, net.variables, CNN_LEARNING_RATE)

        @tf.function(reduce_retracing=True)
        def step(xb: Any, yb: Any, mask: Any) -> Any:
            with tf.GradientTape() as tape:
                logits = net(xb) + mask  # classes absent from the fold's training labels: -inf
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(yb, logits)) + CNN_L2 * net.l2()
            opt.apply(tape.gradient(loss, net.variables))
            return loss

        @tf.function(reduce_retracing=True)
        def probs(xb: Any, mask: Any) -> Any:
            return tf.nn.softmax(net(xb) + mask)

        for tr, te in fold_splits(y.size, folds, int(seed)):
            tr = tr[train[tr]]
            present = np.unique(y[tr])
            if present.size < 2:
                if strict:
                    return None
                out[np.ix_(te, present)] = 1.0 / max(1, present.size)
                continue
            mask = np.full(int(n_classes), -1e9, dtype=np.float32)
            mask[present] = 0.0
            net.reset(rng)
            opt.reset()
            for _ in range(cnn_epochs(tr.size)):
                order = rng.permutation(tr)
                for s in range(0, order.size, CNN_BATCH):
                    b = order[s:s + CNN_BATCH]
                    step(images(b, shift), y[b], mask)
            for s in range(0, te.size, 2048):
                b = te[s:s + 2048]
                out[b] = np.asarray(probs(images(b), mask), dtype=np.float64)
    return out

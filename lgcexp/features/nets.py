"""The TensorFlow pieces the learned feature maps share: a quiet lazy import, op determinism for the
duration of a training, an MLP and Adam on plain variables, seeded mini-batches and a tqdm bar over the
training steps.

Every random draw (weight initialisation, batch order, the VAE's reparameterisation noise) comes from a
seed of the map's own (``features.seed``), drawn with numpy, so the same
parameters give the same features; TensorFlow's op determinism is switched on while a map trains (and
restored afterwards: the Adam loops of AutoL/AutoD are not affected). TensorFlow places the work on the GPU
when it sees one (``device=auto``); ``device=cpu`` hides it (lgcexp.devices).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np

from ..devices import tensorflow as tf_module  # TensorFlow imported lazily, quiet, its pools sized for this process


@contextmanager
def deterministic() -> Iterator[Any]:
    """TensorFlow with op determinism on for the block (restored to its previous state after it)."""
    tf = tf_module()
    from tensorflow.python.framework import config as tf_config

    was = tf_config.is_op_determinism_enabled()
    if not was:
        tf_config.enable_op_determinism()
    try:
        yield tf
    finally:
        if not was:
            tf_config.disable_op_determinism()


def glorot(rng: np.random.Generator, fan_in: int, fan_out: int) -> np.ndarray:
    """Glorot-uniform weights (Glorot & Bengio 2010): U(-a, a), a = sqrt(6 / (fan_in + fan_out))."""
    a = np.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-a, a, size=(fan_in, fan_out)).astype(np.float32)


class MLP:
    """Dense layers ``widths[0] -> ... -> widths[-1]``, ReLU between them, linear output, as plain
    ``tf.Variable`` s (no Keras: one traced training step serves every fold, and :meth:`reset` redraws the
    weights from a numpy generator)."""

    def __init__(self, tf: Any, widths: list[int]):
        self.tf = tf
        self.widths = [int(w) for w in widths]
        self.W = [tf.Variable(np.zeros((a, b), np.float32)) for a, b in zip(self.widths[:-1], self.widths[1:])]
        self.b = [tf.Variable(np.zeros(b, np.float32)) for b in self.widths[1:]]

    @property
    def variables(self) -> list[Any]:
        return [*self.W, *self.b]

    def reset(self, rng: np.random.Generator) -> None:
        for W, b, a, o in zip(self.W, self.b, self.widths[:-1], self.widths[1:]):
            W.assign(glorot(rng, a, o))
            b.assign(np.zeros(o, np.float32))

    def __call__(self, x: Any) -> Any:
        tf = self.tf
        for i, (W, b) in enumerate(zip(self.W, self.b)):
            x = tf.matmul(x, W) + b
            if i < len(self.W) - 1:
                x = tf.nn.relu(x)
        return x

    def l2(self) -> Any:
        return sum(self.tf.reduce_sum(self.tf.square(W)) for W in self.W)


class Adam:
    """Adam (Kingma & Ba 2015) on a list of variables, with its moments as variables (so :meth:`reset`
    restarts it without retracing): m <- b1 m + (1-b1) g, v <- b2 v + (1-b2) g^2,
    w <- w - lr sqrt(1-b2^t)/(1-b1^t) m / (sqrt(v) + eps)."""

    def __init__(self, tf: Any, variables: list[Any], lr: float, b1: float = 0.9, b2: float = 0.999,
                 eps: float = 1e-7):
        self.tf, self.vars, self.lr, self.b1, self.b2, self.eps = tf, variables, lr, b1, b2, eps
        self.m = [tf.Variable(tf.zeros_like(v)) for v in variables]
        self.v = [tf.Variable(tf.zeros_like(v)) for v in variables]
        self.t = tf.Variable(0.0)

    def reset(self) -> None:
        for a in (*self.m, *self.v):
            a.assign(self.tf.zeros_like(a))
        self.t.assign(0.0)

    def apply(self, grads: list[Any]) -> None:
        tf = self.tf
        self.t.assign_add(1.0)
        rate = self.lr * tf.sqrt(1.0 - self.b2 ** self.t) / (1.0 - self.b1 ** self.t)
        for w, g, m, v in zip(self.vars, grads, self.m, self.v):
            m.assign(self.b1 * m + (1.0 - self.b1) * g)
            v.assign(self.b2 * v + (1.0 - self.b2) * tf.square(g))
            w.assign_sub(rate * m / (tf.sqrt(v) + self.eps))


def auto_epochs(epochs: int | None, n: int, batch_size: int, steps: int, low: int, high: int) -> int:
    """``epochs`` as given, else enough epochs for about ``steps`` optimiser steps, clipped to [low, high]."""
    if epochs is not None:
        return int(epochs)
    per_epoch = max(1, math.ceil(n / batch_size))
    return int(min(high, max(low, math.ceil(steps / per_epoch))))


def batches(n: int, batch_size: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Indices of one epoch's mini-batches (a seeded permutation; the last batch may be smaller)."""
    order = rng.permutation(n)
    for start in range(0, n, batch_size):
        yield order[start:start + batch_size]


def step_bar(progress: bool, total: int, desc: str) -> Any:
    """A tqdm bar over the training steps (a no-op object when ``progress`` is false)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="step", leave=False, disable=not progress)


def predict(model: Any, X: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """``model(X)`` in blocks, as float32 numpy."""
    out = [np.asarray(model(X[s:s + batch_size])) for s in range(0, X.shape[0], batch_size)]
    return np.concatenate(out, axis=0).astype(np.float32)

"""``features=vae``: a variational autoencoder trained on the data itself, without labels (Kingma & Welling
2014); the features are the posterior means ``mu(x)`` of the latent code.

Architecture (as GraphLearning's MNIST representation, Calder et al.): an MLP encoder ``d -> hidden (ReLU)
-> (mu, log sigma^2)`` of width ``latent``, a mirrored decoder ``latent -> hidden (ReLU) -> d``. The inputs
are scaled to [0, 1] by the data's global minimum and maximum (MNIST: pixels / 255; the relative scale of
the features is kept). ``likelihood=bernoulli`` (default, the usual choice for [0, 1] pixel intensities):
the reconstruction term is the binary cross-entropy of the decoder's logits against the scaled input;
``gaussian``: a unit-variance Gaussian, i.e. half the squared error. Loss per point: reconstruction summed
over the features plus ``KL(q(z|x) || N(0, I)) = -1/2 sum(1 + log s^2 - mu^2 - s^2)``; Adam, mini-batches.

Training length: ``epochs`` as given, or (null) enough epochs for about 6,000 Adam steps, between 10 and
200 epochs (MNIST: 11 epochs, about 2 minutes on 2 CPU cores; GraphLearning trains 100 epochs on a GPU: a
few thousand steps already give a code whose kNN graph beats the raw pixels', see docs/features.md).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..params import Interval, NoneValue, Options
from . import nets
from .base import FeatureMap

LIKELIHOODS = ("bernoulli", "gaussian")
AUTO_STEPS, MIN_EPOCHS, MAX_EPOCHS = 6000, 10, 200


def scale_unit(X: np.ndarray) -> np.ndarray:
    """X mapped to [0, 1] by its global minimum and maximum (a constant X maps to 0), as float32."""
    lo, hi = float(np.min(X)), float(np.max(X))
    span = hi - lo if hi > lo else 1.0
    return ((np.asarray(X, dtype=np.float64) - lo) / span).astype(np.float32)


class VAEFeatures(FeatureMap):
    """=============  ========================  ==============================================
    latent         int >= 1, 20              width of the code (the features)
    hidden         int >= 1, 400             width of the encoder's and decoder's hidden layer
    likelihood     bernoulli | gaussian      reconstruction term (see the module docstring)
    epochs         int >= 1 or null (auto)   passes over the data (auto: ~6,000 steps, 10-200)
    batch_size     int >= 1, 128             mini-batch size
    learning_rate  (0, 1), 0.001             Adam step size
    seed           int >= 0, 0               weights, batch order and reparameterisation noise
    =============  ========================  =============================================="""

    name = "vae"
    _parameter_constraints = {
        "latent": [Interval("int", 1, None)],
        "hidden": [Interval("int", 1, None)],
        "likelihood": [Options(LIKELIHOODS)],
        "epochs": [Interval("int", 1, None), NoneValue()],
        "batch_size": [Interval("int", 1, None)],
        "learning_rate": [Interval("real", 0, 1, "neither")],
        "seed": [Interval("int", 0, 2**32 - 1)],
    }

    def __init__(self, latent: int = 20, hidden: int = 400, likelihood: str = "bernoulli", epochs: int | None = None,
                 batch_size: int = 128, learning_rate: float = 1e-3, seed: int = 0):
        self.latent = latent
        self.hidden = hidden
        self.likelihood = likelihood
        self.epochs = epochs
        self.batch_size = batch_size
        self.learning_rate = learning_rate
        self.seed = seed

    def _compute(self, X: np.ndarray, *, progress: bool = False, **_: Any) -> tuple[np.ndarray, dict[str, Any]]:
        Xs = scale_unit(X)
        n, d = Xs.shape
        latent, bs = int(self.latent), int(min(self.batch_size, n))
        epochs = nets.auto_epochs(self.epochs, n, bs, AUTO_STEPS, MIN_EPOCHS, MAX_EPOCHS)
        rng = np.random.default_rng([int(self.seed), 0x766165])  # stream "vae"
        bernoulli = self.likelihood == "bernoulli"
        with nets.deterministic() as tf:
            encoder = nets.MLP(tf, [d, int(self.hidden), 2 * latent])  # (mu, log sigma^2)
            decoder = nets.MLP(tf, [latent, int(self.hidden), d])
            init = np.random.default_rng([int(self.seed), 0x766165, 1])
            encoder.reset(init)
            decoder.reset(init)
            weights = encoder.variables + decoder.variables
            opt = nets.Adam(tf, weights, float(self.learning_rate))

            @tf.function(input_signature=[tf.TensorSpec([None, d], tf.float32),
                                          tf.TensorSpec([None, latent], tf.float32)])
            def step(xb, eps):
                with tf.GradientTape() as tape:
                    code = encoder(xb)
                    mu, logvar = code[:, :latent], code[:, latent:]
                    out = decoder(mu + tf.exp(0.5 * logvar) * eps)
                    if bernoulli:
                        rec = tf.reduce_sum(tf.nn.sigmoid_cross_entropy_with_logits(labels=xb, logits=out), axis=1)
                    else:
                        rec = 0.5 * tf.reduce_sum(tf.square(xb - out), axis=1)
                    kl = -0.5 * tf.reduce_sum(1.0 + logvar - tf.square(mu) - tf.exp(logvar), axis=1)
                    loss = tf.reduce_mean(rec + kl)
                opt.apply(tape.gradient(loss, weights))
                return loss

            total = epochs * -(-n // bs)
            losses = []
            with nets.step_bar(progress, total, "features=vae") as bar:
                for _ in range(epochs):
                    ep = []
                    for idx in nets.batches(n, bs, rng):
                        eps = rng.standard_normal((idx.size, latent)).astype(np.float32)
                        ep.append(step(tf.constant(Xs[idx]), tf.constant(eps)))
                        bar.update(1)
                    losses.append(float(np.mean([float(v) for v in ep])))
            Z = nets.predict(lambda x: encoder(x)[:, :latent], Xs)
        return Z, {"epochs": epochs, "steps": total, "final_loss": losses[-1], "first_loss": losses[0]}

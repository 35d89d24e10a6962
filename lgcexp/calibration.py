"""A class distribution calibrated to the labels it is meant to predict, with or without label noise, and the
posterior of each point's true class given its (possibly wrong) label.

Used by the label-issue count (:mod:`lgcexp.issues.count`) and by ``algo=poissonBayes``
(:mod:`lgcexp.algorithms.poisson_bayes`); it imports nothing of lgcexp, so both may.

- :func:`calibrate_temperature`: one temperature, ``softmax(log(p) / T)``, the T that maximises the likelihood of
  the given labels (Guo, Pleiss, Sun & Weinberger, "On calibration of modern neural networks", ICML 2017);
- :func:`calibrate_under_noise`: T fitted jointly with a uniform label-noise rate rho: a given label is the true
  class with probability ``1 - rho`` and each other class with ``rho / (c - 1)`` (the noisy-label likelihood of
  Natarajan, Dhillon, Ravikumar & Tewari, NeurIPS 2013, with one rate);
- :func:`noisy_label_posterior`: Bayes' rule under that noise model,
  ``P(true = k | evidence, given y) ∝ q_k ((1 - rho) [k = y] + rho / (c - 1) [k != y])``.
"""
from __future__ import annotations

import numpy as np

__all__ = ["calibrate_temperature", "calibrate_under_noise", "noise_rate_identified", "noisy_label_posterior",
           "uniform_noise_likelihood"]

#: the smallest probability taken to a log
FLOOR = 1e-12
#: the temperatures searched
T_BOUNDS = (0.05, 20.0)
#: a fitted noise rate is identified where it gains at least this log-likelihood per label it counts
#: (:func:`noise_rate_identified`)
NATS_PER_COUNTED_LABEL = 0.05


def _log_evidence(probs: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(P as float64, rows with evidence (a positive sum), their log-probabilities, their labels)."""
    P = np.asarray(probs, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    has = P.sum(axis=1) > 0 if P.ndim == 2 else np.zeros(0, dtype=bool)
    return P, has, np.log(np.maximum(P[has], FLOOR)), y[has]


def _tempered(L: np.ndarray, T: float) -> tuple[np.ndarray, np.ndarray]:
    """(Z, Q): the shifted logits ``L / T - max`` and their row softmax."""
    Z = L / T
    Z = Z - Z.max(axis=1, keepdims=True)
    Q = np.exp(Z)
    return Z, Q / Q.sum(axis=1, keepdims=True)


def _with_rows(P: np.ndarray, has: np.ndarray, Q: np.ndarray) -> np.ndarray:
    out = np.zeros_like(P)
    out[has] = Q
    return out


def calibrate_temperature(probs: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """``probs`` at the temperature T that maximises the mean log-likelihood of the given labels,
    ``softmax(log(p) / T)`` (bounded search over T in :data:`T_BOUNDS`); returns (calibrated probs, T). Rows
    without evidence stay zero. Classes with zero probability stay at zero."""
    from scipy.optimize import minimize_scalar

    P, has, L, yl = _log_evidence(probs, y)
    if not has.any():
        return P.copy(), 1.0
    rows = np.arange(yl.size)

    def nll(T: float) -> float:
        Z, Q = _tempered(L, T)
        return float(np.mean(np.log(np.exp(Z).sum(axis=1)) - Z[rows, yl]))

    T = float(minimize_scalar(nll, bounds=T_BOUNDS, method="bounded", options={"xatol": 1e-4}).x)
    return _with_rows(P, has, _tempered(L, T)[1]), T


def calibrate_under_noise(probs: np.ndarray, y: np.ndarray,
                          plain: tuple[np.ndarray, float] | None = None) -> tuple[np.ndarray, float, float]:
    """``probs`` at the temperature that maximises the likelihood of the given labels *under uniform label
    noise*: the likelihood of ``y_i`` is ``(1 - rho) q_T(y_i) + rho (1 - q_T(y_i)) / (c - 1)`` with
    ``q_T = softmax(log(p) / T)``. ``T`` and ``rho`` are fitted jointly (L-BFGS-B on ``(log T, rho)`` with the
    analytic gradient; ``T`` in :data:`T_BOUNDS`, ``rho`` in [0, (c - 1) / c]; two starts: plain calibration
    with ``rho = 0``, and ``T = 1, rho = 0.2``). Returns (calibrated probs ``q_T``, T, rho).

    Why: :func:`calibrate_temperature` treats every given label as true, so where many labels are wrong the
    likelihood is best served by a flat distribution (T grows) and no point names another class clearly.
    Modelling the noise keeps the distribution as sharp as the clean labels support. With ``rho`` fixed at 0 the
    objective is :func:`calibrate_temperature`'s. ``plain``: that function's result for the same arguments,
    where the caller has it (the first start)."""
    from scipy.optimize import minimize

    P, has, L, yl = _log_evidence(probs, y)
    c = int(P.shape[1]) if P.ndim == 2 else 0
    if not has.any() or c < 2:
        return P.copy(), 1.0, 0.0
    rows = np.arange(yl.size)
    rho_max = (c - 1) / c

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        theta, rho = float(x[0]), float(x[1])
        Z, Q = _tempered(L, np.exp(theta))
        s = Q[rows, yl]
        a, b = rho / (c - 1), 1.0 - rho * c / (c - 1)
        m = np.maximum(a + b * s, FLOOR)
        d_theta = b * s * ((Q * Z).sum(axis=1) - Z[rows, yl]) / m
        d_rho = (1.0 - c * s) / ((c - 1) * m)
        return float(-np.mean(np.log(m))), -np.array([d_theta.mean(), d_rho.mean()])

    _, T0 = calibrate_temperature(P, y) if plain is None else plain
    bounds = [(np.log(T_BOUNDS[0]), np.log(T_BOUNDS[1])), (0.0, rho_max)]
    best = None
    for start in ((np.log(T0), 0.0), (0.0, min(0.2, rho_max))):
        r = minimize(objective, np.array(start), jac=True, method="L-BFGS-B", bounds=bounds,
                     options={"ftol": 1e-12, "gtol": 1e-9, "maxiter": 500})
        if best is None or r.fun < best.fun:
            best = r
    theta, rho = float(best.x[0]), float(best.x[1])
    return _with_rows(P, has, _tempered(L, np.exp(theta))[1]), float(np.exp(theta)), rho


def _noisy_nll(L: np.ndarray, yl: np.ndarray, T: float, rho: float) -> float:
    """Summed negative log-likelihood of the labels ``yl`` under :func:`calibrate_under_noise`'s model."""
    c = L.shape[1]
    s = _tempered(L, T)[1][np.arange(yl.size), yl]
    return float(-np.sum(np.log(np.maximum(rho / (c - 1) + (1.0 - rho * c / (c - 1)) * s, FLOOR))))


def noise_rate_identified(probs: np.ndarray, y: np.ndarray, T: float, rho: float,
                          plain_T: float | None = None) -> bool:
    """Whether the view identifies the uniform noise rate ``rho`` fitted by :func:`calibrate_under_noise` (with
    temperature ``T``): the log-likelihood it gains over no noise (temperature alone, ``plain_T``; refitted where
    None) is at least :data:`NATS_PER_COUNTED_LABEL` per label the rate counts (``rho`` times the rows with
    evidence).

    Why per counted label: where the likelihood is near-quadratic the gain is about ``e^2 k / 2`` for ``k`` counted
    labels, ``e`` the share of a perfect detector's information about the count that the view carries, so the gain
    per counted label measures the view, not the number of wrong labels. A strong view gains 0.15-4 nats per counted
    label (fully labelled digits, ISOLET and MNIST's test images at 0.5-40 % uniform or idn noise; the least, 0.15,
    at digits' 40 % idn); a linear view of a few sampled labels leaves the likelihood nearly flat (ISOLET, 1,040
    sampled labels, the LDA view: 0.002-0.011 nats per counted label, 201-330 counted for 416 wrong). False where
    ``rho`` is 0."""
    if rho <= 0:
        return False
    _, has, L, yl = _log_evidence(probs, y)
    if not has.any() or L.shape[1] < 2:
        return False
    if plain_T is None:
        plain_T = calibrate_temperature(probs, y)[1]
    gain = _noisy_nll(L, yl, plain_T, 0.0) - _noisy_nll(L, yl, T, rho)
    return gain >= NATS_PER_COUNTED_LABEL * rho * yl.size


def uniform_noise_likelihood(y: np.ndarray, n_classes: int, rho: float) -> np.ndarray:
    """(m, c): ``P(given y_i | true class k)`` under uniform noise at rate ``rho``."""
    y = np.asarray(y, dtype=np.int64)
    lik = np.full((y.size, n_classes), rho / max(n_classes - 1, 1))
    lik[np.arange(y.size), y] = 1.0 - rho
    return lik


def noisy_label_posterior(q: np.ndarray, y: np.ndarray, rho: float) -> np.ndarray:
    """(m, c): the posterior of each point's true class from the evidence ``q`` (a calibrated class distribution
    made without the point's own label: the prior) and its given label ``y`` under uniform noise at rate
    ``rho``: ``q_k P(y | k)``, normalised. A row without evidence (all zero) or with ``rho = 0`` gives the
    given label's one-hot."""
    q = np.asarray(q, dtype=np.float64)
    y = np.asarray(y, dtype=np.int64)
    post = q * uniform_noise_likelihood(y, q.shape[1], rho)
    s = post.sum(axis=1, keepdims=True)
    out = np.zeros_like(post)
    out[np.arange(y.size), y] = 1.0
    ok = s[:, 0] > 0
    out[ok] = post[ok] / s[ok]
    return out

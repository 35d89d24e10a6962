import numpy as np
import pytest
from conftest import random_graph

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.gfhf import GFHF
from lgcexp.algorithms.lgc import LGC, lgc_propagate
from lgcexp.errors import UserError
from lgcexp.solvers.cg import cg


def test_cg_against_dense_solve():
    rng = np.random.default_rng(0)
    M = rng.normal(size=(30, 30))
    A = M @ M.T + 30 * np.eye(30)
    B = rng.normal(size=(30, 4))
    X, it, res = cg(lambda V: A @ V, B, tol=1e-12)
    assert np.allclose(X, np.linalg.solve(A, B), atol=1e-9) and res <= 1e-12


@pytest.mark.parametrize("alpha", [0.5, 0.9, 0.99])
def test_lgc_against_dense_inverse(alpha):
    g, _ = random_graph(50, 4, seed=1)
    labeled = np.array([0, 7, 13, 22, 31, 40])
    y = np.array([0, 1, 2, 0, 1, 2])
    algo = LGC(alpha=alpha).fit(g, labeled, y, 3)
    Y = np.zeros((50, 3))
    Y[labeled, y] = 1
    S = g.S.toarray()
    ref = np.linalg.inv(np.eye(50) - alpha * S) @ Y
    # LGC stops once every argmax is certain: the predictions are exact, the scores within the bound
    assert np.array_equal(algo.predict(), ref.argmax(1))
    R = Y - (algo.scores_ - alpha * S @ algo.scores_)
    bound = np.sqrt(g.degree) * np.abs(R / np.sqrt(g.degree)[:, None]).max() / (1 - alpha)
    assert np.all(np.abs(algo.scores_ - ref) <= bound[:, None] + 1e-12)
    # run to the tolerance (no degrees: no certificate), the scores themselves are accurate
    F, _ = lgc_propagate(g.S, Y, alpha, tol=1e-12)
    assert np.allclose(F, ref, atol=1e-9)


def test_lgc_power_matches_cg():
    g, _ = random_graph(40, 4, seed=2)
    Y = np.zeros((40, 2))
    Y[[0, 5], [0, 1]] = 1
    F_cg, _ = lgc_propagate(g.S, Y, 0.9)
    F_pw, _ = lgc_propagate(g.S, Y, 0.9, solver="power", t=1000)
    assert np.allclose(F_cg, F_pw, atol=1e-9)


def test_gfhf_against_closed_form():
    g, _ = random_graph(45, 4, seed=3)
    labeled = np.array([1, 10, 20, 30, 44])
    y = np.array([0, 1, 1, 0, 2])
    algo = GFHF(tol=1e-12).fit(g, labeled, y, 3)
    W = g.W.toarray()
    d = W.sum(1)
    P = W / d[:, None]
    unl = np.setdiff1d(np.arange(45), labeled)
    YL = np.eye(3)[y]
    FU = np.linalg.inv(np.eye(unl.size) - P[np.ix_(unl, unl)]) @ P[np.ix_(unl, labeled)] @ YL
    assert np.allclose(algo.scores_[unl], FU, atol=1e-8)
    assert np.array_equal(algo.scores_[labeled], YL)
    assert np.array_equal(algo.labeled_pred_, y)  # labelled rows keep their given labels


def test_gfhf_class_mass_normalisation():
    g, _ = random_graph(45, 4, seed=4)
    labeled = np.array([1, 10, 20, 30, 44, 5])
    y = np.array([0, 1, 1, 0, 2, 1])
    plain = GFHF(tol=1e-12).fit(g, labeled, y, 3)
    cmn = GFHF(tol=1e-12, cmn=True).fit(g, labeled, y, 3)
    unl = np.setdiff1d(np.arange(45), labeled)
    prior = np.bincount(y, minlength=3) / y.size
    assert np.allclose(cmn.scores_[unl].sum(0), prior)  # column masses match the label proportions
    assert np.allclose(cmn.scores_[unl], plain.scores_[unl] * prior / plain.scores_[unl].sum(0))


def test_bad_algorithm_params():
    g = random_graph(20)[0]
    with pytest.raises(UserError, match=r"algo\.params\.alpha=1\.5 is not allowed: it must be a number in \(0, 1\)"):
        LGC(alpha=1.5).fit(g, np.array([0, 1]), np.array([0, 1]), 2)
    with pytest.raises(UserError, match="algo.params.solver=lu is not allowed: choose one of cg, power"):
        make_algorithm("lgc", {"solver": "lu"})
    with pytest.raises(UserError, match="algo=nope is not allowed: choose one of lgc, gfhf"):
        make_algorithm("nope", {})
    with pytest.raises(UserError, match="algo.params.beta is not a parameter of algo=lgc; allowed: alpha"):
        make_algorithm("lgc", {"beta": 1})


def _registered():
    from lgcexp.algorithms import ALGORITHMS

    return list(ALGORITHMS.names())


@pytest.mark.parametrize("name", _registered())
def test_every_algorithm_gives_the_same_scores_twice(name):
    """Deterministic: two fits of every registered method on the same graph and labels give the same scores, bit
    for bit (the estimators' check_fit_idempotent compares predictions only)."""
    from lgcexp.graph import build_graph
    from lgcexp.spectral import laplacian_eigenpairs

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(0, 1, (30, 3)), rng.normal(4, 1, (30, 3))])
    labeled, y = np.array([0, 5, 10, 30, 35, 40]), np.array([0, 0, 0, 1, 1, 1])
    from lgcexp.algorithms.eigenfunction import EigenfunctionBuilder
    from lgcexp.anchor import AnchorGraphBuilder

    builders = {"lssc": AnchorGraphBuilder(n_anchors=8), "eigenfunction": EigenfunctionBuilder(k=10, n_bins=10)}
    g = builders[name].build(X)[0] if name in builders else build_graph(X, 5, "mean", "union")[0]
    runs = []
    for _ in range(2):
        algo = make_algorithm(name)
        p = algo.required_eigenpairs()
        eig = laplacian_eigenpairs(g, min(p, 20))[0] if p else None
        if p:
            algo.set_params(**{k: 20 for k in ("p", "m") if k in algo.get_params()})
        runs.append(np.asarray(algo.fit(g, labeled, y, 2, eig=eig, features=X).scores_))
    assert np.array_equal(runs[0], runs[1])

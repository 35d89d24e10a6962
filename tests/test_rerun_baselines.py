"""The baselines the paper quotes from Gong et al. and Lu et al., rerun by lgcexp: the anchor graph (Liu et
al. 2010) and LGC on it, Eigenfunction (Fergus et al. 2009), and the table columns they land in. Each is
checked against an independent computation on a small case (dense solve, brute-force optimum, closed form)."""
import numpy as np
import pytest
from scipy.optimize import minimize

from lgcexp.algorithms.eigenfunction import Eigenfunction
from lgcexp.algorithms.lgc import LGC
from lgcexp.errors import UserError
from lgcexp.evaluate import mark_unreached
from lgcexp.graph.anchor import (
    AnchorGraph,
    AnchorGraphBuilder,
    anchor_matrix,
    kernel_weights,
    lae_weights,
    nearest_anchors,
    project_simplex,
)
from lgcexp.graph.eigenfunction import EigenfunctionBuilder, EigenfunctionGraph, eigenfunctions_1d
from lgcexp.tables import run_method_name


@pytest.fixture(scope="module")
def blobs():
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=6.0, size=(3, 4))
    y = np.repeat(np.arange(3), 80)
    X = centres[y] + rng.normal(size=(y.size, 4))
    return X, y


# -- anchor graph ---------------------------------------------------------------------------------------------

def test_project_simplex_against_brute_force():
    rng = np.random.default_rng(1)
    V = rng.normal(size=(50, 4))
    P = project_simplex(V)
    assert np.allclose(P.sum(1), 1) and (P >= 0).all()
    for v, p in zip(V, P):
        res = minimize(lambda z: ((z - v) ** 2).sum(), np.full(4, 0.25), method="SLSQP", bounds=[(0, None)] * 4,
                       constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1}], options={"ftol": 1e-12})
        assert np.allclose(p, res.x, atol=1e-5)


def test_lae_weights_are_the_simplex_constrained_least_squares_optimum(blobs):
    X, _ = blobs
    anchors = X[::20]
    _, idx = nearest_anchors(X, anchors, 3)
    Z = lae_weights(X, anchors, idx, n_iter=2000)
    for i in range(0, X.shape[0], 23):
        U = anchors[idx[i]]
        f = lambda z: ((X[i] - z @ U) ** 2).sum()  # noqa: E731
        res = minimize(f, np.full(3, 1 / 3), method="SLSQP", bounds=[(0, None)] * 3,
                       constraints=[{"type": "eq", "fun": lambda z: z.sum() - 1}], options={"ftol": 1e-14})
        assert f(Z[i]) <= res.fun + 1e-6


def test_kernel_weights_closed_form():
    d2 = np.array([[1.0, 4.0, 9.0], [0.0, 1.0, 1.0]])
    Z, h = kernel_weights(d2)
    assert h == pytest.approx(np.mean([3.0, 1.0]))
    K = np.exp(-d2 / h ** 2)
    assert np.allclose(Z, K / K.sum(1, keepdims=True))


@pytest.mark.parametrize("weights", ["lae", "kernel"])
def test_anchor_graph_is_z_lambda_inv_zt_and_lgc_matches_a_dense_solve(blobs, weights):
    X, y = blobs
    g, hit = AnchorGraphBuilder(n_anchors=24, s=3, weights=weights).build(X)
    assert not hit and isinstance(g, AnchorGraph)
    Zd = g.Z.toarray()
    W = Zd @ np.diag(1 / Zd.sum(0)) @ Zd.T
    assert np.allclose(g.W.toarray(), W)
    assert np.allclose(W.sum(1), 1) and np.allclose(g.degree, 1)  # degrees 1, so S = W
    labeled = np.arange(0, y.size, 12)
    m = LGC(alpha=0.9).fit(g, labeled, y[labeled], 3)
    Y = np.zeros((y.size, 3))
    Y[labeled, y[labeled]] = 1
    F = np.linalg.solve(np.eye(y.size) - 0.9 * W, Y)
    assert np.allclose(m.scores_, F, atol=1e-7)
    # Woodbury: (I - a Z L^-1 Z')^-1 = I + a Z (L - a Z'Z)^-1 Z' (the m x m form of Liu et al.)
    lam = Zd.sum(0)
    F2 = Y + 0.9 * Zd @ np.linalg.solve(np.diag(lam) - 0.9 * Zd.T @ Zd, Zd.T @ Y)
    assert np.allclose(F, F2)
    assert (m.predict() == y).mean() > 0.95


def test_anchor_graph_components_and_unreached():
    # two groups of points that share no anchor: two components
    Z = anchor_matrix(np.full((4, 1), 1.0), np.array([[0], [0], [1], [1]]), 2)
    g = AnchorGraph(Z, np.zeros((2, 1)), key="t")
    assert g.n_components() == 2 and g.n_edges == 4
    pred, n_unreached = mark_unreached(np.zeros(4, dtype=int), g, np.array([0]))
    assert n_unreached == 2 and list(pred) == [0, 0, -1, -1]


def test_anchor_builder_checks():
    with pytest.raises(UserError, match="graph.s=5 is not allowed"):
        AnchorGraphBuilder(n_anchors=4, s=5).build(np.zeros((10, 2)))
    with pytest.raises(UserError, match="n_anchors=40 is not allowed"):
        AnchorGraphBuilder(n_anchors=40).check_data(10, 2)


# -- Eigenfunction --------------------------------------------------------------------------------------------

def test_eigenfunctions_of_a_uniform_density_are_cosines():
    """For a uniform density on [0, 1] the weighted-Laplacian eigenfunctions are cos(k pi x) (closed form),
    with increasing eigenvalues."""
    x = np.random.default_rng(0).uniform(0, 1, 100_000)
    sig, F, g = eigenfunctions_1d(x, 50, 0.05, 3)
    assert np.all(np.diff(sig) > 0)
    for i in range(3):
        assert abs(np.corrcoef(F[:, i], np.cos((i + 1) * np.pi * g))[0, 1]) > 0.99


def test_eigenfunction_solve_is_the_least_squares_optimum(blobs):
    X, y = blobs
    g, _ = EigenfunctionBuilder(k=6, n_pca=4, n_bins=20).build(X)
    assert isinstance(g, EigenfunctionGraph) and g.U.shape == (y.size, 7)
    assert np.allclose(np.linalg.norm(g.U, axis=0), 1)
    labeled = np.arange(0, y.size, 10)
    lam = 50.0
    m = Eigenfunction(lam=lam).fit(g, labeled, y[labeled], 3)
    # min a' Sigma a + lam |U_L a - Y_L|^2 as one stacked least-squares problem
    Y = np.eye(3)[y[labeled]]
    A = np.vstack([np.diag(np.sqrt(g.eigvals)), np.sqrt(lam) * g.U[labeled]])
    B = np.vstack([np.zeros((g.U.shape[1], 3)), np.sqrt(lam) * Y])
    a = np.linalg.lstsq(A, B, rcond=None)[0]
    assert np.allclose(m.scores_, g.U @ a, atol=1e-8)


def test_eigenfunction_graph_keeps_the_eigenfunctions(blobs, tmp_path):
    """The graph stage's eigenfunction tables read U back exactly on the training points, and survive the
    cache (what the scikit-learn estimator reads new points with)."""
    from lgcexp.cache import Cache

    X, y = blobs
    builder = EigenfunctionBuilder(k=6, n_pca=4, n_bins=20)
    g, hit = builder.build(X, cache=Cache(tmp_path))
    assert not hit and np.array_equal(g.model.transform(X), g.U)
    g2, hit2 = builder.build(X, cache=Cache(tmp_path))
    assert hit2 and np.array_equal(g2.U, g.U) and np.array_equal(g2.model.transform(X), g.U)
    assert g2.model.n_train == y.size and g2.model.dims.size == 6


def test_eigenfunction_needs_its_graph(blobs):
    X, y = blobs
    g, _ = AnchorGraphBuilder(n_anchors=10).build(X)
    with pytest.raises(UserError, match="graph=eigenfunction"):
        Eigenfunction().fit(g, np.arange(3), np.arange(3), 3)


# -- table columns ----------------------------------------------------------------------------------------------

def test_rerun_columns_carry_the_papers_names():
    r = lambda algo, builder="knn", **params: {"algo": algo, "graph": {"builder": builder},  # noqa: E731
                                               "config": {"algo": {"params": params}}}
    assert run_method_name(r("lgc", "anchor")) == "LGC* (anchor graph)"
    assert run_method_name(r("lgc")) == "LGC"
    assert run_method_name(r("gfhf", cmn=False)) == "GFHF"
    assert run_method_name(r("gfhf", cmn=True)) == "GFHF + CMN"
    assert run_method_name(r("eigenfunction", "eigenfunction")) == "Eigenfunction*"
    assert run_method_name(r("gtf")) == "GTF"
    assert run_method_name(r("lssc", "anchor")) == "LSSC"


# -- GTF ---------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("solver,alpha,adaptive,order", [("cg", 1.0, False, 0), ("lu", 1.0, False, 0),
                                                     ("lu", 1.6, True, 0), ("cg", 1.6, True, 0),
                                                     ("lu", 1.6, True, 1)])
def test_gtf_admm_reaches_the_brute_force_optimum(solver, alpha, adaptive, order):
    import scipy.sparse as sp

    from lgcexp.algorithms.gtf import gtf_admm, incidence

    rng = np.random.default_rng(0)
    n = 12
    A = rng.uniform(size=(n, n)) * (rng.uniform(size=(n, n)) < 0.4)
    W = np.triu(A, 1)
    W = W + W.T
    D = incidence(sp.csr_matrix(W), order)
    Dd = D.toarray()
    if order == 0:
        assert np.allclose(np.abs(Dd).sum(), 2 * np.triu(W, 1).sum())  # ||D b||_1 = sum_{i<j} w_ij |b_i - b_j|
    else:  # the Laplacian of the squared weights, from the dense formula
        W2 = W ** 2
        assert np.allclose(Dd, np.diag(W2.sum(1)) - W2)
    lab = np.array([0, 2, 3, 5, 7, 9])
    y = rng.normal(size=(n, 1))
    lam = 0.3
    B, _ = gtf_admm(D, lab, y, lam, rho=5.0 if adaptive else 1.0, tol=1e-7, max_iter=20000, solver=solver,
                    alpha=alpha, adaptive=adaptive)
    f = lambda b: 0.5 * ((b[lab] - y[lab, 0]) ** 2).sum() + lam * np.abs(Dd @ b).sum()  # noqa: E731
    # the same problem as a smooth one with slack variables t >= |D b|, by SLSQP
    obj = lambda x: 0.5 * ((x[:n][lab] - y[lab, 0]) ** 2).sum() + lam * x[n:].sum()  # noqa: E731
    cons = [{"type": "ineq", "fun": lambda x: x[n:] - Dd @ x[:n]},
            {"type": "ineq", "fun": lambda x: x[n:] + Dd @ x[:n]}]
    res = minimize(obj, np.concatenate([np.zeros(n), np.ones(D.shape[0])]), method="SLSQP", constraints=cons,
                   options={"ftol": 1e-14, "maxiter": 2000})
    assert res.success
    assert f(B[:, 0]) == pytest.approx(res.fun, abs=1e-6)


def test_gtf_factor_solves_the_b_step_system():
    """The once-factored b-step matrix M + rho Delta'Delta solves like a dense solve (MMD ordering, symmetric mode)."""
    import scipy.sparse as sp

    from lgcexp.algorithms.gtf import _factor, incidence

    rng = np.random.default_rng(3)
    n = 40
    A = rng.uniform(size=(n, n)) * (rng.uniform(size=(n, n)) < 0.15)
    W = np.triu(A, 1)
    W = W + W.T
    for order in (0, 1):
        D = incidence(sp.csr_matrix(W), order)
        mask = (rng.uniform(size=n) < 0.3).astype(float)
        M = sp.diags(mask + 1e-10 * 0.7) + 0.7 * (D.T @ D)
        R = rng.normal(size=(n, 4))
        assert np.allclose(_factor(M)(R), np.linalg.solve(M.toarray(), R), atol=1e-8)


def test_gtf_classifies_and_refuses_an_anchor_graph(blobs):
    from lgcexp.algorithms.gtf import GTF
    from lgcexp.graph import build_graph

    X, y = blobs
    g, _ = build_graph(X, k=8, sigma="mean")
    labeled = np.arange(0, y.size, 8)
    m = GTF(lam=0.01).fit(g, labeled, y[labeled], 3)
    assert (m.predict() == y).mean() > 0.95
    ga, _ = AnchorGraphBuilder(n_anchors=10).build(X)
    with pytest.raises(UserError, match="algo=gtf needs a graph with an explicit W"):
        GTF().fit(ga, labeled, y[labeled], 3)


# -- LSSC --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sparse,alpha,adaptive,check_every", [(False, 1.0, False, 1), (True, 1.0, False, 1),
                                                              (True, 1.7, True, 10)])
def test_lssc_admm_reaches_the_brute_force_optimum(sparse, alpha, adaptive, check_every):
    import scipy.sparse as sps

    from lgcexp.algorithms.lssc import lssc_admm, reduced_laplacian

    rng = np.random.default_rng(2)
    n, m, l = 30, 5, 8
    Z = rng.uniform(size=(n, m)) * (rng.uniform(size=(n, m)) < 0.6) + 1e-3
    Z /= Z.sum(1, keepdims=True)
    lamd = Z.sum(0)
    Lr = reduced_laplacian(Z, lamd)
    W = Z @ np.diag(1 / lamd) @ Z.T
    assert np.allclose(Lr, Z.T @ (np.eye(n) - W) @ Z)  # the reduced Laplacian, against the dense product
    ZL = Z[:l]
    y = rng.normal(size=(l, 1))
    lam = 0.5
    A, _ = lssc_admm(sps.csr_matrix(ZL) if sparse else ZL, y, Lr, lam, rho=0.05 if adaptive else 1.0, tol=1e-10,
                     max_iter=200000, alpha=alpha, adaptive=adaptive, check_every=check_every)
    f = lambda a: np.abs(ZL @ a - y[:, 0]).sum() + lam * a @ Lr @ a  # noqa: E731
    obj = lambda x: x[m:].sum() + lam * x[:m] @ Lr @ x[:m]  # noqa: E731
    cons = [{"type": "ineq", "fun": lambda x: x[m:] - (ZL @ x[:m] - y[:, 0])},
            {"type": "ineq", "fun": lambda x: x[m:] + (ZL @ x[:m] - y[:, 0])}]
    res = minimize(obj, np.concatenate([np.zeros(m), np.abs(y[:, 0]) + 1]), method="SLSQP", constraints=cons,
                   options={"ftol": 1e-14, "maxiter": 5000})
    assert f(A[:, 0]) == pytest.approx(res.fun, abs=1e-5)


def test_lssc_classifies_on_an_anchor_graph(blobs):
    from lgcexp.algorithms.lssc import LSSC

    X, y = blobs
    g, _ = AnchorGraphBuilder(n_anchors=24).build(X)
    labeled = np.arange(0, y.size, 8)
    yl = y[labeled].copy()
    yl[:3] = (yl[:3] + 1) % 3  # three wrong labels
    m = LSSC(lam=1.0).fit(g, labeled, yl, 3)
    assert (m.predict() == y).mean() > 0.95
    with pytest.raises(UserError, match="graph=anchor"):
        LSSC().fit(EigenfunctionBuilder(k=3, n_pca=2).build(X)[0], labeled, yl, 3)

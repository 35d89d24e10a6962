"""SIIS (Gong et al. 2017; docs/fidelity.md#siis): ALM sub-steps against their closed forms, the whole solver
against an independent optimiser, toy behaviour, parameter checks and the config tables."""
import sys
from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph, two_clusters
from scipy.optimize import minimize

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.base import one_hot
from lgcexp.algorithms.siis import SIIS, SIISProblem, group_shrink, incidence_matrix
from lgcexp.errors import UserError
from lgcexp.graph import Graph


def dense_eig(graph, p=None):
    """Local stand-in for lgcexp.spectral: the p smallest eigenpairs of L = I - S by dense eigh."""
    L = np.eye(graph.n) - graph.S.toarray()
    vals, vecs = np.linalg.eigh(0.5 * (L + L.T))
    p = graph.n if p is None else p
    return SimpleNamespace(values=vals[:p], vectors=vecs[:, :p])


def knn_graph(X, k=6):
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    n = X.shape[0]
    A = np.zeros((n, n))
    nn = np.argsort(D, axis=1)[:, :k]
    for i in range(n):
        A[i, nn[i]] = np.exp(-D[i, nn[i]] ** 2 / 2.0)
    A = np.maximum(A, A.T)
    return Graph(W=sp.csr_matrix(A), sigma=1.0, key="clusters")


@pytest.fixture(scope="module")
def toy():
    """A 40-node graph, 14 labels (2 flipped), m = 6, c = 2."""
    g, X = random_graph(40, 4, seed=1)
    eig = dense_eig(g)
    y = (X[:, 0] > 0).astype(int)
    lab = np.arange(0, 40, 3)
    yl = y[lab].copy()
    yl[:2] = 1 - yl[:2]
    return g, eig, lab, yl


def make_problem(toy, m=6, lambda1=10.0, lambda2=1.0):
    g, eig, lab, yl = toy
    return SIISProblem(U=eig.vectors[:, :m], sigma=eig.values[:m], P=incidence_matrix(g.W), labeled=lab,
                       YL=one_hot(yl, 2), lambda1=lambda1, lambda2=lambda2)


# --- building blocks ---------------------------------------------------------------------------------------

def test_group_shrink_closed_form_and_prox_optimality():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(200, 5)) * rng.uniform(0.1, 3.0, size=(200, 1))
    tau = 1.3
    X = group_shrink(V, tau)
    norms = np.linalg.norm(V, axis=1)
    small = norms <= tau
    assert small.any() and (~small).any()
    assert np.all(X[small] == 0)
    # outside the ball: same direction, norm reduced by exactly tau
    assert np.allclose(np.linalg.norm(X[~small], axis=1), norms[~small] - tau)
    assert np.allclose(X[~small] / np.linalg.norm(X[~small], axis=1)[:, None], V[~small] / norms[~small, None])
    # it is the prox of tau ||.||_2: no perturbation does better on f(x) = tau ||x|| + 1/2 ||x - v||^2
    def f(x, v):
        return tau * np.linalg.norm(x, axis=-1) + 0.5 * ((x - v) ** 2).sum(-1)
    for _ in range(20):
        D = rng.normal(size=V.shape) * 1e-3
        assert np.all(f(X, V) <= f(X + D, V) + 1e-12)
    assert np.all(group_shrink(np.zeros((3, 4)), 0.5) == 0)


def test_incidence_matrix_rows_and_gram():
    g, _ = random_graph(30, 4, seed=2)
    P = incidence_matrix(g.W)
    W = g.W.tocoo()
    assert P.shape == (g.W.nnz, g.n)  # one row per stored entry: both (i, j) and (j, i)
    F = np.random.default_rng(1).normal(size=(g.n, 3))
    ref = W.data[:, None] * (F[W.row] - F[W.col])
    assert np.allclose(P @ F, ref)
    # P^T P = 2 x the graph Laplacian of the squared weights (each undirected edge counted twice)
    W2 = g.W.multiply(g.W).toarray()
    assert np.allclose((P.T @ P).toarray(), 2 * (np.diag(W2.sum(1)) - W2))


def test_q_and_r_updates_are_the_prox_steps(toy):
    prob = make_problem(toy)
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 2))
    F = prob.U @ A
    PF = prob.edge_diff(F)
    Lam1, Lam2, mu = rng.normal(size=PF.shape), rng.normal(size=prob.YL.shape), 2.5
    Q = prob.update_q(PF, Lam1, mu)
    R = prob.update_r(F[prob.labeled], Lam2, mu)
    assert np.allclose(Q, group_shrink(PF - Lam1 / mu, 1 / mu))
    assert np.allclose(R, group_shrink(F[prob.labeled] - prob.YL - Lam2 / mu, prob.lambda1 / mu))

    # each minimises its part of the augmented Lagrangian (rows separate)
    def lq(Qx):
        return np.linalg.norm(Qx, axis=1) + (Lam1 * (Qx - PF)).sum(1) + mu / 2 * ((Qx - PF) ** 2).sum(1)

    def lr(Rx):
        res = Rx - F[prob.labeled] + prob.YL
        return prob.lambda1 * np.linalg.norm(Rx, axis=1) + (Lam2 * res).sum(1) + mu / 2 * (res ** 2).sum(1)

    for _ in range(10):
        assert np.all(lq(Q) <= lq(Q + rng.normal(size=Q.shape) * 1e-3) + 1e-12)
        assert np.all(lr(R) <= lr(R + rng.normal(size=R.shape) * 1e-3) + 1e-12)


def test_a_update_is_the_least_squares_solution(toy):
    prob = make_problem(toy, lambda2=3.0)
    rng = np.random.default_rng(4)
    E, lab = prob.P.shape[0], prob.labeled
    Q, Lam1 = rng.normal(size=(E, 2)), rng.normal(size=(E, 2))
    R, Lam2 = rng.normal(size=(lab.size, 2)), rng.normal(size=(lab.size, 2))
    for mu in (0.7, 1.0, 55.0, 1e6):
        A = prob.update_a(Q, R, Lam1, Lam2, mu)
        # argmin_A lambda2 tr(A^T Sigma A) + <Lam1, Q - PUA> + <Lam2, R - JUA + Y>
        #          + mu/2 (||Q - PUA||^2 + ||R - JUA + Y||^2)
        # = a stacked least-squares problem
        PU = (prob.P @ prob.U)
        M = np.vstack([np.sqrt(mu) * PU, np.sqrt(mu) * prob.UL, np.diag(np.sqrt(2 * prob.lambda2 * prob.sigma))])
        B = np.vstack([np.sqrt(mu) * (Q + Lam1 / mu), np.sqrt(mu) * (R + prob.YL + Lam2 / mu), np.zeros((6, 2))])
        ref = np.linalg.lstsq(M, B, rcond=None)[0]
        assert np.allclose(A, ref, rtol=1e-7, atol=1e-9 * np.abs(ref).max())
        # and the simultaneous diagonalisation solves the m x m system
        rhs = rng.normal(size=(6, 2))
        assert np.allclose(prob.solve_system(rhs, mu), np.linalg.solve(prob.system_matrix(mu), rhs))


def test_singular_system_falls_back_to_least_squares():
    """An unlabelled second component that is a regular graph (a cycle): its trivial eigenvector is constant,
    so P U a = J U a = 0 and Sigma a = 0 for some a; G and the system matrix are singular."""
    g1, _ = random_graph(12, 3, seed=5)
    cycle = sp.diags([np.ones(7), np.ones(7)], [1, -1], shape=(8, 8)).tolil()
    cycle[0, 7] = cycle[7, 0] = 1.0
    W = sp.block_diag([g1.W, cycle]).tocsr()
    g = Graph(W=W, sigma=1.0, key="two")
    eig = dense_eig(g, 4)
    prob = SIISProblem(U=eig.vectors, sigma=eig.values, P=incidence_matrix(g.W), labeled=np.array([0, 3, 6]),
                       YL=one_hot(np.array([0, 1, 0]), 2), lambda1=10.0, lambda2=1.0)
    assert prob.T is None  # no simultaneous diagonalisation
    rhs = prob.system_matrix(2.0) @ np.ones((4, 2))
    A = prob.solve_system(rhs, 2.0)
    assert np.allclose(prob.system_matrix(2.0) @ A, rhs)
    res = prob.solve(max_iter=200)
    assert np.all(np.isfinite(res.F)) and res.converged
    assert np.allclose(res.F[12:], 0.0, atol=1e-8)  # the unlabelled component gets no scores


# --- the whole solver --------------------------------------------------------------------------------------

def reference_optimum(prob, m, c):
    """An independent optimiser: L-BFGS on the objective with each norm smoothed, sqrt(||v||^2 + 1e-12).

    The smoothing moves the minimiser's objective by about 1e-7 relative on these problems.
    """
    from threadpoolctl import threadpool_limits

    PU = prob.P @ prob.U
    eps2 = 1e-12

    def fg(x):
        A = x.reshape(m, c)
        E, R = PU @ A, prob.UL @ A - prob.YL
        ne, nr = np.sqrt((E ** 2).sum(1) + eps2), np.sqrt((R ** 2).sum(1) + eps2)
        val = ne.sum() + prob.lambda1 * nr.sum() + prob.lambda2 * (prob.sigma[:, None] * A * A).sum()
        grad = (PU.T @ (E / ne[:, None]) + prob.lambda1 * prob.UL.T @ (R / nr[:, None])
                + 2 * prob.lambda2 * prob.sigma[:, None] * A)
        return val, grad.ravel()

    with threadpool_limits(1):  # tiny products: threads only add overhead
        r = minimize(fg, np.zeros(m * c), jac=True, method="L-BFGS-B",
                     options=dict(maxiter=5000, ftol=1e-15, gtol=1e-11))
    return prob.objective(r.x.reshape(m, c))


def textbook_alm(prob, mu=1.0, rho=1.2, mu_max=1e7, tol=1e-4, max_iter=1000, init=1.0):
    """The update sequence of docs/fidelity.md#siis, written plainly with dense PU."""
    PU = prob.P @ prob.U
    JU, Y = prob.UL, prob.YL
    m, c = prob.U.shape[1], Y.shape[1]
    S2 = 2 * prob.lambda2 * np.diag(prob.sigma)
    L1, L2 = np.full((PU.shape[0], c), init), np.full(Y.shape, init)
    A = np.zeros((m, c))
    for it in range(1, max_iter + 1):
        Q = group_shrink(PU @ A - L1 / mu, 1 / mu)
        R = group_shrink(JU @ A - Y - L2 / mu, prob.lambda1 / mu)
        A_prev = A
        A = np.linalg.solve(S2 + mu * PU.T @ PU + mu * JU.T @ JU,
                            PU.T @ L1 + JU.T @ L2 + mu * PU.T @ Q + mu * JU.T @ (R + Y))
        L1 = L1 + mu * (Q - PU @ A)
        L2 = L2 + mu * (R - JU @ A + Y)
        mu = min(rho * mu, mu_max)
        if np.abs(A_prev).max() > 0 and np.abs(A - A_prev).max() / np.abs(A_prev).max() <= tol:
            break
    return A, it


@pytest.mark.parametrize("init", ["ones", "zeros"])
def test_in_place_loop_equals_the_textbook_updates(toy, init):
    prob = make_problem(toy, lambda1=100.0, lambda2=10.0)
    res = prob.solve(multiplier_init=init)
    A_ref, it_ref = textbook_alm(prob, init=1.0 if init == "ones" else 0.0)
    assert res.converged and res.iterations == it_ref
    assert np.allclose(res.A, A_ref, rtol=1e-6, atol=1e-9 * np.abs(A_ref).max())


@pytest.mark.parametrize("init", ["ones", "zeros"])
@pytest.mark.parametrize("rho,mu_max", [(1.2, 1e7), (1.5, 20.0)])  # the second reaches mu_max (no rescaling)
def test_fused_edge_pass_equals_the_numpy_loop_and_the_textbook(toy, init, rho, mu_max):
    """The numba pass (lgcexp.solvers.fused.siis_edge_pass) against the numpy loop and the plain textbook updates:
    the same iteration count, coefficients, objective trace and final penalty to round-off."""
    pytest.importorskip("numba")
    prob = make_problem(toy, lambda1=100.0, lambda2=10.0)
    kw = dict(multiplier_init=init, rho=rho, mu_max=mu_max)
    ref = prob.solve(fused=False, **kw)
    res = prob.solve(fused=True, **kw)
    A_book, it_book = textbook_alm(prob, rho=rho, mu_max=mu_max, init=1.0 if init == "ones" else 0.0)
    assert res.iterations == ref.iterations == it_book and res.converged == ref.converged and res.mu == ref.mu
    scale = np.abs(ref.A).max()
    assert np.abs(res.A - ref.A).max() <= 1e-12 * scale
    assert np.allclose(res.A, A_book, rtol=1e-6, atol=1e-9 * scale)
    assert np.allclose(res.F, ref.F, rtol=0, atol=1e-12 * np.abs(ref.F).max())
    assert res.objective.shape == ref.objective.shape
    assert np.allclose(res.objective, ref.objective, rtol=1e-12)
    seen = []
    prob.solve(fused=True, max_iter=3, callback=lambda it, obj: seen.append((it, obj)), **kw)
    assert [it for it, _ in seen] == [1, 2, 3]
    assert np.allclose([o for _, o in seen], ref.objective[1:4], rtol=1e-12)


def test_fused_edge_pass_by_problem_size(monkeypatch):
    """numba's pass from FUSED_MIN_EDGE_ENTRIES (edges x classes) on, unless LGCEXP_FUSED=0."""
    pytest.importorskip("numba")
    from lgcexp.algorithms import siis

    monkeypatch.delenv("LGCEXP_FUSED", raising=False)
    assert not siis.fused_edges(siis.FUSED_MIN_EDGE_ENTRIES - 1)
    assert siis.fused_edges(siis.FUSED_MIN_EDGE_ENTRIES)
    monkeypatch.setenv("LGCEXP_FUSED", "0")
    assert not siis.fused_edges(siis.FUSED_MIN_EDGE_ENTRIES)
    monkeypatch.delenv("LGCEXP_FUSED")
    import lgcexp.solvers

    monkeypatch.setitem(sys.modules, "lgcexp.solvers.fused", None)  # numba not importable: numpy
    monkeypatch.delattr(lgcexp.solvers, "fused", raising=False)
    assert not siis.fused_edges(siis.FUSED_MIN_EDGE_ENTRIES)


def test_edge_arrays_and_a_p_that_is_no_incidence_matrix(toy):
    """edge_arrays reads the two entries of each row; a P with other rows is solved by the numpy loop."""
    from lgcexp.algorithms.siis import edge_arrays

    g = toy[0]
    P = incidence_matrix(g.W)
    head, tail, wh, wt = edge_arrays(P)
    D = np.zeros(P.shape)
    D[np.arange(head.size), head] += wh
    D[np.arange(tail.size), tail] += wt
    assert np.array_equal(D, P.toarray())
    assert np.all(wh == -wt) and np.all(head != tail)
    odd = sp.vstack([P, sp.csr_matrix(([1.0], ([0], [0])), shape=(1, P.shape[1]))]).tocsr()
    assert edge_arrays(odd) is None
    prob = make_problem(toy, lambda1=100.0, lambda2=10.0)
    prob.P = odd
    prob.PT = odd.T
    assert np.array_equal(prob.solve(fused=True).A, prob.solve(fused=False).A)


def test_fused_edge_pass_stops_on_divergence(toy):
    """A non-finite coefficient stops both loops at the same iteration with FloatingPointError."""
    pytest.importorskip("numba")
    prob = make_problem(toy, lambda1=100.0, lambda2=10.0)
    prob.T = prob.T * np.nan  # every A update becomes NaN
    for fused in (False, True):
        with pytest.raises(FloatingPointError, match="iteration 1 "):
            prob.solve(fused=fused)


@pytest.mark.parametrize("lambda1,lambda2", [(10.0, 1.0), (100.0, 10.0)])
def test_fixed_penalty_admm_reaches_the_optimum(toy, lambda1, lambda2):
    """With mu held fixed the iteration is plain ADMM, which converges to the minimiser of the objective."""
    prob = make_problem(toy, lambda1=lambda1, lambda2=lambda2)
    ref = reference_optimum(prob, 6, 2)
    res = prob.solve(mu=100.0, rho=1.0 + 1e-12, mu_max=100.0, tol=1e-12, max_iter=5000, multiplier_init="zeros")
    assert res.objective[-1] == pytest.approx(ref, rel=1e-5)
    assert res.objective[-1] <= ref + 1e-9  # the smoothed optimiser can only be above the true minimum


def test_authors_alm_objective_decreases(toy):
    """The authors' schedule (mu *= 1.2 up to 1e7, multipliers at ones) on the toy graph."""
    g, eig, lab, yl = toy
    algo = SIIS(m=6, lambda1=10.0, lambda2=1.0).fit(g, lab, yl, 2, eig=eig)
    obj = algo.objective_
    assert algo.info_["solver_converged"]
    assert obj.size == algo.info_["solver_iterations"] + 1 and algo.info_["siis_objective"] == obj[-1]
    assert obj[-1] < 0.6 * obj[0]  # A_0 = 0 costs lambda1 * (number of labels)
    # after the first few (infeasible) iterates, the objective goes down: every later value is below the
    # one at iteration 5, and the last is within 0.1 % of the best reached
    assert np.all(obj[6:] < obj[5])
    assert obj[-1] <= obj.min() * 1.001
    # ... and ends within 0.1 % of the true minimum
    ref = reference_optimum(make_problem(toy), 6, 2)
    assert ref * (1 - 1e-5) <= obj[-1] <= ref * 1.001


def test_two_clusters_without_noise():
    X, y = two_clusters(n_per=30, seed=0)
    g = knn_graph(X)
    lab = np.array([0, 5, 12, 31, 40, 50])
    algo = SIIS(m=4, lambda1=1e5, lambda2=10.0).fit(g, lab, y[lab], 2, eig=dense_eig(g))
    assert np.array_equal(algo.predict(), y)
    assert np.array_equal(algo.labeled_pred_, y[lab])
    assert not algo.dropped_.any()


def test_two_clusters_corrects_a_flipped_label():
    X, y = two_clusters(n_per=30, seed=1)
    g = knn_graph(X)
    lab = np.array([0, 5, 12, 20, 31, 40, 50, 55])
    yl = y[lab].copy()
    yl[1] = 1  # a noisy label in cluster 0
    algo = SIIS(m=4, lambda1=10.0, lambda2=10.0).fit(g, lab, yl, 2, eig=dense_eig(g))
    assert np.array_equal(algo.predict(), y)
    assert np.array_equal(algo.labeled_pred_, y[lab])  # corrected back to the clean label
    assert np.array_equal(algo.dropped_, yl != y[lab])
    assert algo.suspicion_.argmax() == 1 and algo.suspicion_[1] > 0 and np.all(np.delete(algo.suspicion_, 1) < 0)
    assert algo.label_info_["siis_corrected"].tolist() == (yl != y[lab]).astype(int).tolist()


def test_eigenpairs_head_and_trivial_vector(toy):
    g, eig, lab, yl = toy
    a = SIIS(m=6, lambda1=10.0, lambda2=1.0)
    b = SIIS(m=6, lambda1=10.0, lambda2=1.0).fit(g, lab, yl, 2, eig=dense_eig(g, 6))
    a.fit(g, lab, yl, 2, eig=eig)  # all 40 pairs given: only the first 6 are used
    assert np.allclose(a.scores_, b.scores_)
    d = SIIS(m=6, drop_trivial=True)
    assert d.required_eigenpairs() == 7
    d.fit(g, lab, yl, 2, eig=eig)
    ref = SIISProblem(U=eig.vectors[:, 1:7], sigma=eig.values[1:7], P=incidence_matrix(g.W), labeled=lab,
                      YL=one_hot(yl, 2), lambda1=100.0, lambda2=10.0).solve()
    assert np.allclose(d.scores_, ref.F)
    with pytest.raises(ValueError, match="needs 7 eigenpairs"):
        SIIS(m=6, drop_trivial=True).fit(g, lab, yl, 2, eig=dense_eig(g, 6))


def test_normalize_weights_scales_the_edge_term(toy):
    """Dividing W by a constant k equals scaling the edge term by 1/k, i.e. lambda1 and lambda2 by k."""
    g, eig, lab, yl = toy
    k = float(g.W.data.mean())
    a = SIIS(m=6, lambda1=10.0, lambda2=1.0, normalize_weights=True, tol=1e-9,
             max_iter=3000).fit(g, lab, yl, 2, eig=eig)
    prob = make_problem(toy, lambda1=10.0 * k, lambda2=1.0 * k)
    assert prob.objective(a.coef_) / k == pytest.approx(a.objective_[-1], rel=1e-9)


# --- parameters, config ------------------------------------------------------------------------------------

@pytest.mark.parametrize("params,needle", [
    ({"m": 0}, "algo.params.m=0"),
    ({"m": 2.5}, "algo.params.m=2.5"),
    ({"lambda1": 0}, "algo.params.lambda1=0"),
    ({"lambda1": -1.0}, "algo.params.lambda1=-1.0"),
    ({"lambda2": 0.0}, "algo.params.lambda2=0.0"),
    ({"rho": 1.0}, "algo.params.rho=1.0"),
    ({"rho": 0.5}, "algo.params.rho=0.5"),
    ({"mu": 0}, "algo.params.mu=0"),
    ({"mu_max": 0.5}, "algo.params.mu_max=0.5"),
    ({"tol": 0}, "algo.params.tol=0"),
    ({"max_iter": 0}, "algo.params.max_iter=0"),
    ({"multiplier_init": "rand"}, "algo.params.multiplier_init=rand"),
    ({"drop_trivial": "yes"}, "algo.params.drop_trivial=yes"),
    ({"lambda1": "auto"}, "algo.params.lambda1=auto"),
])
def test_bad_params_are_user_errors(params, needle):
    with pytest.raises(UserError, match=needle.replace(".", r"\.").replace("(", r"\(")):
        make_algorithm("siis", params)


def test_m_checked_against_the_data(toy):
    g, eig, lab, yl = toy
    with pytest.raises(UserError, match="algo.params.m=40 .*number of points"):
        SIIS(m=40).fit(g, lab, yl, 2, eig=eig)
    with pytest.raises(UserError, match="algo.params.m=2 .*number of classes"):
        SIIS(m=2).fit(g, lab, yl, 3, eig=eig)
    with pytest.raises(UserError, match="algo.params.alpha is not a parameter of algo=siis"):
        make_algorithm("siis", {"alpha": 0.9})


def test_config_tables():
    from helpers import make_cfg

    from lgcexp.config import to_container

    def params(*ov):
        return to_container(make_cfg("algo=siis", *ov))["algo"]["params"]

    assert params("dataset=isolet", "noise.rate=0")["lambda1"] == 1e5
    assert params("dataset=isolet", "noise.rate=0.0")["lambda1"] == 1e5
    for rate in ("0.2", "0.4", "0.6", "0.3"):
        assert params("dataset=isolet", f"noise.rate={rate}")["lambda1"] == 100.0
    p = params("dataset=isolet", "noise.rate=0.4")
    assert p["m"] == 300 and p["lambda2"] == 10.0
    assert params("dataset=digits")["m"] == 30
    p = params("dataset=isolet", "noise.rate=0", "algo.params.lambda1=1000", "algo.params.m=50")
    assert p["lambda1"] == 1000 and p["m"] == 50
    algo = make_algorithm("siis", params("dataset=isolet", "noise.rate=0.6"))
    assert isinstance(algo, SIIS) and algo.required_eigenpairs() == 300 and algo.lambda1 == 100.0


def test_pipeline_run_on_digits(tmp_path):
    import pandas as pd
    from helpers import make_cfg

    from lgcexp.pipeline import run

    r = run(make_cfg("algo=siis", "noise.rate=0.2", tmp=tmp_path), out_dir=tmp_path / "run")
    assert r["algo"] == "siis" and r["eig"]["p"] == 30 and r["siis_m"] == 30
    assert r["acc_unlabeled"] > 0.8 and r["solver_converged"]
    assert "detect_f1" in r  # corrected labels scored against the flipped ones
    labels = pd.read_csv(tmp_path / "run" / "labels.csv")
    assert {"siis_residual", "siis_corrected"} <= set(labels.columns)

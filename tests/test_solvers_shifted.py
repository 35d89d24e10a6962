"""lgcexp.solvers.shifted and the CG loop (lgcexp.solvers.cg): the reverse Cuthill-McKee renumbered solves and the
argmax certificate of the LGC solve, against dense linear algebra."""
import numpy as np
import pytest
from conftest import random_graph

from lgcexp.solvers.cg import cg
from lgcexp.solvers.shifted import ArgmaxCertificate, rcm_reordered, shifted_operator, shifted_solve


def _dense_solution(g, Y, alpha):
    return np.linalg.solve(np.eye(g.n) - alpha * g.S.toarray(), Y)


def test_rcm_reordered_is_a_symmetric_permutation_cached_per_matrix():
    g, _ = random_graph(60, 5, seed=0)
    Sp, perm = rcm_reordered(g.S)
    assert np.array_equal(np.sort(perm), np.arange(g.n))
    assert np.array_equal(Sp.toarray(), g.S.toarray()[np.ix_(perm, perm)])
    assert rcm_reordered(g.S)[0] is Sp                              # computed once per matrix object
    S32, perm32 = rcm_reordered(g.S, np.float32)
    assert S32.dtype == np.float32 and perm32 is perm
    # the bandwidth goes down (that is the point of the renumbering)
    bw = lambda M: int(np.abs(M.tocoo().row - M.tocoo().col).max())  # noqa: E731
    assert bw(Sp) <= bw(g.S)


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("dtype,atol", [(np.float64, 1e-9), (np.float32, 2e-4)])
def test_permuted_solve_equals_the_dense_solve(seed, dtype, atol):
    g, _ = random_graph(70, 4, seed=seed)
    rng = np.random.default_rng(seed)
    Y = rng.random((g.n, 3)).astype(dtype)
    ref = _dense_solution(g, Y.astype(np.float64), 0.9)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    X, _, _ = shifted_solve(g.S, Y, 0.9, tol=tol, reorder=True)
    X0, _, _ = shifted_solve(g.S, Y, 0.9, tol=tol, reorder=False)
    assert X.dtype == dtype
    np.testing.assert_allclose(X, ref, atol=atol * np.abs(ref).max())
    np.testing.assert_allclose(X, X0, atol=atol * np.abs(ref).max())


@pytest.mark.parametrize("seed", range(6))
def test_certificate_bound_holds_for_any_approximate_solution(seed):
    """|X* - X| <= the certificate's per-row bound, for arbitrary X (not only CG iterates)."""
    g, _ = random_graph(50, 4, seed=seed)
    rng = np.random.default_rng(seed)
    alpha = [0.5, 0.9, 0.99][seed % 3]
    Y = np.zeros((g.n, 3))
    Y[rng.choice(g.n, 9, replace=False), rng.integers(0, 3, 9)] = 1
    ref = _dense_solution(g, Y, alpha)
    cert = ArgmaxCertificate(g.degree, alpha, g.S, Y)
    for scale in (1e-1, 1e-4, 1e-8):
        X = ref + scale * rng.normal(size=ref.shape)
        R = Y - shifted_operator(g.S, alpha)(X)
        assert np.all(np.abs(ref - X).max(axis=1) <= cert.bound(X, R))


def _near_tie_problem(seed, delta):
    """LGC scores with a planted near-tie: row ``i``'s top two classes differ by ``delta`` (relative)."""
    g, _ = random_graph(60, 4, seed=seed)
    rng = np.random.default_rng(seed)
    Y = np.zeros((g.n, 3))
    lab = rng.choice(g.n, 12, replace=False)
    Y[lab, np.arange(12) % 3] = 1
    F = _dense_solution(g, Y, 0.9)
    i = int(rng.choice(np.setdiff1d(np.arange(g.n), lab)))
    a, b = np.argsort(F[i])[-2:][::-1]                  # scale class b's labels so that F[i, b] ~ F[i, a]
    Y[:, b] *= F[i, a] / F[i, b] * (1 - delta)
    return g, Y, i


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("delta", [1e-2, 1e-5, 1e-8, 1e-11, 0.0])
def test_argmax_stop_gives_the_dense_argmax_including_near_ties(seed, delta):
    g, Y, i = _near_tie_problem(seed, delta)
    ref = _dense_solution(g, Y, 0.9)
    X, it, rel = shifted_solve(g.S, Y, 0.9, tol=1e-13, degree=g.degree, reorder=True)
    full, it_full, _ = shifted_solve(g.S, Y, 0.9, tol=1e-13, reorder=True)
    assert it <= it_full
    s = np.sort(ref, axis=1)
    decided = s[:, -1] - s[:, -2] > 1e-13 * np.abs(ref).max()   # rows the dense solve itself can decide
    assert np.array_equal(X.argmax(1)[decided], ref.argmax(1)[decided])
    if delta >= 1e-5:  # a clear argmax everywhere: certified well before the tolerance
        assert it < it_full


def test_cg_certify_hook_checks_the_true_residual():
    """The hook is asked with the recursive residual, then with B - A X, and only the latter stops CG."""
    rng = np.random.default_rng(0)
    M = rng.normal(size=(20, 20))
    A = M @ M.T + 20 * np.eye(20)
    B = rng.normal(size=(20, 2))
    seen = []

    def certify(X, R):
        seen.append((X.copy(), R.copy()))
        return True

    X, it, rel = cg(lambda V: A @ V, B, tol=1e-14, certify=certify, certify_below=1.0)
    assert len(seen) == 2 and it == 1                        # asked twice at the first iteration, then stopped
    assert np.array_equal(seen[1][1], B - A @ X)              # the second time with the true residual
    # a hook that refuses never stops it early
    X2, it2, _ = cg(lambda V: A @ V, B, tol=1e-14, certify=lambda X, R: False)
    assert it2 == cg(lambda V: A @ V, B, tol=1e-14)[1]


@pytest.mark.parametrize("seed", range(3))
def test_the_entry_strategies_and_multi_shift_agree_with_dense_solves(seed):
    """shifted_solve's block and fused strategies and its multi-shift form (several alphas, the labelled rows
    selected) against ``(I - alpha S)^-1 B`` from a dense solve, per alpha."""
    pytest.importorskip("numba")
    g, _ = random_graph(150, 5, seed=seed)
    S, _ = rcm_reordered(g.S)
    B = np.random.default_rng(seed).random((g.n, 4))
    rows = np.arange(0, g.n, 9)
    alphas = [0.5, 0.9, 0.99]
    for strategy in ("block", "fused"):
        Xs, it, rel = shifted_solve(S, B, alphas, tol=1e-12, strategy=strategy, select=lambda M: M[rows], rows=rows)
        assert rel <= 1e-12 and len(Xs) == 3
        for a, X in zip(alphas, Xs):
            ref = _dense_solution(type("G", (), {"n": g.n, "S": S})(), B, a)
            np.testing.assert_allclose(X, ref[rows], atol=1e-9 * np.abs(ref).max())
            one, _, _ = shifted_solve(S, B, a, tol=1e-12, strategy=strategy)
            np.testing.assert_allclose(one, ref, atol=1e-9 * np.abs(ref).max())


def test_the_entry_refuses_an_unknown_strategy_and_a_multi_shift_without_select():
    g, _ = random_graph(40, 4)
    with pytest.raises(ValueError, match="strategy='lu'"):
        shifted_solve(g.S, np.ones((g.n, 1)), 0.9, strategy="lu")
    with pytest.raises(ValueError, match="needs select"):
        shifted_solve(g.S, np.ones((g.n, 1)), [0.5, 0.9])


def test_preconditioned_residual_is_that_of_the_jacobi_scaled_system():
    """``residual="preconditioned"`` stops on ``||D^-1/2 r|| / ||D^-1/2 b||`` (the residual of the system scaled
    to a unit diagonal), ``"plain"`` on ``||r|| / ||b||``: each reported residual recomputed here from the
    returned X, on a grounded Laplace-type system whose rows differ by 1e4 in weight."""
    import scipy.sparse as sp

    g, _ = random_graph(200, 5, seed=11)
    w = np.ones(g.n)
    w[:20] = 1e4                                        # heavy nodes, as next to the labels
    W = sp.csr_matrix(sp.diags(w) @ g.W + g.W @ sp.diags(w))
    d = np.asarray(W.sum(axis=1)).ravel() + 1.0        # a grounded Laplacian: SPD
    A = (sp.diags(d) - W).tocsr()
    b = np.random.default_rng(0).random((g.n, 2)) * np.sqrt(d)[:, None]
    scaled = {"plain": np.ones(g.n), "preconditioned": 1.0 / np.sqrt(d)}
    for residual, s in scaled.items():
        X, it, rel = cg(lambda V: A @ V, b, tol=1e-8, precond=1.0 / d, residual=residual, maxiter=100_000)
        r = b - A @ X
        got = (np.linalg.norm(s[:, None] * r, axis=0) / np.linalg.norm(s[:, None] * b, axis=0)).max()
        assert rel <= 1e-8 and got == pytest.approx(rel, rel=1e-3, abs=1e-12)
    with pytest.raises(ValueError, match="needs precond"):
        cg(lambda V: A @ V, b, residual="preconditioned")

"""Eigendecomposition stage: every solver against dense LAPACK, the recorded checks, caching and bad input."""
import json

import numpy as np
import pytest
from conftest import random_graph
from threadpoolctl import threadpool_limits

import lgcexp.spectral as spectral
from lgcexp.cache import Cache
from lgcexp.errors import UserError
from lgcexp.spectral import Eigenpairs, laplacian_eigenpairs, solve_eigenpairs


@pytest.fixture(autouse=True, scope="module")
def _single_blas_thread():
    """Small dense problems: one BLAS thread (busy-waiting threads on a shared 2-core machine cost 50x)."""
    with threadpool_limits(1):
        yield


@pytest.fixture(scope="module")
def graph():
    return random_graph(400, 6, seed=5)[0]


@pytest.fixture(scope="module")
def reference(graph):
    L = np.eye(graph.n) - graph.S.toarray()
    lam, U = np.linalg.eigh(L)
    return lam, U


@pytest.mark.parametrize("solver", ["dense", "lanczos", "chebyshev", "shift-invert", "lobpcg"])
def test_solvers_match_dense_eigh(graph, reference, solver):
    p = 12
    lam, U = reference
    eig = solve_eigenpairs(graph, p, solver=solver, tol=1e-10)
    assert eig.p == p and eig.vectors.shape == (graph.n, p) and eig.solver == solver
    assert np.all(np.diff(eig.values) >= 0)
    assert np.allclose(eig.values, lam[:p], atol=1e-8)
    # same eigenvectors up to sign (the spectrum of this graph has no repeated eigenvalue among the first p)
    assert np.allclose(np.abs(eig.vectors.T @ U[:, :p]), np.eye(p), atol=1e-6)
    assert eig.residual < 1e-6 and eig.orth_error < 1e-10
    # the recorded residual is max_k ||L u_k - lambda_k u_k||
    L = np.eye(graph.n) - graph.S.toarray()
    R = L @ eig.vectors - eig.vectors * eig.values
    assert eig.residual == pytest.approx(np.linalg.norm(R, axis=0).max(), rel=1e-6, abs=1e-14)
    # trivial eigenvector kept: lambda_0 = 0, u_0 proportional to sqrt(degree), sign fixed positive
    assert abs(eig.values[0]) < 1e-10
    d = np.sqrt(graph.degree) / np.linalg.norm(np.sqrt(graph.degree))
    assert np.allclose(eig.vectors[:, 0], d, atol=1e-7)


@pytest.mark.parametrize("solver", ["shift-invert", "chebyshev", "lanczos"])
def test_many_pairs_reaching_into_the_bulk(graph, reference, solver):
    """p = 60 here has lambda_p = 0.58: the authors' Cayley shift-invert (sigma = -0.75) would return pairs from
    the top of the spectrum; every solver must return the 60 smallest."""
    lam, _ = reference
    eig = solve_eigenpairs(graph, 60, solver=solver, tol=1e-10)
    assert np.allclose(eig.values, lam[:60], atol=1e-8) and eig.residual < 1e-6


def test_auto_solver_choice(graph):
    assert spectral.resolve_solver("auto", 400, 30) == "dense"
    assert spectral.resolve_solver("auto", 400, 5) == "chebyshev"
    assert spectral.resolve_solver("auto", 70000, 300) == "chebyshev"
    assert spectral.resolve_solver("shift-invert", 400, 30) == "shift-invert"


def test_head_and_summary(graph):
    eig = solve_eigenpairs(graph, 10, solver="dense")
    h = eig.head(4)
    assert h.p == 4 and np.array_equal(h.values, eig.values[:4]) and np.array_equal(h.vectors, eig.vectors[:, :4])
    assert h.residual == pytest.approx(eig.pair_residuals[:4].max())
    s = eig.summary()
    json.dumps(s)
    assert s["p"] == 10 and s["solver"] == "dense" and s["lambda_min"] == pytest.approx(eig.values[0])
    assert {"residual", "seconds", "lambda_max", "orth_error"} <= set(s)
    with pytest.raises(ValueError):
        eig.head(11)
    # constructible from the three documented fields alone
    e3 = Eigenpairs(eig.values, eig.vectors, eig.residual)
    assert e3.head(3).p == 3 and e3.head(3).residual == eig.residual


def test_cache_reuse_and_head_of_larger_entry(graph, tmp_path, monkeypatch):
    cache = Cache(tmp_path)
    calls = []
    real = spectral.solve_eigenpairs

    def counting(*a, **k):
        calls.append(a[1])
        return real(*a, **k)

    monkeypatch.setattr(spectral, "solve_eigenpairs", counting)
    e1, hit1 = laplacian_eigenpairs(graph, 15, cache=cache, solver="lanczos", tol=1e-8)
    assert not hit1 and calls == [15]
    assert (tmp_path / f"eig-{graph.key}-p15.npz").exists()
    e2, hit2 = laplacian_eigenpairs(graph, 15, cache=cache, solver="lanczos", tol=1e-8)
    assert hit2 and calls == [15]  # no second solve
    assert np.array_equal(e2.values, e1.values) and np.array_equal(e2.vectors, e1.vectors)
    assert e2.solver == "lanczos" and e2.residual == pytest.approx(e1.residual)
    # fewer pairs, another solver, a looser tolerance: the head of the cached entry
    e3, hit3 = laplacian_eigenpairs(graph, 6, cache=cache, solver="dense", tol=1e-6)
    assert hit3 and calls == [15] and np.array_equal(e3.values, e1.values[:6])
    # more pairs than cached, or a stricter tolerance: solved (and stored)
    _, hit4 = laplacian_eigenpairs(graph, 20, cache=cache, tol=1e-8)
    assert not hit4 and calls == [15, 20]
    _, hit5 = laplacian_eigenpairs(graph, 15, cache=cache, tol=1e-12)
    assert not hit5 and calls == [15, 20, 15]
    # a different graph never shares entries
    other = random_graph(400, 6, seed=6)[0]
    _, hit6 = laplacian_eigenpairs(other, 6, cache=cache)
    assert not hit6 and calls[-1] == 6
    # no cache directory: always solved, never a hit
    _, hit7 = laplacian_eigenpairs(graph, 6, cache=Cache(None))
    assert not hit7


@pytest.mark.parametrize(
    "p, kw, needle",
    [
        (400, {}, r"eig\.p=400 .*number of points \(400\)"),
        (500, {}, r"eig\.p=500"),
        (0, {}, r"eig\.p=0 .*integer >= 1"),
        (5, {"solver": "arpack"}, r"eig\.solver=arpack .*lanczos"),
        (5, {"tol": 0}, r"eig\.tol=0"),
    ],
)
def test_bad_input_refused_before_work(graph, p, kw, needle, monkeypatch, tmp_path):
    monkeypatch.setattr(spectral, "solve_eigenpairs", lambda *a, **k: pytest.fail("no solve on bad input"))
    with pytest.raises(UserError, match=needle):
        laplacian_eigenpairs(graph, p, cache=Cache(tmp_path), **kw)


def test_kpm_count_estimate(graph, reference):
    mu = 1.0 - reference[0]
    cuts = np.array([mu[20], mu[60]])
    est = spectral._kpm_count_above(graph.S, cuts, degree=200, n_vectors=16)
    assert np.allclose(est, [21, 61], atol=6)

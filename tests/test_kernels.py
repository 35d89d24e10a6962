"""lgcexp.kernels and lgcexp.linalg.fused_shifted_cg: the fused multi-threaded CG on (I - alpha S) X = B
against scipy's product, block_cg and dense solves."""
import numpy as np
import pytest

pytest.importorskip("numba")

from conftest import random_graph

from lgcexp import kernels, linalg
from lgcexp.linalg import (
    ArgmaxCertificate,
    block_cg,
    fused_shifted_cg,
    rcm_reordered,
    shifted_operator,
    shifted_solve,
)


def _dense(g, Y, alpha):
    return np.linalg.solve(np.eye(g.n) - alpha * g.S.toarray(), Y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c", [1, 3, 10, 17, 33])
def test_shifted_product_is_scipys_bit_for_bit_and_dots_agree(dtype, c):
    g, _ = random_graph(150, 6, seed=c)
    S, _ = rcm_reordered(g.S, dtype)
    rng = np.random.default_rng(c)
    P = rng.standard_normal((g.n, c)).astype(dtype)
    b = kernels.row_chunks(S.indptr)
    AP = np.empty_like(P)
    dots = np.zeros((b.size - 1, c))
    kernels.shifted_product_dot(S.indptr, S.indices, S.data, P, np.array([-0.9], dtype=dtype), AP, b, dots)
    ref = shifted_operator(S, 0.9)(P)                        # S @ P, * -alpha, + P: the numpy path
    assert np.array_equal(AP, ref)
    np.testing.assert_allclose(dots.sum(0), np.einsum("ij,ij->j", P.astype(float), ref.astype(float)), rtol=1e-12)


def test_row_chunks_cover_the_rows_in_order_with_equal_entries():
    g, _ = random_graph(300, 5, seed=1)
    b = kernels.row_chunks(g.S.indptr, 7)
    assert b[0] == 0 and b[-1] == g.n and np.all(np.diff(b) >= 0) and b.size == 8
    nnz = np.diff(g.S.indptr[b])
    assert nnz.max() - nnz.min() <= 2 * np.diff(g.S.indptr).max()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_cg_equals_block_cg_and_the_dense_solve(seed, dtype):
    g, _ = random_graph(200, 5, seed=seed)
    S, _ = rcm_reordered(g.S, dtype)
    rng = np.random.default_rng(seed)
    B = rng.random((g.n, 4)).astype(dtype)
    tol = 1e-12 if dtype == np.float64 else 1e-6
    X, it, rel = fused_shifted_cg(S, 0.9, B, tol=tol)
    Xb, itb, _ = block_cg(shifted_operator(S, 0.9), B, tol=tol)
    ref = _dense(type("G", (), {"n": g.n, "S": S})(), B.astype(float), 0.9)
    assert X.dtype == dtype and rel <= tol
    assert abs(it - itb) <= 1                      # the same recursion; column sums in another order
    atol = (1e-9 if dtype == np.float64 else 3e-4) * np.abs(ref).max()
    np.testing.assert_allclose(X, ref, atol=atol)
    np.testing.assert_allclose(X, Xb, atol=atol)


def test_fused_cg_is_the_same_for_any_thread_count(monkeypatch):
    g, _ = random_graph(400, 5, seed=3)
    S, _ = rcm_reordered(g.S)
    B = np.random.default_rng(3).random((g.n, 3))
    out = []
    for threads in ("1", "2"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        out.append(fused_shifted_cg(S, 0.9, B, tol=1e-12))
    assert np.array_equal(out[0][0], out[1][0]) and out[0][1] == out[1][1]


@pytest.mark.parametrize("seed", range(3))
def test_fused_certified_stop_gives_the_dense_argmax(seed):
    g, _ = random_graph(250, 5, seed=seed)
    rng = np.random.default_rng(seed)
    Y = np.zeros((g.n, 4))
    lab = rng.choice(g.n, 20, replace=False)
    Y[lab, np.arange(20) % 4] = 1
    S, perm = rcm_reordered(g.S)
    Yp = Y[perm]
    cert = ArgmaxCertificate(g.degree[perm], 0.9, S, Yp)
    X, it, _ = fused_shifted_cg(S, 0.9, Yp, tol=1e-13, certify=cert)
    _, it_full, _ = fused_shifted_cg(S, 0.9, Yp, tol=1e-13)
    ref = _dense(g, Y, 0.9)[perm]
    assert it < it_full
    assert np.array_equal(X.argmax(1), ref.argmax(1))


def test_shifted_solve_takes_the_fused_path_for_large_problems(monkeypatch):
    g, _ = random_graph(300, 5, seed=4)
    Y = np.zeros((g.n, 3))
    Y[np.arange(0, 30), np.arange(30) % 3] = 1
    calls = []
    real = linalg.fused_shifted_cg
    monkeypatch.setattr(linalg, "fused_shifted_cg", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(linalg, "FUSED_MIN_ENTRIES", 0)
    F, _, _ = shifted_solve(g.S, Y, 0.9, degree=g.degree)
    assert calls
    monkeypatch.setenv("LGCEXP_FUSED", "0")
    F0, _, _ = shifted_solve(g.S, Y, 0.9, degree=g.degree)
    assert len(calls) == 1                          # switched off: the numpy/scipy path
    assert np.array_equal(F.argmax(1), F0.argmax(1)) and np.array_equal(F.argmax(1), _dense(g, Y, 0.9).argmax(1))


def test_fused_solves_from_several_python_threads_take_turns():
    """numba's workqueue pool aborts the process when two threads enter it at once; the lock serialises."""
    from concurrent.futures import ThreadPoolExecutor

    g, _ = random_graph(300, 5, seed=5)
    S, _ = rcm_reordered(g.S)
    B = np.random.default_rng(5).random((g.n, 3))
    ref = fused_shifted_cg(S, 0.9, B, tol=1e-12)[0]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: fused_shifted_cg(S, 0.9, B, tol=1e-12)[0], range(8)))
    assert all(np.array_equal(o, ref) for o in outs)

"""lgcexp.solvers.fused and shifted_solve's fused strategy: the fused multi-threaded CG on (I - alpha S) X = B
against scipy's product, the block strategy and dense solves."""
import numpy as np
import pytest
import scipy.sparse as sp

pytest.importorskip("numba")

from conftest import random_graph

from lgcexp.solvers import fused, shifted
from lgcexp.solvers.shifted import ArgmaxCertificate, rcm_reordered, shifted_operator, shifted_solve


def fused_cg(S, alpha, B, **kw):
    """shifted_solve's fused strategy on an already renumbered S."""
    return shifted_solve(S, B, alpha, strategy="fused", **kw)


def _dense(g, Y, alpha):
    return np.linalg.solve(np.eye(g.n) - alpha * g.S.toarray(), Y)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c", [1, 3, 10, 17, 33])
def test_shifted_product_is_scipys_bit_for_bit_and_dots_agree(dtype, c):
    g, _ = random_graph(150, 6, seed=c)
    S, _ = rcm_reordered(g.S, dtype)
    rng = np.random.default_rng(c)
    P = rng.standard_normal((g.n, c)).astype(dtype)
    b = fused.row_chunks(S.indptr)
    AP = np.empty_like(P)
    dots = np.zeros((b.size - 1, c))
    fused.shifted_product_dot(S.indptr, S.indices, S.data, P, np.array([-0.9], dtype=dtype), AP, b, dots)
    ref = shifted_operator(S, 0.9)(P)                        # S @ P, * -alpha, + P: the numpy path
    assert np.array_equal(AP, ref)
    np.testing.assert_allclose(dots.sum(0), np.einsum("ij,ij->j", P.astype(float), ref.astype(float)), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_update_passes_are_numpys_elementwise_operations_bit_for_bit(dtype):
    """CG's two update passes: ``R -= step AP`` with R's column sums of squares and the weighted largest
    entry per chunk, then ``X += step P`` and ``P = beta P + R``: numpy's operations bit for bit."""
    rng = np.random.default_rng(1)
    n, c = 500, 7
    X, R, P, AP = (rng.standard_normal((n, c)).astype(dtype) for _ in range(4))
    step, beta = (rng.random(c).astype(dtype) for _ in range(2))
    weight = rng.random(n)
    b = fused.row_chunks(np.arange(0, 4 * n + 1, 4))
    dots, rmax = np.zeros((b.size - 1, c)), np.zeros(b.size - 1)
    R_ref = R - AP * step
    X_ref = X + P * step
    P_ref = P * beta + R_ref
    fused.residual_update(R, AP, step, b, dots, weight, rmax)
    fused.step_update(X, P, R, step, beta, b)
    assert np.array_equal(R, R_ref) and np.array_equal(X, X_ref) and np.array_equal(P, P_ref)
    R64 = R_ref.astype(np.float64)
    np.testing.assert_allclose(dots.sum(0), (R64 ** 2).sum(0), rtol=1e-12)
    scaled = np.abs(R64).max(axis=1) * weight
    assert np.array_equal(rmax, [scaled[lo:hi].max(initial=0.0) for lo, hi in zip(b[:-1], b[1:])])
    fused.residual_update(R, AP, step, b, dots, np.zeros(0), rmax)
    assert not rmax.any()                                    # no weight: no screen
    P_ref = P * beta + R
    fused.step_update(np.zeros((0, c), dtype=dtype), P, R, step, beta, b)   # no iterate: the direction alone
    assert np.array_equal(P, P_ref)


def test_row_chunks_cover_the_rows_in_order_with_equal_entries():
    g, _ = random_graph(300, 5, seed=1)
    b = fused.row_chunks(g.S.indptr, 7)
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
    X, it, rel = fused_cg(S, 0.9, B, tol=tol)
    Xb, itb, _ = shifted_solve(S, B, 0.9, tol=tol, strategy="block")
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
        out.append(fused_cg(S, 0.9, B, tol=1e-12))
    assert np.array_equal(out[0][0], out[1][0]) and out[0][1] == out[1][1]


def _labelled_problem(seed: int):
    """A random 250-point graph with 20 labels of 4 classes: (graph, Y, S and its RCM permutation, Y permuted)."""
    g, _ = random_graph(250, 5, seed=seed)
    rng = np.random.default_rng(seed)
    Y = np.zeros((g.n, 4))
    lab = rng.choice(g.n, 20, replace=False)
    Y[lab, np.arange(20) % 4] = 1
    S, perm = rcm_reordered(g.S)
    return g, Y, S, perm, Y[perm]


@pytest.mark.parametrize("seed", range(3))
def test_fused_certified_stop_gives_the_dense_argmax(seed):
    g, Y, S, perm, Yp = _labelled_problem(seed)
    X, it, _ = fused_cg(S, 0.9, Yp, tol=1e-13, degree=g.degree[perm])
    _, it_full, _ = fused_cg(S, 0.9, Yp, tol=1e-13)
    ref = _dense(g, Y, 0.9)[perm]
    assert it < it_full
    assert np.array_equal(X.argmax(1), ref.argmax(1))


def test_shifted_solve_takes_the_fused_path_for_large_problems(monkeypatch):
    """A 300-point graph with 30 labels of 3 classes, every solve large enough for the fused passes."""
    g, _ = random_graph(300, 5, seed=4)
    Y = np.zeros((g.n, 3))
    Y[np.arange(0, 30), np.arange(30) % 3] = 1
    calls = []
    real = shifted.FusedPasses
    monkeypatch.setattr(shifted, "FusedPasses", lambda *a, **k: calls.append(1) or real(*a, **k))
    monkeypatch.setattr(shifted, "FUSED_MIN_ENTRIES", 0)
    F, _, _ = shifted_solve(g.S, Y, 0.9, degree=g.degree, reorder=True)
    assert calls
    monkeypatch.setenv("LGCEXP_FUSED", "0")
    F0, _, _ = shifted_solve(g.S, Y, 0.9, degree=g.degree, reorder=True)
    assert len(calls) == 1                          # switched off: the numpy/scipy path
    assert np.array_equal(F.argmax(1), F0.argmax(1)) and np.array_equal(F.argmax(1), _dense(g, Y, 0.9).argmax(1))


def test_fused_solves_from_several_python_threads_take_turns():
    """numba's workqueue pool aborts the process when two threads enter it at once; the lock serialises."""
    from concurrent.futures import ThreadPoolExecutor

    g, _ = random_graph(300, 5, seed=5)
    S, _ = rcm_reordered(g.S)
    B = np.random.default_rng(5).random((g.n, 3))
    ref = fused_cg(S, 0.9, B, tol=1e-12)[0]
    with ThreadPoolExecutor(4) as ex:
        outs = list(ex.map(lambda _: fused_cg(S, 0.9, B, tol=1e-12)[0], range(8)))
    assert all(np.array_equal(o, ref) for o in outs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("c", [1, 3, 10, 17])
def test_specialised_product_against_scipy(dtype, c):
    """float64 (no contraction): scipy's product bit for bit; float32 (fused multiply-adds): within rounding."""
    g, _ = random_graph(160, 6, seed=10 + c)
    S, _ = rcm_reordered(g.S, dtype)
    P = np.random.default_rng(c).standard_normal((g.n, c)).astype(dtype)
    b = fused.row_chunks(S.indptr)
    AP = np.empty_like(P)
    dots = np.zeros((b.size - 1, c))
    contract = dtype == np.float32
    fused.specialised_product(c, contract)(S.indptr, S.indices, S.data, P, np.array([-0.9], dtype=dtype), AP, b,
                                             dots)
    ref = shifted_operator(S, 0.9)(P)
    if contract:
        exact = shifted_operator(S.astype(float), 0.9)(P.astype(float))
        scale = np.abs(S).sum(1).A.ravel()[:, None] * np.abs(P).max() + np.abs(P)
        assert np.all(np.abs(AP - exact) <= 40 * np.finfo(np.float32).eps * scale)
    else:
        assert np.array_equal(AP, ref)
    np.testing.assert_allclose(dots.sum(0), np.einsum("ij,ij->j", P.astype(float), AP.astype(float)), rtol=1e-10)
    assert fused.specialised_product(c, contract) is fused.specialised_product(c, contract)   # loaded once
    assert fused.specialised_product(fused.SPECIALISED_MAX_COLUMNS + 1, contract) is None


def _certificate_inputs(seed, n=300, c=5):
    rng = np.random.default_rng(seed)
    deg = rng.random(n) + 0.5
    deg[:7] = 0.0                                       # isolated points: their bound is |R|
    W = sp.random(n, n, density=0.03, random_state=seed)
    S = sp.csr_matrix(W + W.T)
    X = rng.random((n, c))
    X[10:20, 1] = X[10:20, 0]                          # exact ties: never certified
    X[10:20, [2, 3, 4]] = 0.0
    B = rng.random((n, c))
    return deg, S, X, B, rng


@pytest.mark.parametrize("seed", range(4))
def test_fused_certificate_kernel_decides_as_numpy(seed):
    """lgcexp.solvers.fused.argmax_certified: the same decision and gap scale as the numpy test, at residual sizes
    around the threshold, with and without ties."""
    deg, S, X, B, rng = _certificate_inputs(seed)
    ties = X[10:20].copy()
    seen = set()
    for scale in (1e-1, 1e-3, 1e-5, 1e-7):
        for tie in (True, False):
            X2 = X.copy()
            if not tie:
                X2[10:20] = ties + rng.random(ties.shape) * 0.5
            R = rng.standard_normal(X.shape) * scale
            ref, fast = (ArgmaxCertificate(deg, 0.9, S, B, fused=f) for f in (False, True))
            decision = ref(X2, R)
            seen.add(decision)
            assert decision == fast(X2, R)
            assert ref._gap_scale == fast._gap_scale
    assert seen == {True, False}                          # both outcomes tested


def test_unwritable_kernel_directory_falls_back_to_the_generic_product(monkeypatch, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("LGCEXP_KERNEL_DIR", str(blocker / "kernels"))     # below a file: cannot be created
    monkeypatch.setattr(fused, "_SPECIALISED", {})
    assert fused.specialised_product(5, False) is None
    assert fused.product_for(5, np.float64) is fused.shifted_product_dot

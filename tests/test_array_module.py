"""The solvers' array-module plumbing (lgcexp.solvers, the P_LL blocks) run with a stand-in for CuPy: a module
object that is not numpy but forwards to it, so every ``xp is not np`` branch (device copies of S, the
certificate's constants, wide P_LL blocks, host transfers) runs on the CPU; results must equal numpy's. The
GPU's own product kernel (lgcexp.solvers.cg.sparse_product) needs a GPU: ``python -m benchmarks gpu`` checks it."""
import types

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph

from lgcexp import devices
from lgcexp.algorithms import propagation
from lgcexp.solvers import cg, shifted


class _FakeStream:
    def synchronize(self):
        pass


def _fake_cupy():
    fake = types.ModuleType("fakecupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.cuda = types.SimpleNamespace(get_current_stream=lambda: _FakeStream())
    return fake


@pytest.fixture
def xp(monkeypatch):
    fake = _fake_cupy()
    for mod in (shifted, propagation):
        monkeypatch.setattr(mod, "sparse_module", lambda m: sp)
    monkeypatch.setattr(devices, "sparse_module", lambda m: sp)
    return fake


@pytest.fixture
def layouts(monkeypatch):
    """The (C, F) contiguity of every block the shifted operator is applied to."""
    seen = []
    real = shifted.shifted_operator

    def recording(S, alpha):
        apply = real(S, alpha)

        def rec(V):
            seen.append((V.flags.c_contiguous, V.flags.f_contiguous))
            return apply(V)

        return rec

    monkeypatch.setattr(shifted, "shifted_operator", recording)
    return seen


def test_column_reductions_of_the_gpu_branch_equal_numpys():
    """The GPU's column dots (ones @ (A * B)) and norms, run with the stand-in module, against einsum."""
    rng = np.random.default_rng(4)
    A, B = rng.standard_normal((500, 7)), rng.standard_normal((500, 7))
    fake = _fake_cupy()
    assert np.array_equal(cg.column_dots(A, B), np.einsum("ij,ij->j", A, B))     # numpy: einsum's bits
    assert np.array_equal(cg.column_norms(A), np.linalg.norm(A, axis=0))
    np.testing.assert_allclose(cg.column_dots(A, B, fake), np.einsum("ij,ij->j", A, B), rtol=1e-12)
    np.testing.assert_allclose(cg.column_norms(A, fake), np.linalg.norm(A, axis=0), rtol=1e-12)
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    got = cg.column_dots(A32, B32, fake)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, np.einsum("ij,ij->j", A, B), rtol=0, atol=1e-3)


def test_the_gpu_product_kernel_equals_scipy():
    """lgcexp's CSR x row-major kernel on a GPU (skipped without CuPy and a device): empty rows, 1 to 1000
    columns, both precisions; column-major, vector and mistyped blocks go to CuPy's own product."""
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception:  # noqa: BLE001
        pytest.skip("no CUDA device")
    import cupyx.scipy.sparse as csp

    rng = np.random.default_rng(6)
    A = sp.random(300, 300, density=0.03, random_state=7, format="csr")
    A = sp.csr_matrix(A.multiply(sp.csr_matrix(np.arange(300)[:, None] % 7 != 0)))   # empty rows
    for dt, atol in ((np.float64, 1e-12), (np.float32, 1e-4)):
        S = csp.csr_matrix(A.astype(dt))
        for c in (1, 31, 33, 1000):
            V = rng.standard_normal((300, c)).astype(dt)
            got = cp.asnumpy(cg.sparse_product(S, cp.asarray(V)))
            np.testing.assert_allclose(got, A.astype(dt) @ V, rtol=0, atol=atol)
        V = cp.asarray(rng.standard_normal((300, 4)).astype(dt))
        for other in (cp.asfortranarray(V), V[:, 0], V.astype(np.float64 if dt == np.float32 else np.float32)):
            np.testing.assert_allclose(cp.asnumpy(cg.sparse_product(S, other)), cp.asnumpy(S @ other), atol=atol)


def test_sparse_product_is_scipys_off_the_gpu():
    g, _ = random_graph(60, 4, seed=2)
    V = np.random.default_rng(0).standard_normal((60, 3))
    assert np.array_equal(cg.sparse_product(g.S, V), g.S @ V)
    assert np.array_equal(cg.sparse_product(g.S, V[:, 0]), g.S @ V[:, 0])


def test_shifted_solve_with_another_array_module_equals_numpy(xp, layouts):
    g, _ = random_graph(120, 5, seed=0)
    Y = np.zeros((g.n, 3))
    Y[np.arange(15), np.arange(15) % 3] = 1
    ref, it_ref, _ = shifted.shifted_solve(g.S, Y, 0.9, degree=g.degree, xp=np, reorder=True)
    layouts.clear()
    out, it, _ = shifted.shifted_solve(g.S, Y, 0.9, degree=g.degree, xp=xp, reorder=True)
    assert layouts and all(c and not f for c, f in layouts)   # row-major blocks, what the GPU kernel takes
    assert it == it_ref and np.array_equal(out, ref)
    S_dev, _ = shifted.rcm_reordered(g.S, np.float64, xp)
    assert shifted.rcm_reordered(g.S, np.float64, xp)[0] is S_dev         # copied to the device once


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pll_blocks_with_another_array_module_equal_numpy(xp, dtype, layouts):
    g, _ = random_graph(150, 5, seed=1)
    lab = np.arange(0, 150, 7)
    ref, _ = propagation.propagation_submatrix(g.S, lab, 0.9, dtype=dtype, block=8, xp=np)
    layouts.clear()
    out, st = propagation.propagation_submatrix(g.S, lab, 0.9, dtype=dtype, block=8, xp=xp)
    assert layouts and all(c and not f for c, f in layouts)
    assert np.array_equal(out, ref)
    wide, st = propagation.propagation_submatrix(g.S, lab, 0.9, dtype=dtype, xp=xp)   # the GPU's wide blocks
    assert st["block"] == lab.size
    np.testing.assert_allclose(wide, ref, atol=1e-5 if dtype == "float32" else 1e-9)
    refs, _ = propagation.propagation_submatrices(g.S, lab, [0.5, 0.9], dtype=dtype, block=8, xp=np)
    outs, _ = propagation.propagation_submatrices(g.S, lab, [0.5, 0.9], dtype=dtype, block=8, xp=xp)
    diag, _ = propagation.propagation_submatrices(g.S, lab, [0.5, 0.9], dtype=dtype, block=8, xp=xp, diagonal_only=True)
    for a, b, d in zip(refs, outs, diag):
        assert np.array_equal(a, b) and np.array_equal(d, np.diag(a))


def test_solve_module_picks_the_gpu_only_for_large_problems(monkeypatch):
    fake = _fake_cupy()
    monkeypatch.setattr(devices, "gpu_module", lambda: fake)
    assert devices.solve_module(devices.GPU_MIN_ENTRIES) is fake
    assert devices.solve_module(devices.GPU_MIN_ENTRIES - 1) is np
    monkeypatch.setattr(devices, "gpu_module", lambda: None)
    assert devices.solve_module(10 ** 9) is np


def test_without_cupy_there_is_no_gpu_module(monkeypatch):
    monkeypatch.setattr(devices, "_cupy", False)
    import builtins

    real_import = builtins.__import__

    def no_cupy(name, *a, **k):
        if name.split(".")[0] == "cupy":
            raise ImportError("no cupy here")
        return real_import(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_cupy)
    assert devices.gpu_module() is None
    assert devices.to_host(np.ones(2)) is not None and devices.array_module(np.ones(2)) is np


def test_gpu_blocks_fit_a_tenth_of_the_free_device_memory(xp, monkeypatch):
    """Wide GPU blocks are capped at 1 GiB per array and at a tenth of what the device has free (its free
    memory plus the pool's unused bytes); 1 to 1024 columns."""
    g, _ = random_graph(200, 5, seed=3)
    lab = np.arange(0, 200, 2)
    col = 200 * 4                                   # bytes of one float32 column
    xp.get_default_memory_pool = lambda: types.SimpleNamespace(free_bytes=lambda: 3 * col * 10)

    def block_with_free(free):
        xp.cuda.Device = lambda: types.SimpleNamespace(mem_info=(free, 10 ** 12))
        return propagation._prepare_columns(g.S, lab, np.dtype(np.float32), None, True, xp)[2]

    assert block_with_free(7 * col * 10) == 10      # (7 + 3) columns' worth of tenths
    assert block_with_free(0) == 3                  # the pool's unused bytes count
    assert block_with_free(10 ** 12) == lab.size    # plenty: every label in one block
    xp.get_default_memory_pool = lambda: types.SimpleNamespace(free_bytes=lambda: 0)
    assert block_with_free(0) == 1                  # never below one column
    assert devices.free_device_bytes(np) is None
    del xp.cuda.Device                              # unreadable: the 1 GiB cap alone
    assert propagation._prepare_columns(g.S, lab, np.dtype(np.float32), None, True, xp)[2] == lab.size


def test_gpu_pll_entries_name_the_gpu_path(xp):
    """P_LL cache entries of the GPU path carry its name; the earlier GPU path's entries ("gpu": cuSPARSE's
    product, narrower blocks) are other keys."""
    g, _ = random_graph(100, 5, seed=4)
    assert propagation.pll_path(g.S, 20, xp=xp) == "gpu-rowkernel"
    assert propagation.pll_path(g.S, 20, xp=np) != "gpu-rowkernel"

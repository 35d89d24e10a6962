"""The symmetric self-join (lgcexp.graph.selfjoin) against brute force and against faiss's flat search."""
import numpy as np
import pytest

import lgcexp.graph.knn as knn
from lgcexp.graph.knn import exact_search, knn_search
from lgcexp.graph.selfjoin import _true_positions, inexact_rows, projection_bounds, selfjoin_search


def brute_lists(X, k):
    """Exact squared distances in int64 (X integer-valued), each row's k+1 smallest (distance, index) pairs
    (faiss's order: ties to the lower index), then the point itself removed (or, if it is not among them,
    the last pair)."""
    Xi = np.rint(X).astype(np.int64)
    sq = (Xi * Xi).sum(1)
    D = sq[:, None] + sq[None, :] - 2 * Xi @ Xi.T
    n = len(X)
    dist, idx = np.empty((n, k)), np.empty((n, k), dtype=np.int64)
    for i in range(n):
        order = np.lexsort((np.arange(n), D[i]))[: k + 1]
        where = np.flatnonzero(order == i)
        order = np.delete(order, where[0] if where.size else k)
        idx[i] = order
        dist[i] = np.sqrt(D[i, order].astype(np.float32)).astype(np.float64)
    return dist, idx


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dims", [0, 2])
def test_selfjoin_equals_brute_force_with_ties_and_duplicates(threads, dims):
    rng = np.random.default_rng(3)
    X = rng.integers(0, 3, size=(700, 5)).astype(np.float32)  # 243 distinct points: duplicates, ties everywhere
    X[:40] = X[40:80]
    stats = {}
    d, i = selfjoin_search(X, 9, block=64, dims=dims, threads=threads, stats=stats)
    bd, bi = brute_lists(X, 9)
    assert np.array_equal(i, bi)
    assert np.array_equal(d, bd)
    assert stats["pairs_computed"] <= stats["pairs"]


def test_selfjoin_equals_faiss_on_digits():
    from sklearn.datasets import load_digits

    X = load_digits().data  # float64, integers 0..16
    stats = {}
    d, i = selfjoin_search(X, 15, block=128, dims=16, stats=stats)
    fd, fi = exact_search(X, 15, np.arange(len(X)))  # faiss (queries given: never the self-join)
    assert np.array_equal(i, fi) and np.array_equal(d, fd)
    bd, bi = brute_lists(X, 15)
    assert np.array_equal(i, bi) and np.array_equal(d, bd)
    assert stats["pairs_computed"] < stats["pairs"]  # the bound skipped part of the join


def test_bound_that_prunes_nothing_still_exact():
    """Isotropic points: one principal axis and the residual norms bound nothing (every point's residual
    is about as long), so almost no pair can be skipped; the pairs the bound cannot rule out are computed."""
    rng = np.random.default_rng(5)
    X = rng.integers(0, 3, size=(900, 31)).astype(np.float32)
    stats = {}
    d, i = selfjoin_search(X, 6, block=100, dims=1, stats=stats)
    bd, bi = brute_lists(X, 6)
    assert np.array_equal(i, bi) and np.array_equal(d, bd)
    assert stats["blocks_skipped"] == 0 and stats["pairs_computed"] > 0.9 * stats["pairs"]


def test_clustered_data_skips_blocks():
    rng = np.random.default_rng(6)
    centres = rng.integers(0, 200, size=(12, 8))
    X = (centres[rng.integers(0, 12, size=1200)] + rng.integers(-2, 3, size=(1200, 8))).astype(np.float32)
    stats = {}
    d, i = selfjoin_search(X, 5, block=64, dims=4, stats=stats)
    bd, bi = brute_lists(X, 5)
    assert np.array_equal(i, bi) and np.array_equal(d, bd)
    assert stats["blocks_skipped"] > 0 and stats["pairs_computed"] < stats["pairs"] / 2


def test_rows_with_inexact_float32_dot_products_come_from_faiss():
    """Norms above 2^24: some dot products round in float32, in an order only the BLAS knows; those rows
    are faiss's own, all others agree with faiss too."""
    rng = np.random.default_rng(7)
    X = rng.integers(0, 1800, size=(500, 8)).astype(np.float32)
    X[:5] = 3000 + rng.integers(0, 2, size=(5, 8))  # |x|^2 ~ 7.2e7 > 2^24
    risky = inexact_rows(X)
    assert 5 <= risky.size < 500
    stats = {}
    d, i = selfjoin_search(X, 7, block=64, dims=3, stats=stats)
    fd, fi = exact_search(X, 7, np.arange(len(X)))
    assert stats["faiss_rows"] == risky.size
    assert np.array_equal(i, fi) and np.array_equal(d, fd)


def test_float_data_matches_float64_brute_force():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(800, 12)).astype(np.float32)
    d, i = selfjoin_search(X, 8, block=96, dims=4)
    X64 = X.astype(np.float64)
    D = ((X64[:, None, :] - X64[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(D, np.inf)
    bi = np.argsort(D, axis=1)[:, :8]
    assert np.array_equal(np.sort(i, 1), np.sort(bi, 1))
    assert np.allclose(d, np.sqrt(np.take_along_axis(D, bi, 1)), rtol=1e-5, atol=1e-5)


def test_projection_bound_is_a_lower_bound():
    rng = np.random.default_rng(9)
    X = (rng.normal(size=(300, 20)) @ rng.normal(size=(20, 20))).astype(np.float32)
    W, err = projection_bounds(X, 5)
    X64 = X.astype(np.float64)
    D = ((X64[:, None, :] - X64[None, :, :]) ** 2).sum(-1)
    L = ((W[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    assert np.all(L <= D + 1e-9 * D.max())
    assert L.max() > 0.5 * D.max()  # and not a trivial one


def test_true_positions_equals_flatnonzero():
    rng = np.random.default_rng(10)
    for shape in [(37, 13), (64, 64), (1, 5), (0, 3)]:
        M = rng.random(shape) < 0.05
        assert np.array_equal(_true_positions(M), np.flatnonzero(M))


def test_knn_search_uses_the_selfjoin_only_for_integer_data(monkeypatch):
    rng = np.random.default_rng(11)
    Xi = rng.integers(0, 5, size=(400, 6)).astype(np.float32)
    Xf = Xi + rng.normal(0, 0.1, size=Xi.shape).astype(np.float32)
    monkeypatch.setattr(knn, "SELFJOIN_MIN_POINTS", 100)
    assert knn.use_selfjoin(Xi) and not knn.use_selfjoin(Xf)
    calls = []
    import lgcexp.graph.selfjoin as sj

    real = sj.selfjoin_search
    monkeypatch.setattr(sj, "selfjoin_search", lambda X, k, **kw: calls.append(len(X)) or real(X, k, **kw))
    fd, fi = exact_search(Xi, 5, np.arange(400))
    for d, i in (knn_search(Xi, 5), knn_search(Xi, 5, index=knn.flat_index(Xi))):
        assert np.array_equal(i, fi) and np.array_equal(d, fd)
    assert calls == [400, 400]
    knn_search(Xf, 5)
    assert calls == [400, 400]
    monkeypatch.setattr(knn, "SELFJOIN_MIN_POINTS", 1000)
    assert not knn.use_selfjoin(Xi)


@pytest.mark.mnist
def test_selfjoin_equals_faiss_on_mnist():
    import os

    from lgcexp.data import load_dataset

    X = load_dataset("mnist", data_dir=os.environ.get("LGCEXP_DATA_DIR")).X
    d, i = selfjoin_search(X, 15)
    fd, fi = exact_search(X, 15, np.arange(len(X)))
    assert np.array_equal(i, fi) and np.array_equal(d, fd)

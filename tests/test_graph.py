import numpy as np
import pytest
import scipy.sparse as sp

from lgcexp.cache import Cache
from lgcexp.errors import UserError
from lgcexp.graph import Graph, build_affinity, build_graph, knn_search, sigma_mean_heuristic


def brute_knn(X, k):
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    idx = np.argsort(D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, idx, 1), idx


def test_knn_matches_brute_force():
    X = np.random.default_rng(0).normal(size=(200, 5))
    d, i = knn_search(X, 7)
    bd, bi = brute_knn(X, 7)
    assert np.allclose(d, bd, atol=1e-4)
    assert np.all(np.sort(i, 1) == np.sort(bi, 1))
    assert not np.any(i == np.arange(200)[:, None])  # self excluded


def test_affinity_union_weights_symmetric_zero_diagonal():
    X = np.random.default_rng(1).normal(size=(120, 4))
    W, sigma = build_affinity(X, 5, 0.8, "union")
    assert sigma == 0.8
    assert abs(W - W.T).max() < 1e-12
    assert np.all(W.diagonal() == 0)
    bd, bi = brute_knn(X, 5)
    A = np.zeros((120, 120))
    for r in range(120):
        A[r, bi[r]] = np.exp(-bd[r] ** 2 / (2 * 0.8 ** 2))
    ref = np.maximum(A, A.T)  # union of kNN lists
    assert np.allclose(W.toarray(), ref, atol=1e-5)
    Wm, _ = build_affinity(X, 5, 0.8, "mutual")
    assert np.allclose(Wm.toarray(), np.minimum(A, A.T), atol=1e-5)


def test_sigma_mean_hand_computed():
    # points on a line at 0,1,...,11: the 10th neighbour of point i is at a known distance
    X = np.arange(12, dtype=float)[:, None]
    d, _ = knn_search(X, 10)
    expected = np.mean([max(i, 11 - i) if min(i, 11 - i) < 10 else 10 for i in range(12)])
    # 10th nearest distance on a line of 12 points, computed by hand for each point
    hand = []
    for i in range(12):
        dists = sorted(abs(i - j) for j in range(12) if j != i)
        hand.append(dists[9])
    assert sigma_mean_heuristic(d) == pytest.approx(np.mean(hand) / 3)
    _, s = build_affinity(X, 3, "mean")
    assert s == pytest.approx(np.mean(hand) / 3)
    del expected


def test_normalized_affinity():
    W = sp.csr_matrix(np.array([[0, 1, 2], [1, 0, 0], [2, 0, 0]], float))
    g = Graph(W=W, sigma=1.0, key="x")
    d = np.array([3.0, 1.0, 2.0])
    assert np.allclose(g.S.toarray(), W.toarray() / np.sqrt(np.outer(d, d)))


def test_graph_cache_roundtrip(tmp_path):
    X = np.random.default_rng(2).normal(size=(80, 3))
    cache = Cache(tmp_path)
    g1, hit1 = build_graph(X, 6, "mean", cache=cache, data_fingerprint="fp")
    g2, hit2 = build_graph(X, 6, "mean", cache=cache, data_fingerprint="fp")
    assert (hit1, hit2) == (False, True)
    assert g1.key == g2.key and abs(g1.W - g2.W).max() == 0 and g1.sigma == g2.sigma
    assert not list(tmp_path.glob("*.tmp"))
    g3, hit3 = build_graph(X, 7, "mean", cache=cache, data_fingerprint="fp")
    assert not hit3 and g3.key != g1.key


@pytest.mark.parametrize("k,sigma,sym,msg", [(0, 1.0, "union", "graph.k"), (100, 1.0, "union", "graph.k=100"),
                                              (5, -1.0, "union", "graph.sigma"), (5, "median", "union", "graph.sigma"),
                                              (5, 1.0, "both", "graph.symmetrize")])
def test_bad_graph_params(k, sigma, sym, msg):
    X = np.zeros((50, 2)) + np.arange(50)[:, None]
    with pytest.raises(UserError, match=msg):
        build_graph(X, k, sigma, sym)


def test_openblas_coretype_from_cpu_flags(tmp_path):
    from lgcexp.graph import openblas_coretype

    def cpu(flags):
        p = tmp_path / "cpuinfo"
        p.write_text(f"processor\t: 0\nmodel name\t: x\nflags\t\t: {flags}\n\nprocessor\t: 1\nflags\t\t: {flags}\n")
        return str(p)

    assert openblas_coretype(cpu("fpu sse2 avx avx2 fma avx512f avx512cd avx512bw avx512dq avx512vl")) == "SkylakeX"
    assert openblas_coretype(cpu("fpu sse2 avx avx2 fma avx512f")) == "Haswell"   # partial AVX-512
    assert openblas_coretype(cpu("fpu sse2 avx")) is None
    assert openblas_coretype(str(tmp_path / "missing")) is None


def test_components_are_computed_once_per_graph_and_read_only(monkeypatch):
    """A sweep worker's memoised graph answers every job's component count and unreached mask from one
    connected-components pass; the shared labelling cannot be changed by a caller."""
    import scipy.sparse.csgraph as csgraph
    from conftest import random_graph

    g, _ = random_graph(80, 3, seed=5)
    calls = []
    real = csgraph.connected_components
    monkeypatch.setattr(csgraph, "connected_components", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = g.components()
    assert g.n_components() == first[0] and g.unreached_mask(np.array([0])).shape == (80,)
    assert len(calls) == 1
    n_ref, comp_ref = real(g.W, directed=False)
    assert first[0] == n_ref and np.array_equal(first[1], comp_ref)
    with pytest.raises(ValueError):
        first[1][0] = 7

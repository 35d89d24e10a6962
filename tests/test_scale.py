"""Large-data paths: the approximate kNN graph in a PCA projection (with exact re-ranking), its recall in both
spaces, the block-wise exact search of the recall check, the device choice (GPU when faiss sees one, never
with device=cpu), and the InfiMNIST-style generator."""
from pathlib import Path

import numpy as np
import pytest

from lgcexp import devices
from lgcexp.errors import UserError
from lgcexp.graph.knn_approx import KnnApproxGraph, blocked_exact_search, recall_at_k, rerank

ROOT = Path(__file__).resolve().parents[1]


def clustered(n=1200, d=16, seed=3):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=3.0, size=(6, d))
    # most variance in a few directions, so a projection keeps most (not all) neighbours
    scale = np.r_[np.full(4, 3.0), np.full(d - 4, 0.6)]
    return (centers[rng.integers(0, 6, n)] + rng.normal(size=(n, d)) * scale).astype(np.float32)


def brute_knn(X, k, rows):
    """Exact kNN by numpy, self excluded: (distances, indices) of ``rows``."""
    X = X.astype(np.float64)
    D = np.sqrt(((X[rows, None, :] - X[None, :, :]) ** 2).sum(-1))
    D[np.arange(len(rows)), rows] = np.inf
    idx = np.argsort(D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, idx, axis=1), idx


def pca_numpy(X, p):
    """Projection on the first p principal axes (eigenvectors of the covariance), by numpy."""
    Xc = X.astype(np.float64) - X.mean(axis=0)
    _, vecs = np.linalg.eigh(Xc.T @ Xc)
    return Xc @ vecs[:, ::-1][:, :p]


def test_blocked_exact_search_matches_numpy():
    X = clustered(n=700)
    rows = np.array([0, 5, 99, 350, 699])
    d, i = blocked_exact_search(X, 7, rows, block=64)  # eleven blocks, the last one short
    ed, ei = brute_knn(X, 7, rows)
    assert np.allclose(d, ed, rtol=1e-4, atol=1e-4)
    assert recall_at_k(i, d, ei, ed) == 1.0


def test_rerank_keeps_the_nearest_candidates_by_original_distance():
    X = clustered(n=50)
    rng = np.random.default_rng(0)
    cand = np.array([rng.choice(np.delete(np.arange(50), r), 6, replace=False) for r in range(50)])
    cand[3, 5] = -1  # a missing candidate sorts last
    d, i = rerank(X, cand, 3, block=16)
    for r in (0, 3, 49):
        c = cand[r][cand[r] >= 0]
        dist = np.linalg.norm(X[c].astype(np.float64) - X[r], axis=1)
        order = np.argsort(dist)[:3]
        assert list(i[r]) == list(c[order]) and np.allclose(d[r], dist[order], rtol=1e-5)


def test_pca_graph_recall_in_both_spaces():
    X = clustered()
    n, k, p = X.shape[0], 10, 4
    # a search that visits every cell: the exact kNN of the projected data
    b = KnnApproxGraph(k=k, index="ivf", nlist=10, nprobe=10, pca=p)
    g, _ = b.build(X)
    info = g.info
    assert info["pca"] == p and info["distances_in"] == f"pca{p}" and info["recall_at_k"] == 1.0
    # independent check: exact neighbours in numpy's PCA space, judged against numpy's exact neighbours in
    # the original space, on the same seeded queries
    Y = pca_numpy(X, p)
    queries = np.sort(np.random.default_rng(0).choice(n, size=n, replace=False))
    _, yi = brute_knn(Y, k, queries)
    ed, ei = brute_knn(X, k, queries)
    yd_orig = np.sqrt(((X[queries, None].astype(np.float64) - X[yi]) ** 2).sum(-1))
    expect = recall_at_k(yi, yd_orig, ei, ed)
    assert expect < 0.95  # the projection loses neighbours: the test can tell the two spaces apart
    assert info["recall_at_k_original"] == pytest.approx(expect, abs=0.01)
    # the graph's distances are the projected ones: sigma (mean 10th-neighbour distance / 3) from numpy's PCA
    yd, _ = brute_knn(Y, 10, np.arange(n))
    assert g.sigma == pytest.approx(yd[:, 9].mean() / 3, rel=1e-3)

    # refine: candidates from the projection, distances and ranking from the original space
    r = KnnApproxGraph(k=k, index="ivf", nlist=10, nprobe=10, pca=p, refine=4)
    gr, _ = r.build(X)
    assert gr.info["distances_in"] == "original"
    assert gr.info["recall_at_k"] == gr.info["recall_at_k_original"] > info["recall_at_k_original"]
    # independently: the 40 nearest in numpy's projection, re-ranked by the original distance, the best 10
    _, cand = brute_knn(Y, 40, np.arange(n))
    dc = np.sort(np.sqrt(((X[:, None].astype(np.float64) - X[cand]) ** 2).sum(-1)), axis=1)
    assert gr.sigma == pytest.approx(dc[:, 9].mean() / 3, rel=1e-4)
    W = gr.W.tocoo()
    d_edge = np.sqrt(-2 * gr.sigma ** 2 * np.log(W.data))
    d_true = np.linalg.norm(X[W.row].astype(np.float64) - X[W.col], axis=1)
    assert np.allclose(d_edge, d_true, rtol=1e-3, atol=1e-3)


def test_pca_must_reduce_the_dimension():
    X = clustered(n=200, d=8)
    with pytest.raises(UserError, match=r"^graph.pca=8 is not allowed: it must be less than the number of "
                                        r"features \(8\); or pca=null$"):
        KnnApproxGraph(k=5, pca=8).build(X)


def test_cache_key_covers_pca_and_refine():
    X = clustered(n=300)
    keys = {KnnApproxGraph(k=5, **kw).build(X, data_fingerprint="fp")[0].key
            for kw in [{}, {"pca": 4}, {"pca": 4, "refine": 2}, {"refine": 2}, {"pca": 4, "train_size": 5000}]}
    assert len(keys) == 4  # train_size >= n changes nothing, so it is not in the key


class FakeGpuFaiss:
    """faiss with ``get_num_gpus`` and ``index_cpu_to_all_gpus`` monkeypatched (no GPU needed): the index
    stays the CPU one, and every move is recorded."""

    def __init__(self, monkeypatch, n_gpus):
        import faiss

        self.moved = []
        monkeypatch.setattr(faiss, "get_num_gpus", lambda: n_gpus, raising=False)

        def to_gpus(index, *a, **kw):
            self.moved.append(type(index).__name__)
            return index

        monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", to_gpus, raising=False)


@pytest.fixture
def auto_device():
    devices.configure("auto")
    yield
    devices.configure("auto")


def test_gpu_chosen_when_faiss_sees_one(monkeypatch, auto_device):
    fake = FakeGpuFaiss(monkeypatch, 2)
    X = clustered(n=400)
    g, _ = KnnApproxGraph(k=5, index="ivf").build(X)
    assert g.info["device"] == "gpu:2"
    assert "IndexIVFFlat" in fake.moved and "IndexFlatL2" in fake.moved  # the search and the recall check
    assert devices.report()["faiss"] == "gpu:2"
    fake.moved.clear()
    gh, _ = KnnApproxGraph(k=5, index="hnsw").build(X)  # no GPU HNSW in faiss: stays on the CPU
    assert gh.info["device"] == "cpu" and "IndexHNSWFlat" not in fake.moved


def test_device_cpu_forces_the_cpu(monkeypatch, auto_device):
    fake = FakeGpuFaiss(monkeypatch, 1)
    devices.configure("cpu")
    g, _ = KnnApproxGraph(k=5, index="ivf").build(clustered(n=400))
    assert g.info["device"] == "cpu" and fake.moved == []
    assert devices.report()["faiss"] == "cpu"


def test_cpu_build_reports_cpu(monkeypatch, auto_device):
    import faiss

    monkeypatch.delattr(faiss, "get_num_gpus", raising=False)
    assert devices.faiss_device(faiss) == "cpu"
    monkeypatch.setattr(faiss, "get_num_gpus", lambda: 0, raising=False)
    assert devices.faiss_device(faiss) == "cpu"


def test_result_records_device_and_device_is_not_in_the_hash(tmp_path):
    from lgcexp.pipeline import run
    from lgcexp.rundir import config_hash
    from tests.helpers import make_cfg

    cfg = make_cfg("device=cpu", f"paths.cache_dir={tmp_path}")
    try:
        r = run(cfg)
    finally:
        devices.configure("auto")
    assert r["device"]["faiss"] == "cpu"
    assert config_hash(make_cfg("device=cpu")) == config_hash(make_cfg("device=auto"))
    with pytest.raises(UserError, match="^device=gpu is not allowed: choose one of auto, cpu$"):
        from lgcexp.config import plan
        plan(make_cfg("device=gpu"))


def test_make_infimnist_prefix_property_and_labels(tmp_path):
    from lgcexp.data import infimnist as mi

    rng = np.random.default_rng(0)
    base = (rng.random((mi.N_MNIST, 784)) * 255).astype(np.uint8)
    base[:, :100] = 0
    labels = rng.integers(0, 10, mi.N_MNIST).astype(np.uint8)
    src = tmp_path / "mnist.npz"
    np.savez(src, X=base, y=labels)
    xa, ya = mi.make(70010, 7, tmp_path / "a", src, quiet=True)
    xb, yb = mi.make(70004, 7, tmp_path / "b", src, quiet=True)
    xp, yp = mi.make(70004, 7, tmp_path / "a", src, quiet=True)  # copied from the bigger set beside it
    assert np.array_equal(np.load(xp), np.load(xb)) and np.array_equal(np.load(yp), np.load(yb))
    A, B = np.load(xa, mmap_mode="r"), np.load(xb, mmap_mode="r")
    assert A.dtype == np.float32 and A.shape == (70010, 784)
    assert np.array_equal(A[:70000], base.astype(np.float32))  # the digits themselves first
    assert np.array_equal(A[:70004], B)  # a smaller set is a prefix of a bigger one (same seed)
    assert np.array_equal(np.load(ya), labels[np.arange(70010) % 70000])
    new = np.asarray(A[70000:])
    assert not np.array_equal(new, base[:10].astype(np.float32))  # deformed
    assert new.min() >= 0 and new.max() <= 255
    # an identity deformation returns the image: zero displacement, no rotation, no shift
    img = base[:3].reshape(3, 28, 28).astype(np.float32)
    same = mi.deform_block(img, np.random.default_rng(1), alpha=0.0, sigma=4.0, rotate=0.0, shift=0.0)
    assert np.allclose(same, img, atol=1e-3)
    c, _ = mi.make(70010, 8, tmp_path / "c", src, quiet=True)
    assert not np.array_equal(np.load(c, mmap_mode="r")[70000:], new)  # the seed matters
    # blocks deformed by worker processes give the file one process writes (a full and a short block)
    one, _ = mi.make(80004, 7, tmp_path / "one", src, quiet=True)
    many, _ = mi.make(80004, 7, tmp_path / "many", src, quiet=True, workers=2)
    assert np.array_equal(np.load(one), np.load(many))
    assert np.array_equal(np.load(one, mmap_mode="r")[:70010], A)


def test_exact_knn_graph_searches_on_the_gpu_when_faiss_sees_one(monkeypatch, auto_device):
    """graph=knn: with a GPU the exact search goes to faiss's (moved) flat index, not the CPU self-join;
    with device=cpu it stays on the CPU. The neighbours are the brute-force ones either way."""
    from lgcexp.graph import knn

    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3)).astype(np.float32)
    Xi = rng.integers(0, 50, size=(9000, 3)).astype(np.float32)
    fake = FakeGpuFaiss(monkeypatch, 1)
    assert not knn.use_selfjoin(Xi)  # integer-valued and large enough, but the GPU search is chosen
    d, i = knn.exact_search(X, 3)
    assert fake.moved == ["IndexFlatL2"]
    sq = ((X[:, None, :].astype(np.float64) - X[None, :, :]) ** 2).sum(-1)
    np.fill_diagonal(sq, np.inf)
    assert np.array_equal(np.sort(i, axis=1), np.sort(np.argsort(sq, axis=1, kind="stable")[:, :3], axis=1))
    devices.configure("cpu")
    fake.moved.clear()
    assert knn.use_selfjoin(Xi)
    knn.flat_index(X)
    assert fake.moved == []

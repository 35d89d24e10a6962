"""Graph builders (graph=knn, knn_approx, precomputed), kernels, their parameter tables and yaml files."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import make_cfg

from lgcexp.cache import Cache, stable_hash
from lgcexp.config import plan
from lgcexp.errors import UserError
from lgcexp.graph import GRAPH_BUILDERS, KnnGraph, build_graph, graph_key
from lgcexp.params import constructor_defaults

CONF_GRAPH = Path(__file__).resolve().parents[1] / "conf" / "graph"


def dense_knn_graph(X, k, symmetrize="union"):
    """Brute force: the distance matrix, the kNN edge mask (symmetrised) and each row's sorted distances."""
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    Dn = D.copy()
    np.fill_diagonal(Dn, np.inf)
    order = np.argsort(Dn, axis=1, kind="stable")
    M = np.zeros_like(D, dtype=bool)
    M[np.repeat(np.arange(len(X)), k), order[:, :k].ravel()] = True
    E = (M | M.T) if symmetrize == "union" else (M & M.T)
    return D, E, np.take_along_axis(Dn, order, 1)


# -- yaml files and parameter tables -------------------------------------------------------------------------
@pytest.mark.parametrize("path", sorted(CONF_GRAPH.glob("*.yaml")), ids=lambda p: p.stem)
def test_yaml_defaults_equal_constructor_defaults(path):
    conf = yaml.safe_load(path.read_text())
    assert conf["name"] == path.stem
    cls = GRAPH_BUILDERS.get(conf["name"])
    params = {k: v for k, v in conf.items() if k not in ("name", "_target_")}
    # a data set's suggestion is read through an interpolation whose fallback is the constructor default
    for k, v in list(params.items()):
        if isinstance(v, str) and v.startswith("${oc.select:suggested."):
            params[k] = yaml.safe_load(v[:-1].rsplit(",", 1)[1])
    # a mandatory value (???) has the constructor default None, which its constraints refuse
    required = {k for k, v in params.items() if v == "???"}
    defaults = constructor_defaults(cls)
    assert {k: v for k, v in params.items() if k not in required} == {k: v for k, v in defaults.items()
                                                                       if k not in required}
    assert set(params) == set(defaults) == set(cls._parameter_constraints)
    for k in required:
        assert defaults[k] is None and not any(c.is_satisfied_by(None) for c in cls._parameter_constraints[k])
    assert cls.name == path.stem and cls.__doc__
    missing = [p for p in defaults if p not in cls.__doc__]
    assert not missing, f"{cls.__name__}'s docstring does not describe {missing}"  # every parameter documented


# -- kernels (graph=knn) --------------------------------------------------------------------------------------
@pytest.mark.parametrize("symmetrize", ["union", "mutual"])
@pytest.mark.parametrize("kernel,local_scale", [("gaussian", 7), ("self_tuning", 7), ("self_tuning", 3),
                                                 ("self_tuning", 12), ("binary", 7)])
def test_kernels_match_dense_brute_force(kernel, local_scale, symmetrize):
    X = np.random.default_rng(3).normal(size=(90, 4))
    k, sigma = 6, 0.7
    g, _ = build_graph(X, k, sigma, symmetrize, kernel=kernel, local_scale=local_scale)
    D, E, Dsorted = dense_knn_graph(X, k, symmetrize)
    if kernel == "gaussian":
        ref = np.exp(-D ** 2 / (2 * sigma ** 2))
        assert g.sigma == sigma
    elif kernel == "self_tuning":
        s = Dsorted[:, local_scale - 1]  # distance to the local_scale-th neighbour, self excluded
        ref = np.exp(-D ** 2 / np.outer(s, s))
        assert np.isnan(g.sigma)
    else:
        ref = np.ones_like(D)
        assert np.isnan(g.sigma)
    ref = np.where(E, ref, 0.0)
    np.fill_diagonal(ref, 0.0)
    W = g.W.toarray()
    assert np.allclose(W, ref, rtol=1e-5, atol=1e-7)
    assert np.array_equal(W > 0, ref > 0)
    assert abs(g.W - g.W.T).max() == 0 and np.all(g.W.diagonal() == 0)


def test_self_tuning_duplicates_get_a_positive_scale():
    X = np.vstack([np.zeros((9, 2)), np.random.default_rng(0).normal(size=(30, 2))])  # 9 copies of one point
    g, _ = build_graph(X, 5, "mean", kernel="self_tuning", local_scale=3)
    assert np.all(np.isfinite(g.W.data)) and g.W.nnz > 0
    assert g.W[0, 1] == 1.0  # coincident points: weight 1, edge kept


def test_cache_key_covers_kernel_and_its_parameters(tmp_path):
    X = np.random.default_rng(4).normal(size=(60, 3))
    cache = Cache(tmp_path)
    keys = set()
    for kw in [dict(kernel="gaussian"), dict(kernel="self_tuning", local_scale=7),
               dict(kernel="self_tuning", local_scale=5), dict(kernel="binary")]:
        g, hit = build_graph(X, 6, "mean", cache=cache, data_fingerprint="fp", **kw)
        assert not hit
        g2, hit2 = build_graph(X, 6, "mean", cache=cache, data_fingerprint="fp", **kw)
        assert hit2 and abs(g.W - g2.W).max() == 0
        keys.add(g.key)
    assert len(keys) == 4
    # the exact Gaussian graph keeps the key it always had (graphs cached before kernels existed are reused)
    assert graph_key("fp", 6, "mean", "union") == stable_hash({"data": "fp", "k": 6, "sigma": "mean", "sym": "union",
                                                               "v": 1})


@pytest.mark.parametrize("override,msg", [
    ("graph.kernel=foo", "graph.kernel=foo is not allowed: choose one of gaussian, self_tuning, binary"),
    ("graph.local_scale=0", "graph.local_scale=0 is not allowed: it must be an integer >= 1"),
    ("graph.local_scale=2.5", "graph.local_scale=2.5 is not allowed: it must be an integer >= 1"),
    ("graph.symmetrize=both", "graph.symmetrize=both is not allowed: choose one of union, mutual"),
])
def test_bad_kernel_values_one_line(override, msg):
    with pytest.raises(UserError) as e:
        plan(make_cfg(override))
    assert str(e.value) == msg


def test_local_scale_against_data_size():
    b = KnnGraph(k=5, kernel="self_tuning", local_scale=40)
    with pytest.raises(UserError, match=r"^graph.local_scale=40 is not allowed: it must be less than the number "
                                        r"of points \(30\)$"):
        b.check_data(30, 2)
    KnnGraph(k=5, kernel="gaussian", local_scale=40).check_data(30, 2)  # unused by the Gaussian: not checked
    KnnGraph(k=5, sigma="mean", kernel="binary").check_data(8, 2)      # sigma=mean unused by binary


# -- graph=knn_approx -----------------------------------------------------------------------------------------
def clustered(n=1500, d=12, seed=5):
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=4.0, size=(8, d))
    return (centers[rng.integers(0, 8, n)] + rng.normal(size=(n, d))).astype(np.float32)


def test_recall_at_k_by_hand():
    from lgcexp.graph.knn_approx import recall_at_k

    exact_i = np.array([[1, 2, 3], [0, 2, 3]])
    exact_d = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]])
    approx_i = np.array([[1, 3, 7], [0, 9, -1]])  # row 0: 7 is at distance 3.0, tied with the 3rd: found
    approx_d = np.array([[1.0, 3.0, 3.0], [1.0, 5.0, np.nan]])
    assert recall_at_k(approx_i, approx_d, exact_i, exact_d) == pytest.approx((3 / 3 + 1 / 3) / 2)


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_knn_approx_recall_recorded_and_graph_close_to_exact(index):
    from lgcexp.graph.knn_approx import KnnApproxGraph

    X = clustered()
    b = KnnApproxGraph(k=10, sigma="mean", index=index)
    g, hit = b.build(X)
    assert not hit and b.info_ == g.info
    assert g.info["index"] == index and g.info["recall_queries"] == 1000
    assert 0.95 <= g.info["recall_at_k"] <= 1.0
    exact, _ = build_graph(X, 10, "mean")
    assert abs(g.W - g.W.T).max() == 0 and np.all(g.W.diagonal() == 0)
    same = (g.W != 0).multiply(exact.W != 0).nnz / exact.W.nnz
    assert same >= 0.95
    # a wide search finds every neighbour: the same graph as the exact search
    wide = KnnApproxGraph(k=10, index=index, ef_search=400, nprobe=40 if index == "ivf" else 16,
                          nlist=40 if index == "ivf" else "auto")
    gw, _ = wide.build(X)
    assert gw.info["recall_at_k"] == 1.0
    assert ((gw.W != 0) != (exact.W != 0)).nnz == 0  # the same edges
    assert np.allclose(gw.W.toarray(), exact.W.toarray(), rtol=1e-5, atol=1e-8)  # float32 distances may differ
    assert gw.sigma == pytest.approx(exact.sigma, rel=1e-6)


def test_knn_approx_small_data_checks_all_points_and_kernels():
    from lgcexp.graph.knn_approx import KnnApproxGraph

    X = clustered(n=300)
    g, _ = KnnApproxGraph(k=8, kernel="self_tuning", index="ivf").build(X)
    assert g.info["recall_queries"] == 300 and g.info["nlist"] == 300 // 39
    assert np.isnan(g.sigma) and g.W.nnz > 0


def test_knn_approx_cache_key_covers_index_parameters(tmp_path):
    from lgcexp.graph.knn_approx import KnnApproxGraph

    X = clustered(n=1200)
    cache = Cache(tmp_path)
    keys = set()
    for kw in [dict(index="hnsw"), dict(index="hnsw", ef_search=48), dict(index="hnsw", M=8),
               dict(index="hnsw", ef_construction=50), dict(index="ivf"), dict(index="ivf", nprobe=4),
               dict(index="ivf", nlist=20), dict(index="hnsw", recall_queries=1100)]:
        g, hit = KnnApproxGraph(k=6, **kw).build(X, cache=cache, data_fingerprint="fp")
        assert not hit
        g2, hit2 = KnnApproxGraph(k=6, **kw).build(X, cache=cache, data_fingerprint="fp")
        assert hit2 and g2.info == g.info and abs(g2.W - g.W).max() == 0  # the recall comes back from the cache
        keys.add(g.key)
    assert len(keys) == 8
    # the parameters of the index not in use do not change the key
    a = KnnApproxGraph(k=6, index="hnsw", nprobe=3).build(X, cache=cache, data_fingerprint="fp")
    assert a[1] is True
    exact, _ = build_graph(X, 6, "mean", cache=cache, data_fingerprint="fp")
    assert exact.key not in keys


@pytest.mark.parametrize("override,msg", [
    ("graph.index=annoy", "graph.index=annoy is not allowed: choose one of hnsw, ivf"),
    ("graph.M=1", "graph.M=1 is not allowed: it must be an integer in [2, 256]"),
    ("graph.ef_search=0", "graph.ef_search=0 is not allowed: it must be an integer >= 1"),
    ("graph.ef_construction=-3", "graph.ef_construction=-3 is not allowed: it must be an integer >= 1"),
    ("graph.nlist=many", "graph.nlist=many is not allowed: it must be an integer >= 1 or auto"),
    ("graph.nprobe=0", "graph.nprobe=0 is not allowed: it must be an integer >= 1"),
    ("graph.recall_queries=100", "graph.recall_queries=100 is not allowed: it must be an integer >= 1000"),
    ("graph.kernel=foo", "graph.kernel=foo is not allowed: choose one of gaussian, self_tuning, binary"),
    ("+graph.efSearch=10", "graph.efSearch is not a parameter of graph=knn_approx; allowed: M, ef_construction, "
                          "ef_search, index, k, kernel, local_scale, nlist, nprobe, pca, recall_queries, "
                          "refine, sigma, "
                          "symmetrize, train_size"),
    ("graph.pca=0", "graph.pca=0 is not allowed: it must be an integer >= 1 or null"),
    ("graph.refine=0", "graph.refine=0 is not allowed: it must be an integer >= 1"),
])
def test_knn_approx_bad_values_one_line(override, msg):
    with pytest.raises(UserError) as e:
        plan(make_cfg("graph=knn_approx", override))
    assert str(e.value) == msg


def test_knn_approx_relations_and_data_checks():
    with pytest.raises(UserError) as e:
        plan(make_cfg("graph=knn_approx", "graph.index=ivf", "graph.nlist=8", "graph.nprobe=9"))
    assert str(e.value) == "graph.nprobe=9 is not allowed: it must be at most graph.nlist (8)"
    plan(make_cfg("graph=knn_approx", "graph.index=hnsw", "graph.nlist=8", "graph.nprobe=9"))  # ivf unused
    p = plan(make_cfg("graph=knn_approx", "graph.index=ivf", "graph.nlist=5000"))
    with pytest.raises(UserError) as e:
        p.graph.check_data(1797, 10)
    assert str(e.value) == ("graph.nlist=5000 is not allowed: it must be at most the number of points (1797); "
                            "or use nlist=auto")



def test_knn_approx_recall_in_result_json(tmp_path):
    import json

    from lgcexp.pipeline import run

    r = run(make_cfg("algo=lgc", "graph=knn_approx", "graph.index=ivf", tmp=tmp_path), out_dir=tmp_path / "run")
    g = json.loads((tmp_path / "run" / "result.json").read_text())["graph"]
    assert g["builder"] == "knn_approx" and g["index"] == "ivf" and g["k"] == 10  # the dataset preset's k
    assert g["recall_queries"] == 1000 and 0.95 <= g["recall_at_k"] <= 1.0 and g["nlist"] == 42  # round(sqrt(1797))
    assert r["acc_unlabeled"] > 0.8

# -- graph=precomputed ----------------------------------------------------------------------------------------
def test_precomputed_round_trips_a_knn_graph(tmp_path):
    """Save the W that graph=knn builds, read it back with graph=precomputed: the same LGC predictions."""
    import scipy.sparse as sp

    from lgcexp.graph.precomputed import PrecomputedGraph
    from lgcexp.pipeline import load, run

    p = plan(make_cfg("algo=lgc", tmp=tmp_path))
    data = load(p, p.config["paths"])
    g, _ = p.graph.build(data.X)
    sp.save_npz(tmp_path / "W.npz", g.W)
    a = run(make_cfg("algo=lgc", tmp=tmp_path), out_dir=tmp_path / "a")
    b = run(make_cfg("algo=lgc", "graph=precomputed", f"graph.path={tmp_path}/W.npz", tmp=tmp_path),
            out_dir=tmp_path / "b")
    pa = (tmp_path / "a" / "labels.csv").read_text()
    pb = (tmp_path / "b" / "labels.csv").read_text()
    assert pa == pb and a["acc_unlabeled"] == b["acc_unlabeled"] and a["graph"]["edges"] == b["graph"]["edges"]
    assert b["graph"]["builder"] == "precomputed" and b["graph"]["file"] == str((tmp_path / "W.npz").resolve())
    assert b["graph"]["sigma"] is None or np.isnan(b["graph"]["sigma"])
    assert "k" not in b["graph"]  # the dataset preset's graph.k is ignored
    # the builder never reads the features: it builds without them
    g2, hit = PrecomputedGraph(path=str(tmp_path / "W.npz")).build(None)
    assert not hit and abs(g2.W - g.W).max() == 0 and g2.key == b["graph"]["key"]


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("graphs")
    _bad_files(tmp)
    return tmp


def _bad_files(tmp):
    import scipy.sparse as sp

    n = 1797  # digits
    rng = np.random.default_rng(0)
    A = sp.random(n, n, density=0.002, random_state=0, format="csr")
    sym = A.maximum(A.T).tocsr()
    sym.setdiag(0)
    sym.eliminate_zeros()
    files = {}

    def save(name, M):
        sp.save_npz(tmp / name, M)
        files[name] = tmp / name

    save("good.npz", sym)
    asym = sym.copy().tolil()
    asym[0, 5], asym[5, 0] = 0.5, 0.0
    save("asymmetric.npz", asym.tocsr())
    neg = sym.copy()
    neg.data[:4] = -neg.data[:4]
    save("negative.npz", _symmetric_with(neg))
    nan = sym.copy()
    nan.data[[0]] = np.nan
    save("nan.npz", nan)
    save("wrong_size.npz", sym[:100, :100])
    save("not_square.npz", sym[:, :100])
    diag = sym.copy().tolil()
    diag.setdiag(1.0)
    save("diagonal.npz", diag.tocsr())
    np.save(tmp / "dense.npy", rng.random((10, 10)))
    files["dense.npy"] = tmp / "dense.npy"
    np.savez(tmp / "arrays.npz", W=rng.random((10, 10)))
    files["arrays.npz"] = tmp / "arrays.npz"
    (tmp / "junk.npz").write_bytes(b"PK\x03\x04 this is no zip file")
    files["junk.npz"] = tmp / "junk.npz"
    (tmp / "text.npz").write_text("0 1 0.5\n")
    files["text.npz"] = tmp / "text.npz"
    return files


def _symmetric_with(M):
    """A symmetric matrix keeping M's (negative) values."""
    import scipy.sparse as sp

    U = sp.triu(M, k=1)
    return (U + U.T).tocsr()


@pytest.mark.parametrize("name,why", [
    ("asymmetric.npz", r"the matrix is not symmetric \(largest \|W - W\^T\| = 0\.5\); set graph.symmetrize=max "
                       r"or graph.symmetrize=mean to symmetrise it"),
    ("negative.npz", r"\d+ entries are negative \(smallest -[0-9.e-]+\); weights must be >= 0"),
    ("nan.npz", r"1 entries are NaN or infinite; weights must be finite"),
    ("wrong_size.npz", r"the matrix is 100 x 100 but the data has 1797 points"),
    ("not_square.npz", r"the matrix is 1797 x 100; it must be square \(n x n\)"),
    ("diagonal.npz", r"1797 diagonal entries are nonzero \(self-loops\); set graph.diagonal=drop to drop them"),
    ("dense.npy", r"it is a dense array \(.npy\); save the graph as a sparse matrix with "
                  r"scipy.sparse.save_npz\(path, scipy.sparse.csr_matrix\(W\)\)"),
    ("arrays.npz", r"it holds the arrays W, not a sparse matrix; save the graph with "
                   r"scipy.sparse.save_npz\(path, scipy.sparse.csr_matrix\(W\)\)"),
    ("junk.npz", r"cannot read it as a scipy sparse .npz \(.+\)"),
    ("text.npz", r"it is not an .npz file; save the graph with scipy.sparse.save_npz"),
    ("missing.npz", r"no such file"),
])
def test_precomputed_bad_files_refused_in_one_line(bad_files, tmp_path, name, why):
    import re

    from lgcexp.pipeline import run

    typed = f"{bad_files}/{name}"
    with pytest.raises(UserError) as e:
        run(make_cfg("algo=lgc", "graph=precomputed", f"graph.path={typed}", tmp=tmp_path))
    msg = str(e.value)
    assert "\n" not in msg
    assert re.fullmatch(re.escape(f"graph.path={typed} is not allowed: ") + why, msg), msg


def test_precomputed_rules_fix_what_they_name(bad_files, tmp_path):
    from lgcexp.graph.precomputed import PrecomputedGraph

    files = {p.name: p for p in bad_files.iterdir()}
    good, _ = PrecomputedGraph(path=str(files["good.npz"])).load(1797)
    for rule, val in [("max", 0.5), ("mean", 0.25)]:
        b = PrecomputedGraph(path=str(files["asymmetric.npz"]), symmetrize=rule)
        b.check_data(1797, 10)
        g, _ = b.build(None)
        assert abs(g.W - g.W.T).max() == 0 and g.W[0, 5] == val == g.W[5, 0]
        assert b.info_["symmetrized"] == rule
    b = PrecomputedGraph(path=str(files["diagonal.npz"]), diagonal="drop")
    g, _ = b.build(np.zeros((1797, 1)))
    assert np.all(g.W.diagonal() == 0) and abs(g.W - good).max() == 0 and b.info_["diagonal_dropped"] == 1797
    assert g.key == PrecomputedGraph(path=str(files["good.npz"])).build(None)[0].key  # keyed by content
    # round-off asymmetry (1e-14 relative) is averaged away, not refused
    import scipy.sparse as sp
    W = good.copy()
    W.data = W.data * (1 + 1e-14 * np.random.default_rng(1).random(W.nnz))
    sp.save_npz(tmp_path / "roundoff.npz", W)
    g, _ = PrecomputedGraph(path=str(tmp_path / "roundoff.npz")).build(None)
    assert abs(g.W - g.W.T).max() == 0


@pytest.mark.parametrize("overrides,msg", [
    (["graph.path=W.npz", "graph.symmetrize=union"],
     "graph.symmetrize=union is not allowed: choose one of none, max, mean"),
    (["graph.path=W.npz", "graph.diagonal=keep"], "graph.diagonal=keep is not allowed: choose one of refuse, drop"),
    ([], "graph.path has no value: set it on the command line, e.g. graph.path=..."),
    (["graph.path=''"], "graph.path='' is not allowed: it must be a path to a scipy sparse .npz file "
                        "(scipy.sparse.save_npz)"),
])
def test_precomputed_bad_values_one_line(overrides, msg):
    with pytest.raises(UserError) as e:
        plan(make_cfg("graph=precomputed", *overrides))
    assert str(e.value) == msg


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_knn_approx_recall_on_isolet_in_result_json(tmp_path, data_dir, index):
    """The default approximate index reaches recall@k >= 0.95 on ISOLET, measured and recorded."""
    from helpers import make_cfg

    from lgcexp.pipeline import run

    r = run(make_cfg("dataset=isolet", "graph=knn_approx", f"graph.index={index}", f"paths.data_dir={data_dir}",
                     tmp=tmp_path), out_dir=tmp_path / "run")
    assert r["graph"]["builder"] == "knn_approx" and r["graph"]["recall_queries"] >= 1000
    assert r["graph"]["recall_at_k"] >= 0.95
    assert (json.loads((tmp_path / "run" / "result.json").read_text())["graph"]["recall_at_k"]
            == r["graph"]["recall_at_k"])


@pytest.mark.mnist
def test_knn_approx_recall_on_mnist(tmp_path, data_dir):
    from helpers import make_cfg

    from lgcexp.pipeline import run

    r = run(make_cfg("dataset=mnist", "graph=knn_approx", f"paths.data_dir={data_dir}", tmp=tmp_path))
    assert r["graph"]["recall_at_k"] >= 0.95

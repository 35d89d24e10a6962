"""Graph builders (graph=knn, knn_approx, precomputed), kernels, their parameter tables and yaml files."""
import inspect
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
    required = {k for k, v in params.items() if v == "???"}  # a mandatory value: no constructor default
    assert {k: v for k, v in params.items() if k not in required} == constructor_defaults(cls)
    sig = inspect.signature(cls.__init__).parameters
    assert required == {k for k, p in sig.items() if k != "self" and p.default is p.empty}
    assert set(params) == set(cls._parameter_constraints)
    assert cls.name == path.stem and cls.__doc__ and "====" in cls.__doc__  # a parameter table in the docstring


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

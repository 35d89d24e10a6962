"""The features stage (lgcexp.features): PCA against numpy's SVD, the learned maps deterministic and
shape-correct on digits, the out-of-fold property of ``oof`` tested directly, the cache, the config hash
of raw runs, and a user's own .npy embeddings."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from helpers import make_cfg

from lgcexp.cache import Cache
from lgcexp.config import plan
from lgcexp.errors import UserError
from lgcexp.features import FEATURES, is_default, make_features
from lgcexp.params import constructor_defaults
from lgcexp.rundir import config_hash

CONF = Path(__file__).resolve().parents[1] / "conf" / "features"


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X.astype(np.float64), y.astype(np.int64)


@pytest.mark.parametrize("name", ["raw", "pca", "vae", "oof"])
def test_yaml_defaults_equal_constructor_defaults(name):
    section = yaml.safe_load((CONF / f"{name}.yaml").read_text())["features"]
    cls = FEATURES.get(section.pop("name"))
    defaults = {k: list(v) if isinstance(v, tuple) else v for k, v in constructor_defaults(cls).items()}
    assert section == defaults
    assert set(cls._parameter_constraints) == set(defaults)


def test_pca_matches_numpy_svd(digits):
    X, _ = digits
    Z = make_features("pca", n_components=7).transform(X, data_fingerprint="d").X
    Xc = X - X.mean(axis=0)
    _, s, Vt = np.linalg.svd(Xc, full_matrices=False)
    ref = Xc @ Vt[:7].T
    signs = np.sign(np.sum(Z * ref, axis=0))  # a component's sign is a convention
    np.testing.assert_allclose(Z, ref * signs, atol=1e-8 * np.abs(ref).max())
    W = make_features("pca", n_components=7, whiten=True).transform(X, data_fingerprint="d").X
    np.testing.assert_allclose(np.abs(W), np.abs(ref) / (s[:7] / np.sqrt(X.shape[0] - 1)), rtol=1e-6, atol=1e-8)


def test_pca_tall_data_uses_the_same_components():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6)) @ rng.normal(size=(6, 6))  # n >= 10 d: covariance solver
    Z = make_features("pca", n_components=3).transform(X, data_fingerprint="t").X
    Xc = X - X.mean(axis=0)
    ref = Xc @ np.linalg.svd(Xc, full_matrices=False)[2][:3].T
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), atol=1e-8)


def _small(name, **kw):
    base = {"vae": dict(latent=4, hidden=32, epochs=3),
            "oof": dict(hidden=[32], epochs=20, folds=3, learning_rate=0.005)}[name]
    return make_features(name, **{**base, **kw})


def test_vae_is_deterministic_and_shaped(digits):
    X, _ = digits
    a = _small("vae").transform(X, data_fingerprint="d")
    b = _small("vae").transform(X, data_fingerprint="d")
    assert a.X.shape == (X.shape[0], 4) and a.X.dtype == np.float32
    np.testing.assert_array_equal(a.X, b.X)
    c = _small("vae", seed=1).transform(X, data_fingerprint="d")
    assert not np.array_equal(a.X, c.X)
    assert a.info["final_loss"] < a.info["first_loss"]  # it learns


def test_oof_is_deterministic_shaped_and_out_of_fold(digits):
    X, y = digits
    rng = np.random.default_rng(0)
    labeled = np.sort(rng.choice(X.shape[0], 300, replace=False))
    yl = y[labeled].copy()
    kw = dict(data_fingerprint="d", labeled=labeled, n_classes=10)
    a = _small("oof").transform(X, y=yl, **kw)
    b = _small("oof").transform(X, y=yl, **kw)
    assert a.X.shape == (X.shape[0], 10)
    np.testing.assert_array_equal(a.X, b.X)
    assert a.info["oof_agreement"] > 0.7  # the network learns the digits from 200 labels per fold model
    # the out-of-fold property: change one point's label only; its own embedding does not move
    for i in (0, 17, 150):
        y2 = yl.copy()
        y2[i] = (y2[i] + 3) % 10
        c = _small("oof").transform(X, y=y2, **kw)
        np.testing.assert_array_equal(c.X[labeled[i]], a.X[labeled[i]])
        assert not np.array_equal(c.X, a.X)  # the label did train the other fold models
    # folds do not look at the labels, and split the points evenly
    from lgcexp.preprocess import fold_of

    f_lab, f_unl = fold_of(300, 3, 0, 1497)
    assert np.bincount(f_lab).tolist() == [100, 100, 100] and np.ptp(np.bincount(f_unl)) <= 1


def test_cache_hit_gives_identical_arrays(tmp_path, digits):
    X, _ = digits
    cache = Cache(tmp_path)
    a = _small("vae").transform(X, data_fingerprint="d", cache=cache)
    b = _small("vae").transform(X, data_fingerprint="d", cache=cache)
    assert (a.cache_hit, b.cache_hit) == (False, True)
    assert a.key == b.key and a.info == b.info and b.info["epochs"] == 3  # the training facts come with a hit
    np.testing.assert_array_equal(a.X, b.X)
    assert _small("vae", latent=5).key("d") != a.key  # the key holds the parameters
    assert _small("vae").key("e") != a.key           # ... and the data


def test_raw_keeps_the_config_hash_and_the_graph_key(tmp_path):
    from lgcexp import pipeline

    base = make_cfg("labels.n=60", tmp=tmp_path)
    from lgcexp.config import to_container

    c = to_container(base)
    c.pop("hydra", None)
    without = {k: v for k, v in c.items() if k != "features"}
    assert c["features"] == {"name": "raw"} and is_default(c["features"])
    assert config_hash(c) == config_hash(without)
    assert "features" not in pipeline.effective_config(c)
    pca = make_cfg("labels.n=60", "features=pca", "features.n_components=20", tmp=tmp_path)
    cp = to_container(pca)
    cp.pop("hydra", None)
    assert config_hash(cp) != config_hash(c)
    assert cp["graph"]["sigma"] == "mean"  # the data set's paper sigma is for its raw features
    r_raw = pipeline.run(without)
    r_raw2 = pipeline.run(c)
    r_pca = pipeline.run(cp)
    assert r_raw["config_hash"] == r_raw2["config_hash"] and r_raw["graph"]["key"] == r_raw2["graph"]["key"]
    assert r_raw["acc_unlabeled"] == r_raw2["acc_unlabeled"] and "features" not in r_raw
    assert r_pca["graph"]["key"] != r_raw["graph"]["key"]  # the graph's key holds the features' key
    assert r_pca["features"]["dim"] == 20 and r_pca["features"]["cache_hit"] is False
    assert pipeline.run(cp)["features"]["cache_hit"] is True


def test_bad_parameters_refused_in_the_plan():
    with pytest.raises(UserError, match=r"^features.n_components=0 is not allowed: it must be an integer >= 1$"):
        plan(make_cfg("features=pca", "features.n_components=0"))
    with pytest.raises(UserError, match=r"^features.hidden=\[0\] is not allowed"):
        plan(make_cfg("features=oof", "features.hidden=[0]"))
    with pytest.raises(UserError,
                       match="features.likelihood=poisson is not allowed: choose one of bernoulli, gaussian"):
        plan(make_cfg("features=vae", "features.likelihood=poisson"))


def test_own_npy_embeddings_still_work(tmp_path, digits):
    """A user's own embeddings (.npy) with their own labels: a diagnosis run, raw or PCA."""
    from lgcexp import pipeline
    from lgcexp.config import to_container

    X, y = digits
    np.save(tmp_path / "X.npy", X[:400].astype(np.float32))
    lab = y[:400].copy()
    lab[200:] = -1
    np.save(tmp_path / "y.npy", lab)
    for extra in ((), ("features=pca", "features.n_components=10")):
        c = to_container(make_cfg("dataset=npy", f"dataset.path={tmp_path}/X.npy",
                                  f"dataset.labels_path={tmp_path}/y.npy", *extra, tmp=tmp_path))
        c.pop("hydra", None)
        r = pipeline.run(c, out_dir=tmp_path / f"out{len(extra)}")
        assert r["mode"] == "diagnosis" and r["n_labeled"] == 200
        assert (tmp_path / f"out{len(extra)}" / "label_issues.csv").exists()
    assert r["features"]["dim"] == 10

"""lgcexp.preprocess, the one standardisation, PCA and fold rule: against scikit-learn and numpy's SVD, its
blockwise moments against the one-piece ones, the folds' partition and label-blindness, determinism, and the
out-of-fold views built on them (a point's own label never reaches the model that judges it)."""
import numpy as np
import pytest

from lgcexp.preprocess import column_moments, fold_of, fold_splits, pca_axes, pca_transform, standardize


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 9)) @ rng.normal(size=(9, 9)) + rng.normal(size=9) * 10
    X[:, 4] = 2.5  # a constant feature
    return X


def test_standardize_is_sklearns_standard_scaler(data):
    from sklearn.preprocessing import StandardScaler

    Z = standardize(data)
    np.testing.assert_allclose(Z, StandardScaler().fit_transform(data), atol=1e-12)
    assert np.all(Z[:, 4] == 0.0)  # a constant feature is only centred
    assert standardize(data, dtype=np.float32).dtype == np.float32


@pytest.mark.parametrize("block", [1, 7, 64, 1000])
def test_blockwise_moments_equal_the_one_piece_moments(data, block):
    rows = np.sort(np.random.default_rng(0).choice(300, 211, replace=False))
    mu, sd = column_moments(data, rows, block=block)
    np.testing.assert_allclose(mu, data[rows].mean(axis=0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sd, data[rows].std(axis=0), rtol=1e-10, atol=1e-12)
    # far from the origin, where a sum of squares would cancel
    shifted = data + 1e8
    np.testing.assert_allclose(column_moments(shifted, rows, block=block)[1], data[rows].std(axis=0), atol=1e-6)


@pytest.mark.parametrize("shape", [(300, 9), (12, 40)])  # the covariance route and the thin-SVD route
def test_pca_axes_are_the_leading_right_singular_vectors(shape):
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(5)
    X = rng.normal(size=shape) * np.linspace(3.0, 0.5, shape[1])
    p = 6
    mean, axes = pca_axes(X, p, block=16)
    np.testing.assert_allclose(mean, X.mean(axis=0), atol=1e-12)
    _, s, Vt = np.linalg.svd(X - X.mean(axis=0), full_matrices=False)
    ref = Vt[:p].T
    signs = np.sign((axes * ref).sum(axis=0))
    np.testing.assert_allclose(axes, ref * signs, atol=1e-8)
    np.testing.assert_allclose(axes.T @ axes, np.eye(p), atol=1e-10)
    # the sign convention is scikit-learn's: its exact PCA gives the same components and projection
    sk = PCA(p, svd_solver="full").fit(X)
    np.testing.assert_allclose(axes.T, sk.components_, atol=1e-8)
    np.testing.assert_allclose(pca_transform(X, p), sk.transform(X), atol=1e-8)
    # p is clipped to min(n, d); a float32 memory-map-like input gives the same axes up to float32 rounding
    assert pca_axes(X, 10_000)[1].shape[1] == min(shape)
    np.testing.assert_allclose(pca_axes(X.astype(np.float32), p)[1], axes, atol=1e-3)


def test_pca_features_equal_sklearns_pca(data):
    from sklearn.decomposition import PCA

    from lgcexp.features import make_features

    for whiten in (False, True):
        got = make_features("pca", n_components=4, whiten=whiten).transform(data, data_fingerprint="t")
        ref = PCA(4, whiten=whiten, svd_solver="full").fit(data)
        np.testing.assert_allclose(got.X, ref.transform(data), atol=1e-8)
        assert got.info["explained_variance_ratio"] == pytest.approx(ref.explained_variance_ratio_.sum())


def test_folds_partition_the_points_blind_to_labels():
    f, g = fold_of(103, 5, 7, 41)
    assert np.ptp(np.bincount(f)) <= 1 and np.ptp(np.bincount(g)) <= 1 and set(f) == set(range(5))
    again = fold_of(103, 5, 7, 41)
    assert np.array_equal(again[0], f) and np.array_equal(again[1], g)  # deterministic
    assert not np.array_equal(fold_of(103, 5, 8)[0], f)  # the seed draws them
    splits = list(fold_splits(103, 5, 7))
    assert len(splits) == 5
    tests = np.concatenate([te for _, te in splits])
    assert np.array_equal(np.sort(tests), np.arange(103))  # each point tested once
    for j, (tr, te) in enumerate(splits):
        assert np.array_equal(te, np.flatnonzero(f == j)) and np.intersect1d(tr, te).size == 0
        assert tr.size + te.size == 103
    assert len(list(fold_splits(3, 10, 0))) == 3 and len(list(fold_splits(10, 1, 0))) == 2  # clipped to [2, l]


@pytest.mark.parametrize("view", ["lda", "logistic", "mlp", "knn"])
def test_a_label_never_reaches_the_model_that_judges_it(view):
    """Change one label at a time: that point's own out-of-fold row is exactly what it was (its fold's model
    never saw the label and the folds do not depend on it), while some other row moves."""
    from sklearn.datasets import load_digits

    from lgcexp.issues.views import feature_probs, knn_oof_probs

    X, y = load_digits(return_X_y=True)
    X, y = X[:300].astype(np.float64), y[:300].astype(np.int64)

    def probs(labels):
        if view == "knn":
            return knn_oof_probs(X, labels, 10, k=10, folds=5, seed=3)
        return feature_probs(X, labels, 10, folds=5, seed=3, model=view)

    base = probs(y)
    assert np.array_equal(base, probs(y))  # deterministic
    assert np.mean(base.argmax(axis=1) == y) > 0.8
    for i in (0, 101, 299):
        y2 = y.copy()
        y2[i] = (y[i] + 5) % 10
        got = probs(y2)
        np.testing.assert_array_equal(got[i], base[i])
        assert not np.array_equal(got, base)

"""Feature views for fully labelled data (lgcexp.issues): the k-NN baseline from neighbour lists
against its brute-force form, and the network view's out-of-fold property (a point's own label never
trains the model that judges it)."""
import numpy as np
import pytest

from lgcexp.issues.out_of_fold import mlp_epochs, oof_mlp_probs
from lgcexp.issues.views import feature_probs, knn_oof_from_neighbors, knn_oof_probs


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    X = X[:600] + np.random.default_rng(0).normal(0.0, 0.01, (600, 64))  # no equally distant neighbours
    return X, y[:600]


@pytest.mark.parametrize("K", [40, 11])
def test_knn_from_neighbor_lists_is_the_brute_force_baseline(digits, K):
    """Lists searched once (faiss, self excluded) give the brute-force out-of-fold frequencies; with short
    lists (K = 11 for k = 10) many points lack k neighbours outside their fold and take the fallback."""
    from lgcexp.graph.knn import exact_search

    X, y = digits
    nb = exact_search(X, K)[1]
    noisy = y.copy()
    noisy[::7] = (noisy[::7] + 3) % 10
    for seed in (0, 5):
        ref = knn_oof_probs(X, noisy, 10, k=10, folds=5, seed=seed)
        got = knn_oof_from_neighbors(X, nb, noisy, 10, k=10, folds=5, seed=seed)
        assert np.array_equal(got, ref)


def test_nearest_rows_orders_ties_by_index():
    """Brute force on small integers (many equally distant rows): the k nearest by (distance, index), the
    block size does not matter."""
    from lgcexp.issues.views import nearest_rows

    rng = np.random.default_rng(3)
    train, query = rng.integers(0, 3, (200, 4)).astype(float), rng.integers(0, 3, (57, 4)).astype(float)
    d = ((query[:, None, :] - train[None, :, :]) ** 2).sum(axis=2)
    want = np.argsort(d, axis=1, kind="stable")[:, :9]
    assert np.array_equal(nearest_rows(train, query, 9), want)
    assert np.array_equal(nearest_rows(train, query, 9, block_bytes=1), want)  # one query row per block
    assert nearest_rows(train, query[:0], 9).shape == (0, 9)
    with pytest.raises(ValueError, match="k=201"):
        nearest_rows(train, query, 201)


def test_knn_baseline_on_tied_pixels_is_the_same_for_any_thread_count():
    """digits' integer pixels have equally distant neighbours: the brute-force baseline is the same under one
    and two OpenMP threads and equals the one read from faiss's lists (ties to the lower index there too)."""
    from sklearn.datasets import load_digits
    from threadpoolctl import threadpool_limits

    from lgcexp.graph.knn import exact_search

    X, y = load_digits(return_X_y=True)
    noisy = y.copy()
    noisy[::9] = (noisy[::9] + 1) % 10
    with threadpool_limits(limits=1, user_api="openmp"):
        one = knn_oof_probs(X, noisy, 10, k=10, folds=5, seed=0)
    with threadpool_limits(limits=2, user_api="openmp"):
        two = knn_oof_probs(X, noisy, 10, k=10, folds=5, seed=0)
    assert np.array_equal(one, two)
    nb = exact_search(X.astype(np.float32), 60)[1]
    assert np.array_equal(knn_oof_from_neighbors(X, nb, noisy, 10, k=10, folds=5, seed=0), one)


def test_mlp_view_is_out_of_fold(digits):
    """The folds never look at the labels, so a change of one label leaves its own fold's models, and so its
    own row, exactly as they were; the other folds' networks did learn it."""
    from lgcexp.preprocess import fold_splits

    X, y = digits
    base = oof_mlp_probs(X, y, 10, folds=5, seed=2)
    assert base.shape == (600, 10) and np.allclose(base.sum(axis=1), 1.0)
    assert np.mean(base.argmax(axis=1) == y) > 0.9  # a working classifier, not a constant
    (_, te0), *_ = list(fold_splits(600, 5, 2))
    i = int(te0[0])
    y2 = y.copy()
    y2[i] = (y[i] + 1) % 10  # another label for one point of the first test fold
    got = oof_mlp_probs(X, y2, 10, folds=5, seed=2)
    # the first fold's model never saw point i's label: its fold is judged exactly as before
    assert np.array_equal(got[te0], base[te0])
    # while the other folds' models did, and they move
    others = np.setdiff1d(np.arange(600), te0)
    assert not np.array_equal(got[others], base[others])


def test_mlp_view_trains_only_on_kept_labels(digits):
    """Labels outside ``train`` teach nothing: changing them leaves every probability as it was."""
    X, y = digits
    keep = np.ones(600, dtype=bool)
    keep[::5] = False
    a = feature_probs(X, y, 10, keep, folds=5, seed=1, model="mlp")
    y2 = y.copy()
    y2[~keep] = (y2[~keep] + 4) % 10
    b = feature_probs(X, y2, 10, keep, folds=5, seed=1, model="mlp")
    assert np.array_equal(a, b)
    assert np.array_equal(a, oof_mlp_probs(X, y, 10, folds=5, seed=1, train=keep))


def test_network_inputs_keep_the_features_scale(digits):
    """The network's input is the centred rows on their leading principal axes over one common scale:
    a common rescaling or shift of the features changes nothing, a per-feature one does (no standardisation),
    and the axes keep their unequal variances (no whitening)."""
    from lgcexp.issues.out_of_fold import network_inputs

    X, _ = digits
    Z = network_inputs(X, 20)
    Xc = X - X.mean(axis=0)
    _, _, Vt = np.linalg.svd(Xc, full_matrices=False)  # the exact axes, an independent computation
    ref = Xc @ Vt[:20].T
    ref /= np.sqrt(np.mean(ref.var(axis=0)))
    signs = np.sign((Z * ref).sum(axis=0))
    np.testing.assert_allclose(Z, ref * signs, atol=1e-8)
    np.testing.assert_allclose(network_inputs(3.0 * X + 7.0, 20), Z, atol=1e-8)  # signs are the data's
    scaled = X * np.linspace(0.5, 3.0, X.shape[1])
    assert not np.allclose(np.abs(network_inputs(scaled, 20)), np.abs(Z), atol=1e-3)
    sd = Z.std(axis=0)
    assert np.mean(sd**2) == pytest.approx(1.0) and sd.min() < 0.5 * sd.max()


def test_mlp_epochs():
    # ~2,000 steps of 256 rows as epochs in [5, 200]: 24 batches -> 84 epochs; 219 -> 10; 1 -> 200
    assert mlp_epochs(56_000) == 10 and mlp_epochs(100) == 200 and mlp_epochs(6_000) == 84

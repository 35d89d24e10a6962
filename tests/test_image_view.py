"""The image view (lgcexp.issues.image_view): out of fold (a point's own label never trains the network that
judges it), deterministic, the same from a memory map, chosen where the rows are images, and its bad input."""
import numpy as np
import pytest
from sklearn.datasets import load_digits

from lgcexp.data.dataset import check_image_shape
from lgcexp.errors import UserError
from lgcexp.issues import find_label_issues
from lgcexp.issues.image_view import cnn_epochs, oof_cnn_probs
from lgcexp.issues.views import RowSubset, choose_feature_model
from lgcexp.preprocess import fold_splits


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X[:300].astype(np.float32), y[:300].astype(np.int64)


def test_probabilities_are_out_of_fold_and_deterministic(digits):
    X, y = digits
    rows = np.arange(y.size)
    P = oof_cnn_probs(X, rows, y, 10, (8, 8), folds=3)
    assert P.shape == (300, 10) and np.allclose(P.sum(1), 1, atol=1e-5)
    assert np.array_equal(P, oof_cnn_probs(X, rows, y, 10, (8, 8), folds=3))
    # a point's own label changed: the probabilities of its fold do not move, the other folds' do
    i = 7
    y2 = y.copy()
    y2[i] = (y[i] + 1) % 10
    Q = oof_cnn_probs(X, rows, y2, 10, (8, 8), folds=3)
    fold = next(te for _, te in fold_splits(y.size, 3, 0) if i in te)
    others = np.setdiff1d(rows, fold)
    assert np.array_equal(P[fold], Q[fold])
    assert not np.array_equal(P[others], Q[others])


def test_it_learns(digits):
    X, y = digits
    P = oof_cnn_probs(X, np.arange(y.size), y, 10, (8, 8), folds=3)
    assert (P.argmax(1) == y).mean() > 0.8  # chance: 0.1


def test_labels_outside_train_never_train_and_a_memory_map_gives_the_same(digits, tmp_path):
    X, y = digits
    train = np.ones(y.size, dtype=bool)
    train[::5] = False
    P = oof_cnn_probs(X, np.arange(y.size), y, 10, (8, 8), folds=3, train=train)
    y2 = y.copy()
    y2[~train] = (y[~train] + 3) % 10  # labels the network may not learn from
    assert np.array_equal(P, oof_cnn_probs(X, np.arange(y.size), y2, 10, (8, 8), folds=3, train=train))
    path = tmp_path / "X.npy"
    big = np.concatenate([np.zeros((5, 64), np.float32), X])
    np.save(path, big)
    mm = np.load(path, mmap_mode="r")
    sub = RowSubset(mm, np.arange(5, 305))
    assert sub.shape == (300, 64)
    assert np.array_equal(P, oof_cnn_probs(sub, np.arange(300), y, 10, (8, 8), folds=3, train=train))


def test_a_class_missing_from_the_training_labels_gets_zero(digits):
    X, y = digits
    keep = y < 3
    Xs, ys = X[keep], y[keep]
    train = ys != 2
    P = oof_cnn_probs(Xs, np.arange(ys.size), ys, 3, (8, 8), folds=3, train=train)
    assert np.all(P[:, 2] == 0)


def test_the_view_is_chosen_where_rows_are_images():
    assert choose_feature_model(1000, 1000, (28, 28)) == "cnn"
    assert choose_feature_model(1000, 1000) == "mlp"
    assert choose_feature_model(10, 1000, (28, 28)) == "lda"  # a few sampled labels: the paper's LDA


def test_epochs_follow_the_step_budget():
    assert cnn_epochs(100) >= cnn_epochs(10_000) >= cnn_epochs(1_000_000) == 1


def test_find_label_issues_takes_images_as_3d_or_with_a_shape(digits):
    X, y = digits
    yn = y.copy()
    yn[:6] = (y[:6] + 1) % 10
    a = find_label_issues(X, yn, image_shape=(8, 8))
    b = find_label_issues(X.reshape(-1, 8, 8), yn)
    assert a.attrs["feature_model"] == "cnn" == b.attrs["feature_model"]
    assert a.equals(b)
    c = find_label_issues(X, yn)
    assert c.attrs["feature_model"] == "mlp"
    X_before = X.copy()
    find_label_issues(X.reshape(-1, 8, 8, 1), yn, image_shape=(8, 8, 1))
    assert np.array_equal(X, X_before)


@pytest.mark.parametrize("shape, message", [
    ((8, 7), "holds 56 values per image but X has 64 columns"),
    ((8,), "expected (height, width)"),
    ("8x8", "expected (height, width)"),
    ((8, 8.5), "expected (height, width)"),
    ((0, 64), "expected (height, width)"),
])
def test_bad_image_shapes_are_refused_naming_the_argument(digits, shape, message):
    X, y = digits
    with pytest.raises(UserError, match="image_shape") as e:
        find_label_issues(X, y, image_shape=shape)
    assert message in str(e.value)


def test_image_shape_against_the_images_own_and_without_x(digits):
    X, y = digits
    with pytest.raises(UserError, match="does not match X's images"):
        find_label_issues(X.reshape(-1, 8, 8), y, image_shape=(4, 16))
    P = np.full((y.size, 10), 0.1)
    with pytest.raises(UserError, match="image_shape needs"):
        find_label_issues(labels=y, pred_probs=P, image_shape=(8, 8))
    assert check_image_shape((8, 8), 64) == (8, 8, 1)


def test_an_npz_of_images_runs_the_command_with_the_image_view(digits, tmp_path):
    """dataset=npz with X (n, 8, 8): loaded as rows of 64 pixels, its shape recorded, judged by the image view;
    the same npz flattened keeps the network on principal axes."""
    import json

    from helpers import make_cfg

    from lgcexp.data import load_dataset
    from lgcexp.pipeline import run

    X, y = digits
    yn = y.copy()
    yn[:6] = (y[:6] + 1) % 10
    np.savez(tmp_path / "img.npz", X=X.reshape(-1, 8, 8), y=yn, labeled=np.ones(y.size, dtype=bool))
    np.savez(tmp_path / "flat.npz", X=X, y=yn, labeled=np.ones(y.size, dtype=bool))
    data = load_dataset("npz", path=str(tmp_path / "img.npz"))
    assert data.image_shape == (8, 8) and data.X.shape == (300, 64)
    assert np.array_equal(np.asarray(data.X), X)
    models = {}
    for name in ("img", "flat"):
        r = run(make_cfg("dataset=npz", f"dataset.path={tmp_path}/{name}.npz", "algo=lgc", tmp=tmp_path),
                out_dir=tmp_path / name)
        models[name] = r["detect_feature_model"]
        assert json.loads((tmp_path / name / "result.json").read_text())["detect_feature_model"] == models[name]
    assert models == {"img": "cnn", "flat": "mlp"}


def test_the_estimator_takes_an_image_shape_as_find_label_issues_does(digits):
    from lgcexp.algorithms.lgc import LGC
    from lgcexp.graph import KnnGraph
    from lgcexp.sklearn import GraphSSLClassifier

    X, y = digits
    yn = y.copy()
    yn[:6] = (y[:6] + 1) % 10
    est = GraphSSLClassifier(LGC(), KnnGraph(k=10, sigma="mean")).fit(X, yn, image_shape=(8, 8))
    api = find_label_issues(X, yn, method="lgc", image_shape=(8, 8)).set_index("index").sort_index()
    assert api.attrs["feature_model"] == "cnn"
    assert np.array_equal(est.label_issues_, api["is_label_issue"].to_numpy())
    np.testing.assert_allclose(est.label_quality_, api["label_quality"], rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"^image_shape: \(8, 9\) holds 72 values"):
        GraphSSLClassifier(LGC(), KnnGraph(k=10, sigma="mean")).fit(X, yn, image_shape=(8, 9))

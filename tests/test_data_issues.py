"""Outliers and near-duplicates (lgcexp.issues.data_audit) against brute-force computations on the full
distance matrix, and the audit in a diagnosis run's report."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lgcexp.issues import data_audit as di


@pytest.fixture(scope="module")
def planted():
    """Gaussian blobs, 3 far outliers, an exact-duplicate triple and two near-duplicate pairs."""
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(0, 1, (120, 5)), rng.normal(6, 1, (120, 5))])
    X[10] = X[11] = X[12] = X[13]          # exact duplicates: 10, 11, 12, 13
    X[50] = X[51] + 1e-4                   # near duplicates: (50, 51), (200, 201)
    X[200] = X[201] - 1e-4
    X[[30, 150, 230]] = (rng.normal(0, 1, (3, 5)) * 0.1
                         + np.array([40.0, -40.0, 30.0, 0, 0])[None, :] * [[1], [0.7], [-1]])
    return X


def brute(X, k):
    D = np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    order = np.argsort(D, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(D, order, axis=1), order, D


def test_knn_lists_match_brute_force(planted):
    dist, idx = di.knn_lists(planted, 6)
    bd, _, _ = brute(planted, 6)
    np.testing.assert_allclose(dist, bd, atol=1e-3)


def test_outlier_scores_match_brute_force(planted):
    bd, _, _ = brute(planted, 8)
    m = bd.mean(axis=1)
    lm = np.log(np.maximum(m, m[m > 0].min() * 1e-3))
    med = np.median(lm)
    z = (lm - med) / (1.482602218505602 * np.median(np.abs(lm - med)))
    score, flag, mean = di.outlier_scores(bd)
    np.testing.assert_allclose(mean, m)
    np.testing.assert_allclose(score, z)
    assert set(np.flatnonzero(flag)) == set(np.flatnonzero(z > 3.5)) >= {30, 150, 230}
    assert set(np.argsort(-score)[:3]) == {30, 150, 230}  # the planted ones score highest
    # the whole audit finds the same with faiss' lists
    res = di.find_data_issues(planted, k=8)
    np.testing.assert_array_equal(res.is_outlier, flag)


def test_near_duplicates_match_brute_force(planted):
    k = 8
    bd, bi, D = brute(planted, k)
    thr = 0.05 * np.median(bd[:, 0])
    # brute force: pairs of the full matrix within the threshold, sets by union-find
    parent = list(range(len(planted)))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for i, j in zip(*np.nonzero(D <= thr)):
        parent[find(i)] = find(j)
    members = {i for i, j in zip(*np.nonzero(D <= thr))}
    groups = {}
    for i in sorted(members):
        groups.setdefault(find(i), []).append(i)
    expect = sorted(sorted(g) for g in groups.values())
    res = di.find_data_issues(planted, k=k)
    got = {}
    for i in np.flatnonzero(res.is_near_duplicate):
        got.setdefault(int(res.near_duplicate_set[i]), []).append(int(i))
    assert sorted(sorted(g) for g in got.values()) == expect == [[10, 11, 12, 13], [50, 51], [200, 201]]
    assert sorted(np.flatnonzero(res.is_exact_duplicate)) == [10, 11, 12, 13]
    np.testing.assert_allclose(res.near_duplicate_score, bd[:, 0] / np.median(bd[:, 0]), atol=1e-3)
    assert res.threshold == pytest.approx(thr, rel=1e-3)
    assert res.summary()["n_near_duplicate_sets"] == 3


def test_exact_duplicates_beyond_k_are_one_set():
    """More copies than neighbours in a list: the exact sets still hold all of them."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    X[:15] = X[20]
    sets = di.exact_duplicate_sets(X)
    assert set(np.flatnonzero(sets >= 0)) == set(range(15)) | {20} and np.unique(sets[sets >= 0]).size == 1
    res = di.find_data_issues(X, k=5)
    assert np.unique(res.near_duplicate_set[res.is_near_duplicate]).size == 1


def test_robust_z_degenerate():
    assert np.all(di.robust_z(np.ones(5)) == 0)
    z = di.robust_z(np.array([1.0, 1, 1, 1, 5]))  # MAD 0: the mean absolute deviation scales it
    assert z[-1] > 0 and np.all(z[:4] == 0)


def test_diagnosis_run_writes_the_audit_and_the_picture(tmp_path):
    """A diagnosis run on digits-as-.npy (d = 64 = 8 x 8): data_issues.csv next to label_issues.csv, and
    the picture of the most suspicious examples."""
    from helpers import make_cfg
    from sklearn.datasets import load_digits

    from lgcexp import pipeline
    from lgcexp.config import to_container

    X, y = load_digits(return_X_y=True)
    X = X[:600].astype(np.float32)
    X[5] = X[6]  # an exact duplicate pair
    lab = y[:600].copy()
    lab[[1, 2, 3]] = (lab[[1, 2, 3]] + 1) % 10
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", lab)
    c = to_container(make_cfg("dataset=npy", f"dataset.path={tmp_path}/X.npy", f"dataset.labels_path={tmp_path}/y.npy",
                              tmp=tmp_path))
    c.pop("hydra", None)
    out = tmp_path / "run"
    r = pipeline.run(c, out_dir=out)
    frame = pd.read_csv(out / di.DATA_ISSUES_FILE)
    assert list(frame.columns[:3]) == ["index", "is_outlier", "outlier_score"] and len(frame) == 600
    assert frame.loc[5, "is_exact_duplicate"] and frame.loc[6, "is_exact_duplicate"]
    assert frame.loc[5, "near_duplicate_set"] == frame.loc[6, "near_duplicate_set"] >= 0
    assert r["data_issues"]["n_exact_duplicates"] == 2
    assert r["data_issue_report"] == [di.DATA_ISSUES_FILE, "suspicious_examples.png"]
    assert "label_issues.csv" in r["label_issue_report"]
    assert (out / "suspicious_examples.png").stat().st_size > 1000


def test_audit_reuses_the_graphs_exact_lists(planted, tmp_path):
    """The exact kNN graph keeps its lists (built and read back from the cache); the audit from them is the
    audit from a search of its own; an approximate search keeps none."""
    from lgcexp.cache import Cache
    from lgcexp.graph import GRAPH_BUILDERS

    cache = Cache(tmp_path)
    builder = GRAPH_BUILDERS.get("knn")(k=6, sigma=100.0)
    built, hit = builder.build(planted, cache=cache)
    again, hit2 = GRAPH_BUILDERS.get("knn")(k=6, sigma=100.0).build(planted, cache=Cache(tmp_path))
    assert not hit and hit2
    own = di.find_data_issues(planted, k=6).frame()
    for g in (built, again):
        assert g.neighbors_exact
        dist, idx = g.neighbors
        assert dist.shape[0] == planted.shape[0] and dist.shape[1] >= 6
        bd, _, _ = brute(planted, 6)
        np.testing.assert_allclose(dist[:, :6], bd, atol=1e-3)
        reused = di.find_data_issues(planted, k=6, knn=(dist[:, :6], idx[:, :6])).frame()
        pd.testing.assert_frame_equal(reused, own)
    # an approximate search keeps its lists where their distances are the features' own (no PCA, or re-ranked)
    approx, _ = GRAPH_BUILDERS.get("knn_approx")(k=6, sigma=100.0).build(planted, cache=None)
    assert approx.neighbors is not None and approx.neighbors[0].shape[1] >= 6 and not approx.neighbors_exact
    projected, _ = GRAPH_BUILDERS.get("knn_approx")(k=6, sigma=100.0, pca=3).build(planted, cache=None)
    assert projected.neighbors is None and not projected.neighbors_exact


def test_exact_duplicates_survive_digest_collisions(planted, monkeypatch):
    """Every digest equal (a worst-case collision): rows are still joined only where their bytes are equal."""
    X = np.vstack([planted, planted[[5, 5, 77]]])
    want = di.exact_duplicate_sets(X)
    monkeypatch.setattr(di, "_row_digests", lambda B, w: np.zeros(B.shape[0], dtype=np.uint64))
    assert np.array_equal(di.exact_duplicate_sets(X), want)
    _, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    assert np.array_equal(want >= 0, counts[inverse.ravel()] > 1) and {5, 77} <= set(np.flatnonzero(want >= 0))


def test_exact_duplicates_by_digest_match_unique_rows(planted):
    """Digest grouping (block by block) gives the sets of np.unique on whole rows, for any block size."""
    X = np.vstack([planted, planted[[5, 5, 77]]])
    _, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    for block in (7, 1000):
        sets = di.exact_duplicate_sets(X, block=block)
        assert np.array_equal(sets >= 0, counts[inverse] > 1)
        for a in range(X.shape[0]):
            for b in (5, 10, 77):
                assert (sets[a] == sets[b] and sets[a] >= 0) == (a != b and inverse[a] == inverse[b]) or a == b

"""Realistic noise models (noise=idn, noise=confusion): exact counts, determinism, and each step against an
independent computation (the weighted draw against exact enumeration, IDN's rows written out per instance,
the confusion classifier against scikit-learn's cross_val_predict)."""
import itertools

import numpy as np
import pytest
from helpers import make_cfg
from scipy import stats

from lgcexp.errors import UserError
from lgcexp.noise import make_noise, noisy_count
from lgcexp.noise.base import weighted_sample


def blobs(l=300, c=4, d=6, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(l) % c
    centres = rng.normal(scale=2.0, size=(c, d))
    return centres[y] + rng.normal(size=(l, d)), y.astype(np.int64)


def successive_inclusion(w, m):
    """Exact inclusion probability of each index under m successive weighted draws without replacement."""
    w = np.asarray(w, float)
    incl = np.zeros(w.size)
    for seq in itertools.permutations(range(w.size), m):
        p, left = 1.0, w.sum()
        for i in seq:
            p *= w[i] / left
            left -= w[i]
        incl[list(seq)] += p
    return incl


def test_weighted_sample_matches_successive_draws():
    w = np.array([1.0, 2.0, 3.0, 4.0, 0.5])
    want = successive_inclusion(w, 2)
    rng = np.random.default_rng(0)
    hits = np.zeros(w.size)
    reps = 20000
    for _ in range(reps):
        hits[weighted_sample(w, 2, rng)] += 1
    assert np.allclose(hits / reps, want, atol=0.015)
    # zero weights are drawn only after every positive one
    s = weighted_sample(np.array([0.0, 1.0, 0.0, 2.0]), 3, np.random.default_rng(1))
    assert {1, 3} <= set(s.tolist()) and len(s) == 3


def independent_idn_rows(X, y, c, rate, sd, seed):
    """Xia et al.'s transition rows, written out one instance at a time from the documented stream."""
    rng = np.random.default_rng([seed, 0x69646E])
    q = stats.truncnorm.rvs(-rate / sd, (1 - rate) / sd, loc=rate, scale=sd, size=len(y), random_state=rng)
    mu, s = X.mean(0), X.std(0)
    Z = (X - mu) / np.where(s > 0, s, 1)
    W = rng.standard_normal((c, X.shape[1], c))
    rows = np.zeros((len(y), c))
    for i in range(len(y)):
        a = Z[i] @ W[y[i]]
        e = np.array([0.0 if k == y[i] else np.exp(a[k] - max(a[j] for j in range(c) if j != y[i])) for k in range(c)])
        rows[i] = q[i] * e / e.sum()
        rows[i, y[i]] = 1 - q[i]
    return q, rows


@pytest.mark.parametrize("rate", [0.1, 0.4])
def test_idn_rows_and_counts(rate):
    X, y = blobs()
    model = make_noise("idn", rate=rate)
    q, others, _ = model.instance_transitions(X, y, 4, seed=3)
    q_ref, rows = independent_idn_rows(X, y, 4, rate, 0.1, 3)
    assert np.allclose(q, q_ref) and np.all((q >= 0) & (q <= 1))
    mine = q[:, None] * others
    mine[np.arange(y.size), y] = 1 - q
    assert np.allclose(mine, rows) and np.allclose(rows.sum(1), 1)
    obs, flipped = model.corrupt(y, 4, 3, X=X)
    assert flipped.sum() == noisy_count(y.size, rate) and np.array_equal(flipped, obs != y)
    assert np.all(rows[np.flatnonzero(flipped), obs[flipped]] > 0)  # only where the softmax puts mass
    assert np.array_equal(model.counts_.sum(1), np.bincount(y))
    # the flip rates follow the truncated normal (KS test on 3000 instances)
    Xb, yb = blobs(3000, 4, 5, 1)
    qb = model.instance_transitions(Xb, yb, 4, seed=0)[0]
    assert stats.kstest(qb, stats.truncnorm(-rate / 0.1, (1 - rate) / 0.1, loc=rate, scale=0.1).cdf).pvalue > 1e-3


def test_idn_picks_follow_flip_rates_and_targets_follow_softmax():
    X, y = blobs(40, 3, 4, 2)
    model = make_noise("idn", rate=0.2, sd=0.3)
    reps = 3000
    hits = np.zeros(y.size)
    for seed in range(reps):
        hits += model.corrupt(y, 3, seed, X=X)[1]
    # picks: points with higher flip rates (in expectation over seeds: the same for every point) -- so the
    # rate of each point over seeds is the count's share, m / l
    assert np.allclose(hits / reps, noisy_count(40, 0.2) / 40, atol=0.04)
    # at a fixed seed, targets among the other classes follow each instance's softmax: check with a large l
    Xb, yb = blobs(4000, 3, 4, 3)
    m = make_noise("idn", rate=0.5)
    q, others, _ = m.instance_transitions(Xb, yb, 3, seed=5)
    obs, flipped = m.corrupt(yb, 3, 5, X=Xb)
    idx = np.flatnonzero(flipped)
    expected = others[idx].sum(0)          # expected new-class counts given the picks
    got = np.bincount(obs[idx], minlength=3)
    assert np.all(np.abs(got - expected) < 4 * np.sqrt(expected + 1))
    # and the picks favour the high flip rates
    assert q[flipped].mean() > q[~flipped].mean()


def test_confusion_matches_sklearn_cross_val_predict():
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import PredefinedSplit, cross_val_predict
    from sklearn.preprocessing import StandardScaler

    from lgcexp.preprocess import fold_of

    X, y = blobs(200, 4, 12, 4)
    model = make_noise("confusion", rate=0.3, pca=5)
    conf, target = model.confusion(X, y, 4, seed=2)
    Z = PCA(5, svd_solver="full").fit_transform(StandardScaler().fit_transform(X))
    P = cross_val_predict(LogisticRegression(max_iter=1000), Z, y, method="predict_proba",
                          cv=PredefinedSplit(fold_of(200, 5, 2)[0]))
    assert np.allclose(conf, 1 - P[np.arange(200), y], atol=1e-5)
    P2 = P.copy()
    P2[np.arange(200), y] = -1
    assert np.array_equal(target, P2.argmax(1))
    obs, flipped = model.corrupt(y, 4, 2, X=X)
    assert flipped.sum() == noisy_count(200, 0.3) == 60
    assert np.array_equal(obs[flipped], target[flipped])
    assert conf[flipped].mean() > conf[~flipped].mean()


@pytest.mark.parametrize("name", ["idn", "confusion"])
def test_seeded_and_needs_features(name):
    X, y = blobs(120, 3, 5, 6)
    a = make_noise(name, rate=0.3).corrupt(y, 3, 5, X=X)
    b = make_noise(name, rate=0.3).corrupt(y, 3, 5, X=X)
    assert np.array_equal(a[0], b[0])
    assert any(not np.array_equal(a[0], make_noise(name, rate=0.3).corrupt(y, 3, s, X=X)[0]) for s in (6, 7))
    assert not make_noise(name, rate=0.0).corrupt(y, 3, 5, X=X)[1].any()
    with pytest.raises(UserError, match=f"^noise={name} needs the features"):
        make_noise(name, rate=0.3).corrupt(y, 3, 5)


@pytest.mark.parametrize("name", ["idn", "confusion"])
def test_pipeline_run_records_counts(tmp_path, name):
    from lgcexp.pipeline import run

    r = run(make_cfg(f"noise={name}", "noise.rate=0.3", "algo=gfhf", tmp=tmp_path))
    C = np.array(r["noise_counts"])
    assert r["noise"] == name and r["noise_rate"] == 0.3
    assert C.sum() == 100 and C.sum() - np.trace(C) == r["n_flipped"] == 30


def test_bad_values():
    from lgcexp.config import plan

    for ov, start in [(["noise=idn", "noise.sd=0"], "noise.sd=0 is not allowed"),
                      (["noise=confusion", "noise.folds=1"], "noise.folds=1 is not allowed"),
                      (["noise=confusion", "noise.rate=1.0"], "noise.rate=1.0 is not allowed")]:
        with pytest.raises(UserError) as e:
            plan(make_cfg(*ov))
        assert str(e.value).startswith(start) and "\n" not in str(e.value)

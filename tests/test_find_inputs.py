"""find_label_issues as a front end: inputs never modified, the six detect options, bad inputs in one line,
the pred_probs view and the one count (lgcexp.issues.count)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from conftest import two_clusters

from lgcexp.errors import UserError
from lgcexp.issues.count import (
    COMBINED_SHARE,
    MATERIAL_NOISE,
    UNIFORM_SHARE,
    calibrate_temperature,
    calibrate_under_noise,
    calibrate_view,
    clear_classes,
    count_cut,
    estimate_wrong_labels,
    majority_count,
)
from lgcexp.issues.find import find_label_issues
from lgcexp.issues.views import combine_views


def _problem(seed=0):
    X, y = two_clusters(n_per=40, seed=seed)
    labels = y.copy()
    for w in (3, 11, 50, 66):
        labels[w] = 1 - labels[w]
    return X, labels, y


def _affinity(X):
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    return np.exp(-D / 2) * (D < 4.0)


def test_inputs_are_never_modified():
    X, labels, y = _problem()
    W = sp.csr_matrix(_affinity(X))  # with its ones on the diagonal: dropped by the rule, not in place
    rng = np.random.default_rng(0)
    P = rng.dirichlet(np.ones(2), size=y.size)
    P[np.arange(y.size), y] += 2.0
    P /= P.sum(axis=1, keepdims=True)
    before = (X.copy(), labels.copy(), W.data.copy(), W.indices.copy(), W.indptr.copy(), W.nnz, P.copy())
    find_label_issues(X, labels, graph=W, pred_probs=P, method="lgc")
    find_label_issues(None, labels, graph=W, method="lgc")
    find_label_issues(labels=labels, pred_probs=P)
    after = (X, labels, W.data, W.indices, W.indptr, W.nnz, P)
    for b, a in zip(before, after):
        assert np.array_equal(b, a)
    assert W.diagonal().min() == 1.0


def test_graph_with_self_loops_equals_graph_without():
    X, labels, _ = _problem(1)
    W = _affinity(X)
    looped = find_label_issues(None, labels, graph=W, method="lgc")
    np.fill_diagonal(W, 0.0)
    pd.testing.assert_frame_equal(looped, find_label_issues(None, labels, graph=sp.csr_matrix(W), method="lgc"))


def test_the_six_detect_options_reach_the_judgement():
    X, labels, _ = _problem()
    base = find_label_issues(X, labels, method="lgc", cut="threshold", threshold=0.5)
    strict = find_label_issues(X, labels, method="lgc", cut="threshold", threshold=0.99)
    assert strict["is_label_issue"].sum() > base["is_label_issue"].sum()
    kept = find_label_issues(X, labels, method="lgc", cut="prune_by_class", min_per_class=40)
    assert not kept["is_label_issue"].any()  # 40 labels per class: none may go
    for bad, match in [({"folds": 1}, "^folds=1 is not allowed"), ({"min_agreement": 2}, "^min_agreement=2"),
                       ({"threshold": -1}, "^threshold=-1"), ({"min_per_class": -1}, "^min_per_class=-1"),
                       ({"features": "maybe"}, "^features='maybe' is not allowed: use True or False$")]:
        with pytest.raises(UserError, match=match):
            find_label_issues(X, labels, method="lgc", **bad)


def test_sparse_X_is_refused_in_one_line():
    X, labels, _ = _problem()
    with pytest.raises(UserError, match=r"^X: a scipy sparse matrix is not allowed; give dense features"):
        find_label_issues(sp.csr_matrix(X), labels)


def _cifar_like(n=3000, c=5, rate=0.1, seed=0):
    """Labels with ``rate`` of them flipped and out-of-fold-like probabilities: the true class usually clear,
    sometimes split with another."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c))
    logits[np.arange(n), t] += rng.gamma(2.0, 2.0, n)
    P = np.exp(logits)
    P /= P.sum(axis=1, keepdims=True)
    y = t.copy()
    wrong = rng.random(n) < rate
    y[wrong] = (t[wrong] + rng.integers(1, c, wrong.sum())) % c
    return P, y, t


def test_pred_probs_alone_ranks_by_self_confidence_and_cuts_at_the_estimate():
    P, y, t = _cifar_like()
    df = find_label_issues(labels=y, pred_probs=P, clean_labels=t).sort_values("index")
    assert df.attrs["method"] == "pred_probs"
    np.testing.assert_allclose(df["label_quality"], P[np.arange(y.size), y])
    assert df["is_label_issue"].sum() == df.attrs["estimated_issues"] == estimate_wrong_labels(P, y)
    flagged_q = df.loc[df["is_label_issue"], "label_quality"]
    assert flagged_q.max() <= df.loc[~df["is_label_issue"], "label_quality"].min()
    truth = int((y != t).sum())
    assert abs(df.attrs["estimated_issues"] - truth) < 0.25 * truth
    # string labels: columns in the sorted order of the values
    names = np.array(["a", "b", "c", "d", "e"])
    df2 = find_label_issues(labels=names[y], pred_probs=P).sort_values("index")
    assert (df2["is_label_issue"].to_numpy() == df["is_label_issue"].to_numpy()).all()


def test_pred_probs_as_second_view_with_features():
    X, labels, y = _problem()
    P = np.full((y.size, 2), 0.1)
    P[np.arange(y.size), y] = 0.9
    df = find_label_issues(X, labels, pred_probs=P, method="lgc", clean_labels=y)
    assert sorted(df.loc[df["is_label_issue"], "index"]) == [3, 11, 50, 66]


@pytest.mark.parametrize("change,match", [
    (lambda P: P[:, :1], r"^pred_probs has 1 columns, fewer than the 2 classes"),
    (lambda P: np.hstack([P, np.zeros((P.shape[0], 1))]), r"^pred_probs has 3 columns, more than the 2 classes"),
    (lambda P: P[:-1], r"^pred_probs has 79 rows but labels has 80 values"),
    (lambda P: P * 2, r"^pred_probs: 80 row\(s\) do not sum to 1 \(first: row 0, sum 2\)"),
    (lambda P: np.where(np.arange(P.size).reshape(P.shape) == 5, np.nan, P), r"^pred_probs: 1 row\(s\) hold NaN"),
    (lambda P: P - np.eye(80, 2) * 2, r"^pred_probs: 2 row\(s\) hold negative entries \(first: row 0"),
    (lambda P: P[0], r"^pred_probs: it has shape \(2,\); it must be 2-D"),
])
def test_bad_pred_probs_one_line(change, match):
    _, labels, y = _problem()
    P = np.full((y.size, 2), 0.5)
    with pytest.raises(UserError, match=match) as e:
        find_label_issues(labels=labels, pred_probs=change(P))
    assert "\n" not in str(e.value)
    with pytest.raises(UserError, match=r"^pred_probs: with integer labels column j is class j"):
        find_label_issues(labels=labels + 1, pred_probs=P)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_embeddings_with_nan_or_inf_are_refused_in_one_line(bad):
    X, labels, _ = _problem()
    X = X.astype(np.float32)
    X[7, 1] = bad
    with pytest.raises(UserError, match=r"^X: X has NaN or Inf in 1 of 80 rows \(first bad row: 7\)") as e:
        find_label_issues(X, labels)
    assert "\n" not in str(e.value)


def test_count_against_hand_computation():
    # three classes; the majority joint by hand, calibrated rows scale to the label counts
    P = np.array([[0.9, 0.05, 0.05], [0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.4, 0.4, 0.2],
                  [0.1, 0.8, 0.1], [0.05, 0.9, 0.05], [0.1, 0.1, 0.8], [0.6, 0.2, 0.2]])
    y = np.array([0, 0, 0, 0, 1, 1, 2, 2])
    Q, T = calibrate_temperature(P, y)
    clear = clear_classes([P], y)
    named = np.where(Q.max(axis=1) > 0.5, Q.argmax(axis=1), -1)
    assert clear.tolist() == named.tolist()
    C = np.zeros((3, 3), dtype=int)
    np.add.at(C, (y[named >= 0], named[named >= 0]), 1)
    N = C * (np.bincount(y, minlength=3) / C.sum(axis=1))[:, None]  # rows scaled to the label counts
    assert estimate_wrong_labels(P, y) == round(N.sum() - np.trace(N))
    # two views: counted only where both name the same class clearly (each calibrated as calibrate_view does:
    # under noise where the fitted rate is material, here it is -- the other view contradicts half the labels)
    other = P[:, [1, 0, 2]]
    assert calibrate_under_noise(other, y)[2] > MATERIAL_NOISE
    np.testing.assert_allclose(calibrate_view(other, y), calibrate_under_noise(other, y)[0])
    assert calibrate_under_noise(P, y)[2] <= MATERIAL_NOISE  # P: temperature alone
    np.testing.assert_allclose(calibrate_view(P, y), Q)
    named1 = named
    named2 = np.where(calibrate_under_noise(other, y)[0].max(axis=1) > 0.5,
                      calibrate_under_noise(other, y)[0].argmax(axis=1), -1)
    both = np.where((named1 == named2) & (named1 >= 0), named1, -1)
    assert (clear_classes([P, other], y) == both).all() and (both >= 0).sum() < (named1 >= 0).sum()
    ll = lambda t: np.mean(np.log((P ** (1 / t) / (P ** (1 / t)).sum(1, keepdims=True))[np.arange(8), y]))  # noqa
    assert ll(T) >= max(ll(T * 1.05), ll(T / 1.05)) - 1e-9
    assert count_cut(P, y, 2).tolist() == [False, False, True, False, False, False, False, True]


def _noisy_likelihood(P, y, T, rho):
    """The mean log-likelihood of the given labels under uniform noise, written out directly."""
    c = P.shape[1]
    Q = P ** (1 / T)
    Q /= Q.sum(axis=1, keepdims=True)
    s = Q[np.arange(y.size), y]
    return np.mean(np.log((1 - rho) * s + rho * (1 - s) / (c - 1)))


def test_calibration_under_noise_recovers_the_rate_and_the_temperature():
    rng = np.random.default_rng(3)
    n, c = 6000, 5
    Q = rng.dirichlet(np.full(c, 0.3), size=n)  # the true class distribution of each point
    truth = (Q.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    P = Q ** 2 / (Q ** 2).sum(axis=1, keepdims=True)  # over-confident: temperature 2 undoes it
    for rho in (0.0, 0.1, 0.4):
        y = truth.copy()
        flip = rng.random(n) < rho
        y[flip] = (y[flip] + rng.integers(1, c, flip.sum())) % c
        Qhat, T, r = calibrate_under_noise(P, y)
        assert abs(T - 2.0) < 0.15 and abs(r - rho) < 0.03, (rho, T, r)
        np.testing.assert_allclose(Qhat.sum(axis=1), 1.0)
        # a maximum of the likelihood written out independently (within the bounds)
        best = _noisy_likelihood(P, y, T, r)
        for dT, dr in ((1.02, 0), (1 / 1.02, 0), (1, 0.01), (1, -0.01)):
            if 0 <= r + dr <= (c - 1) / c:
                assert best >= _noisy_likelihood(P, y, T * dT, r + dr) - 1e-9
        if rho == 0.4:  # temperature alone reads the noise as doubt: a much flatter distribution
            assert calibrate_temperature(P, y)[1] > 1.5 * T
    # without noise in the labels it is plain temperature calibration
    Q0, T0 = calibrate_temperature(P, truth)
    Qn, Tn, r0 = calibrate_under_noise(P, truth)
    assert r0 < 0.005 and abs(Tn - T0) < 0.05 * T0
    # rows without evidence stay zero
    P2 = P[:10].copy()
    P2[4] = 0.0
    assert (calibrate_under_noise(P2, truth[:10])[0][4] == 0).all()


def test_count_takes_the_fitted_rate_where_the_noise_is_uniform():
    """Point 3 of lgcexp.issues.count: with two views, the last view's fitted uniform rate times n is the count
    where it is at least UNIFORM_SHARE of the majority count. The views here are calibrated and the true classes
    drawn from them, so they make confident mistakes on right labels (~6 % of the points), which the majority
    rule counts and the fit does not; where the wrong labels sit in the views' doubt (confusion noise) the fit
    reads ~0 and the majority count stands; so it does where the first view backs the flipped labels (the
    combination's own fitted rate is below COMBINED_SHARE of the fit); one view alone keeps the majority count."""
    rng = np.random.default_rng(0)
    n, c = 20000, 5
    Q = rng.dirichlet(np.full(c, 0.03), size=n)
    truth = (Q.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    views = [V / V.sum(axis=1, keepdims=True) for V in (Q * np.exp(rng.normal(scale=0.3, size=Q.shape))
                                                       for _ in range(2))]
    flip = rng.random(n) < 0.02  # uniform noise
    y = truth.copy()
    y[flip] = (y[flip] + rng.integers(1, c, flip.sum())) % c
    fitted = round(calibrate_under_noise(views[1], y)[2] * n)
    majority = majority_count(views, y)
    assert majority > 3 * flip.sum() and fitted >= UNIFORM_SHARE * majority
    assert estimate_wrong_labels(views, y) == fitted and abs(fitted - flip.sum()) <= 0.1 * flip.sum()
    assert estimate_wrong_labels(views, y, under_noise=False) == majority_count(views, y, under_noise=False)
    assert estimate_wrong_labels(views[1], y) == majority_count(views[1], y)  # one view: the majority count
    # confusion noise: labels moved to the class the views doubt most, where they hold at least 0.2
    second = np.argsort(Q, axis=1)[:, -2]
    doubt = (Q[np.arange(n), truth] > 0.5) & (Q[np.arange(n), second] > 0.2)
    conf = doubt & (rng.random(n) < 0.5)
    y2 = truth.copy()
    y2[conf] = second[conf]
    majority2 = majority_count(views, y2)
    assert round(calibrate_under_noise(views[1], y2)[2] * n) < UNIFORM_SHARE * majority2
    assert estimate_wrong_labels(views, y2) == majority2 and majority2 >= 0.5 * conf.sum()
    # a first view (the graph's) that backs the flipped labels: the combination explains them, the majority stands
    backed = views[0].copy()
    backed[flip] = 0.02
    backed[flip, y[flip]] = 1.0
    backed /= backed.sum(axis=1, keepdims=True)
    combined = calibrate_under_noise(combine_views(backed, views[1]), y)[2] * n
    assert combined < COMBINED_SHARE * fitted and fitted >= UNIFORM_SHARE * majority_count([backed, views[1]], y)
    assert estimate_wrong_labels([backed, views[1]], y) == majority_count([backed, views[1]], y)


def test_the_fitted_rate_counts_only_where_the_view_identifies_it(monkeypatch):
    """lgcexp.calibration.noise_rate_identified: a view that barely separates the classes leaves the likelihood
    nearly flat in the noise rate (the paper's protocol: a linear view of 40 sampled labels per class). Its fitted
    rate is then a guess (0.27 here, where 40 % of the labels are wrong). The count takes the rate of the last view
    that identifies it: the feature view's, else the graph's (a sharp first view, as the graph's evidence is on the
    paper's protocol); where neither does, the majority count."""
    from lgcexp.calibration import NATS_PER_COUNTED_LABEL, noise_rate_identified

    rng = np.random.default_rng(0)
    n, c = 20000, 5
    Q = rng.dirichlet(np.full(c, 0.03), size=n)
    truth = (Q.cumsum(axis=1) > rng.random(n)[:, None]).argmax(axis=1)
    sharp = Q * np.exp(rng.normal(scale=0.3, size=Q.shape))
    sharp /= sharp.sum(axis=1, keepdims=True)
    weak = rng.dirichlet(np.full(c, 0.3), size=n)  # the true class only a little more likely than the others
    weak[np.arange(n), truth] += 0.15
    weak /= weak.sum(axis=1, keepdims=True)
    flip = rng.random(n) < 0.4
    y = truth.copy()
    y[flip] = (y[flip] + rng.integers(1, c, flip.sum())) % c
    _, T, rho = calibrate_under_noise(weak, y)
    assert 0.2 < rho < 0.35 and not noise_rate_identified(weak, y, T, rho)
    weak2 = rng.dirichlet(np.full(c, 0.3), size=n)
    weak2[np.arange(n), truth] += 0.15
    weak2 /= weak2.sum(axis=1, keepdims=True)
    assert estimate_wrong_labels([weak2, weak], y) == majority_count([weak2, weak], y)
    _, T, rho = calibrate_under_noise(sharp, y)
    assert abs(rho - flip.mean()) < 0.01 and noise_rate_identified(sharp, y, T, rho)
    assert estimate_wrong_labels([weak, sharp], y) == round(rho * n)
    assert estimate_wrong_labels([sharp, weak], y) == round(rho * n) != majority_count([sharp, weak], y)
    # one view: the majority count (pred_probs alone, the k-NN baseline), unless it is a graph method's
    # leave-one-out (point 4), whose identified rate counts; judge() counts on LabelJudgement.leave_one_out
    from lgcexp.issues.judge import judge
    from lgcexp.issues.judgement import LabelJudgement

    assert estimate_wrong_labels(sharp, y) == majority_count(sharp, y) != round(rho * n)
    assert estimate_wrong_labels(sharp, y, alone=True) == round(rho * n)
    assert estimate_wrong_labels(weak, y, alone=True) == majority_count(weak, y)
    opts = {"features": False}
    assert judge(LabelJudgement(probs=sharp, leave_one_out=sharp), y, opts).estimated_issues == round(rho * n)
    assert judge(LabelJudgement(probs=sharp), y, opts).estimated_issues == majority_count(sharp, y)
    # the count reads the plain leave-one-out, not the judged evidence (AutoL's vote share at learnt weights)
    assert judge(LabelJudgement(probs=weak, leave_one_out=sharp), y, opts).estimated_issues == round(rho * n)
    assert judge(LabelJudgement(probs=sharp, leave_one_out=weak), y, opts).estimated_issues == \
        majority_count(weak, y)
    # the rule is the gain per counted label: just below and just above it
    from lgcexp.calibration import _log_evidence, _noisy_nll, calibrate_temperature

    _, _, L, yl = _log_evidence(sharp, y)
    gain = _noisy_nll(L, yl, calibrate_temperature(sharp, y)[1], 0.0) - _noisy_nll(L, yl, T, rho)
    per_label = gain / (rho * n)
    assert per_label > NATS_PER_COUNTED_LABEL
    import lgcexp.calibration as cal

    monkeypatch.setattr(cal, "NATS_PER_COUNTED_LABEL", per_label * 1.001)
    assert not noise_rate_identified(sharp, y, T, rho)
    monkeypatch.setattr(cal, "NATS_PER_COUNTED_LABEL", per_label * 0.999)
    assert noise_rate_identified(sharp, y, T, rho)
    monkeypatch.undo()
    assert not noise_rate_identified(sharp, y, T, 0.0)


def test_issue_type_and_evidence_of_each_flag():
    import scipy.sparse as sp_

    from lgcexp.issues.explain import issue_types

    P = np.array([[0.1, 0.8, 0.1], [0.45, 0.4, 0.15], [0.7, 0.2, 0.1], [0.3, 0.3, 0.4]])
    y = np.array([0, 0, 0, 1])
    s = P.argmax(axis=1)
    assert issue_types(P, y, s, np.array([True, True, False, True])).tolist() == ["wrong", "ambiguous", "",
                                                                                  "ambiguous"]
    X, labels, truth = _problem()
    df, ev = find_label_issues(X, labels, method="lgc", evidence=True, clean_labels=truth)
    flagged = df[df["is_label_issue"]]
    assert (flagged["issue_type"] == "wrong").all() and flagged["is_flipped"].all()
    assert ev["index"].tolist() == flagged["index"].tolist()
    assert (ev["reported_p_suggested"] > 0.5).all() and (ev["method_p_given"] < ev["method_p_suggested"]).all()
    # the neighbours: the heaviest edges of the kNN graph to other labelled points, by hand
    from lgcexp.graph import build_graph

    W = sp_.csr_matrix(build_graph(X, k=10, sigma="mean")[0].W)
    i = int(ev["index"][0])
    row = W.getrow(i).toarray().ravel()
    row[i] = 0
    top = np.argsort(-row, kind="stable")[:5]
    listed = [(int(a), int(b), float(c)) for a, b, c in (t.split(":") for t in ev["neighbours"][0].split(";"))]
    assert [t[0] for t in listed] == top.tolist()
    assert [t[1] for t in listed] == labels[top].tolist()
    np.testing.assert_allclose([t[2] for t in listed], row[top], rtol=1e-3)


def test_the_estimator_leaves_a_precomputed_matrix_as_it_was():
    from lgcexp.graph.precomputed import PrecomputedGraph
    from lgcexp.sklearn import LGCClassifier

    X, labels, _ = _problem()
    W = sp.csr_matrix(_affinity(X))  # ones on the diagonal: dropped by the rule on a copy
    before = (W.data.copy(), W.indices.copy(), W.indptr.copy(), W.nnz)
    LGCClassifier(graph=PrecomputedGraph(diagonal="drop")).fit(W, labels)
    for b, a in zip(before, (W.data, W.indices, W.indptr, W.nnz)):
        assert np.array_equal(b, a)


# --- metric="cosine": network embeddings (docs/label_issues.md#embeddings) -------------------------------------

def _embedding_like(n=90, d=40, seed=0):
    """Three classes of non-negative rows whose direction carries the class and whose length varies widely
    (as a ReLU layer's activations do): Euclidean neighbours follow the length, cosine ones the direction."""
    rng = np.random.default_rng(seed)
    y = np.repeat([0, 1, 2], n // 3)
    centres = np.abs(rng.normal(size=(3, d))) * (rng.random((3, d)) < 0.4)
    X = np.maximum(centres[y] + 0.3 * rng.normal(size=(n, d)), 0) * rng.uniform(0.2, 5.0, size=(n, 1))
    return X.astype(np.float32), y


def test_unit_rows_is_blockwise_keeps_float32_and_refuses_zero_rows():
    from lgcexp.preprocess import unit_rows

    X, _ = _embedding_like()
    before = X.copy()
    U = unit_rows(X, block=7)
    assert U.dtype == np.float32 and np.array_equal(X, before)
    np.testing.assert_allclose(U, X / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True), rtol=1e-6)
    assert np.array_equal(U, unit_rows(X, block=1000))
    assert unit_rows(X.astype(np.float64)).dtype == np.float64
    X[5] = 0.0
    with pytest.raises(UserError, match=r"^X: row 5 is all zeros; the cosine metric needs every row"):
        unit_rows(X, block=4)


def test_cosine_graph_equals_brute_force_cosine_knn():
    from lgcexp.graph.knn import KnnGraph
    from lgcexp.preprocess import unit_rows

    X, _ = _embedding_like(n=60)
    k, sigma = 6, 0.4
    W = KnnGraph(k=k, sigma=sigma).build(unit_rows(X))[0].W.toarray()
    X64 = X.astype(np.float64)
    cos = (X64 @ X64.T) / np.outer(np.linalg.norm(X64, axis=1), np.linalg.norm(X64, axis=1))
    np.fill_diagonal(cos, -np.inf)
    near = np.argsort(-cos, axis=1, kind="stable")[:, :k]
    A = np.zeros_like(cos, dtype=bool)
    A[np.repeat(np.arange(60), k), near.ravel()] = True
    A |= A.T  # the union graph
    d2 = 2.0 - 2.0 * np.where(np.isfinite(cos), cos, 1.0)
    expected = np.where(A, np.exp(-d2 / (2 * sigma**2)), 0.0)
    assert np.array_equal(W > 0, A)
    np.testing.assert_allclose(W, expected, atol=1e-5)
    # and it is not the Euclidean graph of the rows as given
    assert not np.array_equal(KnnGraph(k=k, sigma=sigma).build(X)[0].W.toarray() > 0, A)


def test_metric_cosine_judges_directions():
    X, y = _embedding_like(seed=1)
    labels = y.copy()
    labels[[4, 40, 70]] = (labels[[4, 40, 70]] + 1) % 3
    cos = find_label_issues(X, labels, metric="cosine", method="lgc")
    scaled = X * np.random.default_rng(2).uniform(0.1, 10.0, size=(X.shape[0], 1)).astype(np.float32)
    pd.testing.assert_frame_equal(cos, find_label_issues(scaled, labels, metric="cosine", method="lgc"),
                                  check_exact=False, atol=1e-5)
    by_hand = X.astype(np.float64) / np.linalg.norm(X.astype(np.float64), axis=1, keepdims=True)
    pd.testing.assert_frame_equal(cos, find_label_issues(by_hand, labels, method="lgc"), check_exact=False, atol=1e-5)
    assert set(cos.loc[cos["is_label_issue"], "index"]) == {4, 40, 70}


@pytest.mark.parametrize("kw,match", [
    ({"metric": "manhattan"}, r"^metric='manhattan' is not allowed: choose one of euclidean, cosine"),
    ({"metric": "cosine", "X": None, "pred_probs": "P"}, r"^metric='cosine' needs the features X"),
])
def test_bad_metric_one_line(kw, match):
    X, y = _embedding_like()
    P = np.eye(3)[y] * 0.9 + 0.1 / 3
    args = {"X": X, **kw}
    if args.get("pred_probs") == "P":
        args["pred_probs"] = P
    with pytest.raises(UserError, match=match):
        find_label_issues(labels=y, **args)


def test_auto_cut_flags_the_count_where_every_point_is_labelled():
    """cut="auto" (the default): as many flags as the estimate where every point carries a label; the paper's
    consensus where labels were sampled; an explicit cut is kept."""
    from lgcexp.issues.options import resolve_cut

    assert resolve_cut("auto", True) == "count" and resolve_cut("auto", False) == "consensus"
    assert resolve_cut("suggested", True) == "suggested"
    X, labels, _ = _problem()
    df = find_label_issues(X, labels, method="lgc")
    assert df.attrs["cut"] == "count" and df["is_label_issue"].sum() == df.attrs["estimated_issues"]
    sampled = labels.copy()
    sampled[::3] = -1
    df2 = find_label_issues(X, sampled, method="lgc")
    assert df2.attrs["cut"] == "consensus"
    assert find_label_issues(X, labels, method="lgc", cut="suggested").attrs["cut"] == "suggested"


@pytest.mark.parametrize("method", ["lgc", "autoL", "auto"])
def test_graph_methods_mark_their_judgement_as_leave_one_out(method):
    """LGC's, AutoL's and auto's (AutoL at a chosen alpha) judgements carry the graph's plain leave-one-out (the
    count reads it; its fitted rate may count alone, point 4 of lgcexp.issues.count): for LGC its evidence, for
    AutoL and auto the vote of every other label counted once at their alpha, against a dense solve; the user's
    pred_probs and the k-NN baseline have none."""
    from lgcexp.algorithms import make_algorithm
    from lgcexp.graph.knn import KnnGraph
    from lgcexp.issues.pred_probs import pred_probs_judgement
    from lgcexp.stages import fit_on_graph

    X, labels, _ = _problem()
    labeled = np.arange(0, 80, 2)
    fitted = fit_on_graph(KnnGraph(k=10, sigma="mean"), make_algorithm(method, {}), X, labeled, labels[labeled], 2)
    J = fitted.algorithm.label_judgement()
    a = fitted.algorithm
    alpha = {"lgc": lambda: a.alpha, "autoL": lambda: 1 / (1 + a.mu), "auto": lambda: a.alpha_}[method]()
    S = fitted.graph.S.toarray()
    P = np.linalg.inv(np.eye(len(X)) - alpha * S)[np.ix_(labeled, labeled)]
    np.fill_diagonal(P, 0.0)
    y = labels[labeled]
    V = np.stack([P[:, y == k].sum(axis=1) for k in range(2)], axis=1)
    np.testing.assert_allclose(J.leave_one_out, V / V.sum(axis=1, keepdims=True), atol=1e-4)
    if method == "lgc":
        assert J.leave_one_out is J.probs
    else:  # the vote share at the learnt weights differs where a weight is not 1
        assert not np.allclose(J.probs, J.leave_one_out)
    assert pred_probs_judgement(np.full((4, 2), 0.5)).leave_one_out is None

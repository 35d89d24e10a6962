"""Label issues (lgcexp.issues): every score and cut against a brute-force or hand computation, the
metrics' edge cases, confident learning on a hand-worked example (and against cleanlab where installed),
the methods' judgements against leave-one-out refits, find_label_issues on a toy problem, and the runs'
label_issues.csv and detection metrics."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import random_graph, two_clusters
from helpers import CONF, make_cfg

from lgcexp.errors import UserError
from lgcexp.issues import count, cuts, frames, views
from lgcexp.issues import judge as judging
from lgcexp.issues import judgement as jm
from lgcexp.issues import options as opts_mod
from lgcexp.issues.find import find_label_issues
from lgcexp.params import constructor_defaults

# --- quality and suggestion -------------------------------------------------------------------------------


def test_quality_and_suggestion_by_hand():
    probs = np.array([[0.7, 0.2, 0.1],
                      [0.5, 0.5, 0.0],   # tie between the given label and another: keep the given one
                      [0.0, 0.0, 0.0],   # no evidence: quality 1, keep the given label
                      [0.1, 0.3, 0.6]])
    y = np.array([1, 1, 2, 2])
    np.testing.assert_allclose(jm.label_quality(probs, y), [0.2, 0.5, 1.0, 0.6])
    assert jm.suggested_labels(probs, y).tolist() == [0, 1, 2, 2]
    assert cuts.decide(probs, y, "suggested").tolist() == [True, False, False, False]
    assert cuts.decide(probs, y, "threshold", threshold=0.55).tolist() == [True, True, False, False]
    assert cuts.decide(probs, y, "method", decision=np.array([0, 0, 1, 0])).tolist() == [False, False, True, False]
    with pytest.raises(ValueError, match="no decision of its own"):
        cuts.decide(probs, y, "method")
    # consensus: the evidence and the reported distribution must both prefer another class
    evidence = np.array([[0.2, 0.7, 0.1], [0.9, 0.1, 0.0], [0, 0, 0], [0.1, 0.3, 0.6]])
    assert cuts.decide(probs, y, "consensus", evidence=evidence).tolist() == [False, False, False, False]
    assert cuts.decide(probs, y, "consensus").tolist() == cuts.decide(probs, y, "suggested").tolist()


def test_graph_loo_probs_brute_force():
    """Row i: how much each class's labels (weighted) reach i, i's own label left out, normalised."""
    rng = np.random.default_rng(0)
    P = rng.random((7, 7))
    y = np.array([0, 1, 2, 0, 1, 2, 0])
    w = rng.random(7)
    w[3] = -0.5  # a negative weight counts as 0 (AutoL's max(omega, 0))
    got = jm.graph_loo_probs(P, y, 3, weights=w)
    for i in range(7):
        v = np.zeros(3)
        for j in range(7):
            if j != i:
                v[y[j]] += max(w[j], 0) * P[i, j]
        np.testing.assert_allclose(got[i], v / v.sum())
    # scale-free: the same at 10 w (the vote share does not sharpen as omega grows)
    np.testing.assert_allclose(jm.graph_loo_probs(P, y, 3, weights=10 * w), got)


def test_lgc_judgement_is_lgc_refitted_without_each_label():
    from lgcexp.algorithms.lgc import LGC

    graph, _ = random_graph(n=40, k=5, seed=1)
    labeled = np.array([0, 3, 7, 12, 18, 22, 27, 31, 36])
    y = np.array([0, 1, 0, 1, 1, 0, 1, 0, 1])
    a = LGC(alpha=0.9).fit(graph, labeled, y, 2)
    got = a.label_judgement().probs
    M = np.linalg.inv(np.eye(40) - 0.9 * graph.S.toarray())
    for i in range(labeled.size):
        Y = np.zeros((40, 2))
        keep = np.arange(labeled.size) != i
        Y[labeled[keep], y[keep]] = 1.0
        F = M @ Y
        np.testing.assert_allclose(got[i], F[labeled[i]] / F[labeled[i]].sum(), atol=1e-5)
    assert LGC(judge=False).fit(graph, labeled, y, 2).label_judgement() is None


def test_autol_judgement_is_the_vote_share_at_the_learnt_weights():
    from lgcexp.algorithms.autol import AutoL

    graph, _ = random_graph(n=40, k=5, seed=2)
    labeled = np.arange(0, 40, 3)
    y = (labeled >= 20).astype(int)
    y[2] = 1 - y[2]
    a = AutoL(steps=200, xla=False, dtype="float64").fit(graph, labeled, y, 2)
    j = a.label_judgement()
    np.testing.assert_allclose(j.probs, jm.graph_loo_probs(a._P, y, 2, weights=a.omega_))
    assert np.array_equal(j.decision, a.omega_ <= 0)
    np.testing.assert_allclose(j.probs.sum(axis=1), 1.0)


def test_siis_judgement_is_its_clipped_normalised_scores(toy_graph):
    from lgcexp.algorithms.siis import SIIS

    labeled = np.arange(0, 40, 4)
    y = (labeled >= 20).astype(int)
    a = SIIS(m=6, max_iter=50).fit(toy_graph, labeled, y, 2)
    j = a.label_judgement()
    F = np.clip(a.scores_[labeled], 0, None)
    np.testing.assert_allclose(j.probs, F / F.sum(axis=1, keepdims=True))
    assert np.array_equal(j.decision, a.dropped_)


# --- confident learning -----------------------------------------------------------------------------------

#: a hand-worked example: 8 labelled points, 2 classes
CL_PROBS = np.array([
    [0.9, 0.1],   # 0 given 0
    [0.8, 0.2],   # 1 given 0
    [0.3, 0.7],   # 2 given 0: confidently 1
    [0.6, 0.4],   # 3 given 0
    [0.2, 0.8],   # 4 given 1
    [0.1, 0.9],   # 5 given 1
    [0.7, 0.3],   # 6 given 1: confidently 0
    [0.45, 0.55],  # 7 given 1: below both thresholds
])
CL_Y = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def test_confident_learning_hand_worked():
    # t_0 = mean(0.9, 0.8, 0.3, 0.6) = 0.65;  t_1 = mean(0.8, 0.9, 0.3, 0.55) = 0.6375
    np.testing.assert_allclose(cuts.confident_thresholds(CL_PROBS, CL_Y, 2), [0.65, 0.6375])
    # confident classes: 0:{0} 1:{0} 2:{1} 3:none (0.6<0.65, 0.4<0.6375) 4:{1} 5:{1} 6:{0} 7:none
    C, guess = cuts.confident_joint(CL_PROBS, CL_Y, 2)
    assert guess.tolist() == [0, 0, 1, -1, 1, 1, 0, -1]
    assert C.tolist() == [[2, 1], [1, 2]]
    # off-diagonal of the confident joint
    assert np.flatnonzero(cuts.confident_learning(CL_PROBS, CL_Y, filter_by="confident_joint")).tolist() == [2, 6]
    # calibrated counts: each row [2, 1] scaled to the 4 labels of its class -> [8/3, 4/3] -> rounded
    # preserving 4: [3, 1] (the larger remainder, 2/3, gets the extra unit)
    assert count.calibrated_counts(C, CL_Y).tolist() == [[3, 1], [1, 3]]
    # prune by noise rate: the label-0 point with the largest margin p1 - p0 (point 2), and the label-1
    # point with the largest p0 - p1 (point 6)
    assert np.flatnonzero(cuts.confident_learning(CL_PROBS, CL_Y, filter_by="prune_by_noise_rate")).tolist() == [2, 6]
    # prune by class: the 1 label of each class with the lowest self-confidence: 2 (0.3) and 6 (0.3)
    assert np.flatnonzero(cuts.confident_learning(CL_PROBS, CL_Y, filter_by="prune_by_class")).tolist() == [2, 6]
    assert np.flatnonzero(cuts.confident_learning(CL_PROBS, CL_Y, filter_by="both")).tolist() == [2, 6]
    # min_per_class caps what a class may lose
    assert not cuts.confident_learning(CL_PROBS, CL_Y, filter_by="prune_by_class", min_per_class=4).any()


def test_confident_learning_never_flags_the_most_likely_class_and_counts_by_rate():
    probs = np.array([[0.2, 0.8], [0.55, 0.45], [0.3, 0.7],      # given 0
                      [0.3, 0.7], [0.4, 0.6], [0.35, 0.65]])     # given 1
    y = np.array([0, 0, 0, 1, 1, 1])
    # t = (0.35, 0.65); confident classes 1, 0, 1 | 1, 0, 1 (point 5 reaches both: the larger, 1)
    C, guess = cuts.confident_joint(probs, y, 2)
    assert guess.tolist() == [1, 0, 1, 1, 0, 1] and C.tolist() == [[1, 2], [1, 2]]
    # calibrated = C (rows already sum to 3): prune 2 of class 0 towards 1 by margin (points 0 and 2), 1 of
    # class 1 towards 0 (point 4, the largest p0 - p1), but point 4's own class is its most likely: kept
    assert count.calibrated_counts(C, y).tolist() == [[1, 2], [1, 2]]
    flags = cuts.confident_learning(probs, y, filter_by="prune_by_noise_rate")
    assert np.flatnonzero(flags).tolist() == [0, 2]
    assert np.flatnonzero(cuts.confident_learning(probs, y, filter_by="confident_joint")).tolist() == [0, 2]


def test_confident_learning_against_cleanlab_when_installed():
    cleanlab = pytest.importorskip("cleanlab.filter")
    rng = np.random.default_rng(3)
    diff: dict = {}
    for trial in range(20):
        l, c = 120, 4
        y_true = rng.integers(0, c, l)
        logits = rng.normal(size=(l, c)) + 2.5 * np.eye(c)[y_true]
        probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        y = y_true.copy()
        flip = rng.random(l) < 0.2
        y[flip] = (y[flip] + rng.integers(1, c, flip.sum())) % c
        for ours_name, fb in (("prune_by_noise_rate",) * 2, ("prune_by_class",) * 2, ("both",) * 2,
                              ("confident_joint", "confident_learning")):
            ours = cuts.confident_learning(probs, y, c, filter_by=ours_name)
            theirs = cleanlab.find_label_issues(y, probs, filter_by=fb)
            diff.setdefault(fb, []).append(((ours ^ theirs).sum(), theirs.sum()))
    # the same sets up to a few labels (details of cleanlab's count adjustments): under 5 % of the flagged
    for fb, v in diff.items():
        d, n = np.sum(v, axis=0)
        assert d <= 0.05 * n, (fb, v)


# --- baselines --------------------------------------------------------------------------------------------


def test_knn_oof_probs_brute_force():
    from lgcexp.preprocess import fold_of

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 3))
    y = np.repeat([0, 1, 2], 10)
    got = views.knn_oof_probs(X, y, 3, k=4, folds=5, seed=7)
    want = np.zeros((30, 3))
    fold = fold_of(30, 5, 7)[0]  # lgcexp's folds
    for f in range(5):
        tr, te = np.flatnonzero(fold != f), np.flatnonzero(fold == f)
        for i in te:
            d = ((X[tr] - X[i]) ** 2).sum(axis=1)
            for j in tr[np.argsort(d, kind="stable")[:4]]:
                want[i, y[j]] += 0.25
    np.testing.assert_allclose(got, want)


def test_shrinkage_lda_is_the_gaussian_posterior_with_the_shrunk_covariance():
    from scipy.stats import multivariate_normal
    from sklearn.covariance import ledoit_wolf

    rng = np.random.default_rng(2)
    Z = np.vstack([rng.normal(size=(15, 4)) + m for m in ([0, 0, 0, 0], [2, 0, 1, 0], [0, 3, 0, 1])])
    y = np.repeat([0, 2, 3], 15)  # class 1 absent from training
    Zt = rng.normal(size=(5, 4))
    got = views.shrinkage_lda(Z, y, Zt, 4)
    means = {k: Z[y == k].mean(axis=0) for k in (0, 2, 3)}
    S, _ = ledoit_wolf(Z - np.stack([means[k] for k in y]), assume_centered=True)
    logp = np.stack([np.log(1 / 3) + multivariate_normal(means[k], S).logpdf(Zt) for k in (0, 2, 3)], axis=1)
    post = np.exp(logp - logp.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(got[:, [0, 2, 3]], post, atol=1e-10)
    assert (got[:, 1] == 0).all()


def test_feature_view_never_learns_from_rejected_labels():
    rng = np.random.default_rng(4)
    X = np.vstack([rng.normal(size=(20, 2)), rng.normal(size=(20, 2)) + 5])
    y = np.repeat([0, 1], 20)
    y_bad = y.copy()
    y_bad[:6] = 1  # six wrong labels in cluster 0
    keep = np.ones(40, dtype=bool)
    keep[:6] = False
    clean = views.feature_probs(X, y_bad, 2, keep)
    assert (clean[:6, 0] > 0.9).all()  # the rejected labels are predicted from the others
    assert views.feature_probs(X, y, 2, np.arange(40) < 20) is None  # one class left: no model


def test_combine_views():
    g = np.array([[0.5, 0.5, 0.0], [0, 0, 0]])
    f = np.array([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
    got = views.combine_views(g, f, floor=0.0)
    want = np.sqrt(g[0] * f[0])
    np.testing.assert_allclose(got[0], want / want.sum())
    assert (got[1] == 0).all()  # no evidence from the method: stays without evidence


# --- metrics ----------------------------------------------------------------------------------------------


def test_detection_metrics_by_hand():
    q = np.array([0.1, 0.2, 0.3, 0.4, 0.9, 0.8])
    d = np.array([1, 1, 0, 1, 0, 0], dtype=bool)
    f = np.array([1, 0, 1, 0, 0, 0], dtype=bool)
    sug = np.array([2, 0, 1, 1, 0, 0])
    clean = np.array([2, 1, 0, 1, 0, 0])
    m = frames.detection_metrics(q, d, f, sug, clean)
    # AUC: flipped at 0.1 and 0.3 against 4 clean at 0.2, 0.4, 0.9, 0.8 -> pairs won: 4 + 3 = 7 of 8
    assert m["detect_auc"] == pytest.approx(7 / 8)
    # AP: ranks 1 (hit), 2, 3 (hit) -> (1/1 + 2/3) / 2
    assert m["detect_ap"] == pytest.approx((1 + 2 / 3) / 2)
    assert m["detect_precision_at_k"] == pytest.approx(0.5)
    assert (m["detect_precision"], m["detect_recall"]) == (pytest.approx(1 / 3), pytest.approx(1 / 2))
    assert m["detect_f1"] == pytest.approx(2 * 1 / (2 * 1 + 2 + 1))
    assert m["n_label_issues"] == 3 and m["detect_false_alarms"] == 2
    assert m["detect_false_alarm_rate"] == pytest.approx(2 / 6)
    assert m["detect_suggest_acc"] == pytest.approx(0.5)


def test_detection_metrics_edge_cases():
    q = np.array([0.1, 0.5, 0.9])
    none = np.zeros(3, dtype=bool)
    # no flips: F1, precision, recall 0 (not NaN); AUC, AP, P@k and suggestion accuracy undefined (None)
    m = frames.detection_metrics(q, np.array([True, False, False]), none, np.zeros(3), np.zeros(3))
    assert (m["detect_f1"], m["detect_precision"], m["detect_recall"]) == (0.0, 0.0, 0.0)
    assert m["detect_auc"] is None and m["detect_ap"] is None and m["detect_precision_at_k"] is None
    assert m["detect_suggest_acc"] is None and m["detect_false_alarms"] == 1
    # nothing flagged, nothing flipped
    m = frames.detection_metrics(q, none, none)
    assert m["detect_f1"] == 0.0 and m["n_label_issues"] == 0 and m["detect_false_alarm_rate"] == 0.0
    # every label flipped: AUC undefined, the rest defined
    m = frames.detection_metrics(q, ~none, ~none)
    assert m["detect_auc"] is None and m["detect_f1"] == 1.0 and m["detect_ap"] == 1.0
    # nothing flagged but flips: precision 0 (not NaN)
    m = frames.detection_metrics(q, none, np.array([True, False, False]))
    assert m["detect_precision"] == 0.0 and m["detect_recall"] == 0.0 and m["detect_f1"] == 0.0
    assert json.dumps(m)  # no NaN anywhere


def test_issues_frame_order_and_columns():
    df = frames.issues_frame(np.array([10, 11, 12, 13]), np.array(["a", "b", "a", "b"]), np.array(["a", "a", "b", "b"]),
                         np.array([0.9, 0.2, 0.1, 0.2]), np.array([False, True, True, False]),
                         np.array([False, True, True, False]))
    assert list(df.columns) == ["index", "given_label", "suggested_label", "label_quality", "is_label_issue",
                                "is_flipped"]
    assert df["index"].tolist() == [12, 11, 13, 10]  # flagged first, each by quality, ties by index


def _posterior_by_enumeration(views, y, prior, floor):
    """The product-of-experts posterior written out class by class, for one row at a time."""
    l, c = views[0].shape
    out = np.zeros(l)
    for i in range(l):
        if views[0][i].sum() == 0:
            continue
        score = np.ones(c)
        for j in range(c):
            for v in views:
                score[j] *= v[i, j] + floor
            score[j] /= max(prior[j], floor) ** (len(views) - 1)
        out[i] = 1.0 - score[y[i]] / score.sum()
    return out


@pytest.mark.parametrize("n_views", [1, 2, 3])
def test_issue_probability_against_enumeration(n_views):
    rng = np.random.default_rng(n_views)
    l, c = 40, 4
    views = [rng.dirichlet(np.full(c, 0.5), size=l) for _ in range(n_views)]
    views[0][3] = 0.0  # no evidence: probability 0
    y = rng.integers(0, c, size=l)
    prior = np.bincount(y, minlength=c) / l
    got = cuts.issue_probability(views, y)
    if n_views == 1:
        want = 1.0 - jm.normalize_rows(views[0])[np.arange(l), y]
        want[3] = 0.0
    else:
        want = _posterior_by_enumeration(views, y, prior, 1e-4)
    assert got[3] == 0.0 and np.allclose(got, want, atol=1e-12)
    # an explicit prior replaces the label fractions
    flat = np.full(c, 1.0 / c)
    if n_views > 1:
        assert np.allclose(cuts.issue_probability(views, y, prior=flat),
                           _posterior_by_enumeration(views, y, flat, 1e-4), atol=1e-12)


def test_judge_reports_issue_probability_of_the_views_used():
    rng = np.random.default_rng(0)
    X, y = two_clusters(n_per=60, seed=1)
    wrong = rng.choice(y.size, 10, replace=False)
    y_obs = y.copy()
    y_obs[wrong] = 1 - y_obs[wrong]
    evidence = jm.normalize_rows(np.eye(2)[y] * 0.8 + 0.1)
    with_view = judging.judge(jm.LabelJudgement(probs=evidence), y_obs, None, X=X)
    alone = judging.judge(jm.LabelJudgement(probs=evidence), y_obs, {"features": False}, X=X)
    assert with_view.features and not alone.features
    assert np.allclose(alone.issue_probability, 1.0 - evidence[np.arange(y.size), y_obs])
    assert with_view.expected_issues == pytest.approx(with_view.issue_probability.sum())
    # two agreeing views are surer than one: the wrong labels' probabilities go up
    assert (with_view.issue_probability[wrong] > alone.issue_probability[wrong]).all()
    # the feature view handed back is the out-of-fold view trained on the labels the evidence keeps
    keep = evidence.argmax(axis=1) == y_obs
    assert np.array_equal(with_view.feature_view, views.feature_probs(X, y_obs, 2, keep))
    assert alone.feature_view is None


# --- the Python entry point -------------------------------------------------------------------------------


def _toy_labels(seed: int = 0):
    X, y = two_clusters(n_per=40, seed=seed)
    names = np.array(["left", "right"])[y].astype(object)
    labels = np.full(y.size, "", dtype=object)
    every = np.arange(0, y.size, 2)
    labels[every] = names[every]
    wrong = [4, 10, 50, 62]
    for w in wrong:
        labels[w] = "right" if names[w] == "left" else "left"
    return X, labels, names, sorted(wrong)


@pytest.mark.parametrize("method,params", [("autoL", {"steps": 300, "xla": False}), ("lgc", None), ("knn", None)])
def test_find_label_issues_on_two_clusters(method, params):
    X, labels, names, wrong = _toy_labels()
    df = find_label_issues(X, labels, method=method, params=params, clean_labels=names)
    assert list(df.columns) == ["index", "given_label", "suggested_label", "label_quality", "issue_probability",
                                "is_label_issue", "issue_type", "is_flipped"]
    assert df["issue_probability"].between(0, 1).all()
    flagged = df["is_label_issue"].to_numpy()
    assert df["issue_probability"][flagged].min() > df["issue_probability"][~flagged].mean()
    assert df.attrs["expected_issues"] == pytest.approx(df["issue_probability"].sum())
    assert len(df) == 40 and df["label_quality"].between(0, 1).all()
    assert sorted(df.loc[df["is_label_issue"], "index"]) == wrong
    assert sorted(df["index"][:4]) == wrong  # most suspicious first
    top = df[df["is_label_issue"]]
    assert (top["suggested_label"] == names[top["index"]]).all() and top["is_flipped"].all()


def test_find_label_issues_with_a_graph_only_and_bad_input():
    import scipy.sparse as sp

    X, labels, names, wrong = _toy_labels(seed=1)
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    W = np.exp(-D / 2) * (D < 4.0)
    np.fill_diagonal(W, 0)
    df = find_label_issues(None, labels, graph=sp.csr_matrix(W), method="lgc")
    assert sorted(df.loc[df["is_label_issue"], "index"]) == wrong and "is_flipped" not in df.columns
    with pytest.raises(UserError, match="give X"):
        find_label_issues(None, labels)
    with pytest.raises(UserError, match="^graph: the matrix is not symmetric"):
        find_label_issues(None, labels, graph=np.triu(W))
    # the checks of graph=precomputed, self-loops dropped: the same judgement as without them
    looped = find_label_issues(None, labels, graph=W + np.eye(W.shape[0]), method="lgc")
    pd.testing.assert_frame_equal(looped, df)
    with pytest.raises(UserError, match=r"^graph: the matrix is 5 x 5 but the data has"):
        find_label_issues(None, labels, graph=W[:5, :5])
    negative = W.copy()
    negative[0, 1] = -1.0
    with pytest.raises(UserError, match=r"^graph: 1 entries are negative"):
        find_label_issues(None, labels, graph=negative)
    with pytest.raises(UserError, match="cut=foo"):
        find_label_issues(X, labels, cut="foo")
    with pytest.raises(UserError, match="does not judge labels"):
        find_label_issues(X, labels, method="gfhf")


def test_find_label_issues_is_exported():
    import lgcexp

    assert lgcexp.find_label_issues is find_label_issues


# --- config and runs --------------------------------------------------------------------------------------


def test_yaml_detect_defaults_equal_constructor_defaults():
    section = yaml.safe_load((Path(CONF) / "config.yaml").read_text())["detect"]
    from lgcexp.config import PRED_PROBS_KEY

    assert section.pop(PRED_PROBS_KEY) is None  # an input (a file), not an option of the judgement
    defaults = constructor_defaults(opts_mod.DetectOptions)
    assert section == defaults and set(defaults) == set(opts_mod.DetectOptions._parameter_constraints)
    for k, v in section.items():
        assert type(v) is type(defaults[k]), k


def test_run_writes_label_issues_and_metrics(tmp_path):
    from lgcexp.pipeline import run

    r = run(make_cfg("algo=lgc", "noise.rate=0.2", tmp=tmp_path), out_dir=tmp_path / "lgc")
    df = pd.read_csv(tmp_path / "lgc" / frames.ISSUES_FILE)
    assert list(df.columns) == ["index", "given_label", "suggested_label", "label_quality", "issue_probability",
                                "is_label_issue", "issue_type", "is_flipped"]
    assert r["detect_expected_issues"] == pytest.approx(df["issue_probability"].sum())
    assert len(df) == r["n_labeled"] and df["is_flipped"].sum() == r["n_flipped"] == 20
    flagged = df[df["is_label_issue"]]
    assert (flagged["suggested_label"] != flagged["given_label"]).all()
    assert df["label_quality"].is_monotonic_increasing or not flagged.empty
    for key in ("detect_auc", "detect_ap", "detect_f1", "detect_precision", "detect_recall", "detect_precision_at_k",
                "detect_false_alarms", "detect_suggest_acc", "n_label_issues"):
        assert key in r
    assert r["detect_auc"] > 0.9 and r["detect_f1"] > 0.7 and r["detect_features"] is True
    res = json.loads((tmp_path / "lgc" / "result.json").read_text())
    assert res["detect_cut"] == "consensus"
    # the same flagged set from the python entry point's functions
    assert int(df["is_label_issue"].sum()) == r["n_label_issues"]
    # a method that does not judge labels writes none
    r = run(make_cfg("algo=gfhf", "noise.rate=0.2", tmp=tmp_path), out_dir=tmp_path / "gfhf")
    assert not (tmp_path / "gfhf" / frames.ISSUES_FILE).exists() and "detect_auc" not in r
    # options: the method's own verdict, no feature view
    r = run(make_cfg("algo=lgc", "noise.rate=0.2", "detect.cut=prune_by_class", "detect.features=false",
                     tmp=tmp_path), out_dir=tmp_path / "lgc2")
    assert r["detect_cut"] == "prune_by_class" and r["detect_features"] is False


def test_run_at_zero_noise_scores_no_nan(tmp_path):
    from lgcexp.pipeline import run

    run(make_cfg("algo=lgc", "noise.rate=0", tmp=tmp_path), out_dir=tmp_path / "z")
    res = json.loads((tmp_path / "z" / "result.json").read_text())
    assert res["detect_f1"] == 0.0 and res["detect_auc"] is None and res["n_flipped"] == 0
    assert res["detect_false_alarms"] == res["n_label_issues"]


def test_auto_judgement_is_autol_s_at_the_chosen_alpha():
    """algo=auto judges its labels as AutoL does, with the P_LL of the alpha it chose (so CLI auto runs write
    label_issues.csv and detect_* figures)."""
    from lgcexp.algorithms.auto import Auto
    from lgcexp.algorithms.propagation import propagation_submatrix

    graph, _ = random_graph(n=40, k=5, seed=2)
    labeled = np.arange(0, 40, 3)
    y = (labeled >= 20).astype(int)
    y[2] = 1 - y[2]
    a = Auto(steps=200, search_steps=50, xla=False, dtype="float64", tol=1e-12).fit(graph, labeled, y, 2)
    j = a.label_judgement()
    P, _ = propagation_submatrix(graph.S, labeled, a.alpha_, tol=1e-12, dtype="float64")
    np.testing.assert_allclose(j.probs, jm.graph_loo_probs(P, y, 2, weights=a.omega_), atol=1e-9)
    assert np.array_equal(j.decision, a.omega_ <= 0)
    np.testing.assert_allclose(j.probs.sum(axis=1), 1.0)


def test_project_rows_is_the_standardised_pca_projection(tmp_path):
    """Bounded-memory projection of a memory map: with the whole set as its sample it is the standardised
    rows times the leading eigenvectors of their covariance (each axis up to its sign)."""
    rng = np.random.default_rng(4)
    X = (rng.normal(size=(600, 12)) @ rng.normal(size=(12, 12))).astype(np.float32)
    X[:, 3] = 5.0  # a constant feature keeps deviation 1, as in the in-memory standardisation
    path = tmp_path / "X.npy"
    np.save(path, X)
    M = np.load(path, mmap_mode="r")
    rows = np.sort(rng.choice(600, 400, replace=False))
    got = views.project_rows(M, rows, 4, sample=10_000, block=64)
    from lgcexp.preprocess import standardize

    Z = standardize(X[rows])
    vals, vecs = np.linalg.eigh(Z.T @ Z)
    ref = Z @ vecs[:, ::-1][:, :4]
    signs = np.sign((got * ref).sum(axis=0))
    np.testing.assert_allclose(got, ref * signs, atol=2e-3 * np.abs(ref).max())
    # only centred (the network view's input): the eigenvectors of the centred rows' covariance
    got = views.project_rows(M, rows, 4, sample=10_000, block=64, standardize=False)
    Z = X[rows].astype(np.float64) - X[rows].astype(np.float64).mean(axis=0)
    vals, vecs = np.linalg.eigh(Z.T @ Z)
    ref = Z @ vecs[:, ::-1][:, :4]
    signs = np.sign((got * ref).sum(axis=0))
    np.testing.assert_allclose(got, ref * signs, atol=2e-3 * np.abs(ref).max())


@pytest.mark.parametrize("model", ["logistic", "mlp"])
def test_judge_run_projects_large_views(monkeypatch, model):
    """Above LARGE_VIEW_BYTES the feature view reads the rows through project_rows (standardised for the
    logistic view, centred for the network's); the judgement stays (cut by consensus: the count's fitted noise
    rate follows the view's fine calibration, 5.15 against 6.0 labels here)."""
    from types import SimpleNamespace

    X, y = two_clusters(n_per=60, seed=2)
    rng = np.random.default_rng(0)  # 60 more columns, each a noisy mix of the two informative ones
    X = np.hstack([X, X @ rng.normal(size=(2, 60)) + rng.normal(scale=0.05, size=(X.shape[0], 60))])
    y_obs = y.copy()
    y_obs[:6] = 1 - y_obs[:6]
    evidence = jm.normalize_rows(np.eye(2)[y] * 0.8 + 0.1)
    algo = SimpleNamespace(label_judgement=lambda: jm.LabelJudgement(probs=evidence))
    split = SimpleNamespace(labeled=np.arange(y.size), y_observed=y_obs)
    monkeypatch.setattr(judging, "choose_feature_model", lambda n_labeled, n, image_shape=None: model)
    small = judging.judge_run(algo, split, {"cut": "consensus"}, X=X)
    calls = []
    real = views.project_rows
    monkeypatch.setattr(views, "project_rows", lambda *a, **k: calls.append(k["standardize"]) or real(*a, **k))
    monkeypatch.setattr(views, "LARGE_VIEW_BYTES", 1000)
    large = judging.judge_run(algo, split, {"cut": "consensus"}, X=X)
    assert calls == [model != "mlp"] and large.features and small.features
    assert np.array_equal(large.is_issue, small.is_issue) and sorted(np.flatnonzero(large.is_issue)) == list(range(6))

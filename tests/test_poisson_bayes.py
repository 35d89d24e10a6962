"""PoissonBayes: the posterior against Bayes' rule by enumeration, the whole fit against a dense computation that
re-solves Poisson learning without each label, and a flipped label corrected on separated clusters."""
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import random_graph
from test_poissonl import _dense_G

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.poisson import mixing_steps
from lgcexp.calibration import calibrate_under_noise, noisy_label_posterior
from lgcexp.graph import Graph


def test_posterior_is_bayes_rule_by_enumeration():
    rng = np.random.default_rng(0)
    c, m, rho = 4, 6, 0.3
    q = rng.dirichlet(np.ones(c), size=m)
    q[2] = 0.0                                    # no evidence: the given label stays
    y = rng.integers(0, c, size=m)
    post = noisy_label_posterior(q, y, rho)
    for i in range(m):
        joint = np.array([q[i, k] * ((1 - rho) if k == y[i] else rho / (c - 1)) for k in range(c)])
        want = joint / joint.sum() if joint.sum() > 0 else np.eye(c)[y[i]]
        assert np.allclose(post[i], want, atol=1e-14)
    assert np.allclose(noisy_label_posterior(q[[0, 1]], y[[0, 1]], 0.0), np.eye(c)[y[[0, 1]]])


def _loo_rows_by_resolving(Gd, labeled):
    """A_i: Poisson learning's value at label i with label i removed and every other label a class of its own."""
    m = labeled.size
    A = np.zeros((m, m))
    for i in range(m):
        keep = np.delete(np.arange(m), i)
        B = np.zeros((Gd.shape[0], m))
        E = np.eye(m)[keep]
        B[labeled[keep]] = E - E.mean(0)
        A[i] = (Gd @ B)[labeled[i]]
    return A


@pytest.mark.parametrize("labels", ["soft", "hard"])
def test_fit_against_a_dense_computation(labels):
    g, _ = random_graph(60, 5, seed=21)
    labeled = np.array([1, 5, 9, 14, 20, 26, 31, 37, 44, 50, 55, 58])
    y = np.array([0, 1, 2, 0, 1, 2, 0, 1, 2, 0, 2, 1])
    c = 3
    T = mixing_steps(g.W, labeled)
    Gd = _dense_G(g, T)
    A = _loo_rows_by_resolving(Gd, labeled)
    Z = (A / np.abs(A).sum(1, keepdims=True)) @ np.eye(c)[y]
    Z /= np.abs(Z).mean()
    P = np.exp(Z - Z.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    q, _, rho = calibrate_under_noise(P, y)
    lik = np.where(np.eye(c)[y] > 0, 1 - rho, rho / (c - 1))
    post = q * lik / (q * lik).sum(1, keepdims=True)
    S = post if labels == "soft" else np.eye(c)[post.argmax(1)]
    B = np.zeros((60, c))
    B[labeled] = S - S.mean(0)
    U = (Gd @ B) * ((1 / c) / S.mean(0))
    alg = make_algorithm("poissonBayes", {"labels": labels}).fit(g, labeled, y, c)
    assert np.isclose(alg.noise_rate_, rho, atol=1e-9)
    assert np.allclose(alg.posterior_, post, atol=1e-9)
    assert np.allclose(alg.scores_, U, atol=1e-9)
    assert np.array_equal(alg.labeled_pred_, post.argmax(1))
    judgement = alg.label_judgement()                 # the prior: the other labels' evidence, calibrated
    assert np.allclose(judgement.probs, q, atol=1e-9)
    assert np.array_equal(judgement.decision, post.argmax(1) != y)


def _clusters(n_per=30, c=3, seed=3):
    """c well separated clusters: a dense within-cluster kNN graph, one weak link between neighbours."""
    rng = np.random.default_rng(seed)
    X = np.concatenate([rng.normal(size=(n_per, 2)) * 0.3 + 6 * k for k in range(c)])
    D = np.sqrt(((X[:, None] - X[None]) ** 2).sum(-1))
    np.fill_diagonal(D, np.inf)
    W = np.zeros_like(D)
    nn = np.argsort(D, 1)[:, :6]
    for i in range(len(X)):
        W[i, nn[i]] = np.exp(-D[i, nn[i]] ** 2)
    W = np.maximum(W, W.T)
    for k in range(c - 1):
        a, b = k * n_per, (k + 1) * n_per
        W[a, b] = W[b, a] = 1e-3
    return Graph(W=sp.csr_matrix(W), sigma=1.0, key=f"clusters{seed}"), np.repeat(np.arange(c), n_per)


def test_a_flipped_label_is_corrected_and_clean_labels_stay():
    g, truth = _clusters()
    labeled = np.array([0, 3, 6, 9, 12, 30, 33, 36, 39, 42, 60, 63, 66, 69, 72])
    y = truth[labeled].copy()
    clean = make_algorithm("poissonBayes", {}).fit(g, labeled, y, 3)
    assert clean.noise_rate_ < 0.02 and not clean.dropped_.any()
    y[3] = 2                                      # a cluster-0 point labelled 2
    alg = make_algorithm("poissonBayes", {}).fit(g, labeled, y, 3)
    assert alg.noise_rate_ > 0.02
    assert alg.labeled_pred_[3] == 0 and np.flatnonzero(alg.dropped_).tolist() == [3]
    assert np.argmax(alg.suspicion_) == 3
    assert (alg.predict() == truth).mean() == 1.0
    others = np.arange(labeled.size) != 3
    assert alg.posterior_[3, 0] > 0.5 and np.allclose(alg.posterior_[others], clean.posterior_[others], atol=0.2)


def test_one_label_per_class_is_poisson_learning():
    """No other label can speak for a class with one label: nothing is judged and the fit is Poisson learning with
    the class-size rescaling (here all ones)."""
    g, _ = random_graph(40, 4, seed=13)
    labeled, y = np.array([3, 17, 31]), np.array([0, 1, 2])
    alg = make_algorithm("poissonBayes", {}).fit(g, labeled, y, 3)
    plain = make_algorithm("poisson", {"balance": True}).fit(g, labeled, y, 3)
    assert np.allclose(alg.scores_, plain.scores_) and not alg.dropped_.any()
    assert alg.info_["n_isolated"] == 3 and alg.noise_rate_ == 0.0


def test_the_label_issue_finder_flags_the_flipped_label_from_the_judgement():
    """The judgement through the pipeline's label-issue stage: on separated clusters with one flipped label that
    label is the only one flagged, with its true class suggested; the only label of a class gets a zero row and is
    never flagged."""
    from lgcexp.issues.judge import judge_labels
    from lgcexp.issues.options import DetectOptions

    g, truth = _clusters()
    labeled = np.array([0, 3, 6, 9, 12, 30, 33, 36, 39, 42, 60, 63, 66, 69, 72, 45])
    y = truth[labeled].copy()
    y[3] = 2                                      # a cluster-0 point labelled 2
    y[-1] = 3                                     # a class of one label (4 classes)
    alg = make_algorithm("poissonBayes", {}).fit(g, labeled, y, 4)
    judgement = alg.label_judgement()
    assert not judgement.probs[-1].any() and judgement.probs[:-1].sum(1) == pytest.approx(1.0)
    issues = judge_labels(judgement, labeled, y, g.n, DetectOptions(cut="consensus", features=False))
    assert np.flatnonzero(issues.is_issue).tolist() == [3]
    assert issues.suggested[3] == 0


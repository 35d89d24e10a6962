"""PoissonL: the leave-one-out matrix against re-solving Poisson learning without each label (dense), the
closed-form gradient against finite differences and TensorFlow, and a fit that corrects a flipped label."""
import numpy as np
import pytest
from conftest import random_graph
from test_poisson import plain_mbo_rounds

from lgcexp.algorithms import make_algorithm
from lgcexp.algorithms.poisson import mixing_steps
from lgcexp.algorithms.poissonl import (
    loo_gradient,
    normalise_rows,
    poisson_loo_matrix,
    poisson_submatrix,
)


def _dense_G(g, T):
    W = g.W.toarray()
    d = W.sum(1)
    P = W / d[:, None]
    return sum(np.linalg.matrix_power(P, t) for t in range(T)) / d[None, :]


def test_loo_matrix_is_the_poisson_solve_without_each_label():
    g, _ = random_graph(40, 4, seed=11)
    labeled = np.array([2, 7, 15, 21, 30, 38])
    y = np.array([0, 1, 2, 0, 1, 2])
    c = 3
    w = np.array([1.0, 0.5, 2.0, 0.0, 1.5, 0.7])
    T = mixing_steps(g.W, labeled)
    Gd = _dense_G(g, T)
    G = poisson_submatrix(g.W, labeled, T)
    assert np.allclose(G, Gd[np.ix_(labeled, labeled)], atol=1e-12)
    A = poisson_loo_matrix(G)
    Y = np.eye(c)[y] * w[:, None]
    for i in range(labeled.size):
        keep = np.delete(np.arange(labeled.size), i)
        B = np.zeros((40, c))
        B[labeled[keep]] = Y[keep] - Y[keep].mean(0)   # mean shift of the others
        U = Gd @ B
        assert np.allclose(A[i] @ Y, U[labeled[i]], atol=1e-12)
    assert np.allclose(A.sum(1), 0, atol=1e-12) and np.all(np.diag(A) == 0)


@pytest.mark.parametrize("loss", ["xent", "mse", "ce"])
def test_gradient_against_finite_differences_and_tensorflow(loss):
    from lgcexp.algorithms.autol import LooModel

    g, _ = random_graph(40, 4, seed=12)
    labeled = np.array([1, 6, 12, 19, 25, 33, 39])
    y = np.array([0, 1, 2, 0, 1, 2, 0])
    A, _ = normalise_rows(poisson_loo_matrix(poisson_submatrix(g.W, labeled, mixing_steps(g.W, labeled))))
    w = np.array([1.3, 0.4, 2.0, 0.9, 1.1, 0.6, 1.7])
    f, grad = loo_gradient(A, w, y, 3, loss)
    h = 1e-6
    fd = np.array([(loo_gradient(A, w + h * e, y, 3, loss)[0] - loo_gradient(A, w - h * e, y, 3, loss)[0]) / (2 * h)
                   for e in np.eye(w.size)])
    assert np.allclose(grad, fd, atol=1e-7, rtol=1e-5)
    model = LooModel(A, y, 3, loss=loss, dtype="float64", form="dense")
    ft, gt = model.loss_and_grad(w)
    assert np.isclose(f, ft, rtol=1e-10) and np.allclose(grad, gt, atol=1e-10)


def _blob_graph(n=300, seed=1):
    import scipy.sparse as sp
    from sklearn.datasets import make_blobs
    from sklearn.neighbors import kneighbors_graph

    from lgcexp.graph import Graph

    X, y = make_blobs(n, centers=3, cluster_std=1.0, random_state=seed)
    K = kneighbors_graph(X, 10, mode="distance")
    K.data = np.exp(-K.data ** 2)
    W = sp.csr_matrix(K.maximum(K.T))
    return Graph(W=W, sigma=1.0, key=f"blobs{n}-{seed}"), y


def test_poissonl_fit_corrects_a_flipped_label(tmp_path):
    from lgcexp.cache import Cache

    g, y = _blob_graph()
    rng = np.random.default_rng(0)
    labeled = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 4, replace=False) for c in range(3)]))
    obs = y[labeled].copy()
    obs[0] = (obs[0] + 1) % 3                                        # one wrong label
    cache = Cache(str(tmp_path))
    a = make_algorithm("poissonL", {"steps": 300, "dtype": "float64"}).fit(g, labeled, obs, 3, cache=cache)
    assert a.labeled_pred_[0] == y[labeled[0]] and a.omega_[0] < a.omega_[1:].min()
    # the judgement: the other labels' leave-one-out votes at weights max(omega, 0), divided by their mean absolute
    # value, softmax-normalised (an independent numpy computation from the exact leave-one-out matrix), lowest
    # quality at the flipped label
    from lgcexp.algorithms.poissonl import poisson_loo_matrix
    from lgcexp.issues.judgement import label_quality

    G, _, _ = a.operator(g, labeled, cache)
    A = poisson_loo_matrix(G)
    Z = (A / np.abs(A).sum(1, keepdims=True)) @ (np.maximum(a.omega_, 0)[:, None] * np.eye(3)[obs])
    Z /= np.abs(Z).mean()
    Q = np.exp(Z - Z.max(1, keepdims=True))
    probs = a.label_judgement().probs
    assert np.allclose(probs, Q / Q.sum(1, keepdims=True), atol=1e-9)
    assert np.argmin(label_quality(probs, obs)) == 0
    assert (a.predict() == y).mean() >= (make_algorithm("poisson").fit(g, labeled, obs, 3).predict() == y).mean()
    b = make_algorithm("poissonL", {"steps": 300, "dtype": "float64"}).fit(g, labeled, obs, 3, cache=cache)
    assert b.info_["operator_cache_hit"] and np.array_equal(a.scores_, b.scores_)


@pytest.mark.parametrize("sources", ["corrected", "kept"])
@pytest.mark.parametrize("start", ["given", "reweighted"])
def test_poissonl_mbo_is_mbo_forced_by_the_reweighted_labels(sources, start):
    """PoissonL-MBO = PoissonL's fit, then the MBO rounds written plainly from Poisson learning's decision on the
    given labels (``given``) or PoissonL's (``reweighted``), forced by the corrected labels (``corrected``) or by
    the given labels PoissonL keeps (``kept``)."""
    from lgcexp.algorithms.poisson import Poisson, poisson_sources

    g, y = _blob_graph()
    rng = np.random.default_rng(3)
    labeled = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 5, replace=False) for c in range(3)]))
    obs = y[labeled].copy()
    obs[[0, 7]] = (obs[[0, 7]] + 1) % 3                              # two wrong labels
    p = {"steps": 300, "dtype": "float64", "T": 6, "Ns": 15}
    ours = make_algorithm("poissonLMBO", {**p, "sources": sources, "start": start}).fit(g, labeled, obs, 3)
    pl = make_algorithm("poissonL", {"steps": 300, "dtype": "float64"}).fit(g, labeled, obs, 3)
    assert np.array_equal(ours.omega_, pl.omega_) and pl.dropped_.any()
    if sources == "corrected":
        B = poisson_sources(g.n, labeled, pl.corrected_)
    else:
        k = ~pl.dropped_
        B = poisson_sources(g.n, labeled[k], np.eye(3)[obs[k]])
    if start == "given":
        first = Poisson().solve(g.W, poisson_sources(g.n, labeled, np.eye(3)[obs]), labeled)[0].argmax(1)
    else:
        first = pl.predict()
    ref, _ = plain_mbo_rounds(g, B, first, np.full(3, 1 / 3), Ns=15, mu=1.0, T=6)
    assert np.array_equal(ours.predict(), ref)
    assert (ours.predict() == y).mean() >= (make_algorithm("poissonMBO", {"T": 6, "Ns": 15})
                                            .fit(g, labeled, obs, 3).predict() == y).mean()


def test_poissonl_mbo_without_a_dropped_label_is_poisson_mbo():
    """With clean, well-separated labels PoissonL keeps every label, and ``sources=kept`` is Poisson-MBO itself."""
    g, y = _blob_graph()
    rng = np.random.default_rng(4)
    labeled = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 5, replace=False) for c in range(3)]))
    ours = make_algorithm("poissonLMBO", {"steps": 300, "dtype": "float64", "sources": "kept"}).fit(
        g, labeled, y[labeled], 3)
    assert not ours.dropped_.any()
    assert np.array_equal(ours.scores_, make_algorithm("poissonMBO").fit(g, labeled, y[labeled], 3).scores_)


@pytest.mark.parametrize("sources", ["kept", "corrected"])
def test_cutssl_l_is_cutssl_on_the_labels_poissonl_trusts(sources):
    """CutSSL-L = PoissonL's fit, then CutSSL on the kept labels (``kept``) or on every label corrected
    (``corrected``); with clean, well-separated labels nothing is dropped and it is CutSSL itself."""
    g, y = _blob_graph()
    rng = np.random.default_rng(3)
    labeled = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 5, replace=False) for c in range(3)]))
    obs = y[labeled].copy()
    obs[[0, 7]] = (obs[[0, 7]] + 1) % 3                              # two wrong labels
    cut = {"iterations": [20, 40]}
    ours = make_algorithm("cutsslL", {"steps": 300, "dtype": "float64", "sources": sources, **cut}).fit(
        g, labeled, obs, 3)
    pl = make_algorithm("poissonL", {"steps": 300, "dtype": "float64"}).fit(g, labeled, obs, 3)
    assert np.array_equal(ours.omega_, pl.omega_) and pl.dropped_.any()
    k = ~pl.dropped_
    lab, yl = (labeled[k], obs[k]) if sources == "kept" else (labeled, pl.labeled_pred_)
    ref = make_algorithm("cutssl", cut).fit(g, lab, yl, 3)
    assert np.array_equal(ours.scores_, ref.scores_)
    assert (ours.predict() == y).mean() >= (make_algorithm("cutssl", cut).fit(g, labeled, obs, 3).predict() == y).mean()
    rng = np.random.default_rng(4)
    clean = np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), 5, replace=False) for c in range(3)]))
    a = make_algorithm("cutsslL", {"steps": 300, "dtype": "float64", "sources": sources, **cut}).fit(
        g, clean, y[clean], 3)
    assert not a.dropped_.any() and np.array_equal(a.scores_, make_algorithm("cutssl", cut).fit(
        g, clean, y[clean], 3).scores_)


def test_the_only_label_of_a_class_is_neither_judged_nor_dropped():
    """One label per class: no other label can vote for a label's class, so nothing is judged and PoissonL is
    Poisson learning; with one class reduced to a single label, that label keeps its class."""
    g, _ = random_graph(40, 4, seed=13)
    labeled = np.array([3, 17, 31])
    y = np.array([0, 1, 2])
    pl = make_algorithm("poissonL", {"steps": 50, "dtype": "float64"}).fit(g, labeled, y, 3)
    plain = make_algorithm("poisson", {}).fit(g, labeled, y, 3)
    assert np.allclose(pl.scores_, plain.scores_) and not pl.dropped_.any()
    assert pl.info_["n_unjudged"] == 3 and pl.labeled_pred_.tolist() == [0, 1, 2]
    labeled = np.array([1, 6, 12, 19, 25, 33, 39])
    y = np.array([0, 1, 0, 1, 0, 1, 2])                  # class 2 has one label
    pl = make_algorithm("poissonL", {"steps": 300, "dtype": "float64"}).fit(g, labeled, y, 3)
    assert pl.labeled_pred_[6] == 2 and not pl.dropped_[6] and pl.info_["n_unjudged"] >= 1
    assert np.allclose(pl.corrected_[6], [0, 0, 1])
    judgement = pl.label_judgement()              # the label-issue finder never sees evidence for it
    assert not judgement.probs[6].any() and np.array_equal(judgement.decision, pl.dropped_)
    # the judged rows: the votes scaled by their mean absolute value over the judged labels only (numpy, from A)
    from lgcexp.algorithms.poissonl import poisson_loo_matrix

    G, _, _ = pl.operator(g, labeled)
    A = poisson_loo_matrix(G)
    Z = (A / np.abs(A).sum(1, keepdims=True)) @ (np.maximum(pl.omega_, 0)[:, None] * np.eye(3)[y])
    Z = Z[:6] / np.abs(Z[:6]).mean()
    Q = np.exp(Z - Z.max(1, keepdims=True))
    assert np.allclose(judgement.probs[:6], Q / Q.sum(1, keepdims=True), atol=1e-9)

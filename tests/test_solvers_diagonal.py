"""Leave-one-out without P_LL (lgcexp.solvers.diagonal, lgcexp.algorithms.lgc.lgc_loo_probs): the exact path against the
dense P_LL, the diagonal against a dense inverse, the colouring against brute-force graph distances, probing's error
bound, the switch in LGC's judgement, and the memory refusal (lgcexp.algorithms.propagation)."""
import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from lgcexp.algorithms import propagation
from lgcexp.algorithms.lgc import lgc_loo_probs
from lgcexp.algorithms.propagation import propagation_submatrix
from lgcexp.errors import UserError
from lgcexp.issues.judgement import graph_loo_probs
from lgcexp.solvers import diagonal


@pytest.fixture(scope="module")
def small():
    from sklearn.datasets import load_digits

    from lgcexp.graph import build_graph

    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400]
    g, _ = build_graph(X, k=8, sigma="mean")
    rng = np.random.default_rng(0)
    lab = np.sort(rng.choice(400, 300, replace=False))
    yl = y[lab].copy()
    flip = rng.choice(300, 30, replace=False)
    yl[flip] = (yl[flip] + 1) % 10
    return g, lab, yl


def test_diagonal_exact_is_the_dense_inverse(small):
    g, lab, _ = small
    Pinv = np.linalg.inv(np.eye(g.n) - 0.9 * g.S.toarray())
    d, _ = diagonal.propagation_diagonal(g.S, lab, 0.9, method="exact", dtype="float64", tol=1e-12)
    assert np.allclose(d, np.diag(Pinv)[lab], atol=1e-9)


@pytest.mark.parametrize("dtype,atol", [("float64", 1e-9), ("float32", 2e-5)])
def test_exact_loo_equals_dense_pll_without_diagonal(small, dtype, atol):
    g, lab, yl = small
    P, _ = propagation_submatrix(g.S, lab, 0.9, dtype="float64", tol=1e-12)
    ref = graph_loo_probs(P, yl, 10)
    got, _ = lgc_loo_probs(g.S, lab, yl, 10, 0.9, diagonal="exact", dtype=dtype,
                               tol=1e-12 if dtype == "float64" else 1e-6)
    assert np.allclose(got, ref, atol=atol)
    # and the unnormalised scores are (P_LL - diag) Y_L up to the factor 1 - alpha
    V, _ = diagonal.lgc_loo_scores(g.S, lab, yl, 10, 0.9, diagonal="exact", dtype="float64", tol=1e-12)
    Pt = P - np.diag(np.diag(P))
    assert np.allclose(0.1 * V, Pt @ np.eye(10)[yl], atol=1e-9)


@pytest.mark.parametrize("method", ["exact", "probe"])
def test_given_diagonal_is_reused_across_label_sets(small, method):
    """The diagonal depends on neither the labels nor c: computed once and passed as ``P_diag``, every label
    set gets the very numbers it gets when the diagonal is computed inside; and the reused one still matches
    the dense P_LL for a second label set."""
    g, lab, yl = small
    d, _ = diagonal.propagation_diagonal(g.S, lab, 0.9, method=method, distance=2, check=0)
    other = (yl + np.arange(yl.size) % 3) % 10  # a different labelling of the same points
    for labels in (yl, other):
        ref, st_ref = diagonal.lgc_loo_scores(g.S, lab, labels, 10, 0.9, diagonal=method, distance=2)
        got, st = diagonal.lgc_loo_scores(g.S, lab, labels, 10, 0.9, P_diag=d)
        assert np.array_equal(got, ref)
        assert st["diagonal"]["method"] == "given" and st_ref["diagonal"]["method"] == method
    P, _ = propagation_submatrix(g.S, lab, 0.9, dtype="float64", tol=1e-12)
    d_exact, _ = diagonal.propagation_diagonal(g.S, lab, 0.9, method="exact")
    got, _ = lgc_loo_probs(g.S, lab, other, 10, 0.9, P_diag=d_exact)
    assert np.allclose(got, graph_loo_probs(P, other, 10), atol=2e-5)
    with pytest.raises(ValueError, match="P_diag"):
        diagonal.lgc_loo_scores(g.S, lab, yl, 10, 0.9, P_diag=d[:-1])


@pytest.mark.parametrize("distance", [1, 2, 3])
def test_colouring_separates_by_more_than_distance(small, distance):
    g, lab, _ = small
    D = shortest_path(sp.csr_matrix(g.S), unweighted=True)
    among = np.zeros(g.n, dtype=bool)
    among[lab] = True
    for mask in (None, among):
        col = diagonal.distance_colouring(g.S, distance, among=mask)
        same = (col[:, None] == col[None, :]) & (col[:, None] >= 0)
        np.fill_diagonal(same, False)
        assert np.all(D[same] > distance)
        if mask is not None:
            assert np.all(col[~mask] == -1) and np.all(col[mask] >= 0)
        # the chunking (rows, and the neighbourhood budget) never changes the colours
        for chunk, budget in ((7, 1 << 25), (4096, 50), (4096, 1)):
            assert np.array_equal(diagonal.distance_colouring(g.S, distance, among=mask, chunk=chunk, budget=budget),
                                  col)


def test_colouring_chunks_respect_the_budget(small):
    g, _, _ = small
    A = sp.csr_matrix(g.S, dtype=np.float32, copy=True)
    A.data[:] = 1.0
    A = (A + sp.identity(g.n, dtype=np.float32, format="csr")).tocsr()
    ranges = diagonal.colouring_chunks(A, 3, chunk=64, budget=2000)
    assert ranges[0][0] == 0 and ranges[-1][1] == g.n and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    for s0, s1 in ranges:
        R = (A[s0:s1] @ A @ A).tocsr()
        assert s1 - s0 <= 64 and (R.nnz <= 2000 or s1 - s0 == 1)


def test_probe_bounds_and_converges(small):
    g, lab, _ = small
    exact, _ = diagonal.propagation_diagonal(g.S, lab, 0.9, method="exact", dtype="float64", tol=1e-12)
    errs = []
    for r in (1, 2, 3, 4):
        d, st = diagonal.propagation_diagonal(g.S, lab, 0.9, method="probe", distance=r, dtype="float64", tol=1e-12,
                                         check=50)
        assert np.all(d >= exact - 1e-9)  # P >= 0: probing only adds
        errs.append(np.abs(d - exact).mean())
        assert st["probe_check"]["points"] == 50
    assert errs[0] > errs[1] > errs[2] > errs[3] and errs[3] < 0.01 * exact.mean()
    # with a distance beyond the diameter the points of one colour lie in different components (P_ij = 0
    # between them): probing is exact
    d, st = diagonal.propagation_diagonal(g.S, lab, 0.9, method="probe", distance=60, dtype="float64", tol=1e-12,
                                          check=0)
    assert st["colours"] > 200 and np.allclose(d, exact, atol=1e-9)


def test_lgc_judgement_switches_above_the_dense_limit(small, monkeypatch):
    from lgcexp.algorithms import make_algorithm

    g, lab, yl = small
    dense = make_algorithm("lgc", {}).fit(g, lab, yl, 10).label_judgement().probs
    monkeypatch.setattr(propagation, "DENSE_MAX_LABELS", 100)
    alg = make_algorithm("lgc", {}).fit(g, lab, yl, 10)
    probe = alg.label_judgement().probs
    assert "loo_diagonal" in alg.info_ and alg.info_["loo_diagonal"]["method"] == "probe"  # 300 of 400 labelled
    assert alg.info_["loo_diagonal"]["probe_check"]["max_prob_diff"] < 0.02
    assert diagonal.choose_diagonal(300, 400) == "probe" and diagonal.choose_diagonal(100, 400) == "exact"
    assert np.abs(probe - dense).max() < 0.02 and np.mean(probe.argmax(1) == dense.argmax(1)) > 0.99


def test_dense_methods_refused_when_they_cannot_fit(monkeypatch):
    from lgcexp.issues.find import find_label_issues

    monkeypatch.setattr(propagation, "physical_memory", lambda: 1 << 20)  # a 1 MiB machine
    X = np.random.default_rng(0).normal(size=(500, 3))
    y = np.arange(500) % 3
    with pytest.raises(UserError) as e:
        find_label_issues(X, y, method="autoL")
    msg = str(e.value)
    assert msg.startswith("method=autoL is not allowed with 500 labels") and "use method=lgc" in msg and "\n" not in msg
    assert propagation.dense_refusal("autoL", 500, "algo").startswith("algo=autoL is not allowed with 500 labels")
    # the default method for many labels is lgc, which never needs the dense matrix
    monkeypatch.setattr(propagation, "DENSE_MAX_LABELS", 50)
    df = find_label_issues(X, y)
    assert len(df) == 500 and df.attrs["method"] == "lgc"


def test_default_method_by_labelled_share():
    from lgcexp.issues.find import default_method

    assert default_method(1040, 7797) == "autoL"  # the paper's protocol: a few sampled labels
    assert default_method(7797, 7797) == "lgc" and default_method(500, 1000) == "lgc"  # most points labelled
    many = propagation.DENSE_MAX_LABELS + 1
    assert default_method(many, 10 * many) == "lgc"  # too many for l x l


def test_feature_model_by_labelled_share_and_logistic_view():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import PredefinedSplit

    from lgcexp.issues.views import choose_feature_model, feature_probs
    from lgcexp.preprocess import fold_of

    assert choose_feature_model(1040, 7797) == "lda"  # the paper's protocol keeps the LDA
    assert choose_feature_model(7797, 7797) == "mlp" and choose_feature_model(500, 1000) == "mlp"
    rng = np.random.default_rng(1)
    y = np.arange(150) % 3
    X = rng.normal(size=(150, 4)) + 2.0 * np.eye(3, 4)[y]
    keep = rng.random(150) > 0.2
    got = feature_probs(X, y, 3, keep, folds=5, seed=4, model="logistic")
    # the same by hand: standardised features, each fold's model on the other folds' kept labels only
    Z = (X - X.mean(0)) / X.std(0)
    want = np.zeros((150, 3))
    for tr, te in PredefinedSplit(fold_of(150, 5, 4)[0]).split(Z, y):  # lgcexp's folds
        tr = tr[keep[tr]]
        want[te] = LogisticRegression(max_iter=1000).fit(Z[tr], y[tr]).predict_proba(Z[te])
    assert np.allclose(got, want, atol=1e-5)


def test_diagnosis_run_refuses_autol_before_the_graph(tmp_path, monkeypatch):
    import pandas as pd
    from helpers import make_cfg

    from lgcexp.graph import KnnGraph
    from lgcexp.pipeline import run

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "label": np.arange(400) % 2}).to_csv(tmp_path / "d.csv",
                                                                                                index=False)
    monkeypatch.setattr(propagation, "physical_memory", lambda: 1 << 20)

    def no_graph(*a, **k):
        raise AssertionError("the graph stage was reached")

    monkeypatch.setattr(KnnGraph, "build", no_graph)
    with pytest.raises(UserError) as e:
        run(make_cfg("dataset=csv", f"dataset.path={tmp_path}/d.csv", "algo=autoL", tmp=tmp_path))
    assert (str(e.value).startswith("algo=autoL is not allowed with 400 labels on this machine")
            and "\n" not in str(e.value))


def test_lgc_leaves_the_dense_pll_for_fully_labelled_sets_above_probe_min_labels():
    from lgcexp.algorithms import propagation

    assert propagation.needs_pll(1_797, 1_797)  # digits, every point labelled: the dense path (cheap there)
    # fully labelled above PROBE_MIN_LABELS: probed
    assert not propagation.needs_pll(propagation.PROBE_MIN_LABELS + 1, propagation.PROBE_MIN_LABELS + 1)
    assert propagation.needs_pll(5_000, 20_000)  # a quarter labelled: the dense path below DENSE_MAX_LABELS
    assert not propagation.needs_pll(propagation.DENSE_MAX_LABELS + 1, 10 * propagation.DENSE_MAX_LABELS)
